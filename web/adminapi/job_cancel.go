package adminapi

import (
	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// CancelJob cancels one pending job, or asks a running one to stop at its
// next heartbeat (it answers with cancel_requested set); 409 in other
// states.
func (h *Handler) CancelJob(c echo.Context) error {
	return h.jobAction(c, h.queue.CancelOne, queue.CancelRefusal)
}

// CancelJobs cancels the pending jobs a selector picks and asks the
// running ones to stop; the others are left alone and not counted.
func (h *Handler) CancelJobs(c echo.Context) error {
	return h.bulkAction(c, h.queue.Cancel)
}
