package web

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

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

// workersBody is GET /api/v1/workers.
type workersBody struct {
	Workers []workerStatusView `json:"workers"`
}

// workerStatusView is a worker as GET /api/v1/workers shows it: presence,
// what its device-info command last said, what it runs, its outcomes of
// the last 24 hours and whether it claims.
type workerStatusView struct {
	ID        string          `json:"id"`
	Device    *string         `json:"device"`
	Queues    []string        `json:"queues"`
	Online    bool            `json:"online"`
	StartedAt apiTime         `json:"started_at"`
	LastSeen  apiTime         `json:"last_seen"`
	Info      json.RawMessage `json:"info"`
	InfoAt    *apiTime        `json:"info_at"`
	InfoError *string         `json:"info_error"`
	Running   int64           `json:"running"`
	LastJobID *int64          `json:"last_job_id"`
	Succeeded int64           `json:"succeeded_24h"`
	Failed    int64           `json:"failed_24h"`
	// Claiming is false for a worker that holds back (its phone is
	// unfit) or is offline; Reason says which.
	Claiming bool    `json:"claiming"`
	Reason   *string `json:"reason"`
}

// workerList answers the workers seen in the last 24 hours, latest first.
func (s *server) workerList(c echo.Context) error {
	workers, err := s.queue.WorkerStatuses(c.Request().Context(), workersPageWindow, workerOnlineWindow, workerOutcomes)
	if err != nil {
		return err
	}
	body := workersBody{Workers: make([]workerStatusView, len(workers))}
	for i, w := range workers {
		claiming, reason := workerHealth(w)
		v := workerStatusView{
			ID: w.ID, Device: w.Device, Queues: w.Queues, Online: w.Online,
			StartedAt: apiTime(w.StartedAt), LastSeen: apiTime(w.LastSeen),
			Info: w.Info, InfoAt: apiTimePtr(w.InfoAt), InfoError: w.InfoError,
			Running: w.Running, Succeeded: w.Succeeded, Failed: w.Failed, Claiming: claiming,
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
