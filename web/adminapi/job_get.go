package adminapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// GetJob answers one job with its attempts, artifacts, events and effects,
// and, while it is pending, why it waits.
func (h *Handler) GetJob(c echo.Context) error {
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	d, err := h.queue.Detail(ctx, id)
	if err != nil {
		return err
	}
	v := d.API()
	if d.State == queue.StatePending {
		why, err := h.queue.WhyWaiting(ctx, id)
		if err != nil {
			return err
		}
		// Absent when the job left pending between the two reads: null,
		// as for any job not pending.
		if w, ok := why[id]; ok {
			v.Waiting = w.API()
		}
	}
	return c.JSON(http.StatusOK, v)
}
