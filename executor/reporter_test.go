package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// fakeLedger is an in-memory side-effect ledger shared by the attempts of
// one job, the way the effects table is: give every attempt's reporter the
// same one.
type fakeLedger struct {
	mu      sync.Mutex
	entries map[string]json.RawMessage // nil value: started, not done
}

func newFakeLedger() *fakeLedger {
	return &fakeLedger{entries: map[string]json.RawMessage{}}
}

// start returns the recorded result when key is done; otherwise it marks
// key started.
func (l *fakeLedger) start(key string) (json.RawMessage, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if result := l.entries[key]; result != nil {
		return result, true
	}
	l.entries[key] = nil
	return nil, false
}

func (l *fakeLedger) finish(key string, result json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[key] = result
}

// fakeEffectKey is the key pattern the real ledger accepts.
var fakeEffectKey = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// fakeReporter is a worker.Reporter without a database for one attempt of
// a job: it records what the executor reports and keeps effects in its
// fakeLedger. changed is signalled on every Progress and Artifact call.
type fakeReporter struct {
	jobID   int64
	ledger  *fakeLedger
	changed chan struct{}

	mu          sync.Mutex
	leaseLost   bool  // every call answers queue.ErrLeaseLost
	artifactErr error // when set, every upload fails with it
	progress    []fakeProgress
	steps       []int           // the step of each progress, 0 for none (ProgressStep)
	artifacts   []fakeArtifact  // accepted uploads, in order
	refused     []string        // names of uploads refused for their content
	started     map[string]bool // effects this attempt started
	checkpoints []fakeCheckpoint
	usage       []queue.Usage // usage reports taken, in order
	budget      int           // when > 0, the report that makes this many answers queue.ErrBudgetSpent
}

type fakeCheckpoint struct {
	step  int
	state json.RawMessage
}

// Usage implements worker.UsageReporter: it checks u as the queue does.
func (f *fakeReporter) Usage(_ context.Context, u queue.Usage) error {
	if err := queue.CheckUsage(&u); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseLost {
		return queue.ErrLeaseLost
	}
	f.usage = append(f.usage, u)
	if f.budget > 0 && len(f.usage) >= f.budget {
		f.leaseLost = true // the attempt is over
		return queue.ErrBudgetSpent
	}
	return nil
}

type fakeProgress struct {
	fraction float64
	message  string
}

type fakeArtifact struct {
	name string
	data []byte
}

func newFakeReporter(jobID int64, l *fakeLedger) *fakeReporter {
	return &fakeReporter{jobID: jobID, ledger: l, changed: make(chan struct{}, 1), started: map[string]bool{}}
}

func (f *fakeReporter) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// loseLease makes every later call answer queue.ErrLeaseLost, as for an
// attempt whose lease has gone.
func (f *fakeReporter) loseLease() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaseLost = true
}

func (f *fakeReporter) Progress(ctx context.Context, fraction float64, message string) error {
	return f.ProgressStep(ctx, 0, fraction, message)
}

// ProgressStep makes fakeReporter a worker.StepReporter, as the worker's is.
func (f *fakeReporter) ProgressStep(_ context.Context, step int, fraction float64, message string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.signal()
	if f.leaseLost {
		return queue.ErrLeaseLost
	}
	f.progress = append(f.progress, fakeProgress{fraction, message})
	f.steps = append(f.steps, step)
	return nil
}

// ArtifactStep completes worker.StepReporter; the step is not kept.
func (f *fakeReporter) ArtifactStep(ctx context.Context, _ int, name string, r io.Reader) (queue.Artifact, error) {
	return f.Artifact(ctx, name, r)
}

func (f *fakeReporter) Artifact(_ context.Context, name string, r io.Reader) (queue.Artifact, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return queue.Artifact{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.signal()
	if f.leaseLost {
		return queue.Artifact{}, queue.ErrLeaseLost
	}
	if f.artifactErr != nil {
		return queue.Artifact{}, f.artifactErr
	}
	// Like the real storage: images are checked by content.
	if strings.HasSuffix(strings.ToLower(name), ".png") && !bytes.HasPrefix(data, []byte("\x89PNG")) {
		f.refused = append(f.refused, name)
		return queue.Artifact{}, errors.New("not a PNG, JPEG or WebP image")
	}
	f.artifacts = append(f.artifacts, fakeArtifact{name, data})
	return queue.Artifact{Name: name, Size: int64(len(data))}, nil
}

func (f *fakeReporter) StartEffect(_ context.Context, key string) (queue.EffectStart, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseLost {
		return queue.EffectStart{}, queue.ErrLeaseLost
	}
	if !fakeEffectKey.MatchString(key) {
		return queue.EffectStart{}, &queue.ValidationError{Field: "key", Message: "must match [A-Za-z0-9_.:-]{1,128}"}
	}
	start := queue.EffectStart{IdempotencyKey: queue.IdempotencyKey(f.jobID, key)}
	if result, done := f.ledger.start(key); done {
		start.Done, start.Result = true, result
		return start, nil
	}
	f.started[key] = true
	return start, nil
}

// FinishEffect, like the real ledger, accepts only the attempt that
// started key.
func (f *fakeReporter) FinishEffect(_ context.Context, key string, result json.RawMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseLost || !f.started[key] {
		return queue.ErrLeaseLost
	}
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	f.ledger.finish(key, result)
	return nil
}

// Checkpoint checks and records a checkpoint as the queue would save it.
func (f *fakeReporter) Checkpoint(_ context.Context, step int, state json.RawMessage) error {
	if err := queue.CheckCheckpoint(step, state); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseLost {
		return queue.ErrLeaseLost
	}
	f.checkpoints = append(f.checkpoints, fakeCheckpoint{step: step, state: slices.Clone(state)})
	f.signal()
	return nil
}

// savedCheckpoints returns the checkpoints recorded, in order.
func (f *fakeReporter) savedCheckpoints() []fakeCheckpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.checkpoints)
}

func (f *fakeReporter) Effect(ctx context.Context, key string, fn worker.EffectFunc) (json.RawMessage, error) {
	return worker.RunEffect(ctx, f, key, fn)
}

// snapshot returns the progress calls, the accepted uploads and the names
// of the refused ones, in order.
func (f *fakeReporter) snapshot() ([]fakeProgress, []fakeArtifact, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.progress), slices.Clone(f.artifacts), slices.Clone(f.refused)
}

// artifactNames returns the names of the accepted uploads, in order.
func (f *fakeReporter) artifactNames() []string {
	_, arts, _ := f.snapshot()
	var names []string
	for _, a := range arts {
		names = append(names, a.name)
	}
	return names
}

// artifact returns the last accepted upload named name and how many
// there were.
func (f *fakeReporter) artifact(name string) (fakeArtifact, int) {
	_, arts, _ := f.snapshot()
	var found fakeArtifact
	n := 0
	for _, a := range arts {
		if a.name == name {
			found, n = a, n+1
		}
	}
	return found, n
}

// waitFor waits until cond holds, checking whenever the reporter records
// something.
func (f *fakeReporter) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-f.changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
