package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// fakeCheck is a pre- or post-flight check whose verdict a test sets;
// it records the jobs it ran for (0 for a run with no job).
type fakeCheck struct {
	mu   sync.Mutex
	fail string
	ran  []int64
	// hold, when not nil, holds a run with no job (the worker's recheck
	// while held back) until it is closed.
	hold chan struct{}
}

func (c *fakeCheck) setFail(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = msg
}

func (c *fakeCheck) run(ctx context.Context, job *queue.Job, outcome string) (string, error) {
	if job == nil && c.hold != nil {
		select {
		case <-c.hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var id int64
	if job != nil {
		id = job.ID
	}
	c.ran = append(c.ran, id)
	if c.fail != "" {
		return "checked: " + c.fail + "\n", errors.New(c.fail)
	}
	return "checked ok " + outcome + "\n", nil
}

// startChecked runs a direct sim worker with an artifact store, so that
// the checks' outputs are kept.
// With remote, it works through the worker API (as "remote-worker").
func (f *fixture) startChecked(t *testing.T, remote bool, pre, post *fakeCheck) (id string) {
	t.Helper()
	store, err := artifact.New(t.TempDir(), f.client, artifact.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := worker.Config{ID: "checked", Lease: 2 * time.Second, Executor: executor.Sim{}, DeviceInfoEvery: 50 * time.Millisecond, Poll: 50 * time.Millisecond}
	newWorker := func() *worker.Worker { return worker.NewDirect(f.pool, store, cfg) }
	if remote {
		cfg.ID, cfg.Backend = "remote-worker", f.remote(t)
		newWorker = func() *worker.Worker { return worker.New(cfg) }
	}
	if pre != nil {
		cfg.Preflight = pre.run
	}
	if post != nil {
		cfg.Postflight = post.run
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	w := newWorker()
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cfg.ID
}

// checkOutputs are the text artifacts of job's attempt n, by name.
func (f *fixture) checkOutputs(t *testing.T, id int64, attempt int32) map[string]bool {
	t.Helper()
	d, err := f.client.Detail(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, a := range d.Artifacts {
		if a.Attempt == attempt {
			names[a.Name] = true
		}
	}
	return names
}

func (f *fixture) workerReason(t *testing.T, id string) (claiming bool, reason string) {
	t.Helper()
	ws, err := f.client.WorkerStatuses(f.ctx, time.Hour, queue.OnlineWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w.Health()
		}
	}
	return true, ""
}

// TestFailedPreflightReleasesAndHoldsBack: a failing preflight releases
// the job uncounted, keeps its output on the attempt, and the worker
// claims nothing (and says why) until the preflight passes again.
// Direct and remote alike.
func TestFailedPreflightReleasesAndHoldsBack(t *testing.T) {
	t.Parallel()
	for _, remote := range []bool{false, true} {
		t.Run(map[bool]string{false: "Direct", true: "Remote"}[remote], func(t *testing.T) {
			t.Parallel()
			testFailedPreflight(t, remote)
		})
	}
}

func testFailedPreflight(t *testing.T, remote bool) {
	f := setup(t)
	pre, post := &fakeCheck{fail: "screen locked"}, &fakeCheck{}
	id := f.startChecked(t, remote, pre, post)
	job := f.submit(t, `{"steps":1,"step_ms":10}`, 3)
	testutil.Await(t, 20*time.Second, func() (string, bool) {
		claiming, reason := f.workerReason(t, id)
		return reason, !claiming && strings.Contains(reason, "preflight failed: screen locked")
	}, func(r string) string { return "worker reason " + r })
	// The release is written after the phone is held back (which presence
	// may report first).
	d := testutil.Await(t, 20*time.Second, func() (queue.JobDetail, bool) {
		d, err := f.client.Detail(f.ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return d, d.State == queue.StatePending && len(d.Attempts) == 1
	}, func(d queue.JobDetail) string { return fmt.Sprintf("job %s attempts %+v", d.State, d.Attempts) })
	if *d.Attempts[0].Outcome != "released" || d.CountedAttempts != 0 {
		t.Fatalf("attempts %+v counted %d, want one released attempt, not counted", d.Attempts, d.CountedAttempts)
	}
	if out := f.checkOutputs(t, job.ID, 1); !out["preflight.txt"] || out["postflight.txt"] {
		t.Errorf("attempt 1 keeps %v, want preflight.txt alone (the job never ran)", out)
	}

	pre.setFail("")
	d = f.waitState(t, job.ID, queue.StateSucceeded)
	if out := f.checkOutputs(t, job.ID, d.Attempt); !out["preflight.txt"] || !out["postflight.txt"] {
		t.Errorf("attempt %d keeps %v, want both outputs", d.Attempt, out)
	}
}

// TestFailedPostflightHoldsBackUntilPreflightPasses: the job's outcome
// stands, and the phone claims nothing more until a preflight passes.
func TestFailedPostflightHoldsBackUntilPreflightPasses(t *testing.T) {
	t.Parallel()
	f := setup(t)
	pre, post := &fakeCheck{hold: make(chan struct{})}, &fakeCheck{fail: "could not uninstall"}
	f.startChecked(t, false, pre, post)
	first := f.submit(t, `{"steps":1,"step_ms":10}`, 3)
	f.waitState(t, first.ID, queue.StateSucceeded)
	testutil.Await(t, 20*time.Second, func() (string, bool) {
		claiming, reason := f.workerReason(t, "checked")
		return reason, !claiming && strings.Contains(reason, "postflight failed: could not uninstall")
	}, func(r string) string { return "worker reason " + r })

	// The preflight, run with no job while held back, passes: it claims again.
	// Held back, it claims nothing.
	second := f.submit(t, `{"steps":1,"step_ms":10}`, 3)
	if d, err := f.client.Detail(f.ctx, second.ID); err != nil || d.State != queue.StatePending || len(d.Attempts) != 0 {
		t.Fatalf("job %+v (%v), want pending and never claimed", d, err)
	}
	post.setFail("")
	close(pre.hold)
	f.waitState(t, second.ID, queue.StateSucceeded)
	pre.mu.Lock()
	defer pre.mu.Unlock()
	if !containsID(pre.ran, 0) {
		t.Errorf("preflight runs %v: none without a job while held back", pre.ran)
	}
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
