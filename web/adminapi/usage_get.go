package adminapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// GetUsage answers what the attempts used from ?from= to ?to=, summed by
// ?group_by= (app, kind or day), one row per group and currency.
func (h *Handler) GetUsage(c echo.Context) error {
	q, err := queue.ParseUsageQuery(c.QueryParam("from"), c.QueryParam("to"), c.QueryParam("group_by"), time.Now())
	if err != nil {
		return err
	}
	rows, err := h.read(c).UsageSummary(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q.API(rows))
}
