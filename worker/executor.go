// Package worker runs jobs: it claims them, runs an executor per job,
// renews each lease by heartbeat, and stops a job the moment its lease is
// lost, cancelled, or handed back at shutdown.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/leasehold/leasehold/queue"
)

// Executor runs one attempt of a job. It must return soon after ctx ends:
// that is how the worker stops a job whose lease is lost or cancelled.
type Executor interface {
	Run(ctx context.Context, job queue.Job, r Reporter) (result json.RawMessage, err error)
}

// Reporter is what an executor may write for its attempt. Every write is
// fenced like the attempt's others: queue.ErrLeaseLost once the lease is
// gone.
type Reporter interface {
	// Progress records a progress event on the job's timeline.
	Progress(ctx context.Context, fraction float64, message string) error
	// Artifact stores a screenshot (PNG, JPEG, WebP, checked by content)
	// or a text artifact (.txt, .log, .xml) of this attempt. name is for
	// display only; it never becomes a path.
	Artifact(ctx context.Context, name string, r io.Reader) (queue.Artifact, error)
	// StartEffect and FinishEffect are the side-effect ledger, step by
	// step (exec children reach them through LEASEHOLD_EFFECTS_URL);
	// Effect does both around fn.
	StartEffect(ctx context.Context, key string) (queue.EffectStart, error)
	FinishEffect(ctx context.Context, key string, result json.RawMessage) error
	Effect(ctx context.Context, key string, fn EffectFunc) (json.RawMessage, error)
	// Checkpoint saves state (a JSON object of at most
	// queue.MaxCheckpointBytes) as the point a later attempt of the job
	// may resume from: the attempt has done step. The next attempt's
	// job.Checkpoint is the last one saved (SPEC "Checkpoints").
	Checkpoint(ctx context.Context, step int, state json.RawMessage) error
}

// StepReporter is a Reporter that can say which step of the attempt a
// write belongs to (1 to queue.MaxStep): the replay shows a step's
// screenshot with that step's progress message, whichever was written
// first. The worker's reporters are StepReporters; use ProgressStep and
// ArtifactStep, which fall back to the plain writes for others.
type StepReporter interface {
	Reporter
	ProgressStep(ctx context.Context, step int, fraction float64, message string) error
	ArtifactStep(ctx context.Context, step int, name string, r io.Reader) (queue.Artifact, error)
}

// ProgressStep reports progress of the given step through r, as a plain
// Progress when r cannot name steps.
func ProgressStep(ctx context.Context, r Reporter, step int, fraction float64, message string) error {
	if sr, ok := r.(StepReporter); ok {
		return sr.ProgressStep(ctx, step, fraction, message)
	}
	return r.Progress(ctx, fraction, message)
}

// ArtifactStep stores an artifact of the given step through r, as a
// plain Artifact when r cannot name steps.
func ArtifactStep(ctx context.Context, r Reporter, step int, name string, body io.Reader) (queue.Artifact, error) {
	if sr, ok := r.(StepReporter); ok {
		return sr.ArtifactStep(ctx, step, name, body)
	}
	return r.Artifact(ctx, name, body)
}

// UsageReporter is a Reporter that can report what the attempt used
// (model, tokens, cost, counters): the worker's reporters are. A report
// that spends the job's budget (max_cost) is answered
// queue.ErrBudgetSpent: the attempt is over, and the worker stops it.
type UsageReporter interface {
	Reporter
	Usage(ctx context.Context, u queue.Usage) error
}

// ErrNoUsage is ReportUsage's answer for a Reporter that cannot report
// usage.
var ErrNoUsage = errors.New("this reporter cannot report usage")

// ReportUsage reports u through r; ErrNoUsage when r cannot.
func ReportUsage(ctx context.Context, r Reporter, u queue.Usage) error {
	if ur, ok := r.(UsageReporter); ok {
		return ur.Usage(ctx, u)
	}
	return ErrNoUsage
}

// EffectFunc performs an external action once; idempotencyKey goes with
// the call so that its receiver can drop a repeat.
type EffectFunc func(ctx context.Context, idempotencyKey string) (json.RawMessage, error)

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

// Ledger is the step-by-step side-effect ledger of one attempt.
type Ledger interface {
	StartEffect(ctx context.Context, key string) (queue.EffectStart, error)
	FinishEffect(ctx context.Context, key string, result json.RawMessage) error
}

// RunEffect performs fn at most once for the job under key, across all
// its attempts: when an earlier attempt recorded the effect done, fn is
// not called and the recorded result comes back. One gap no ledger can
// close: a crash after fn's external call and before FinishEffect; the
// next attempt calls again, with the same idempotency key, so the
// receiver can drop the repeat.
func RunEffect(ctx context.Context, l Ledger, key string, fn EffectFunc) (json.RawMessage, error) {
	start, err := l.StartEffect(ctx, key)
	if err != nil || start.Done {
		return start.Result, err
	}
	result, err := fn(ctx, start.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	return result, l.FinishEffect(ctx, key, result)
}
