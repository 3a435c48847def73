package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/leasehold/leasehold/queue"
)

// reporter is the Reporter of one attempt. Its writes are retried through
// outages (a server restarting, a database failing over or refusing
// writes for a while: see transient) until they succeed, are refused, or
// the executor's context ends, which the heartbeat ends before the lease
// could have run out: the same for both kinds of worker, so that no
// executor needs its own retries. Artifacts go through the spool and are
// uploaded in the background (uploads).
type reporter struct {
	backend Backend
	lease   queue.Lease
	jl      *jobLog
	uploads *uploads
	// stop ends the attempt's executor, as a lost lease does: a write
	// that spent the job's budget ended the attempt (see spent).
	stop context.CancelCauseFunc
}

func (w *Worker) reporter(lease queue.Lease, jl *jobLog, stop context.CancelCauseFunc) reporter {
	return reporter{backend: w.backend, lease: lease, jl: jl, uploads: newUploads(w.backend, w.cfg.Spool, lease, jl), stop: stop}
}

// errBudgetSpent stops an executor whose write spent its job's budget:
// the server ended the attempt (failed, permanent, "budget spent"), so,
// as for a lost lease, the worker writes nothing more for it.
var errBudgetSpent = fmt.Errorf("%w: %w", queue.ErrBudgetSpent, errLeaseLost)

// spent stops the executor when err says the write spent the budget.
func (r reporter) spent(err error) error {
	if errors.Is(err, queue.ErrBudgetSpent) && r.stop != nil {
		r.jl.get().Warn("budget spent: the attempt ended; stopping the job")
		r.stop(errBudgetSpent)
	}
	return err
}

// Usage records what the attempt used (UsageReporter), checked first as
// the queue checks it; queue.ErrBudgetSpent stops the job.
func (r reporter) Usage(ctx context.Context, u queue.Usage) error {
	if err := queue.CheckUsage(&u); err != nil {
		return err
	}
	return r.spent(r.retry(ctx, "usage", func(ctx context.Context) error {
		return r.backend.Usage(ctx, r.lease, u)
	}))
}

// retry is retryWrite, with the job's logger made only when a write
// failed (see jobLog).
func (r reporter) retry(ctx context.Context, op string, write func(context.Context) error) error {
	err := write(ctx)
	if !transient(err) || ctx.Err() != nil {
		return err
	}
	return retryWrite(ctx, r.jl.get(), op, write)
}

// Progress waits for the attempt's artifacts handed over before it to be
// stored (or given up) first, so that the timeline keeps the order in
// which the executor wrote: a replay pairs a screenshot without a step
// with the progress written before it, by time (queue.ReplaySteps), and
// a screenshot stored after the next step's message would show that
// step's action. When nothing is waiting in the spool, as normally, it
// waits for nothing.
func (r reporter) Progress(ctx context.Context, fraction float64, message string) error {
	return r.ProgressStep(ctx, 0, fraction, message)
}

// ProgressStep is Progress of the given step (StepReporter); 0 for none.
// A step out of range is refused as the server would refuse it.
func (r reporter) ProgressStep(ctx context.Context, step int, fraction float64, message string) error {
	if step < 0 || step > queue.MaxStep {
		return &queue.ValidationError{Field: "step", Message: fmt.Sprintf("must be between 1 and %d", queue.MaxStep)}
	}
	r.uploads.wait(ctx)
	err := r.retry(ctx, "progress", func(ctx context.Context) error {
		return r.backend.Progress(ctx, r.lease, int32(step), fraction, message)
	})
	if err == nil {
		r.uploads.progress(fraction)
	}
	return r.spent(err)
}

// Artifact spools body and returns once it is in the spool (the returned
// Artifact has its name and size, not yet an id); it is uploaded after
// the attempt's earlier ones. ErrSpoolFull when the spool has no room.
func (r reporter) Artifact(ctx context.Context, name string, body io.Reader) (queue.Artifact, error) {
	return r.ArtifactStep(ctx, 0, name, body)
}

// ArtifactStep is Artifact of the given step (StepReporter); 0 for none.
func (r reporter) ArtifactStep(_ context.Context, step int, name string, body io.Reader) (queue.Artifact, error) {
	if step < 0 || step > queue.MaxStep {
		return queue.Artifact{}, &queue.ValidationError{Field: "step", Message: fmt.Sprintf("must be between 1 and %d", queue.MaxStep)}
	}
	if d, ok := r.backend.(Direct); ok && d.Artifacts == nil {
		return queue.Artifact{}, errNoArtifactStorage
	}
	return r.uploads.add(name, int32(step), body)
}

func (r reporter) StartEffect(ctx context.Context, key string) (queue.EffectStart, error) {
	var start queue.EffectStart
	err := r.retry(ctx, "effect start", func(ctx context.Context) error {
		var err error
		start, err = r.backend.StartEffect(ctx, r.lease, key)
		return err
	})
	return start, err
}

func (r reporter) FinishEffect(ctx context.Context, key string, result json.RawMessage) error {
	// Checked before sending, for both kinds of worker: a *queue.ValidationError.
	if err := queue.CheckResult(result); err != nil {
		return err
	}
	return r.retry(ctx, "effect finish", func(ctx context.Context) error {
		return r.backend.FinishEffect(ctx, r.lease, key, result)
	})
}

// Checkpoint saves the attempt's checkpoint, checked before it is sent
// (a *queue.ValidationError) and retried through outages like every
// write. It waits for the attempt's artifacts handed over before it, as
// Progress does: a later attempt that resumes after step should find
// that step's screenshots stored.
func (r reporter) Checkpoint(ctx context.Context, step int, state json.RawMessage) error {
	if err := queue.CheckCheckpoint(step, state); err != nil {
		return err
	}
	r.uploads.wait(ctx)
	return r.retry(ctx, "checkpoint", func(ctx context.Context) error {
		return r.backend.Checkpoint(ctx, r.lease, step, state)
	})
}

// Effect performs fn at most once for the job under key: see RunEffect.
func (r reporter) Effect(ctx context.Context, key string, fn EffectFunc) (json.RawMessage, error) {
	return RunEffect(ctx, r, key, fn)
}
