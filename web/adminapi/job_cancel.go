package adminapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// CancelJob cancels one pending job, or asks a running one to stop at its
// next heartbeat (it answers with cancel_requested set); 409 in other
// states.
func (h *Handler) CancelJob(c echo.Context) error {
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	job, err := h.queue.CancelOne(c.Request().Context(), id, httpx.Actor(c))
	if errors.Is(err, queue.ErrWrongState) {
		return &httpx.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %d is %s; only pending or running jobs can be cancelled", id, job.State)}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// CancelJobs cancels the pending jobs a selector picks and asks the
// running ones to stop; the others are left alone and not counted.
func (h *Handler) CancelJobs(c echo.Context) error {
	f, err := decodeSelector(c)
	if err != nil {
		return err
	}
	jobs, err := h.queue.Cancel(c.Request().Context(), f, httpx.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBulkBody(jobs))
}
