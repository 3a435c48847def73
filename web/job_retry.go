package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// jobRetry moves one dead or cancelled job back to pending with a fresh
// budget of attempts; 409 in other states.
func (s *server) jobRetry(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	job, err := s.queue.RetryOne(c.Request().Context(), id, actor(c))
	if errors.Is(err, queue.ErrWrongState) {
		return &apiError{Status: http.StatusConflict, Message: fmt.Sprintf("job %d is %s; only dead or cancelled jobs can be retried", id, job.State)}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// jobRetryMany retries the dead or cancelled jobs a selector picks; the
// others are left alone and not counted.
func (s *server) jobRetryMany(c echo.Context) error {
	f, err := decodeSelector(c)
	if err != nil {
		return err
	}
	jobs, err := s.queue.Retry(c.Request().Context(), f, actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBulkBody(jobs))
}
