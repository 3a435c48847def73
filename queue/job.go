// Package queue is the lease lifecycle of Leasehold: submit, claim,
// heartbeat, complete, fail, reclaim, cancel and retry. It is the only
// writer of job state; the server and the worker both use it.
package queue

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/leasehold/leasehold/db"
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

// States lists every state, in lifecycle order.
var States = []State{StatePending, StateRunning, StateSucceeded, StateDead, StateCancelled}

// Valid reports whether s names a state.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Errors callers branch on. Driver errors never leave this package raw.
var (
	// ErrNotFound means no job has that id.
	ErrNotFound = errors.New("job not found")
	// ErrLeaseLost means the write came with a stale token or after the
	// lease deadline; nothing was changed.
	ErrLeaseLost = errors.New("lease lost")
	// ErrWrongState means the job is not in a state the action applies to.
	ErrWrongState = errors.New("job is not in a state that allows this")
	// ErrIdempotencyConflict means the idempotency key names a job with
	// different contents.
	ErrIdempotencyConflict = errors.New("idempotency key already used for a different job")
	// ErrTokenRevoked means a remote claim's worker token was revoked:
	// the claim took nothing, and no later one will.
	ErrTokenRevoked = errors.New("the worker token is revoked")
)

// Job is a unit of work and its current lease.
type Job struct {
	ID              int64
	Kind            string
	Queue           string
	Priority        int32
	Payload         json.RawMessage
	State           State
	Attempt         int32
	MaxAttempts     int32
	CountedAttempts int32
	RunAt           time.Time
	LeaseOwner      *string
	LeaseUntil      *time.Time
	LeaseToken      int64
	LeaseMs         int32
	HeartbeatAt     *time.Time
	TimeoutMs       *int32
	CancelRequested bool
	IdempotencyKey  *string
	BackoffBaseMs   int32
	BackoffMaxMs    int32
	// ConcurrencyKey, when set, limits how many jobs that share it run at
	// once: this one starts only while fewer than ConcurrencyLimit do.
	ConcurrencyKey   *string
	ConcurrencyLimit int32
	// RateLimits are the rate-limit keys the job names: each claim takes
	// one unit of every budget of each (see ratelimit.go).
	RateLimits []string
	LastError  *string
	Result     json.RawMessage
	CreatedAt  time.Time
	FinishedAt *time.Time
	// Schedule is the schedule that made the job, if one did.
	Schedule *string
	// Checkpoint is the last one an attempt saved, nil for none: a job
	// just claimed resumes from it.
	Checkpoint *Checkpoint
	// MaxCost and MaxSteps are the job's budget (nil: none), over all its
	// attempts; CostSpentMicros and StepsSpent what it has spent (steps
	// are counted only for a job with MaxSteps). See Usage.
	MaxCost         *int64
	MaxSteps        *int32
	CostSpentMicros int64
	StepsSpent      int32
	// FailureGroup is the failure group of the job's last failed attempt
	// (nil: it has not failed since failure groups began).
	FailureGroup *int64
}

// Attempt is one claim of a job, from start to its outcome.
type Attempt struct {
	Number      int32
	WorkerID    string
	LeaseToken  int64
	StartedAt   time.Time
	HeartbeatAt *time.Time
	LeaseUntil  *time.Time
	EndedAt     *time.Time
	Outcome     *string
	Error       *string
}

// Event is one entry of a job's timeline.
type Event struct {
	At      time.Time
	Type    string
	Attempt *int32
	Detail  json.RawMessage
}

// JobDetail is a job with its history.
type JobDetail struct {
	Job
	Attempts  []Attempt
	Artifacts []Artifact
	Events    []Event
	Effects   []Effect
	// Usage is what the attempts reported, one entry per attempt, model
	// and currency, in attempt order.
	Usage []AttemptUsage
}

// Lease identifies one attempt's hold on a job: every write of the attempt
// carries it, and the database refuses it once it is no longer current.
type Lease struct {
	JobID    int64
	Token    int64
	WorkerID string
}

func jobFromRow(r db.Job) Job {
	return Job{
		ID: r.ID, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority, Payload: r.Payload,
		State: State(r.State), Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		CountedAttempts: r.CountedAttempts, RunAt: r.RunAt, LeaseOwner: r.LeaseOwner,
		LeaseUntil: r.LeaseUntil, LeaseToken: r.LeaseToken, LeaseMs: r.LeaseMs,
		HeartbeatAt: r.HeartbeatAt, TimeoutMs: r.TimeoutMs, CancelRequested: r.CancelRequested,
		IdempotencyKey: r.IdempotencyKey, BackoffBaseMs: r.BackoffBaseMs, BackoffMaxMs: r.BackoffMaxMs,
		LastError: r.LastError, Result: r.Result, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
		Schedule:       r.Schedule,
		ConcurrencyKey: r.ConcurrencyKey, ConcurrencyLimit: r.ConcurrencyLimit,
		Checkpoint: checkpointFromRow(r),
		MaxCost:    r.MaxCost, MaxSteps: r.MaxSteps, CostSpentMicros: r.CostSpentMicros, StepsSpent: r.StepsSpent,
		RateLimits: r.RateLimits, FailureGroup: r.FailureGroup,
	}
}

// jobRow is satisfied by every generated row type that carries a whole
// job: sqlc emits one per query, all with the fields of db.Job.
type jobRow interface {
	db.Job | db.JobClaimRow | db.JobClaimLimitedRow | db.JobFailRow | db.JobStopRow | db.JobCancelRow | db.JobRetryRow | db.JobClaimRatedRow
}

func toJob[R jobRow](r R) Job { return jobFromRow(db.Job(r)) }

func toJobs[R jobRow](rows []R) []Job {
	jobs := make([]Job, len(rows))
	for i, r := range rows {
		jobs[i] = toJob(r)
	}
	return jobs
}
