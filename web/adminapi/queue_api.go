package adminapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// queueBodyLimit bounds a PATCH of a queue: two small fields.
const queueBodyLimit = 4 << 10

// ListQueues is GET /api/v1/queues: every queue that has jobs or settings.
func (h *Handler) ListQueues(c echo.Context) error {
	queues, err := h.read(c).Queues(c.Request().Context())
	if err != nil {
		return err
	}
	body := api.Queues{Queues: make([]api.Queue, len(queues))}
	for i, q := range queues {
		body.Queues[i] = q.API()
	}
	return c.JSON(http.StatusOK, body)
}

// PatchQueue is PATCH /api/v1/queues/{name}: pause, resume or cap a
// queue, creating its settings when it has none.
func (h *Handler) PatchQueue(c echo.Context) error {
	name := c.Param("name")
	if err := queue.CheckQueueName(name); err != nil {
		return err
	}
	body, err := httpx.ReadBody(c, queueBodyLimit)
	if err != nil {
		return err
	}
	var req api.QueuePatch
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		var ae *httpx.Error
		if errors.As(err, &ae) && ae.Field == "max_running" {
			return httpx.BadRequest("max_running", "must be null or a whole number from 0 to %d", queue.MaxQueueCap)
		}
		return err
	}
	p := queue.QueuePatch{}
	if req.Paused.Set {
		if req.Paused.Value == nil {
			return httpx.BadRequest("paused", "must be true or false")
		}
		p.Paused = req.Paused.Value
	}
	if req.MaxRunning.Set {
		p.MaxRunning, p.ClearMaxRunning = req.MaxRunning.Value, req.MaxRunning.Value == nil
	}
	q, err := h.queue.PatchQueue(c.Request().Context(), name, p, httpx.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q.API())
}
