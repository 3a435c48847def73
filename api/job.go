package api

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

// NewJob is the body of POST /api/v1/jobs: a job to submit. Only Kind is
// required; absent fields take the server's defaults.
type NewJob struct {
	Kind     string `json:"kind"`
	Queue    string `json:"queue,omitempty"`
	Priority int32  `json:"priority,omitempty"`
	// Payload is a JSON object of at most 1 MiB.
	Payload        json.RawMessage `json:"payload,omitempty"`
	MaxAttempts    *int32          `json:"max_attempts,omitempty"`
	RunAt          *time.Time      `json:"run_at,omitempty"`
	TimeoutMs      *int32          `json:"timeout_ms,omitempty"`
	IdempotencyKey *string         `json:"idempotency_key,omitempty"`
	BackoffBaseMs  *int32          `json:"backoff_base_ms,omitempty"`
	BackoffMaxMs   *int32          `json:"backoff_max_ms,omitempty"`
	// ConcurrencyKey: at most ConcurrencyLimit (default 1) running jobs
	// share it at once.
	ConcurrencyKey   *string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit *int32  `json:"concurrency_limit,omitempty"`
	// MaxCost (micro-units of the currency usage is reported in) and
	// MaxSteps are a budget over all the job's attempts.
	MaxCost  *int64 `json:"max_cost,omitempty"`
	MaxSteps *int32 `json:"max_steps,omitempty"`
	// RateLimits names rate-limit keys (at most 8, each at most 200
	// characters, none twice): each claim of the job spends one unit of
	// every budget of each.
	RateLimits []string `json:"rate_limits,omitempty"`
}

// NewJobs is the body of POST /api/v1/jobs/batch.
type NewJobs struct {
	Jobs []NewJob `json:"jobs"`
}

// Job is a job as the API shows it; the names are SPEC's.
type Job struct {
	ID              int64           `json:"id"`
	Kind            string          `json:"kind"`
	Queue           string          `json:"queue"`
	Priority        int32           `json:"priority"`
	Payload         json.RawMessage `json:"payload"`
	State           State           `json:"state"`
	Attempt         int32           `json:"attempt"`
	MaxAttempts     int32           `json:"max_attempts"`
	CountedAttempts int32           `json:"counted_attempts"`
	RunAt           Time            `json:"run_at"`
	LeaseOwner      *string         `json:"lease_owner"`
	LeaseUntil      *Time           `json:"lease_until"`
	LeaseToken      int64           `json:"lease_token"`
	LeaseMs         int32           `json:"lease_ms"`
	HeartbeatAt     *Time           `json:"heartbeat_at"`
	TimeoutMs       *int32          `json:"timeout_ms"`
	CancelRequested bool            `json:"cancel_requested"`
	IdempotencyKey  *string         `json:"idempotency_key"`
	BackoffBaseMs   int32           `json:"backoff_base_ms"`
	BackoffMaxMs    int32           `json:"backoff_max_ms"`
	// ConcurrencyKey, when set, limits how many jobs that share it run at
	// once: this one starts only while fewer than ConcurrencyLimit do.
	ConcurrencyKey   *string `json:"concurrency_key"`
	ConcurrencyLimit int32   `json:"concurrency_limit"`
	// RateLimits are the job's rate-limit keys; empty when it names none.
	RateLimits []string        `json:"rate_limits"`
	LastError  *string         `json:"last_error"`
	Result     json.RawMessage `json:"result"`
	CreatedAt  Time            `json:"created_at"`
	FinishedAt *Time           `json:"finished_at"`
	// Schedule is the schedule that made the job, if one did.
	Schedule *string `json:"schedule"`
	// MaxCost and MaxSteps are the job's budget (null: none);
	// CostSpentMicros and StepsSpent what all its attempts spent of it
	// (steps are counted only for a job with max_steps).
	MaxCost         *int64 `json:"max_cost"`
	MaxSteps        *int32 `json:"max_steps"`
	CostSpentMicros int64  `json:"cost_spent_micros"`
	StepsSpent      int32  `json:"steps_spent"`
	// Checkpoint is the last one an attempt saved (SPEC "Checkpoints"),
	// null for none: in a claim answer, what the attempt resumes from.
	Checkpoint *Checkpoint `json:"checkpoint"`
	// FailureGroup is the failure group of the job's last failed attempt
	// (GET /api/v1/failure-groups), null when it has none.
	FailureGroup *int64 `json:"failure_group"`
}

// Checkpoint is the state an attempt saved to resume from: the step it
// ends and the executor's state (a JSON object), by which attempt and
// when. It is also what LEASEHOLD_CHECKPOINT holds for an exec command
// (step and state only).
type Checkpoint struct {
	Step    int32           `json:"step"`
	State   json.RawMessage `json:"state"`
	Attempt int32           `json:"attempt,omitempty"`
	SavedAt *Time           `json:"saved_at,omitempty"`
}

// CheckpointRequest is the body of the checkpoint action: the step the
// state ends (>= 0) and the state, a JSON object of at most 64 KiB.
type CheckpointRequest struct {
	LeaseRequest
	Step  *int64          `json:"step"`
	State json.RawMessage `json:"state"`
}

// Jobs is a list of jobs: the answer of a batch submit.
type Jobs struct {
	Jobs []Job `json:"jobs"`
}

// JobList is one page of GET /api/v1/jobs, newest first; NextCursor is
// null on the last page.
type JobList struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor *int64 `json:"next_cursor"`
}

// JobDetail is a job with its history: GET /api/v1/jobs/{id}.
type JobDetail struct {
	Job
	Attempts  []Attempt  `json:"attempts"`
	Artifacts []Artifact `json:"artifacts"`
	Events    []Event    `json:"events"`
	Effects   []Effect   `json:"effects"`
	// Usage is what the attempts reported, one entry per attempt, model
	// and currency, in attempt order.
	Usage []AttemptUsage `json:"usage"`
	// Waiting says why the job is not running; null unless it is pending.
	Waiting *Waiting `json:"waiting"`
}

// WaitKind names why a pending job is not running (see Waiting).
type WaitKind string

// The reasons, in the order the server tries them (the first that holds
// is the answer).
const (
	WaitQueuePaused   WaitKind = "queue_paused"
	WaitNoWorker      WaitKind = "no_worker_for_queue"
	WaitNoDevice      WaitKind = "no_matching_device"
	WaitDevicesUnfit  WaitKind = "devices_unfit"
	WaitOutsideWindow WaitKind = "outside_window"
	WaitBackoff       WaitKind = "backoff"
	WaitScheduled     WaitKind = "scheduled"
	WaitRateLimited   WaitKind = "rate_limited"
	WaitQueueAtCap    WaitKind = "queue_at_cap"
	WaitKeyHeld       WaitKind = "concurrency_key_held"
	WaitReady         WaitKind = "ready"
)

// Waiting is why a pending job is not running. Kind and Queue are always
// there; the other fields only for the kinds that have them.
type Waiting struct {
	Kind  WaitKind `json:"kind"`
	Queue string   `json:"queue"`
	// PausedBy and PausedAt: who paused the queue and when
	// (queue_paused; absent when not recorded).
	PausedBy *string `json:"paused_by,omitempty"`
	PausedAt *Time   `json:"paused_at,omitempty"`
	// Running of at most Limit: the queue's running jobs and its cap
	// (queue_at_cap), or the key's running jobs and the job's
	// concurrency_limit (concurrency_key_held).
	Running *int64 `json:"running,omitempty"`
	Limit   *int64 `json:"limit,omitempty"`
	// ConcurrencyKey and HeldBy, the oldest running job holding it
	// (concurrency_key_held).
	// RateLimitKey is the job's rate-limit key whose budget is spent
	// (rate_limited; Until is when it returns).
	RateLimitKey   *string `json:"rate_limit_key,omitempty"`
	ConcurrencyKey *string `json:"concurrency_key,omitempty"`
	HeldBy         *int64  `json:"held_by,omitempty"`
	// Until is when the job is due (backoff, scheduled), when a spent
	// rate-limit budget returns (rate_limited), or when a phone
	// that could take it is available again for long enough
	// (outside_window; absent when its windows never are).
	Until *Time `json:"until,omitempty"`
	// Window and WindowOf: the availability window that opens at Until,
	// as written, and the device label or worker whose it is
	// (outside_window).
	Window   *string `json:"window,omitempty"`
	WindowOf *string `json:"window_of,omitempty"`
	// Device is the job's device label, when it names one.
	Device *string `json:"device,omitempty"`
	// DevicesOnline counts the workers online that could take the job,
	// all holding back; Unfit says why, "worker: reason", at most ten
	// (devices_unfit).
	DevicesOnline *int64   `json:"devices_online,omitempty"`
	Unfit         []string `json:"unfit,omitempty"`
}

// Attempt is one claim of a job, from start to its outcome.
type Attempt struct {
	Number      int32  `json:"number"`
	WorkerID    string `json:"worker_id"`
	LeaseToken  int64  `json:"lease_token"`
	StartedAt   Time   `json:"started_at"`
	HeartbeatAt *Time  `json:"heartbeat_at"`
	LeaseUntil  *Time  `json:"lease_until"`
	EndedAt     *Time  `json:"ended_at"`
	// Outcome is nil while the attempt runs: succeeded, failed,
	// lease_expired, cancelled, released, or not_delivered (a hand-over
	// to a remote worker it never confirmed; it does not count).
	Outcome *string `json:"outcome"`
	Error   *string `json:"error"`
}

// Event is one entry of a job's timeline.
type Event struct {
	At      Time            `json:"at"`
	Type    string          `json:"type"`
	Attempt *int32          `json:"attempt"`
	Detail  json.RawMessage `json:"detail"`
}

// Artifact is the metadata of a screenshot or text file of a job; its
// bytes are at URL (relative to the server: /artifacts/{id}). A worker's
// upload is answered with it too.
type Artifact struct {
	ID          int64  `json:"id"`
	Attempt     int32  `json:"attempt"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	Width       *int32 `json:"width,omitempty"`
	Height      *int32 `json:"height,omitempty"`
	Step        *int32 `json:"step,omitempty"`
	URL         string `json:"url"`
	CreatedAt   Time   `json:"created_at"`
}

// Effect is one entry of a job's side-effect ledger.
type Effect struct {
	Key     string `json:"key"`
	Attempt int32  `json:"attempt"`
	// State is started or done.
	State     string          `json:"state"`
	Result    json.RawMessage `json:"result"`
	CreatedAt Time            `json:"created_at"`
}

// Selector is the body of a bulk retry or cancel (POST /api/v1/jobs/retry,
// /api/v1/jobs/cancel): ids, a filter, or both (then a job must match all
// of it). It must not be empty.
type Selector struct {
	IDs   []int64 `json:"ids,omitempty"`
	State State   `json:"state,omitempty"`
	Kind  string  `json:"kind,omitempty"`
	Queue string  `json:"queue,omitempty"`
	// FailureGroup picks the jobs whose last failure is in that group:
	// a retry takes its dead (and cancelled) jobs, a cancel those still
	// retrying.
	FailureGroup int64 `json:"failure_group,omitempty"`
	// Checkpoint, for a retry only: "resume" (the default) or
	// "start_over", which clears each job's checkpoint.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// BulkResult answers a bulk retry or cancel: what it changed. Jobs is left
// out when more than MaxBulkJobs changed (Count and IDs are always
// complete). Selected jobs in a state the action does not apply to are
// skipped, not an error.
type BulkResult struct {
	Count int     `json:"count"`
	IDs   []int64 `json:"ids"`
	Jobs  []Job   `json:"jobs,omitzero"`
}

// MaxBulkJobs is the most changed jobs a BulkResult spells out: a filter
// can select millions, whose full JSON would be gigabytes.
const MaxBulkJobs = 1000

// Stats is GET /api/v1/stats: jobs per state (every state, even at 0),
// the workers seen lately and what the artifact files take.
type Stats struct {
	Jobs    map[State]int64 `json:"jobs"`
	Workers []Worker        `json:"workers"`
	Storage Storage         `json:"storage"`
}

// Storage is the artifact files on disk and their bytes.
type Storage struct {
	ArtifactFiles int64 `json:"artifact_files"`
	ArtifactBytes int64 `json:"artifact_bytes"`
}
