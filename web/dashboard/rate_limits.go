package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// windowNames say which window a budget counts in, for the page.
var windowNames = map[time.Duration]string{
	time.Second: "this second", time.Minute: "this minute", time.Hour: "this hour", 24 * time.Hour: "today (UTC)",
}

// rateLimitRows fills in the queues page's rate-limit section; refused is
// a form the page refused, shown with what was typed.
func (h *Handler) rateLimitRows(c echo.Context, v *templates.QueuesView, refused refusedBudgets) error {
	all, err := h.queue.RateLimits(c.Request().Context())
	if err != nil {
		return fmt.Errorf("queues page: %w", err)
	}
	known := false
	for _, rl := range all {
		r := templates.RateLimitRow{Key: rl.Key}
		var typed []string
		for _, b := range rl.Budgets {
			typed = append(typed, b.String())
			r.Spent = append(r.Spent, fmt.Sprintf("%d/%d %s", b.Used, b.Limit, windowNames[b.Window]))
		}
		r.Budgets = strings.Join(typed, ", ")
		if refused.key == rl.Key {
			r.Budgets, r.Error, known = refused.typed, refused.reason, true
		}
		v.RateLimits = append(v.RateLimits, r)
	}
	if refused.reason != "" && !known {
		v.NewRateLimit = templates.RateLimitRow{Key: refused.key, Budgets: refused.typed, Error: refused.reason}
	}
	return nil
}

// SetRateLimit is the rate-limit form of the queues page: a key and its
// budgets, comma-separated ("60/min, 10000/day"); empty budgets remove
// the key's.
func (h *Handler) SetRateLimit(c echo.Context) error {
	key := strings.TrimSpace(c.FormValue("key"))
	typed := strings.TrimSpace(c.FormValue("budgets"))
	var budgets []string
	for b := range strings.SplitSeq(typed, ",") {
		if b = strings.TrimSpace(b); b != "" {
			budgets = append(budgets, b)
		}
	}
	actor := "user:" + httpx.CurrentSession(c).Username
	var err error
	if len(budgets) == 0 {
		err = h.queue.DeleteRateLimit(c.Request().Context(), key)
		if errors.Is(err, queue.ErrNotFound) {
			err = nil
		}
	} else {
		_, err = h.queue.SetRateLimit(c.Request().Context(), key, budgets, actor)
	}
	var ve *queue.ValidationError
	if errors.As(err, &ve) {
		msg := ve.Message
		if ve.Field == "key" {
			msg = "The key " + msg + "."
		}
		return h.renderQueues(c, http.StatusUnprocessableEntity,
			[]templates.ListNotice{{Kind: "error", Text: "The budgets of " + listClip(key, 64) + " were not changed."}},
			refusedLimit{budgets: refusedBudgets{key: key, typed: typed, reason: msg}})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/queues")
}
