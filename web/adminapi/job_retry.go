package adminapi

import (
	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// RetryJob moves one dead or cancelled job back to pending with a fresh
// budget of attempts; 409 in other states.
func (h *Handler) RetryJob(c echo.Context) error {
	return h.jobAction(c, h.queue.RetryOne, queue.RetryRefusal)
}

// RetryJobs retries the dead or cancelled jobs a selector picks; the
// others are left alone and not counted.
func (h *Handler) RetryJobs(c echo.Context) error {
	return h.bulkAction(c, h.queue.Retry)
}
