package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// maxPageBulkIDs bounds the jobs one submit of a list's form may name:
// a page shows at most fifty, and more belong to "Retry all" or the API.
const maxPageBulkIDs = 500

// JobsPage is GET /jobs: jobs newest first, filtered by the query string,
// one keyset page at a time. The newest page polls itself for its table.
func (h *Handler) JobsPage(c echo.Context) error {
	q := parseListQuery(c, true)
	live := h.liveURL(0) // before reading: what changes after the read is replayed
	v := templates.JobsView{
		Filter: q.filter, States: listStateNames(), FieldErrors: q.fieldErrors, Cursor: q.cursor,
		Notices: listFlashNotices(c),
	}
	for _, p := range q.problems {
		v.Notices = append(v.Notices, templates.ListNotice{Kind: "error", Text: p})
	}
	page := h.page(c, "Jobs", "jobs")
	if q.invalid() {
		v.Invalid = true
		return render(c, http.StatusBadRequest, templates.Jobs(page, v))
	}
	f := queue.Filter{State: queue.State(q.filter.State), Kind: q.filter.Kind, Queue: q.filter.Queue, App: q.filter.App, Text: q.filter.Q}
	jobs, next, err := h.read(c).List(c.Request().Context(), f, q.cursor, jobsPageSize)
	if err != nil {
		return fmt.Errorf("listing jobs for the jobs page: %w", err)
	}
	// Why the pending ones wait: one statement for the whole page.
	var pending []int64
	for _, j := range jobs {
		if j.State == queue.StatePending {
			pending = append(pending, j.ID)
		}
	}
	why, err := h.queue.WhyWaiting(c.Request().Context(), pending...)
	if err != nil {
		return fmt.Errorf("reading why jobs wait for the jobs page: %w", err)
	}
	now := time.Now()
	v.Rows = make([]templates.JobsRow, len(jobs))
	for i, j := range jobs {
		v.Rows[i] = templates.JobsRow{
			ID: j.ID, App: listPayloadApp(j.Payload), Kind: j.Kind, State: string(j.State),
			Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
			Created: j.CreatedAt, LastError: listErrorLine(j.LastError),
		}
		if w, ok := why[j.ID]; ok {
			r := &v.Rows[i]
			if r.Waiting = waitBadge(w, now); r.Waiting != "" {
				r.WaitKind, r.WaitTitle = string(w.Kind), waitSentence(w, now)
			}
		}
		// lease_owner outlives the lease: a pending job waiting for its
		// retry still names the worker that lost or released it, which
		// the column would show as the one running it. A finished job
		// keeps the worker it last ran on: that is its history.
		if j.State != queue.StatePending {
			v.Rows[i].Worker = listDeref(j.LeaseOwner)
		}
	}
	if next != nil {
		v.NextURL = listURL("/jobs", q.filter, *next, nil)
	}
	if q.cursor > 0 {
		v.FirstURL = listURL("/jobs", q.filter, 0, nil)
	} else {
		// Only the newest page refreshes itself: an older one would shift
		// under the reader as new jobs arrive.
		v.LiveURL = listURL("/jobs", q.filter, 0, nil)
		v.Pushed, page.Live = live != "", live
	}
	return render(c, http.StatusOK, templates.Jobs(page, v))
}

// A bulk action of the list pages.
type bulkAction int

const (
	bulkRetry bulkAction = iota
	bulkCancel
)

// RetryJobs is POST /jobs/retry from the list pages' forms (see jobsBulk).
func (h *Handler) RetryJobs(c echo.Context) error { return h.jobsBulk(c, bulkRetry) }

// CancelJobs is POST /jobs/cancel from the list pages' forms (see jobsBulk).
func (h *Handler) CancelJobs(c echo.Context) error { return h.jobsBulk(c, bulkCancel) }

// jobsBulk is a bulk action from the list pages' forms: ids repeated
// (checkboxes, or one row's button), all=dead to retry every dead job,
// or failure_group=ID to act on one failure group.
// It redirects back to the page the form was on, with its filters and a
// done= notice saying what changed.
func (h *Handler) jobsBulk(c echo.Context, action bulkAction) error {
	form, err := c.FormParams()
	if err != nil {
		return httpx.BadRequest("", "reading the form: %v", err)
	}
	back := bulkReturnURL(form)
	ids, problem := parseBulkIDs(form["ids"])
	f := queue.Selection{IDs: ids}
	// all=dead is the dead-letter queue's "Retry all dead": a filter
	// instead of ids, never both, and never a cancel.
	if all := form.Get("all"); all != "" && problem == "" {
		if all != "dead" || action != bulkRetry || len(ids) > 0 {
			problem = "Choose either jobs by their checkboxes or “Retry all dead”."
		}
		f = queue.Selection{State: queue.StateDead}
	}
	// failure_group=ID is a failure group's "Retry its dead letters" (the
	// group's dead jobs) or "Cancel its retries" (its jobs still retrying).
	if g := form.Get("failure_group"); g != "" && problem == "" {
		id, err := strconv.ParseInt(g, 10, 64)
		switch {
		case err != nil || id < 1:
			problem = "That failure group does not exist."
		case len(ids) > 0 || form.Get("all") != "":
			problem = "Choose either jobs by their checkboxes or a failure group."
		case action == bulkRetry:
			f = queue.Selection{FailureGroup: id, State: queue.StateDead}
		default:
			f = queue.Selection{FailureGroup: id}
		}
	}
	if problem != "" {
		return render(c, http.StatusBadRequest, templates.ListProblem(h.page(c, "Nothing was changed", ""), problem, back))
	}
	if len(f.IDs) == 0 && f.State == "" && f.FailureGroup == 0 {
		return bulkRedirect(c, back, url.Values{"done": {"none"}})
	}
	who := "user:" + httpx.CurrentSession(c).Username
	done := url.Values{}
	var changed []queue.Job
	if action == bulkRetry {
		changed, err = h.queue.Retry(c.Request().Context(), f, who)
		done.Set("done", "retried:"+strconv.Itoa(len(changed)))
	} else {
		changed, err = h.queue.Cancel(c.Request().Context(), f, who)
		done.Set("done", "cancelled:"+strconv.Itoa(len(changed)))
		stopping := 0
		for _, j := range changed {
			if j.State == queue.StateRunning {
				stopping++
			}
		}
		if stopping > 0 {
			done.Set("stopping", strconv.Itoa(stopping))
		}
	}
	if err != nil {
		return fmt.Errorf("bulk action from the dashboard: %w", err)
	}
	if skipped := len(f.IDs) - len(changed); len(f.IDs) > 0 && skipped > 0 {
		done.Set("skipped", strconv.Itoa(skipped))
	}
	h.logger.Info("bulk action", "by", who, "retry", action == bulkRetry, "ids", len(f.IDs), "state", f.State,
		"failure_group", f.FailureGroup, "changed", len(changed))
	return bulkRedirect(c, back, done)
}

// parseBulkIDs reads the ids of a bulk form: positive integers, at most
// maxPageBulkIDs, duplicates dropped.
func parseBulkIDs(raw []string) ([]int64, string) {
	if len(raw) > maxPageBulkIDs {
		return nil, fmt.Sprintf("Select at most %d jobs at a time (%d were sent). For more, use “Retry all dead” or the API with a filter.", maxPageBulkIDs, len(raw))
	}
	ids := make([]int64, 0, len(raw))
	for _, v := range raw {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Sprintf("%q is not a job id.", listClip(v, 40))
		}
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return slices.Compact(ids), ""
}

// bulkReturnURL is the list page a bulk form came from, with the filters
// and cursor it carried. Only values that check out are kept, and the
// path is one of ours: the form cannot send the browser elsewhere.
func bulkReturnURL(form url.Values) string {
	path := "/jobs"
	if form.Get("from") == "dead" {
		path = "/dead"
	}
	var f templates.ListFilter
	if path == "/jobs" {
		if st := form.Get("state"); queue.State(st).Valid() {
			f.State = st
		}
		for _, p := range []struct {
			name string
			dst  *string
		}{{"kind", &f.Kind}, {"queue", &f.Queue}, {"app", &f.App}} {
			if v := form.Get(p.name); httpx.CheckText(p.name, v) == nil {
				*p.dst = v
			}
		}
		if v := strings.TrimSpace(form.Get("q")); queue.CheckSearch("q", v) == nil {
			f.Q = v
		}
	}
	cursor, err := strconv.ParseInt(form.Get("cursor"), 10, 64)
	if err != nil || cursor < 1 {
		cursor = 0
	}
	return listURL(path, f, cursor, nil)
}

// bulkRedirect sends the browser back to the list with the notice: a 303
// for a plain form, a full navigation (HX-Redirect) for htmx, whose
// request would otherwise follow the redirect and swap in the whole page.
func bulkRedirect(c echo.Context, back string, done url.Values) error {
	target := back
	if len(done) > 0 {
		sep := "?"
		if strings.Contains(back, "?") {
			sep = "&"
		}
		target += sep + done.Encode()
	}
	if httpx.IsHTMX(c) {
		c.Response().Header().Set("HX-Redirect", target)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, target)
}
