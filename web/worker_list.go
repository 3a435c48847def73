package web

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
)

// How far back the workers page and GET /api/v1/workers look, how
// recently a worker must have been seen to count as online (they report
// every 10 s), and the window of their outcome counts.
const (
	workersPageWindow  = 24 * time.Hour
	workerOnlineWindow = queue.OnlineWindow
	workerOutcomes     = 24 * time.Hour
)

// workerList answers the workers seen in the last 24 hours, latest first.
func (s *server) workerList(c echo.Context) error {
	workers, err := s.queue.WorkerStatuses(c.Request().Context(), workersPageWindow, workerOnlineWindow, workerOutcomes)
	if err != nil {
		return err
	}
	body := api.Workers{Workers: make([]api.WorkerStatus, len(workers))}
	for i, w := range workers {
		claiming, reason := workerHealth(w)
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

// workerHealth says whether a worker claims, and why not: it is offline,
// or it said so with its last presence.
func workerHealth(w queue.WorkerStatus) (bool, string) {
	switch {
	case !w.Online:
		return false, "offline"
	case !w.Claiming:
		return false, listDeref(w.NotClaiming)
	}
	return true, ""
}
