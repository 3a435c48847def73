package adminapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// defaultGroupLimit is the page of GET /api/v1/failure-groups without a
// limit.
const defaultGroupLimit = 50

// ListFailureGroups answers GET /api/v1/failure-groups: the groups of the
// dead-letter queue, the one seen last first;
// with since (RFC 3339), every group with a failed attempt since then,
// the one seen last first. limit is 1 to 500 (default 50); there is no
// cursor, a page holds causes, not jobs.
func (h *Handler) ListFailureGroups(c echo.Context) error {
	q := queue.FailureGroupQuery{Limit: defaultGroupLimit}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > queue.MaxFailureGroups {
			return httpx.BadRequest("limit", "must be an integer from 1 to %d", queue.MaxFailureGroups)
		}
		q.Limit = n
	}
	if v := c.QueryParam("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			return httpx.BadRequest("since", "must be a time in RFC 3339, such as 2026-12-01T00:00:00Z")
		}
		q.Since = t
	}
	groups, err := h.read(c).FailureGroups(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := api.FailureGroupList{Groups: make([]api.FailureGroup, len(groups))}
	for i, g := range groups {
		out.Groups[i] = FailureGroupAPI(g)
	}
	return c.JSON(http.StatusOK, out)
}

// FailureGroupAPI is g as the API shows it.
func FailureGroupAPI(g queue.FailureGroup) api.FailureGroup {
	out := api.FailureGroup{
		ID: g.ID, Signature: g.Signature, Error: g.Error, JobID: g.JobID, Attempt: g.Attempt,
		Dead: g.Dead, Attempts: g.Attempts, FirstSeen: api.Time(g.FirstSeen), LastSeen: api.Time(g.LastSeen),
		Apps: g.Apps, AppCount: g.AppCount,
	}
	if out.Apps == nil {
		out.Apps = []string{}
	}
	if g.ScreenHash != nil {
		h := fmt.Sprintf("%016x", uint64(*g.ScreenHash))
		out.ScreenHash = &h
	}
	if g.ScreenshotID != nil {
		p := "/artifacts/" + strconv.FormatInt(*g.ScreenshotID, 10)
		out.Screenshot = &p
	}
	return out
}
