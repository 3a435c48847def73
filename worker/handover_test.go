package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// lateConfirm is the worker API with the first heartbeat held up past
// the server's hand-over deadline, as a slow network can: the server
// refuses it.
type lateConfirm struct {
	*worker.Remote
	delay time.Duration
	held  atomic.Bool
}

func (b *lateConfirm) Heartbeat(ctx context.Context, l queue.Lease) (queue.HeartbeatResult, error) {
	if b.held.CompareAndSwap(false, true) {
		time.Sleep(b.delay)
	}
	return b.Remote.Heartbeat(ctx, l)
}

// A remote worker starts a job only once the server has accepted the
// heartbeat that confirms its hand-over (SPEC lease rule 11). Its first
// confirmation comes too late and is refused: that attempt never runs an
// executor and ends not_delivered, uncounted; the job runs in the next.
func TestRemoteWorkerRunsNoJobWhoseConfirmIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// Held past the deadline, within the worker's own bound on the call
	// (a heartbeat interval): the server, not a timeout, refuses it.
	backend := &lateConfirm{Remote: f.remoteHandover(t, 500*time.Millisecond), delay: 700 * time.Millisecond}
	backend.ClaimWait = time.Second // wrapped, its long poll is not cut at shutdown
	var (
		mu  sync.Mutex
		ran []int32
	)
	exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
		mu.Lock()
		ran = append(ran, job.Attempt)
		mu.Unlock()
		return json.RawMessage(`{"ok":true}`), nil
	})
	f.run(t, worker.Config{ID: "remote-worker", Lease: 5 * time.Second, Heartbeat: time.Second, Executor: exec,
		Backend: backend, Pool: f.pool, Reaper: true})
	job := f.submit(t, `{}`, 1)
	d := f.waitState(t, job.ID, queue.StateSucceeded)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []int32{2}) {
		t.Fatalf("the executor ran for attempts %v, want only 2 (attempt 1's hand-over was refused)", ran)
	}
	if len(d.Attempts) != 2 || deref(d.Attempts[0].Outcome) != "not_delivered" || d.CountedAttempts != 0 {
		t.Fatalf("attempts %+v, %d counted; want not_delivered then succeeded, none counted (events %v)",
			d.Attempts, d.CountedAttempts, eventTypes(d))
	}
}

// cancelledInHandover hands its claims over, and a cancel of each job
// comes before the worker confirms it.
type cancelledInHandover struct {
	worker.Direct
}

func (b cancelledInHandover) Claim(ctx context.Context, p queue.ClaimParams) (worker.Claim, error) {
	c, err := b.Direct.Claim(ctx, p)
	for _, j := range c.Jobs {
		if _, cerr := b.Client.CancelOne(ctx, j.ID, "test"); cerr != nil {
			return c, cerr
		}
	}
	c.Handover = true
	return c, err
}

// A job whose cancel the confirming heartbeat reports is never started:
// it ends cancelled at once, rather than run until the next heartbeat.
func TestHandoverCancelledBeforeConfirmIsNotRun(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var ran atomic.Int32
	exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
		ran.Add(1)
		return nil, nil
	})
	f.run(t, worker.Config{ID: "w", Lease: 30 * time.Second, Executor: exec,
		Backend: cancelledInHandover{Direct: worker.Direct{Client: f.client}}, Pool: f.pool})
	job := f.submit(t, `{}`, 1)
	d := f.waitState(t, job.ID, queue.StateCancelled)
	if n := ran.Load(); n != 0 {
		t.Fatalf("the executor ran %d times for a job cancelled before it started", n)
	}
	if len(d.Attempts) != 1 || deref(d.Attempts[0].Outcome) != "cancelled" || d.CountedAttempts != 0 {
		t.Fatalf("attempts %+v, %d counted; want one cancelled, uncounted", d.Attempts, d.CountedAttempts)
	}
}
