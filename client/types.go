package client

import (
	"encoding/json"
	"time"
)

// State is where a job is in its lifecycle.
type State string

// The states of a job.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateDead      State = "dead"
	StateCancelled State = "cancelled"
)

// NewJob is a job to submit. Only Kind is required; nil and empty fields
// take the server's defaults.
type NewJob struct {
	Kind     string `json:"kind"`
	Queue    string `json:"queue,omitempty"`
	Priority int32  `json:"priority,omitempty"`
	// Payload is a JSON object of at most 1 MiB.
	Payload        json.RawMessage `json:"payload,omitempty"`
	MaxAttempts    *int32          `json:"max_attempts,omitempty"`
	RunAt          *time.Time      `json:"run_at,omitempty"`
	TimeoutMs      *int32          `json:"timeout_ms,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	BackoffBaseMs  *int32          `json:"backoff_base_ms,omitempty"`
	BackoffMaxMs   *int32          `json:"backoff_max_ms,omitempty"`
	// ConcurrencyKey: at most ConcurrencyLimit (default 1) running jobs
	// share it at once.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit *int32 `json:"concurrency_limit,omitempty"`
}

// Job is a job as the API shows it.
type Job struct {
	ID               int64           `json:"id"`
	Kind             string          `json:"kind"`
	Queue            string          `json:"queue"`
	Priority         int32           `json:"priority"`
	Payload          json.RawMessage `json:"payload"`
	State            State           `json:"state"`
	Attempt          int32           `json:"attempt"`
	MaxAttempts      int32           `json:"max_attempts"`
	CountedAttempts  int32           `json:"counted_attempts"`
	RunAt            time.Time       `json:"run_at"`
	LeaseOwner       *string         `json:"lease_owner"`
	LeaseUntil       *time.Time      `json:"lease_until"`
	LeaseToken       int64           `json:"lease_token"`
	LeaseMs          int32           `json:"lease_ms"`
	HeartbeatAt      *time.Time      `json:"heartbeat_at"`
	TimeoutMs        *int32          `json:"timeout_ms"`
	CancelRequested  bool            `json:"cancel_requested"`
	IdempotencyKey   *string         `json:"idempotency_key"`
	BackoffBaseMs    int32           `json:"backoff_base_ms"`
	BackoffMaxMs     int32           `json:"backoff_max_ms"`
	ConcurrencyKey   *string         `json:"concurrency_key"`
	ConcurrencyLimit int32           `json:"concurrency_limit"`
	LastError        *string         `json:"last_error"`
	Result           json.RawMessage `json:"result"`
	CreatedAt        time.Time       `json:"created_at"`
	FinishedAt       *time.Time      `json:"finished_at"`
	Schedule         *string         `json:"schedule"`
}

// JobDetail is a job with its history.
type JobDetail struct {
	Job
	Attempts  []Attempt  `json:"attempts"`
	Artifacts []Artifact `json:"artifacts"`
	Events    []Event    `json:"events"`
	Effects   []Effect   `json:"effects"`
}

// Attempt is one claim of a job, from start to its outcome.
type Attempt struct {
	Number      int32      `json:"number"`
	WorkerID    string     `json:"worker_id"`
	LeaseToken  int64      `json:"lease_token"`
	StartedAt   time.Time  `json:"started_at"`
	HeartbeatAt *time.Time `json:"heartbeat_at"`
	LeaseUntil  *time.Time `json:"lease_until"`
	EndedAt     *time.Time `json:"ended_at"`
	// Outcome is nil while the attempt runs: succeeded, failed,
	// lease_expired, cancelled or released.
	Outcome *string `json:"outcome"`
	Error   *string `json:"error"`
}

// Artifact is the metadata of a screenshot or text file; its bytes are
// at URL (relative to the server, /artifacts/{id}).
type Artifact struct {
	ID          int64     `json:"id"`
	Attempt     int32     `json:"attempt"`
	Kind        string    `json:"kind"`
	Name        string    `json:"name"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Width       *int32    `json:"width,omitempty"`
	Height      *int32    `json:"height,omitempty"`
	URL         string    `json:"url"`
	CreatedAt   time.Time `json:"created_at"`
}

// Event is one entry of a job's timeline.
type Event struct {
	At      time.Time       `json:"at"`
	Type    string          `json:"type"`
	Attempt *int32          `json:"attempt"`
	Detail  json.RawMessage `json:"detail"`
}

// Effect is one entry of a job's side-effect ledger.
type Effect struct {
	Key       string          `json:"key"`
	Attempt   int32           `json:"attempt"`
	State     string          `json:"state"`
	Result    json.RawMessage `json:"result"`
	CreatedAt time.Time       `json:"created_at"`
}

// ListOptions filters a listing; empty fields do not filter.
type ListOptions struct {
	State State
	Kind  string
	Queue string
	// App is the job's payload.app.
	App string
	// PageSize is the number of jobs per request, at most 500 (default 50).
	PageSize int
}

// Page is one page of a listing, newest first. NextCursor is nil on the
// last page.
type Page struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor *int64 `json:"next_cursor"`
}

// Selector picks the jobs of a bulk retry or cancel: by IDs, by a filter,
// or both (then a job must match all of it). It must not be empty.
type Selector struct {
	IDs   []int64 `json:"ids,omitempty"`
	State State   `json:"state,omitempty"`
	Kind  string  `json:"kind,omitempty"`
	Queue string  `json:"queue,omitempty"`
}

// BulkResult is what a bulk retry or cancel changed. Jobs is nil when more
// than 1000 changed (Count and IDs are always complete).
type BulkResult struct {
	Count int     `json:"count"`
	IDs   []int64 `json:"ids"`
	Jobs  []Job   `json:"jobs"`
}

// Stats are the job counts per state and the workers seen lately.
type Stats struct {
	Jobs    map[State]int64 `json:"jobs"`
	Workers []Worker        `json:"workers"`
}

// Worker is a worker as the stats show it.
type Worker struct {
	ID       string    `json:"id"`
	LastSeen time.Time `json:"last_seen"`
	Device   *string   `json:"device"`
	Queues   []string  `json:"queues"`
	Running  int64     `json:"running"`
}

// WorkerStatus is a worker as GET /api/v1/workers shows it: presence,
// what its device-info command last said of its phone (Info, nil without
// one), its health (Claiming false with a Reason while it holds back or is
// offline) and its outcomes of the last 24 hours.
type WorkerStatus struct {
	ID           string          `json:"id"`
	Device       *string         `json:"device"`
	Queues       []string        `json:"queues"`
	Online       bool            `json:"online"`
	StartedAt    time.Time       `json:"started_at"`
	LastSeen     time.Time       `json:"last_seen"`
	Info         json.RawMessage `json:"info"`
	InfoAt       *time.Time      `json:"info_at"`
	InfoError    *string         `json:"info_error"`
	Running      int64           `json:"running"`
	LastJobID    *int64          `json:"last_job_id"`
	Succeeded24h int64           `json:"succeeded_24h"`
	Failed24h    int64           `json:"failed_24h"`
	Claiming     bool            `json:"claiming"`
	Reason       *string         `json:"reason"`
}
