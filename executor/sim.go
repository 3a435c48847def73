package executor

import (
	"bytes"
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

// Run implements worker.Executor.
func (s Sim) Run(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
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
	)
	for step := 1; step <= steps || p.Sim.Hang; step++ {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(time.Duration(stepMs) * time.Millisecond):
		}
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
		if err := worker.ProgressStep(ctx, r, named, fraction, msg); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
			return nil, fmt.Errorf("reporting progress: %w", err)
		}
	}
	// With no steps there is no first step to hold the effect; asking for
	// one still means it should happen.
	if steps == 0 && effectURL != nil {
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
