package executor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// SimOptions is payload.sim: how the simulated investigation behaves.
type SimOptions struct {
	Steps        *int   `json:"steps"`         // default 3
	StepMs       *int   `json:"step_ms"`       // default 500
	FailAttempts int    `json:"fail_attempts"` // the first N attempts fail after their last step
	Permanent    bool   `json:"permanent"`     // a failure is permanent (exit code 100)
	Hang         bool   `json:"hang"`          // never finish; stop only when stopped
	EffectURL    string `json:"effect_url"`    // POSTed once per job, in the first step, through the ledger
	// Checkpoint saves a checkpoint after each step; an attempt that
	// receives one starts at the step after it.
	Checkpoint bool `json:"checkpoint"`
	// Usage, when given, is reported after every step's progress.
	Usage *SimUsage `json:"usage"`
}

// simState is the state of a sim checkpoint: what the steps before it
// gave, so that a resumed run's result counts them too.
type simState struct {
	Screenshots int             `json:"screenshots"`
	Effect      json.RawMessage `json:"effect,omitempty"`
}

// SimUsage is payload.sim.usage: what each simulated step uses.
type SimUsage struct {
	Model               string           `json:"model"` // default "sim"
	Currency            string           `json:"currency"`
	InputTokensPerStep  int64            `json:"input_tokens_per_step"`
	OutputTokensPerStep int64            `json:"output_tokens_per_step"`
	CostMicrosPerStep   int64            `json:"cost_micros_per_step"`
	CountersPerStep     map[string]int64 `json:"counters_per_step"`
}

// report is one step's usage.
func (u SimUsage) report() queue.Usage {
	return queue.Usage{
		Model: cmp.Or(u.Model, "sim"), Currency: u.Currency, InputTokens: u.InputTokensPerStep,
		OutputTokens: u.OutputTokensPerStep, CostMicros: u.CostMicrosPerStep, Counters: u.CountersPerStep,
	}
}

// SimEffectKey is the side-effect ledger key of effect_url's POST.
const SimEffectKey = "sim-effect"

// maxWarnings bounds the warnings a result carries: a worker without
// artifact storage would otherwise repeat one per step.
const maxWarnings = 10

// Sim simulates an app investigation step by step, deterministically from
// its payload, for demos and tests. Every step uploads a screenshot.
type Sim struct {
	// HTTPClient makes effect_url's POST; nil means a client with a 30 s
	// timeout.
	HTTPClient *http.Client
}

// simPayload is what the sim reads of a job's payload.
type simPayload struct {
	App string
	Sim SimOptions
}

// readSimPayload reads payload's app and sim options. The payload may
// hold anything else, but payload.sim must name only the options above:
// a misspelt one ("cost_micros" for "cost_micros_per_step") would
// otherwise be ignored without a word, and the run not be the one asked
// for.
func readSimPayload(payload json.RawMessage) (simPayload, error) {
	var raw struct {
		App string          `json:"app"`
		Sim json.RawMessage `json:"sim"`
	}
	if err := json.Unmarshal(payload, &raw); err != nil {
		return simPayload{}, fmt.Errorf("reading sim payload: %w", err)
	}
	p := simPayload{App: raw.App}
	if len(raw.Sim) > 0 && string(raw.Sim) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw.Sim))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p.Sim); err != nil {
			return simPayload{}, fmt.Errorf("reading payload.sim: %w", err)
		}
	}
	return p, nil
}

// Run implements worker.Executor.
func (s Sim) Run(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
	p, err := readSimPayload(job.Payload)
	if err != nil {
		return nil, worker.Permanent(err)
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
	if p.Sim.Usage != nil {
		if u := p.Sim.Usage.report(); queue.CheckUsage(&u) != nil {
			return nil, worker.Permanent(fmt.Errorf("sim: usage: %w", queue.CheckUsage(&u)))
		}
	}
	var effectURL *url.URL
	if p.Sim.EffectURL != "" {
		u, err := url.Parse(p.Sim.EffectURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, worker.Permanent(fmt.Errorf("sim: effect_url must be an http(s) URL with a host, got %q", p.Sim.EffectURL))
		}
		effectURL = u
	}
	app := p.App
	if app == "" {
		app = "the app"
	}

	var (
		effect           json.RawMessage
		uploaded, failed int
		warnings         []string
		ran              int
	)
	first := 1
	if p.Sim.Checkpoint && job.Checkpoint != nil {
		// Resumed: the steps up to the checkpoint's are done. A state
		// that is not a sim's (another executor's) only loses its counts.
		var st simState
		_ = json.Unmarshal(job.Checkpoint.State, &st)
		first, uploaded, effect = int(job.Checkpoint.Step)+1, st.Screenshots, st.Effect
	}
	for step := first; step <= steps || p.Sim.Hang; step++ {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(time.Duration(stepMs) * time.Millisecond):
		}
		ran++
		if step == 1 && effectURL != nil {
			res, err := s.effect(ctx, job, app, effectURL, r)
			if err != nil {
				return nil, err
			}
			effect = res
		}
		// The step names the screenshot's and the progress's step, for the
		// replay; a hanging run past queue.MaxStep names none.
		named := step
		if named > queue.MaxStep {
			named = 0
		}
		if shootsAt(step, steps, stepMs, p.Sim.Hang) {
			img, err := Screen{JobID: job.ID, Attempt: job.Attempt, App: app, Step: step, Steps: steps, Hang: p.Sim.Hang}.PNG()
			if err != nil {
				return nil, err
			}
			_, err = worker.ArtifactStep(ctx, r, named, fmt.Sprintf("step-%02d.png", step), bytes.NewReader(img))
			switch {
			case err == nil:
				uploaded++
			case ctx.Err() != nil:
				return nil, context.Cause(ctx)
			case errors.Is(err, queue.ErrLeaseLost):
				// The heartbeat stops the job; nothing of this attempt
				// will be recorded anyway.
			default:
				// A missing screenshot does not make the investigation
				// wrong: say so in the result instead of failing it.
				failed++
				warnings = addWarning(warnings, fmt.Sprintf("uploading screenshots: %v", err))
			}
		}
		fraction := 1.0
		if !p.Sim.Hang && steps > 0 {
			fraction = float64(step) / float64(steps)
		}
		msg := fmt.Sprintf("step %d: explored screen %d of %s", step, step, app)
		err := worker.ProgressStep(ctx, r, named, fraction, msg)
		if err == nil && p.Sim.Usage != nil {
			err = worker.ReportUsage(ctx, r, p.Sim.Usage.report())
		}
		switch {
		case errors.Is(err, queue.ErrBudgetSpent):
			// The attempt is over (the worker stops it): nothing more to do.
			return nil, err
		case err != nil && !errors.Is(err, queue.ErrLeaseLost):
			return nil, fmt.Errorf("reporting progress: %w", err)
		}
		if p.Sim.Checkpoint && step <= queue.MaxStep {
			state, err := json.Marshal(simState{Screenshots: uploaded, Effect: effect})
			if err != nil {
				return nil, fmt.Errorf("encoding the checkpoint: %w", err)
			}
			switch err := r.Checkpoint(ctx, step, state); {
			case err == nil, errors.Is(err, queue.ErrLeaseLost):
			case ctx.Err() != nil:
				return nil, context.Cause(ctx)
			default:
				warnings = addWarning(warnings, fmt.Sprintf("saving checkpoints: %v", err))
			}
		}
	}
	// With no steps there is no first step to hold the effect; asking for
	// one still means it should happen.
	if steps == 0 && effectURL != nil && effect == nil {
		res, err := s.effect(ctx, job, app, effectURL, r)
		if err != nil {
			return nil, err
		}
		effect = res
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
	result := map[string]any{
		"app":         app,
		"steps":       steps,
		"attempt":     job.Attempt,
		"screenshots": uploaded,
		"summary":     fmt.Sprintf("investigated %s in %d steps", app, steps),
	}
	if effect != nil {
		result["effect"] = effect
	}
	if first > 1 {
		// Which steps this attempt ran: the ones after its checkpoint.
		result["resumed_after_step"] = first - 1
		result["steps_run"] = ran
	}
	if len(warnings) > 0 {
		result["warnings"] = warnings
		result["screenshots_failed"] = failed
	}
	return json.Marshal(result)
}

// shootsAt reports whether step takes a screenshot. Every step of a
// finite run does; a hanging job, which may run for an hour at 50 ms a
// step, takes one per nominal step and then about one a second, so that
// it cannot fill the artifact storage.
func shootsAt(step, steps, stepMs int, hang bool) bool {
	if !hang || step <= steps {
		return true
	}
	every := max(1, (1000+stepMs-1)/max(stepMs, 1))
	return step%every == 0
}

// addWarning appends w unless it is already there or the list is full.
func addWarning(ws []string, w string) []string {
	for _, have := range ws {
		if have == w {
			return ws
		}
	}
	if len(ws) >= maxWarnings {
		return ws
	}
	return append(ws, w)
}

// effect POSTs to u once per job through the side-effect ledger. A lost
// lease is not this step's to handle: the heartbeat stops the job. A failed
// POST fails the attempt, to be retried; the ledger then lets the next
// attempt try again with the same idempotency key.
func (s Sim) effect(ctx context.Context, job queue.Job, app string, u *url.URL, r worker.Reporter) (json.RawMessage, error) {
	res, err := r.Effect(ctx, SimEffectKey, func(ctx context.Context, key string) (json.RawMessage, error) {
		return s.post(ctx, u, key, job, app)
	})
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case errors.Is(err, queue.ErrLeaseLost):
		return nil, nil
	default:
		return nil, fmt.Errorf("sim effect: %w", err)
	}
}

func (s Sim) post(ctx context.Context, u *url.URL, idempotencyKey string, job queue.Job, app string) (json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{"job_id": job.ID, "attempt": job.Attempt, "app": app})
	if err != nil {
		return nil, fmt.Errorf("encoding effect body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building effect request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	client := s.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("posting effect: %w", err)
	}
	defer resp.Body.Close()
	// Drain a little so the connection can be reused; the body itself is
	// not part of the result.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("posting effect to %s: %s", u.Redacted(), resp.Status)
	}
	return json.Marshal(map[string]int{"status": resp.StatusCode})
}
