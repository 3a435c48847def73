package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// JobPage shows one job with its attempts, screenshots, events and
// effects. htmx polls it while the job is live and keeps only the live
// part of the answer (hx-select), so it is the same page either way.
func (h *Handler) JobPage(c echo.Context) error {
	id, ok, err := h.jobPageID(c)
	if !ok {
		return err
	}
	return h.renderJobPage(c, http.StatusOK, id, "")
}

// RetryJob is the Retry button: a dead or cancelled job goes back to
// pending with a fresh budget; then back to the job's page (Post/Redirect/
// Get), where the retry shows on the timeline.
//
// A job with a checkpoint offers two buttons: checkpoint=resume (the
// default) keeps it, checkpoint=start_over clears it first.
func (h *Handler) RetryJob(c echo.Context) error {
	retry := h.queue.RetryOne
	switch c.FormValue("checkpoint") {
	case "", "resume":
	case "start_over":
		retry = h.queue.RetryOneStartOver
	default:
		return h.jobProblem(c, http.StatusBadRequest, "Not a choice", `checkpoint must be "resume" or "start_over".`)
	}
	return h.jobPageAction(c, retry, queue.RetryRefusal)
}

// CancelJob is the Cancel button: a pending job is cancelled at once,
// a running one is asked to stop at its next heartbeat.
func (h *Handler) CancelJob(c echo.Context) error {
	return h.jobPageAction(c, h.queue.CancelOne, queue.CancelRefusal)
}

func (h *Handler) jobPageAction(c echo.Context, act func(context.Context, int64, string) (queue.Job, error), refusal string) error {
	id, ok, err := h.jobPageID(c)
	if !ok {
		return err
	}
	job, err := act(c.Request().Context(), id, "user:"+httpx.CurrentSession(c).Username)
	switch {
	case errors.Is(err, queue.ErrWrongState):
		// Someone else (or the worker) got there first: show the job as it
		// is now, and why nothing happened.
		return h.renderJobPage(c, http.StatusConflict, id, fmt.Sprintf("Nothing changed: this job is %s now, and %s.", job.State, refusal))
	case errors.Is(err, queue.ErrNotFound):
		return h.jobPageMissing(c, id)
	case err != nil:
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/jobs/"+strconv.FormatInt(id, 10))
}

func (h *Handler) renderJobPage(c echo.Context, status int, id int64, notice string) error {
	live := h.liveURL(id) // before reading: what changes after the read is replayed
	d, total, err := h.read(c).DetailRecent(c.Request().Context(), id, jobPageEvents, jobPageEventChars)
	if errors.Is(err, queue.ErrNotFound) && httpx.FromReplica(c) {
		// A job newer than the replica's replay (a link sent the moment
		// it was submitted) is the primary's to show.
		d, total, err = h.queue.DetailRecent(c.Request().Context(), id, jobPageEvents, jobPageEventChars)
	}
	if errors.Is(err, queue.ErrNotFound) {
		return h.jobPageMissing(c, id)
	}
	if err != nil {
		return fmt.Errorf("reading job %d: %w", id, err)
	}
	v := newJobPageView(d)
	v.EventsTotal = int(total)
	v.Notice = notice
	if d.State == queue.StatePending {
		why, err := h.queue.WhyWaiting(c.Request().Context(), id)
		if err != nil {
			return err
		}
		if w, ok := why[id]; ok {
			v.Waiting, v.WaitKind = waitSentence(w, time.Now()), string(w.Kind)
		}
	}
	if ok, err := h.jobPageReplay(c, d, &v); !ok {
		return err
	}
	title := fmt.Sprintf("%s · #%d %s", v.Heading(), id, v.State)
	page := h.page(c, title, "jobs")
	if v.Live() {
		v.Pushed, page.Live = live != "", live
	}
	return render(c, status, templates.JobPage(page, v))
}

// jobPageID reads the job number of a page's URL. When it is not one, it
// answers with a page (people see it, not scripts) and ok is false; err is
// then the handler's result.
func (h *Handler) jobPageID(c echo.Context) (id int64, ok bool, err error) {
	id, err = httpx.JobID(c)
	if err == nil {
		return id, true, nil
	}
	raw := c.Param("id")
	if utf8.RuneCountInString(raw) > 40 {
		raw = string([]rune(raw)[:40]) + "…"
	}
	return 0, false, h.jobProblem(c, http.StatusBadRequest, "Not a job number",
		fmt.Sprintf("“%s” is not a job number: jobs are numbered 1, 2, 3 and so on.", raw))
}

func (h *Handler) jobPageMissing(c echo.Context, id int64) error {
	return h.jobProblem(c, http.StatusNotFound, "Job not found",
		fmt.Sprintf("There is no job %d. It may never have existed, or the link is mistyped.", id))
}

// jobProblem answers a browser's bad request with a page, not JSON.
func (h *Handler) jobProblem(c echo.Context, status int, title, message string) error {
	return render(c, status, templates.JobProblem(h.page(c, title, "jobs"), templates.JobProblemView{Title: title, Message: message}))
}
