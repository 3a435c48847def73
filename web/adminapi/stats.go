package adminapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
)

// Stats answers the current counts, read from the maintained counters
// rather than by counting jobs or artifacts.
func (h *Handler) Stats(c echo.Context) error {
	ctx := c.Request().Context()
	counts, err := h.read(c).Counts(ctx)
	if err != nil {
		return err
	}
	workers, err := h.read(c).Workers(ctx, queue.OnlineWindow) // the workers online
	if err != nil {
		return err
	}
	storage, err := h.read(c).ArtifactStorage(ctx)
	if err != nil {
		return err
	}
	body := api.Stats{
		Jobs:    make(map[api.State]int64, len(queue.States)),
		Workers: make([]api.Worker, len(workers)),
		Storage: api.Storage{ArtifactFiles: storage.ArtifactFiles, ArtifactBytes: storage.ArtifactBytes},
	}
	for _, st := range queue.States {
		body.Jobs[api.State(st)] = counts.Jobs[st]
	}
	for i, w := range workers {
		body.Workers[i] = w.API()
	}
	return c.JSON(http.StatusOK, body)
}
