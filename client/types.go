package client

import "github.com/leasehold/leasehold/api"

// The client's types are the API's own (package api): one declaration of
// each body for the server, the worker and this client.

// State is where a job is in its lifecycle.
type State = api.State

// The states of a job.
const (
	StatePending   = api.StatePending
	StateRunning   = api.StateRunning
	StateSucceeded = api.StateSucceeded
	StateDead      = api.StateDead
	StateCancelled = api.StateCancelled
)

// NewJob is a job to submit. Only Kind is required; nil and empty fields
// take the server's defaults.
type NewJob = api.NewJob

// Job is a job as the API shows it.
type Job = api.Job

// JobDetail is a job with its history.
type JobDetail = api.JobDetail

// Attempt is one claim of a job, from start to its outcome.
type Attempt = api.Attempt

// Artifact is the metadata of a screenshot or text file; its bytes are
// at URL (relative to the server, /artifacts/{id}).
type Artifact = api.Artifact

// Event is one entry of a job's timeline.
type Event = api.Event

// Effect is one entry of a job's side-effect ledger.
type Effect = api.Effect

// FailureGroup is one cause of failure: failed attempts whose errors
// match once numbers, ids, times and paths are masked, and whose last
// screenshots show the same screen.
type FailureGroup = api.FailureGroup

// Time is a time as the API shows it; Time() is its time.Time.
type Time = api.Time

// ListOptions filters a listing; empty fields do not filter.
type ListOptions struct {
	State State
	Kind  string
	Queue string
	// App is the job's payload.app.
	App string
	// FailureGroup lists that failure group's dead letters (State must
	// then be empty or dead).
	FailureGroup int64
	// PageSize is the number of jobs per request, at most 500 (default 50).
	PageSize int
}

// Page is one page of a listing, newest first. NextCursor is nil on the
// last page.
type Page = api.JobList

// Selector picks the jobs of a bulk retry or cancel: by IDs, by a filter,
// or both (then a job must match all of it). It must not be empty.
type Selector = api.Selector

// BulkResult is what a bulk retry or cancel changed. Jobs is nil when more
// than 1000 changed (Count and IDs are always complete).
type BulkResult = api.BulkResult

// Stats are the job counts per state and the workers seen lately.
type Stats = api.Stats

// Worker is a worker as the stats show it.
type Worker = api.Worker

// WorkerStatus is a worker as GET /api/v1/workers shows it.
type WorkerStatus = api.WorkerStatus
