package adminapi

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
)

// ListWorkers answers the workers seen in the last 24 hours, latest first.
func (h *Handler) ListWorkers(c echo.Context) error {
	workers, err := h.read(c).WorkerStatuses(c.Request().Context(), queue.WorkerListWindow, queue.OnlineWindow, queue.WorkerOutcomeWindow)
	if err != nil {
		return err
	}
	body := api.Workers{Workers: make([]api.WorkerStatus, len(workers))}
	for i, w := range workers {
		claiming, reason := w.Health()
		v := api.WorkerStatus{
			ID: w.ID, Device: w.Device, Queues: w.Queues, Online: w.Online,
			StartedAt: api.Time(w.StartedAt), LastSeen: api.Time(w.LastSeen),
			Info: w.Info, InfoAt: api.TimePtr(w.InfoAt), InfoError: w.InfoError,
			Running: w.Running, Succeeded24h: w.Succeeded, Failed24h: w.Failed, Claiming: claiming,
		}
		if v.Info == nil {
			v.Info = json.RawMessage("null")
		}
		if w.LastJobID != 0 {
			v.LastJobID = &w.LastJobID
		}
		if !claiming {
			v.Reason = &reason
		}
		body.Workers[i] = v
	}
	return c.JSON(http.StatusOK, body)
}
