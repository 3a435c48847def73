package adminapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// availabilityBodyLimit bounds a PUT of a window: one short text.
const availabilityBodyLimit = 4 << 10

// ListAvailability is GET /api/v1/availability: every window.
func (h *Handler) ListAvailability(c echo.Context) error {
	all, err := h.queue.Availabilities(c.Request().Context())
	if err != nil {
		return err
	}
	now := time.Now()
	body := api.Availabilities{Windows: make([]api.Availability, len(all))}
	for i, a := range all {
		body.Windows[i] = a.API(now)
	}
	return c.JSON(http.StatusOK, body)
}

// PutAvailability is PUT /api/v1/availability/{scope}/{name}: sets the
// window of a device label or a worker.
func (h *Handler) PutAvailability(c echo.Context) error {
	body, err := httpx.ReadBody(c, availabilityBodyLimit)
	if err != nil {
		return err
	}
	var req api.AvailabilityPut
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		return err
	}
	a, err := h.queue.SetAvailability(c.Request().Context(), c.Param("scope"), c.Param("name"), req.Window, httpx.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a.API(time.Now()))
}

// DeleteAvailability is DELETE /api/v1/availability/{scope}/{name}: the
// device label or worker may claim at any time again.
func (h *Handler) DeleteAvailability(c echo.Context) error {
	if _, err := queue.CheckAvailability(c.Param("scope"), c.Param("name"), "mon 00:00-24:00"); err != nil {
		return err
	}
	if err := h.queue.ClearAvailability(c.Request().Context(), c.Param("scope"), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
