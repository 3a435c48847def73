package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// QueuesPage is GET /queues: every queue with its state, counts and
// limit, and the buttons to change them.
func (h *Handler) QueuesPage(c echo.Context) error {
	return h.renderQueues(c, http.StatusOK, nil, refusedLimit{})
}

// refusedBudgets is a rate-limit form the page refused: the key, what
// was typed and why.
type refusedBudgets struct{ key, typed, reason string }

// refusedLimit is a limit the form refused: the queue, what was typed and
// why, shown beside the field.
type refusedLimit struct {
	queue, typed, reason string
	budgets              refusedBudgets
}

// renderQueues shows the queues page.
func (h *Handler) renderQueues(c echo.Context, status int, notices []templates.ListNotice, refused refusedLimit) error {
	queues, err := h.read(c).Queues(c.Request().Context())
	if err != nil {
		return fmt.Errorf("queues page: %w", err)
	}
	v := templates.QueuesView{Rows: make([]templates.QueuesRow, len(queues)), Notices: notices}
	for i, q := range queues {
		r := templates.QueuesRow{
			Name: q.Name, Paused: q.Paused, PausedBy: listDeref(q.PausedBy), PausedAt: q.PausedAt,
			Pending: q.Pending, PendingOver: q.PendingOver, Running: q.Running,
		}
		if q.MaxRunning != nil {
			r.MaxRunning = strconv.Itoa(int(*q.MaxRunning))
		}
		if q.Name == refused.queue {
			r.MaxRunning, r.LimitError = refused.typed, refused.reason
		}
		v.Rows[i] = r
	}
	if err := h.rateLimitRows(c, &v, refused.budgets); err != nil {
		return err
	}
	return render(c, status, templates.Queues(h.page(c, "Queues", "queues"), v))
}

// PauseQueue is the Pause button of the queues page.
func (h *Handler) PauseQueue(c echo.Context) error { return h.setQueuePaused(c, true) }

// ResumeQueue is the Resume button of the queues page.
func (h *Handler) ResumeQueue(c echo.Context) error { return h.setQueuePaused(c, false) }

func (h *Handler) setQueuePaused(c echo.Context, pause bool) error {
	name := c.Param("name")
	_, err := h.queue.PatchQueue(c.Request().Context(), name, queue.QueuePatch{Paused: &pause}, "user:"+httpx.CurrentSession(c).Username)
	if err != nil {
		return h.queuesPageRefused(c, err)
	}
	return c.Redirect(http.StatusSeeOther, "/queues")
}

// SetQueueLimit is the limit form: a whole number, or empty for no limit.
func (h *Handler) SetQueueLimit(c echo.Context) error {
	name := c.Param("name")
	typed := strings.TrimSpace(c.FormValue("max_running"))
	p := queue.QueuePatch{ClearMaxRunning: typed == ""}
	if typed != "" {
		n, err := strconv.ParseInt(typed, 10, 32)
		if err != nil || n < 0 || n > queue.MaxQueueCap {
			msg := fmt.Sprintf("The limit must be a whole number from 0 to %d, or empty for no limit.", queue.MaxQueueCap)
			return h.renderQueues(c, http.StatusUnprocessableEntity,
				[]templates.ListNotice{{Kind: "error", Text: "The limit of " + listClip(name, 64) + " was not changed."}},
				refusedLimit{queue: name, typed: typed, reason: msg})
		}
		p.MaxRunning = new(int32(n))
	}
	if _, err := h.queue.PatchQueue(c.Request().Context(), name, p, "user:"+httpx.CurrentSession(c).Username); err != nil {
		return h.queuesPageRefused(c, err)
	}
	return c.Redirect(http.StatusSeeOther, "/queues")
}

// queuesPageRefused shows the page with why nothing changed: a queue
// name no queue can have (a hand-made request) is a 400, never a 500.
func (h *Handler) queuesPageRefused(c echo.Context, err error) error {
	var ve *queue.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return h.renderQueues(c, http.StatusBadRequest, []templates.ListNotice{{Kind: "error", Text: "Nothing changed: " + ve.Message + "."}}, refusedLimit{})
}
