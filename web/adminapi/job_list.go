package adminapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// Page sizes of GET /api/v1/jobs.
const (
	defaultListLimit = 50
	maxListLimit     = 500
)

// ListJobs lists jobs newest first, filtered by state, kind, queue and app,
// and q, a text searched for in their app, payload, last error and
// result, or failure_group, which lists that group's dead letters; one
// keyset page at a time: cursor is the next_cursor of the
// page before.
func (h *Handler) ListJobs(c echo.Context) error {
	var f queue.Filter
	if st := c.QueryParam("state"); st != "" {
		f.State = queue.State(st)
		if !f.State.Valid() {
			return httpx.BadRequest("state", "must be one of pending, running, succeeded, dead, cancelled")
		}
	}
	f.Kind, f.Queue, f.App = c.QueryParam("kind"), c.QueryParam("queue"), c.QueryParam("app")
	for _, p := range [][2]string{{"kind", f.Kind}, {"queue", f.Queue}, {"app", f.App}} {
		if err := httpx.CheckText(p[0], p[1]); err != nil {
			return err
		}
	}
	if q := strings.TrimSpace(c.QueryParam("q")); q != "" { // an empty search box searches nothing
		if err := queue.CheckSearch("q", q); err != nil {
			return err
		}
		f.Text = q
	}
	if v := c.QueryParam("failure_group"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return httpx.BadRequest("failure_group", "must be a failure group's id (a positive integer)")
		}
		f.FailureGroup = n
	}
	limit := int64(defaultListLimit)
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > maxListLimit {
			// A larger page is refused rather than cut short, so a client
			// never mistakes a capped page for the size it asked for.
			return httpx.BadRequest("limit", "must be an integer from 1 to %d", maxListLimit)
		}
		limit = n
	}
	var cursor int64
	if v := c.QueryParam("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return httpx.BadRequest("cursor", "must be the next_cursor of the previous page (a positive integer)")
		}
		cursor = n
	}
	jobs, next, err := h.read(c).List(c.Request().Context(), f, cursor, int(limit))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.JobList{Jobs: queue.JobsAPI(jobs), NextCursor: next})
}
