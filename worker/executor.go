// Package worker runs jobs: it claims them, runs an executor per job,
// renews each lease by heartbeat, and stops a job the moment its lease is
// lost, cancelled, or handed back at shutdown.
package worker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/leasehold/leasehold/queue"
)

// Executor runs one attempt of a job. It must return soon after ctx ends:
// that is how the worker stops a job whose lease is lost or cancelled.
type Executor interface {
	Run(ctx context.Context, job queue.Job, r Reporter) (result json.RawMessage, err error)
}

// Reporter lets an executor record progress on the job's timeline; the
// write is fenced like every other write of the attempt.
type Reporter interface {
	Progress(ctx context.Context, fraction float64, message string) error
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure that retrying cannot fix: the job goes
// dead at once (the exit code 100 of an exec job).
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked by Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
