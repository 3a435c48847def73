package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// workerWindow is how recently a worker must have been seen to be listed:
// the workers online.
const workerWindow = queue.OnlineWindow

// statsBody is GET /api/v1/stats: jobs per state (every state, even at 0),
// the workers seen lately and what the artifact files take.
type statsBody struct {
	Jobs    map[queue.State]int64 `json:"jobs"`
	Workers []workerView          `json:"workers"`
	Storage storageView           `json:"storage"`
}

// storageView is the artifact files on disk and their bytes.
type storageView struct {
	ArtifactFiles int64 `json:"artifact_files"`
	ArtifactBytes int64 `json:"artifact_bytes"`
}

// stats answers the current counts, read from the maintained counters
// rather than by counting jobs or artifacts.
func (s *server) stats(c echo.Context) error {
	ctx := c.Request().Context()
	counts, err := s.queue.Counts(ctx)
	if err != nil {
		return err
	}
	workers, err := s.queue.Workers(ctx, workerWindow)
	if err != nil {
		return err
	}
	storage, err := s.queue.ArtifactStorage(ctx)
	if err != nil {
		return err
	}
	body := statsBody{Storage: storageView(storage), Jobs: make(map[queue.State]int64, len(queue.States)), Workers: make([]workerView, len(workers))}
	for _, st := range queue.States {
		body.Jobs[st] = counts.Jobs[st]
	}
	for i, w := range workers {
		body.Workers[i] = workerView{ID: w.ID, LastSeen: apiTime(w.LastSeen), Device: w.Device, Queues: w.Queues, Running: w.Running}
	}
	return c.JSON(http.StatusOK, body)
}
