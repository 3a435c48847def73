package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// SimOptions is payload.sim: how the simulated investigation behaves.
type SimOptions struct {
	Steps        *int `json:"steps"`         // default 3
	StepMs       *int `json:"step_ms"`       // default 500
	FailAttempts int  `json:"fail_attempts"` // the first N attempts fail after their last step
	Permanent    bool `json:"permanent"`     // a failure is permanent (exit code 100)
	Hang         bool `json:"hang"`          // never finish; stop only when stopped
}

// Sim simulates an app investigation step by step, deterministically from
// its payload, for demos and tests.
type Sim struct{}

// Run implements worker.Executor.
func (Sim) Run(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
	var p struct {
		App string     `json:"app"`
		Sim SimOptions `json:"sim"`
	}
	if err := json.Unmarshal(job.Payload, &p); err != nil {
		return nil, worker.Permanent(fmt.Errorf("reading sim payload: %w", err))
	}
	steps, stepMs := 3, 500
	if p.Sim.Steps != nil {
		steps = *p.Sim.Steps
	}
	if p.Sim.StepMs != nil {
		stepMs = *p.Sim.StepMs
	}
	if steps < 0 || steps > 10_000 || stepMs < 0 || stepMs > 3_600_000 {
		return nil, worker.Permanent(errors.New("sim: steps must be 0..10000 and step_ms 0..3600000"))
	}
	app := p.App
	if app == "" {
		app = "the app"
	}
	for step := 1; step <= steps || p.Sim.Hang; step++ {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(time.Duration(stepMs) * time.Millisecond):
		}
		fraction := 1.0
		if !p.Sim.Hang && steps > 0 {
			fraction = float64(step) / float64(steps)
		}
		msg := fmt.Sprintf("step %d: explored screen %d of %s", step, step, app)
		if err := r.Progress(ctx, fraction, msg); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
			return nil, fmt.Errorf("reporting progress: %w", err)
		}
	}
	// permanent alone fails the first attempt for good; with fail_attempts
	// it makes those failures permanent.
	if int(job.Attempt) <= p.Sim.FailAttempts || (p.Sim.Permanent && p.Sim.FailAttempts == 0) {
		err := fmt.Errorf("sim: attempt %d fails as asked (fail_attempts=%d)", job.Attempt, p.Sim.FailAttempts)
		if p.Sim.Permanent {
			return nil, worker.Permanent(err)
		}
		return nil, err
	}
	return json.Marshal(map[string]any{
		"app":     app,
		"steps":   steps,
		"attempt": job.Attempt,
		"summary": fmt.Sprintf("investigated %s in %d steps", app, steps),
	})
}
