package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
)

// DeadPage is GET /dead: the dead-letter queue newest first, one keyset
// page at a time, each job with its last error and the screenshots of its
// last attempt, all read in a fixed number of queries whatever the page
// holds. Its newest page shows the letters' causes (failure groups)
// first; ?group=ID lists the letters of one cause.
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
	filter, extra := queue.Filter{State: queue.StateDead}, url.Values{}
	if raw := c.QueryParam("group"); raw != "" {
		g, err := h.deadGroup(ctx, c, raw)
		if err != nil {
			return err
		}
		if g == nil {
			v.Invalid = true
			v.Notices = append(v.Notices, templates.ListNotice{Kind: "error", Text: "There is no such failure group: it may have been a link from another server. Every cause is on the dead-letter page."})
			return render(c, http.StatusNotFound, templates.Dead(page, v))
		}
		v.Group, filter, extra = g, queue.Filter{FailureGroup: g.ID}, url.Values{"group": {raw}}
	} else if q.cursor == 0 {
		groups, err := h.read(c).FailureGroups(ctx, queue.FailureGroupQuery{Limit: deadGroupsShown})
		if err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		for _, g := range groups {
			v.Groups = append(v.Groups, deadGroupView(g))
		}
	}
	jobs, next, err := h.read(c).List(ctx, filter, q.cursor, deadPageSize)
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
		v.NextURL = listURL("/dead", templates.ListFilter{}, *next, extra)
	}
	if q.cursor > 0 {
		v.FirstURL = listURL("/dead", templates.ListFilter{}, 0, extra)
	}
	liveParams := listFlashParams(c)
	for k, vs := range extra {
		liveParams[k] = vs
	}
	v.Pushed, v.LiveURL, page.Live = live != "", listURL("/dead", templates.ListFilter{}, q.cursor, liveParams), live
	return render(c, http.StatusOK, templates.Dead(page, v))
}

// deadGroupsShown is how many causes the dead-letter page shows above
// its letters: the ones seen last.
const deadGroupsShown = 20

// deadGroup reads the failure group ?group=raw names; nil when raw names
// none.
func (h *Handler) deadGroup(ctx context.Context, c echo.Context, raw string) (*templates.DeadGroup, error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		return nil, nil
	}
	g, err := h.read(c).GetFailureGroup(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	v := deadGroupView(g)
	return &v, nil
}

func deadGroupView(g queue.FailureGroup) templates.DeadGroup {
	v := templates.DeadGroup{
		ID: g.ID, Signature: g.Signature, Error: g.Error, Dead: g.Dead, Attempts: g.Attempts,
		DeadMore: g.Dead >= queue.CountCap, AttemptsMore: g.Attempts >= queue.CountCap,
		FirstSeen: g.FirstSeen, LastSeen: g.LastSeen, Apps: g.Apps, AppCount: g.AppCount,
	}
	if g.ScreenshotID != nil {
		v.ShotID = *g.ScreenshotID
	}
	return v
}
