package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// queueBodyLimit bounds a PATCH of a queue: two small fields.
const queueBodyLimit = 4 << 10

// queueView is a queue in the API.
type queueView struct {
	Name        string   `json:"name"`
	Paused      bool     `json:"paused"`
	PausedBy    *string  `json:"paused_by"`
	PausedAt    *apiTime `json:"paused_at"`
	MaxRunning  *int32   `json:"max_running"`
	Pending     int64    `json:"pending"`
	PendingOver bool     `json:"pending_over"`
	Running     int64    `json:"running"`
}

func newQueueView(q queue.QueueInfo) queueView {
	return queueView{
		Name: q.Name, Paused: q.Paused, PausedBy: q.PausedBy, PausedAt: apiTimePtr(q.PausedAt), MaxRunning: q.MaxRunning,
		Pending: q.Pending, PendingOver: q.PendingOver, Running: q.Running,
	}
}

// queueList is GET /api/v1/queues: every queue that has jobs or settings.
func (s *server) queueList(c echo.Context) error {
	queues, err := s.queue.Queues(c.Request().Context())
	if err != nil {
		return err
	}
	body := struct {
		Queues []queueView `json:"queues"`
	}{Queues: make([]queueView, len(queues))}
	for i, q := range queues {
		body.Queues[i] = newQueueView(q)
	}
	return c.JSON(http.StatusOK, body)
}

// queuePatchRequest is the body of PATCH /api/v1/queues/{name}: absent
// fields stay as they are, and max_running may be null (no cap).
type queuePatchRequest struct {
	Paused     presentBool `json:"paused"`
	MaxRunning presentInt  `json:"max_running"`
}

// presentBool is a boolean field that may be absent, but not null.
type presentBool struct {
	set   bool
	value bool
}

func (b *presentBool) UnmarshalJSON(data []byte) error {
	if string(data) == "null" || json.Unmarshal(data, &b.value) != nil {
		return badRequest("paused", "must be true or false")
	}
	b.set = true
	return nil
}

// presentInt is an integer field that may be absent or null.
type presentInt struct {
	set   bool
	value *int32
}

func (n *presentInt) UnmarshalJSON(data []byte) error {
	n.set = true
	if string(data) == "null" {
		return nil
	}
	var v int32
	if err := json.Unmarshal(data, &v); err != nil {
		return badRequest("max_running", "must be null or a whole number from 0 to %d", queue.MaxQueueCap)
	}
	n.value = &v
	return nil
}

// queuePatch is PATCH /api/v1/queues/{name}: pause, resume or cap a
// queue, creating its settings when it has none.
func (s *server) queuePatch(c echo.Context) error {
	name := c.Param("name")
	if err := queue.CheckQueueName(name); err != nil {
		return err
	}
	body, err := readBody(c, queueBodyLimit)
	if err != nil {
		return err
	}
	var req queuePatchRequest
	if err := decodeObject(body, &req, ""); err != nil {
		return err
	}
	p := queue.QueuePatch{}
	if req.Paused.set {
		p.Paused = &req.Paused.value
	}
	if req.MaxRunning.set {
		p.MaxRunning, p.ClearMaxRunning = req.MaxRunning.value, req.MaxRunning.value == nil
	}
	q, err := s.queue.PatchQueue(c.Request().Context(), name, p, actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newQueueView(q))
}
