package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// jobPage shows one job with its attempts, screenshots, events and
// effects. htmx polls it while the job is live and keeps only the live
// part of the answer (hx-select), so it is the same page either way.
func (s *server) jobPage(c echo.Context) error {
	id, ok, err := s.jobPageID(c)
	if !ok {
		return err
	}
	return s.renderJobPage(c, http.StatusOK, id, "")
}

// jobPageRetry is the Retry button: a dead or cancelled job goes back to
// pending with a fresh budget; then back to the job's page (Post/Redirect/
// Get), where the retry shows on the timeline.
func (s *server) jobPageRetry(c echo.Context) error {
	return s.jobPageAction(c, s.queue.RetryOne, "only dead or cancelled jobs can be retried")
}

// jobPageCancel is the Cancel button: a pending job is cancelled at once,
// a running one is asked to stop at its next heartbeat.
func (s *server) jobPageCancel(c echo.Context) error {
	return s.jobPageAction(c, s.queue.CancelOne, "only pending or running jobs can be cancelled")
}

func (s *server) jobPageAction(c echo.Context, act func(context.Context, int64, string) (queue.Job, error), refusal string) error {
	id, ok, err := s.jobPageID(c)
	if !ok {
		return err
	}
	job, err := act(c.Request().Context(), id, "user:"+httpx.CurrentSession(c).Username)
	switch {
	case errors.Is(err, queue.ErrWrongState):
		// Someone else (or the worker) got there first: show the job as it
		// is now, and why nothing happened.
		return s.renderJobPage(c, http.StatusConflict, id, fmt.Sprintf("Nothing changed: this job is %s now, and %s.", job.State, refusal))
	case errors.Is(err, queue.ErrNotFound):
		return s.jobPageMissing(c, id)
	case err != nil:
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/jobs/"+strconv.FormatInt(id, 10))
}

func (s *server) renderJobPage(c echo.Context, status int, id int64, notice string) error {
	live := s.liveURL(id) // before reading: what changes after the read is replayed
	d, err := s.queue.Detail(c.Request().Context(), id)
	if errors.Is(err, queue.ErrNotFound) {
		return s.jobPageMissing(c, id)
	}
	if err != nil {
		return fmt.Errorf("reading job %d: %w", id, err)
	}
	v := newJobPageView(d)
	v.Notice = notice
	if v.State == string(queue.StatePending) && v.Device != "" {
		if v.Waiting, err = s.deviceWaiting(c.Request().Context(), v.Device, v.Queue); err != nil {
			return err
		}
	}
	if ok, err := s.jobPageReplay(c, d, &v); !ok {
		return err
	}
	title := fmt.Sprintf("%s · #%d %s", v.Heading(), id, v.State)
	page := s.page(c, title, "jobs")
	if v.Live() {
		v.Pushed, page.Live = live != "", live
	}
	return render(c, status, templates.JobPage(page, v))
}

// jobPageID reads the job number of a page's URL. When it is not one, it
// answers with a page (people see it, not scripts) and ok is false; err is
// then the handler's result.
func (s *server) jobPageID(c echo.Context) (id int64, ok bool, err error) {
	id, err = jobID(c)
	if err == nil {
		return id, true, nil
	}
	raw := c.Param("id")
	if utf8.RuneCountInString(raw) > 40 {
		raw = string([]rune(raw)[:40]) + "…"
	}
	return 0, false, s.jobProblem(c, http.StatusBadRequest, "Not a job number",
		fmt.Sprintf("“%s” is not a job number: jobs are numbered 1, 2, 3 and so on.", raw))
}

func (s *server) jobPageMissing(c echo.Context, id int64) error {
	return s.jobProblem(c, http.StatusNotFound, "Job not found",
		fmt.Sprintf("There is no job %d. It may never have existed, or the link is mistyped.", id))
}

// jobProblem answers a browser's bad request with a page, not JSON.
func (s *server) jobProblem(c echo.Context, status int, title, message string) error {
	return render(c, status, templates.JobProblem(s.page(c, title, "jobs"), templates.JobProblemView{Title: title, Message: message}))
}

// deviceWaiting says why a pending job for device in queue is not taken,
// when that is for want of a fit phone: none with that label is online
// (and takes the queue), or every one that is holds back. "" when some
// phone could take it.
func (s *server) deviceWaiting(ctx context.Context, device, queueName string) (string, error) {
	a, err := s.queue.DeviceAvailability(ctx, device, queueName, workerOnlineWindow)
	switch {
	case err != nil:
		return "", err
	case a.Claiming > 0:
		return "", nil
	case a.Online == 0:
		return fmt.Sprintf("waiting for %s: no such phone online", device), nil
	}
	reasons := strings.Join(a.Reasons, "; ")
	if a.Online == 1 {
		return fmt.Sprintf("waiting for %s: the only such phone online is not claiming (%s)", device, reasons), nil
	}
	return fmt.Sprintf("waiting for %s: all %d such phones online are not claiming (%s)", device, a.Online, reasons), nil
}
