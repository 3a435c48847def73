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

// execReporter records what an executor reports, with an in-memory
// side-effect ledger. changed is signalled on every write.
type execReporter struct {
	jobID   int64
	changed chan struct{}

	mu        sync.Mutex
	leaseLost bool
	progress  []execProgressCall
	artifacts []execArtifactCall // accepted uploads
	refused   []string           // names of refused uploads
	started   map[string]bool
	done      map[string]json.RawMessage
}

type execProgressCall struct {
	fraction float64
	message  string
}

type execArtifactCall struct {
	name string
	data []byte
}

func newExecReporter(jobID int64) *execReporter {
	return &execReporter{jobID: jobID, changed: make(chan struct{}, 1),
		started: map[string]bool{}, done: map[string]json.RawMessage{}}
}

func (f *execReporter) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *execReporter) loseLease() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaseLost = true
}

func (f *execReporter) Progress(_ context.Context, fraction float64, message string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.signal()
	if f.leaseLost {
		return queue.ErrLeaseLost
	}
	f.progress = append(f.progress, execProgressCall{fraction, message})
	return nil
}

func (f *execReporter) Artifact(_ context.Context, name string, r io.Reader) (queue.Artifact, error) {
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
	// Like the real storage: images are checked by content.
	if strings.HasSuffix(strings.ToLower(name), ".png") && !bytes.HasPrefix(data, []byte("\x89PNG")) {
		f.refused = append(f.refused, name)
		return queue.Artifact{}, errors.New("not a PNG, JPEG or WebP image")
	}
	f.artifacts = append(f.artifacts, execArtifactCall{name, data})
	return queue.Artifact{Name: name, Size: int64(len(data))}, nil
}

func (f *execReporter) StartEffect(_ context.Context, key string) (queue.EffectStart, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseLost {
		return queue.EffectStart{}, queue.ErrLeaseLost
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`).MatchString(key) {
		return queue.EffectStart{}, &queue.ValidationError{Field: "key", Message: "must match [A-Za-z0-9_.:-]{1,128}"}
	}
	start := queue.EffectStart{IdempotencyKey: queue.IdempotencyKey(f.jobID, key)}
	if result, ok := f.done[key]; ok {
		start.Done, start.Result = true, result
		return start, nil
	}
	f.started[key] = true
	return start, nil
}

func (f *execReporter) FinishEffect(_ context.Context, key string, result json.RawMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseLost || !f.started[key] {
		return queue.ErrLeaseLost
	}
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	f.done[key] = result
	return nil
}

func (f *execReporter) Effect(ctx context.Context, key string, fn worker.EffectFunc) (json.RawMessage, error) {
	start, err := f.StartEffect(ctx, key)
	if err != nil || start.Done {
		return start.Result, err
	}
	result, err := fn(ctx, start.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return result, f.FinishEffect(ctx, key, result)
}

func (f *execReporter) snapshot() ([]execProgressCall, []execArtifactCall, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.progress), slices.Clone(f.artifacts), slices.Clone(f.refused)
}

// waitFor waits until cond holds, checking whenever the reporter records
// something.
func (f *execReporter) waitFor(t *testing.T, what string, cond func() bool) {
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

func (f *execReporter) artifact(name string) (execArtifactCall, int) {
	_, arts, _ := f.snapshot()
	var found execArtifactCall
	n := 0
	for _, a := range arts {
		if a.name == name {
			found, n = a, n+1
		}
	}
	return found, n
}
