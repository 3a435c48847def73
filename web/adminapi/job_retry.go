package adminapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// RetryJob moves one dead or cancelled job back to pending with a fresh
// budget of attempts; 409 in other states.
func (h *Handler) RetryJob(c echo.Context) error {
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	job, err := h.queue.RetryOne(c.Request().Context(), id, httpx.Actor(c))
	if errors.Is(err, queue.ErrWrongState) {
		return &httpx.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %d is %s; only dead or cancelled jobs can be retried", id, job.State)}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// RetryJobs retries the dead or cancelled jobs a selector picks; the
// others are left alone and not counted.
func (h *Handler) RetryJobs(c echo.Context) error {
	f, err := decodeSelector(c)
	if err != nil {
		return err
	}
	jobs, err := h.queue.Retry(c.Request().Context(), f, httpx.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBulkBody(jobs))
}
