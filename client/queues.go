package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Queue is a queue's settings and how many of its jobs wait and run.
type Queue struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// PausedBy and PausedAt describe the latest pause (kept after a resume).
	PausedBy *string    `json:"paused_by"`
	PausedAt *time.Time `json:"paused_at"`
	// MaxRunning caps the queue's running jobs; nil: no cap.
	MaxRunning *int32 `json:"max_running"`
	// Pending is exact up to 100,000; past it PendingOver is true.
	Pending     int64 `json:"pending"`
	PendingOver bool  `json:"pending_over"`
	Running     int64 `json:"running"`
}

// QueuePatch changes a queue's settings; nil fields stay as they are.
type QueuePatch struct {
	Paused *bool
	// MaxRunning sets the cap; ClearMaxRunning removes it.
	MaxRunning      *int32
	ClearMaxRunning bool
}

// MarshalJSON leaves out what stays and sends null to clear the cap.
func (p QueuePatch) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if p.Paused != nil {
		m["paused"] = *p.Paused
	}
	switch {
	case p.ClearMaxRunning:
		m["max_running"] = nil
	case p.MaxRunning != nil:
		m["max_running"] = *p.MaxRunning
	}
	return json.Marshal(m)
}

// Queues lists every queue that has jobs or settings, by name.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	var body struct {
		Queues []Queue `json:"queues"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/queues", nil, nil, &body)
	return body.Queues, err
}

// PatchQueue pauses, resumes or caps a queue, creating its settings when
// it has none.
func (c *Client) PatchQueue(ctx context.Context, name string, p QueuePatch) (Queue, error) {
	var q Queue
	_, err := c.do(ctx, http.MethodPatch, "/api/v1/queues/"+url.PathEscape(name), nil, p, &q)
	return q, err
}
