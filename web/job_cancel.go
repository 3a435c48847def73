package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// jobCancel cancels one pending job, or asks a running one to stop at its
// next heartbeat (it answers with cancel_requested set); 409 in other
// states.
func (s *server) jobCancel(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	job, err := s.queue.CancelOne(c.Request().Context(), id, actor(c))
	if errors.Is(err, queue.ErrWrongState) {
		return &apiError{Status: http.StatusConflict, Message: fmt.Sprintf("job %d is %s; only pending or running jobs can be cancelled", id, job.State)}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// jobCancelMany cancels the pending jobs a selector picks and asks the
// running ones to stop; the others are left alone and not counted.
func (s *server) jobCancelMany(c echo.Context) error {
	f, err := decodeSelector(c)
	if err != nil {
		return err
	}
	jobs, err := s.queue.Cancel(c.Request().Context(), f, actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBulkBody(jobs))
}
