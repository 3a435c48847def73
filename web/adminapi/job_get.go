package adminapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/web/httpx"
)

// GetJob answers one job with its attempts, artifacts, events and effects.
func (h *Handler) GetJob(c echo.Context) error {
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	d, err := h.queue.Detail(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d.API())
}
