package dashboard

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
)

// DeadPage is GET /dead: the dead-letter queue newest first, one keyset
// page at a time, each job with its last error and the screenshots of its
// last attempt, all read in a fixed number of queries whatever the page
// holds.
func (h *Handler) DeadPage(c echo.Context) error {
	ctx := c.Request().Context()
	q := parseListQuery(c, false)
	counts, err := h.read(c).Counts(ctx)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	live := h.liveURL(0) // before reading: what changes after the read is replayed
	v := templates.DeadView{Cursor: q.cursor, Total: counts.Jobs[queue.StateDead], Notices: listFlashNotices(c)}
	for _, p := range q.problems {
		v.Notices = append(v.Notices, templates.ListNotice{Kind: "error", Text: p})
	}
	page := h.page(c, "Dead letters", "dead")
	if q.invalid() {
		v.Invalid = true
		return render(c, http.StatusBadRequest, templates.Dead(page, v))
	}
	jobs, next, err := h.read(c).List(ctx, queue.Filter{State: queue.StateDead}, q.cursor, deadPageSize)
	if err != nil {
		return fmt.Errorf("listing dead letters: %w", err)
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	shots, err := h.read(c).LatestScreenshots(ctx, ids, deadShotsPerJob)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	permanent, err := h.read(c).PermanentlyDead(ctx, ids)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	v.Rows = make([]templates.DeadRow, len(jobs))
	for i, j := range jobs {
		r := templates.DeadRow{
			ID: j.ID, App: listPayloadApp(j.Payload), Kind: j.Kind, Queue: j.Queue,
			Counted: j.CountedAttempts, MaxAttempts: j.MaxAttempts, Attempts: j.Attempt,
			DiedAt: j.FinishedAt, Created: j.CreatedAt,
			Error: listDeref(j.LastError), ErrorLine: listErrorLine(j.LastError),
			Permanent: permanent[j.ID],
		}
		if sh, ok := shots[j.ID]; ok {
			r.ShotsAttempt, r.MoreShots = sh.Attempt, sh.Total-len(sh.Artifacts)
			for _, a := range sh.Artifacts {
				r.Shots = append(r.Shots, templates.DeadShot{ID: a.ID, Name: a.Name})
			}
		}
		v.Rows[i] = r
	}
	if next != nil {
		v.NextURL = listURL("/dead", templates.ListFilter{}, *next, nil)
	}
	if q.cursor > 0 {
		v.FirstURL = "/dead"
	}
	v.Pushed, v.LiveURL, page.Live = live != "", listURL("/dead", templates.ListFilter{}, q.cursor, listFlashParams(c)), live
	return render(c, http.StatusOK, templates.Dead(page, v))
}
