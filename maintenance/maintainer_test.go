package maintenance_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/maintenance"
)

// fakeService runs until ctx ends, or fails with fail once it starts.
type fakeService struct {
	role    string
	fail    error
	started chan struct{}
	stopped atomic.Bool
}

func newFake(role string, fail error) *fakeService {
	return &fakeService{role: role, fail: fail, started: make(chan struct{})}
}

func (s *fakeService) Role() string { return s.role }
func (s *fakeService) Active() bool { return false }
func (s *fakeService) Run(ctx context.Context) error {
	close(s.started)
	defer s.stopped.Store(true)
	if s.fail != nil {
		return s.fail
	}
	<-ctx.Done()
	return nil
}

func runMaintainer(t *testing.T, ctx context.Context, services ...maintenance.Service) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- maintenance.NewMaintainer(nil, services...).Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the maintainer did not return within 10 s")
		return nil
	}
}

// Every service starts, and when ctx ends all have stopped before Run
// returns.
func TestMaintainerStopsAllAtEnd(t *testing.T) {
	t.Parallel()
	a, b := newFake("a", nil), newFake("b", nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-a.started; <-b.started; cancel() }()
	if err := runMaintainer(t, ctx, a, b); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if !a.stopped.Load() || !b.stopped.Load() {
		t.Fatalf("returned with a service running: a stopped %v, b stopped %v", a.stopped.Load(), b.stopped.Load())
	}
}

// A service that fails is reported, with its role, and the others are
// stopped: a process never goes on without one silently.
func TestMaintainerReportsFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	ok, bad := newFake("ok", nil), newFake("bad", boom)
	err := runMaintainer(t, context.Background(), ok, bad)
	if !errors.Is(err, boom) || err.Error() != "bad: boom" {
		t.Fatalf("Run = %v, want bad: boom", err)
	}
	if !ok.stopped.Load() {
		t.Fatal("the other service still runs after one failed")
	}
}
