package api

import "encoding/json"

// WebhookEvent is the body of a webhook delivery. Job is the job exactly
// as GET /api/v1/jobs/{id} shows it (a Job, without attempts and events),
// or {"id":N} alone when the job was deleted before the first attempt;
// worker.offline carries Worker instead.
type WebhookEvent struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	At     Time            `json:"at"`
	Job    json.RawMessage `json:"job,omitempty"`
	Worker *WebhookWorker  `json:"worker,omitempty"`
}

// WebhookWorker is a worker.offline event's worker.
type WebhookWorker struct {
	ID        string   `json:"id"`
	Device    *string  `json:"device"`
	Queues    []string `json:"queues"`
	StartedAt Time     `json:"started_at"`
	LastSeen  Time     `json:"last_seen"`
}
