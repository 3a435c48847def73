package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

type fixture struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	client *queue.Client
}

func setup(t testing.TB) *fixture {
	t.Helper()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &fixture{ctx: ctx, pool: pool, client: queue.NewClient(pool, nil)}
}

// start runs a sim worker until the returned stop is called; stop returns
// once Run has returned.
func (f *fixture) start(t *testing.T, cfg worker.Config) (stop func()) {
	t.Helper()
	if cfg.Executor == nil {
		cfg.Executor = executor.Sim{}
	}
	cfg.ID = "test-worker"
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = worker.NewDirect(f.pool, nil, cfg).Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

func (f *fixture) submit(t *testing.T, sim string, maxAttempts int32) queue.Job {
	t.Helper()
	base := int32(0)
	job, _, err := f.client.Insert(f.ctx, queue.NewJob{
		Kind: "app_investigation", MaxAttempts: &maxAttempts, BackoffBaseMs: &base,
		Payload: json.RawMessage(`{"app":"com.example.notes","sim":` + sim + `}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func (f *fixture) waitState(t *testing.T, id int64, want queue.State) queue.JobDetail {
	t.Helper()
	return testutil.Await(t, 20*time.Second, func() (queue.JobDetail, bool) {
		d, err := f.client.Detail(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d, d.State == want
	}, func(d queue.JobDetail) string {
		lease := "no lease"
		if d.LeaseUntil != nil && d.LeaseOwner != nil {
			lease = fmt.Sprintf("lease of %s until %s (read at %s)", *d.LeaseOwner, d.LeaseUntil.Format("15:04:05.000"), time.Now().Format("15:04:05.000"))
		}
		return fmt.Sprintf("job %d is %s, want %s; %s; events: %v", id, d.State, want, lease, eventTypes(d))
	})
}

func TestRetriesUntilSuccess(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// A lease of seconds: no reaper runs here, so an attempt whose lease a
	// stalled machine let lapse would stay running to the test's end (CI
	// saw one such: the third attempt stopped after its first progress).
	f.start(t, worker.Config{Lease: 5 * time.Second})
	job := f.submit(t, `{"steps":2,"step_ms":10,"fail_attempts":2}`, 5)
	d := f.waitState(t, job.ID, queue.StateSucceeded)
	if len(d.Attempts) != 3 || *d.Attempts[0].Outcome != "failed" || *d.Attempts[2].Outcome != "succeeded" {
		t.Fatalf("attempts %+v", d.Attempts)
	}
	progress := 0
	for _, e := range d.Events {
		if e.Type == "progress" {
			progress++
		}
	}
	if progress != 6 {
		t.Fatalf("%d progress events, want 2 per attempt", progress)
	}
}

func TestPermanentFailureGoesDead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.start(t, worker.Config{Lease: 5 * time.Second}) // as above
	job := f.submit(t, `{"steps":1,"step_ms":10,"permanent":true}`, 5)
	d := f.waitState(t, job.ID, queue.StateDead)
	if len(d.Attempts) != 1 {
		t.Fatalf("%d attempts, want 1", len(d.Attempts))
	}
}

func TestCancelReachesRunningJob(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// The heartbeat brings the cancel; the lease is long so that a
	// stalled machine does not fence the worker first (no reaper runs
	// here to end a fenced attempt).
	f.start(t, worker.Config{Lease: 5 * time.Second, Heartbeat: 100 * time.Millisecond})
	job := f.submit(t, `{"hang":true,"step_ms":50}`, 5)
	f.waitState(t, job.ID, queue.StateRunning)
	if _, err := f.client.CancelOne(f.ctx, job.ID, "tester"); err != nil {
		t.Fatal(err)
	}
	d := f.waitState(t, job.ID, queue.StateCancelled)
	if *d.Attempts[0].Outcome != "cancelled" || d.CountedAttempts != 0 {
		t.Fatalf("attempt %+v counted %d", d.Attempts[0], d.CountedAttempts)
	}
}

func TestRefusedHeartbeatStopsExecutor(t *testing.T) {
	t.Parallel()
	f := setup(t)
	stopped := make(chan error, 1)
	exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	f.start(t, worker.Config{Lease: 5 * time.Second, Heartbeat: 100 * time.Millisecond, Executor: exec})
	job := f.submit(t, `{}`, 5)
	running := f.waitState(t, job.ID, queue.StateRunning)
	// Another worker takes the job over (as after a reclaim): the old
	// holder's next heartbeat is refused.
	if _, err := f.pool.Exec(f.ctx, "UPDATE jobs SET lease_token = nextval('lease_token_seq') WHERE id = $1", job.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-stopped:
		if cause == nil || cause.Error() != "lease lost" {
			t.Fatalf("executor stopped with cause %v, want lease lost", cause)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("executor not stopped within 2s of a refused heartbeat")
	}
	time.Sleep(100 * time.Millisecond)
	d, _ := f.client.Detail(f.ctx, job.ID)
	if d.State != queue.StateRunning || d.Attempts[0].EndedAt != nil || d.CountedAttempts != running.CountedAttempts {
		t.Fatalf("fenced worker wrote an outcome: %+v", d.Job)
	}
}

func TestShutdownFinishesWithinGrace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	stop := f.start(t, worker.Config{Lease: 5 * time.Second, Grace: 10 * time.Second})
	job := f.submit(t, `{"steps":3,"step_ms":100}`, 5)
	f.waitState(t, job.ID, queue.StateRunning)
	stop()
	d, _ := f.client.Detail(f.ctx, job.ID)
	if d.State != queue.StateSucceeded {
		t.Fatalf("after graceful stop the job is %s, want succeeded", d.State)
	}
}

func TestShutdownReleasesLeasesAfterGrace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	stop := f.start(t, worker.Config{Lease: 5 * time.Second, Grace: 200 * time.Millisecond, Concurrency: 2})
	a := f.submit(t, `{"hang":true,"step_ms":50}`, 1)
	b := f.submit(t, `{"hang":true,"step_ms":50}`, 1)
	f.waitState(t, a.ID, queue.StateRunning)
	f.waitState(t, b.ID, queue.StateRunning)
	stop()
	for _, id := range []int64{a.ID, b.ID} {
		d, _ := f.client.Detail(f.ctx, id)
		if d.State != queue.StatePending || *d.Attempts[0].Outcome != "released" || d.CountedAttempts != 0 {
			t.Fatalf("job %d after shutdown: state %s, attempt %+v", id, d.State, d.Attempts[0])
		}
	}
}

func TestIdleWorkerWakesOnSubmit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	started := make(chan time.Time, 1)
	exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
		started <- time.Now()
		return nil, nil
	})
	// A poll period far longer than the test: only a notification can
	// wake the worker in time.
	f.start(t, worker.Config{Lease: time.Second, Poll: time.Hour, Executor: exec})
	time.Sleep(300 * time.Millisecond) // let it settle into idleness
	f.submit(t, `{}`, 1)
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("idle worker did not pick up a new job without polling")
	}
}

type executorFunc func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error)

func (f executorFunc) Run(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
	return f(ctx, job, r)
}

func eventTypes(d queue.JobDetail) []string {
	var out []string
	for _, e := range d.Events {
		out = append(out, e.Type)
	}
	return out
}

func TestRetryStartsWhenDueWithoutPolling(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// A poll far longer than the test: only the reaper's announcement that
	// the retry is due can start it.
	f.start(t, worker.Config{Lease: time.Second, Poll: time.Hour, Reaper: true})
	base := int32(200)
	maxAttempts := int32(3)
	job, _, err := f.client.Insert(f.ctx, queue.NewJob{
		Kind: "app_investigation", MaxAttempts: &maxAttempts, BackoffBaseMs: &base,
		Payload: json.RawMessage(`{"app":"com.example.notes","sim":{"steps":1,"step_ms":10,"fail_attempts":1}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	d := f.waitState(t, job.ID, queue.StateSucceeded)
	gap := d.Attempts[1].StartedAt.Sub(*d.Attempts[0].EndedAt)
	if gap < 160*time.Millisecond || gap > time.Second {
		t.Fatalf("retry started %v after the failure, want its 160–240ms backoff and then at once", gap)
	}
	t.Logf("retry started %v after the failure (backoff 200ms ±20%%)", gap)
}

// scheduleSoon submits a sim job due at at; nobody announces it then but
// the reaper.
func (f *fixture) scheduleSoon(t *testing.T, at time.Time) queue.Job {
	t.Helper()
	job, _, err := f.client.Insert(f.ctx, queue.NewJob{
		Kind: "app_investigation", RunAt: &at,
		Payload: json.RawMessage(`{"app":"com.example.notes","sim":{"steps":1,"step_ms":10}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// startedWithin waits for job's first attempt and says how long after due
// it began; it fails the test if none began within d of due.
func (f *fixture) startedWithin(t *testing.T, job queue.Job, due time.Time, d time.Duration) time.Duration {
	t.Helper()
	detail := testutil.Await(t, time.Until(due.Add(d)), func() (queue.JobDetail, bool) {
		detail, err := f.client.Detail(f.ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return detail, len(detail.Attempts) > 0
	}, func(last queue.JobDetail) string {
		return fmt.Sprintf("job %d's first attempt (state %s, due %v ago)", job.ID, last.State, time.Since(due).Round(time.Millisecond))
	})
	return detail.Attempts[0].StartedAt.Sub(due)
}

// A job that fell due while no reaper was active (its process was
// restarting, or the role was changing hands) is announced by the reaper
// that becomes active next, not left to the workers' next poll.
func TestDueJobAnnouncedByTheNextActiveReaper(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.start(t, worker.Config{Lease: time.Second, Poll: time.Hour}) // no reaper in it
	// Once a first job has run, the worker has claimed, found nothing
	// more and waits to be told: the job below cannot be found by a
	// claim of its start-up, however slowly it starts.
	f.waitState(t, f.submit(t, `{"steps":1,"step_ms":1}`, 1).ID, queue.StateSucceeded)
	due := time.Now().Add(time.Second)
	job := f.scheduleSoon(t, due)
	time.Sleep(time.Until(due.Add(300 * time.Millisecond)))
	if d, err := f.client.Detail(f.ctx, job.ID); err != nil || len(d.Attempts) > 0 {
		t.Fatalf("job started (%d attempts, err %v) with no reaper to announce it: the test proves nothing", len(d.Attempts), err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = maintenance.NewReaper(f.pool, maintenance.ReaperConfig{}).Run(ctx) }()
	t.Logf("started %v after due, its reaper 300ms after", f.startedWithin(t, job, due, 5*time.Second).Round(time.Millisecond))
}

// A due time that passes while the reaper is awake for other reasons
// (claims in a busy fleet wake it for their leases) is announced all the
// same.
func TestDueJobAnnouncedWhileTheReaperIsBusy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.start(t, worker.Config{Lease: time.Second, Poll: time.Hour, Reaper: true})
	due := time.Now().Add(500 * time.Millisecond)
	job := f.scheduleSoon(t, due)
	// Wake-ups faster than the reaper looks, from before the due time
	// until well after it: the reaper never sleeps to its planned time.
	flood, err := f.pool.Acquire(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(due.Add(300 * time.Millisecond)) {
		if _, err := flood.Exec(f.ctx, "SELECT pg_notify('leasehold_reaper', '')"); err != nil {
			t.Fatal(err)
		}
	}
	flood.Release()
	t.Logf("started %v after due", f.startedWithin(t, job, due, 5*time.Second).Round(time.Millisecond))
}
