package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

type fixture struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	client *queue.Client
}

func setup(t *testing.T, maxConns int) *fixture {
	t.Helper()
	pool := testutil.NewPool(t, maxConns)
	return &fixture{ctx: testutil.Context(t), pool: pool, client: queue.NewClient(pool, nil)}
}

type jobOpts struct {
	kind, queue    string
	payload        string
	maxAttempts    int32
	backoffBase    int32
	backoffMax     int32
	idempotencyKey string
	timeoutMs      int32
}

// insert inserts a job; unlike the queue's default, its retries are due
// at once unless o says otherwise.
func (f *fixture) insert(t *testing.T, o jobOpts) queue.Job {
	t.Helper()
	return testutil.InsertJob(t, f.ctx, f.client, testutil.Job{
		Kind: o.kind, Queue: o.queue, Payload: o.payload, MaxAttempts: o.maxAttempts,
		BackoffBaseMs: &o.backoffBase, BackoffMaxMs: o.backoffMax, IdempotencyKey: o.idempotencyKey, TimeoutMs: o.timeoutMs,
	})
}

func (f *fixture) claimOne(t *testing.T, worker string, lease time.Duration) queue.Job {
	t.Helper()
	return testutil.ClaimJob(t, f.ctx, f.client, worker, "default", lease)
}

func TestClaimConcurrentExactlyOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, 70)
	const total, claimers = 10_000, 64
	batch := make([]queue.NewJob, total)
	for i := range batch {
		batch[i] = queue.NewJob{Kind: "noop", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	if _, err := f.client.InsertMany(f.ctx, batch); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for w := range claimers {
		wg.Go(func() {
			for {
				limit := 1 + rand.IntN(20)
				jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{
					WorkerID: fmt.Sprintf("w%d", w), Queues: []string{"default"}, Limit: limit, Lease: time.Minute,
				})
				if err != nil {
					errs <- err
					return
				}
				if len(jobs) > limit {
					errs <- fmt.Errorf("claim with limit %d returned %d jobs", limit, len(jobs))
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					seen[j.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %d claimed %d times", id, n)
		}
	}
	counts, err := f.client.Counts(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Jobs[queue.StateRunning] != total || counts.Jobs[queue.StatePending] != 0 || counts.Claims != total {
		t.Fatalf("counts = %+v, want %d running", counts, total)
	}
}

func TestClaimOrderAndLimit(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	low := f.insert(t, jobOpts{})
	nj := queue.NewJob{Kind: "test", Priority: -5}
	high, _, err := f.client.Insert(f.ctx, nj)
	if err != nil {
		t.Fatal(err)
	}
	f.insert(t, jobOpts{queue: "other"})
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 10, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != high.ID || jobs[1].ID != low.ID {
		t.Fatalf("claimed %v, want [%d %d] (priority first, other queue left)", ids(jobs), high.ID, low.ID)
	}
	if jobs[0].LeaseToken == jobs[1].LeaseToken || jobs[0].Attempt != 1 {
		t.Fatalf("tokens %d %d, attempt %d", jobs[0].LeaseToken, jobs[1].LeaseToken, jobs[0].Attempt)
	}
}

func TestDeviceRouting(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	pixel := f.insert(t, jobOpts{payload: `{"device":"pixel7"}`})
	any := f.insert(t, jobOpts{})
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Devices: []string{"galaxy"}, Limit: 10, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != any.ID {
		t.Fatalf("galaxy worker claimed %v, want only %d", ids(jobs), any.ID)
	}
	jobs, err = f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w2", Queues: []string{"default"}, Devices: []string{"x", "pixel7"}, Limit: 10, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != pixel.ID {
		t.Fatalf("pixel7 worker claimed %v, want %d", ids(jobs), pixel.ID)
	}
}

func TestStaleTokenRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{backoffBase: 0})
	old := f.claimOne(t, "old", 100*time.Millisecond)
	// An hour on, by the statements' clock: the lease has long expired.
	later := f.client.At(time.Now().Add(time.Hour))
	reapAt(t, f, later, old.ID)
	current := testutil.ClaimJob(t, f.ctx, later, "new", "default", time.Minute)
	if current.LeaseToken <= old.LeaseToken {
		t.Fatalf("new token %d not larger than old %d", current.LeaseToken, old.LeaseToken)
	}
	stale := testutil.LeaseOf(old)
	if _, err := f.client.Heartbeat(f.ctx, stale); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("stale heartbeat: %v, want ErrLeaseLost", err)
	}
	if _, err := f.client.Complete(f.ctx, stale, json.RawMessage(`{"late":true}`)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("stale complete: %v, want ErrLeaseLost", err)
	}
	if _, err := f.client.Fail(f.ctx, stale, "late", true); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("stale fail: %v, want ErrLeaseLost", err)
	}
	d, err := f.client.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != queue.StateRunning || d.LeaseToken != current.LeaseToken || d.Result != nil {
		t.Fatalf("stale writes changed the job: %+v", d.Job)
	}
	var refused []string
	for _, e := range d.Events {
		if e.Type != "stale_write_refused" {
			continue
		}
		var detail struct {
			Op         string `json:"op"`
			LeaseToken int64  `json:"lease_token"`
			Reason     string `json:"reason"`
		}
		if err := json.Unmarshal(e.Detail, &detail); err != nil {
			t.Fatal(err)
		}
		if detail.LeaseToken != old.LeaseToken || e.Attempt == nil || *e.Attempt != 1 || detail.Reason != "stale token" {
			t.Fatalf("refusal event %s: attempt %v detail %s", e.Type, e.Attempt, e.Detail)
		}
		refused = append(refused, detail.Op)
	}
	if strings.Join(refused, ",") != "heartbeat,complete,fail" {
		t.Fatalf("refusal events for %v, want heartbeat,complete,fail", refused)
	}
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(current), nil); err != nil {
		t.Fatalf("current holder's complete: %v", err)
	}
}

func TestExpiredLeaseRefusedBeforeReap(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{})
	j := f.claimOne(t, "w", time.Minute)
	if _, err := f.client.Heartbeat(f.ctx, testutil.LeaseOf(j)); err != nil {
		t.Fatalf("heartbeat in time: %v", err)
	}
	// Two minutes on, by the statements' clock.
	late := f.client.At(time.Now().Add(2 * time.Minute))
	// No reaper runs: the job is still "running", but its deadline passed.
	if got, _ := f.client.Get(f.ctx, j.ID); got.State != queue.StateRunning {
		t.Fatalf("state %s, want running (not reaped yet)", got.State)
	}
	if _, err := late.Heartbeat(f.ctx, testutil.LeaseOf(j)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("late heartbeat: %v, want ErrLeaseLost", err)
	}
	if _, err := late.Fail(f.ctx, testutil.LeaseOf(j), "late", true); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("late fail: %v, want ErrLeaseLost", err)
	}
	if _, err := late.Complete(f.ctx, testutil.LeaseOf(j), nil); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("late complete: %v, want ErrLeaseLost", err)
	}
	if _, err := f.client.Heartbeat(f.ctx, queue.Lease{JobID: j.ID + 1000, Token: 1}); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("heartbeat of missing job: %v, want ErrNotFound", err)
	}
}

func TestLeaseDeadlineUsesDatabaseClock(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{})
	j := f.claimOne(t, "w", 3*time.Second)
	var dbNow time.Time
	if err := f.pool.QueryRow(f.ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	// The deadline is the database's now() at the claim plus the lease,
	// to the microsecond; the worker sends no time at all.
	if got := j.LeaseUntil.Sub(*j.HeartbeatAt); got != 3*time.Second {
		t.Fatalf("lease_until - claim time = %v, want exactly 3s", got)
	}
	if d := dbNow.Sub(*j.HeartbeatAt); d < 0 || d > 5*time.Second {
		t.Fatalf("claim time %v is not the database clock (now %v)", j.HeartbeatAt, dbNow)
	}
	hb, err := f.client.Heartbeat(f.ctx, testutil.LeaseOf(j))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.client.Get(f.ctx, j.ID)
	if hb.LeaseUntil.Sub(*got.HeartbeatAt) != 3*time.Second {
		t.Fatalf("renewed deadline %v, heartbeat %v", hb.LeaseUntil, got.HeartbeatAt)
	}
}

func TestFailBackoffBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	const base, maxMs = 40, 300
	job := f.insert(t, jobOpts{maxAttempts: 7, backoffBase: base, backoffMax: maxMs})
	// Each retry is claimed and failed at the time it is due, by the
	// statements' clock: no wait for the backoff.
	at := f.client
	for n := 1; n <= 6; n++ {
		j := testutil.ClaimJob(t, f.ctx, at, "w", "default", time.Minute)
		failed, err := at.Fail(f.ctx, testutil.LeaseOf(j), fmt.Sprintf("boom %d", n), true)
		if err != nil {
			t.Fatal(err)
		}
		if failed.State != queue.StatePending {
			t.Fatalf("after failure %d state %s, want pending", n, failed.State)
		}
		d, _ := f.client.Detail(f.ctx, job.ID)
		ended := *d.Attempts[n-1].EndedAt
		delay := failed.RunAt.Sub(ended)
		ideal := float64(base) * float64(int(1)<<(n-1))
		lo := time.Duration(min(float64(maxMs), ideal*0.8) * float64(time.Millisecond))
		hi := time.Duration(min(float64(maxMs), ideal*1.2) * float64(time.Millisecond))
		if delay < lo || delay > hi {
			t.Fatalf("failure %d: backoff %v outside [%v, %v]", n, delay, lo, hi)
		}
		at = f.client.At(failed.RunAt)
	}
}

func TestDeadAfterMaxAttemptsKeepsEveryAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	job := f.insert(t, jobOpts{maxAttempts: 3})
	var last queue.Job
	for n := 1; n <= 3; n++ {
		j := f.claimOne(t, fmt.Sprintf("w%d", n), time.Minute)
		var err error
		last, err = f.client.Fail(f.ctx, testutil.LeaseOf(j), fmt.Sprintf("boom %d", n), true)
		if err != nil {
			t.Fatal(err)
		}
	}
	if last.State != queue.StateDead || last.LastError == nil || *last.LastError != "boom 3" || last.FinishedAt == nil {
		t.Fatalf("after 3 failures: %+v", last)
	}
	d, _ := f.client.Detail(f.ctx, job.ID)
	if len(d.Attempts) != 3 {
		t.Fatalf("%d attempts kept, want 3", len(d.Attempts))
	}
	for i, a := range d.Attempts {
		if a.Outcome == nil || *a.Outcome != "failed" || a.Error == nil || *a.Error != fmt.Sprintf("boom %d", i+1) ||
			a.WorkerID != fmt.Sprintf("w%d", i+1) || a.EndedAt == nil {
			t.Fatalf("attempt %d = %+v", i+1, a)
		}
	}
	if d.Events[len(d.Events)-1].Type != "dead" {
		t.Fatalf("last event %s, want dead", d.Events[len(d.Events)-1].Type)
	}
	if _, err := f.client.CancelOne(f.ctx, job.ID, "tester"); !errors.Is(err, queue.ErrWrongState) {
		t.Fatalf("cancel of a dead job: %v, want ErrWrongState", err)
	}

	// A manual retry gives a fresh budget and keeps the history.
	retried, err := f.client.RetryOne(f.ctx, job.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if retried.State != queue.StatePending || retried.CountedAttempts != 0 {
		t.Fatalf("retried job %+v", retried)
	}
	j := f.claimOne(t, "w4", time.Minute)
	if j.Attempt != 4 {
		t.Fatalf("attempt after retry %d, want 4", j.Attempt)
	}
	if after, _ := f.client.Fail(f.ctx, testutil.LeaseOf(j), "again", true); after.State != queue.StatePending {
		t.Fatalf("first failure after retry: state %s, want pending", after.State)
	}
	d, _ = f.client.Detail(f.ctx, job.ID)
	var by string
	for _, e := range d.Events {
		if e.Type == "retried" {
			var detail struct{ By string }
			_ = json.Unmarshal(e.Detail, &detail)
			by = detail.By
		}
	}
	if by != "alice" || len(d.Attempts) != 4 {
		t.Fatalf("retry by %q, %d attempts", by, len(d.Attempts))
	}
	if _, err := f.client.RetryOne(f.ctx, job.ID, "alice"); !errors.Is(err, queue.ErrWrongState) {
		t.Fatalf("retry of a pending job: %v, want ErrWrongState", err)
	}
}

func TestPermanentFailureGoesDeadAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{maxAttempts: 5})
	j := f.claimOne(t, "w", time.Minute)
	got, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "bad input", false)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != queue.StateDead || got.CountedAttempts != 1 {
		t.Fatalf("permanent failure: state %s counted %d", got.State, got.CountedAttempts)
	}
}

func TestIdempotentSubmissionConcurrent(t *testing.T) {
	t.Parallel()
	f := setup(t, 60)
	const n = 50
	var wg sync.WaitGroup
	results := make(chan queue.Job, n)
	existedCount := make(chan bool, n)
	for range n {
		wg.Go(func() {
			key := "same-key"
			job, existed, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "test", Payload: json.RawMessage(`{"a":1,"b":[1,2]}`), IdempotencyKey: &key})
			if err != nil {
				t.Error(err)
				return
			}
			results <- job
			existedCount <- existed
		})
	}
	wg.Wait()
	close(results)
	close(existedCount)
	ids := map[int64]bool{}
	for j := range results {
		ids[j.ID] = true
	}
	created := 0
	for e := range existedCount {
		if !e {
			created++
		}
	}
	if len(ids) != 1 || created != 1 {
		t.Fatalf("%d distinct jobs, %d created; want 1 and 1", len(ids), created)
	}
	key := "same-key"
	// Same contents with keys in another order: the same job.
	if _, existed, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "test", Payload: json.RawMessage(`{"b":[1,2],"a":1}`), IdempotencyKey: &key}); err != nil || !existed {
		t.Fatalf("equal resubmission: existed=%v err=%v", existed, err)
	}
	if _, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "test", Payload: json.RawMessage(`{"a":2}`), IdempotencyKey: &key}); !errors.Is(err, queue.ErrIdempotencyConflict) {
		t.Fatalf("different payload: %v, want ErrIdempotencyConflict", err)
	}
	counts, _ := f.client.Counts(f.ctx)
	if counts.Jobs[queue.StatePending] != 1 {
		t.Fatalf("pending = %d, want 1", counts.Jobs[queue.StatePending])
	}
}

func TestInsertManyAllOrNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	good := queue.NewJob{Kind: "test"}
	_, err := f.client.InsertMany(f.ctx, []queue.NewJob{good, {Kind: "Bad Kind"}, good})
	var ve *queue.ValidationError
	if !errors.As(err, &ve) || ve.Field != "jobs[1].kind" {
		t.Fatalf("invalid batch: %v, want a ValidationError on jobs[1].kind", err)
	}
	key := "k1"
	if _, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "test", Payload: json.RawMessage(`{"x":1}`), IdempotencyKey: &key}); err != nil {
		t.Fatal(err)
	}
	_, err = f.client.InsertMany(f.ctx, []queue.NewJob{good, {Kind: "test", Payload: json.RawMessage(`{"x":2}`), IdempotencyKey: &key}})
	if !errors.Is(err, queue.ErrIdempotencyConflict) {
		t.Fatalf("conflicting key in batch: %v", err)
	}
	counts, _ := f.client.Counts(f.ctx)
	if counts.Jobs[queue.StatePending] != 1 {
		t.Fatalf("pending = %d after rejected batches, want 1", counts.Jobs[queue.StatePending])
	}
	jobs, err := f.client.InsertMany(f.ctx, []queue.NewJob{good, {Kind: "test", Payload: json.RawMessage(`{"x":1}`), IdempotencyKey: &key}, good})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 || jobs[1].IdempotencyKey == nil || *jobs[1].IdempotencyKey != key {
		t.Fatalf("batch with an existing key returned %v", ids(jobs))
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	pending := f.insert(t, jobOpts{})
	got, err := f.client.CancelOne(f.ctx, pending.ID, "bob")
	if err != nil || got.State != queue.StateCancelled {
		t.Fatalf("cancel pending: %v %s", err, got.State)
	}
	f.insert(t, jobOpts{})
	running := f.claimOne(t, "w", time.Minute)
	got, err = f.client.CancelOne(f.ctx, running.ID, "bob")
	if err != nil || got.State != queue.StateRunning || !got.CancelRequested {
		t.Fatalf("cancel running: %v %+v", err, got)
	}
	hb, err := f.client.Heartbeat(f.ctx, testutil.LeaseOf(running))
	if err != nil || !hb.CancelRequested {
		t.Fatalf("heartbeat after cancel: %v %+v", err, hb)
	}
	got, err = f.client.AckCancel(f.ctx, testutil.LeaseOf(running))
	if err != nil || got.State != queue.StateCancelled {
		t.Fatalf("ack cancel: %v %s", err, got.State)
	}
	d, _ := f.client.Detail(f.ctx, running.ID)
	if *d.Attempts[0].Outcome != "cancelled" || d.CountedAttempts != 0 {
		t.Fatalf("attempt outcome %s, counted %d", *d.Attempts[0].Outcome, d.CountedAttempts)
	}
	if _, err := f.client.CancelOne(f.ctx, running.ID, "bob"); !errors.Is(err, queue.ErrWrongState) {
		t.Fatalf("cancel of cancelled: %v", err)
	}
	if _, err := f.client.CancelOne(f.ctx, 999999, "bob"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("cancel of missing: %v", err)
	}
	// Bulk by filter: retry every cancelled job.
	retried, err := f.client.Retry(f.ctx, queue.Selection{State: queue.StateCancelled}, "bob")
	if err != nil || len(retried) != 2 {
		t.Fatalf("bulk retry: %v, %d jobs", err, len(retried))
	}
}

func TestReleaseDoesNotCountAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{maxAttempts: 1})
	j := f.claimOne(t, "w", time.Minute)
	got, err := f.client.Release(f.ctx, testutil.LeaseOf(j))
	if err != nil || got.State != queue.StatePending || got.CountedAttempts != 0 {
		t.Fatalf("release: %v %+v", err, got)
	}
	again := f.claimOne(t, "w2", time.Minute)
	if again.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", again.Attempt)
	}
	d, _ := f.client.Detail(f.ctx, j.ID)
	if *d.Attempts[0].Outcome != "released" {
		t.Fatalf("outcome %s", *d.Attempts[0].Outcome)
	}
}

func TestTimeoutCapsRenewals(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{timeoutMs: 300, maxAttempts: 1})
	j := f.claimOne(t, "w", time.Minute)
	if got := j.LeaseUntil.Sub(*j.HeartbeatAt); got != 300*time.Millisecond {
		t.Fatalf("first deadline %v after claim, want the 300ms timeout", got)
	}
	hb, err := f.client.Heartbeat(f.ctx, testutil.LeaseOf(j))
	if err != nil || !hb.LeaseUntil.Equal(*j.LeaseUntil) {
		t.Fatalf("renewal past the timeout: %v %v", err, hb.LeaseUntil)
	}
	// Past the timeout, by the reaper statement's clock.
	reapAt(t, f, f.client.At(time.Now().Add(time.Minute)), j.ID)
	d, _ := f.client.Detail(f.ctx, j.ID)
	if d.State != queue.StateDead || *d.Attempts[0].Outcome != "failed" || !strings.Contains(*d.LastError, "timed out") {
		t.Fatalf("after timeout: state %s outcome %s error %v", d.State, *d.Attempts[0].Outcome, *d.LastError)
	}
}

func TestHeartbeatIsHOTUpdate(t *testing.T) {
	t.Parallel()
	// One connection, so that the statistics this test reads are all its
	// own backend's, flushed by pg_stat_force_next_flush.
	f := setup(t, 1)
	f.insert(t, jobOpts{})
	j := f.claimOne(t, "w", time.Minute)
	// 25 row versions of ~160 bytes fit in the page's free space even if
	// no pruning happens (other tests' transactions can hold it back), so
	// every heartbeat is HOT exactly when it changes no indexed column.
	before := tupleStats(t, f)
	const beats = 25
	for range beats {
		if _, err := f.client.Heartbeat(f.ctx, testutil.LeaseOf(j)); err != nil {
			t.Fatal(err)
		}
	}
	after := tupleStats(t, f)
	upd, hot := after[0]-before[0], after[1]-before[1]
	if upd != beats || hot != upd {
		t.Fatalf("%d heartbeats: %d updates, %d HOT; want all HOT", beats, upd, hot)
	}
}

func tupleStats(t *testing.T, f *fixture) [2]int64 {
	t.Helper()
	// The backend flushes its counters when it next goes idle.
	if _, err := f.pool.Exec(f.ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	var s [2]int64
	err := f.pool.QueryRow(f.ctx, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobs'").Scan(&s[0], &s[1])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func reapUntil(t *testing.T, f *fixture, id int64) {
	t.Helper()
	r := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitFor(t, "job reclaimed", func() bool {
		got, _ := f.client.Get(f.ctx, id)
		return got.State != queue.StateRunning
	})
}

func claimWhenDue(t *testing.T, f *fixture, worker string) queue.Job {
	t.Helper()
	var job queue.Job
	waitFor(t, "job due", func() bool {
		jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{"default"}, Limit: 1, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 1 {
			job = jobs[0]
		}
		return len(jobs) == 1
	})
	return job
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, what, cond)
}

// reapAt runs the reaper's statement as at, and fails unless it takes
// back the job id.
func reapAt(t *testing.T, f *fixture, at *queue.Client, id int64) {
	t.Helper()
	reaped, err := at.ReapExpired(f.ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range reaped {
		ids = append(ids, r.JobID)
	}
	if !slices.Contains(ids, id) {
		t.Fatalf("reaped %v, want job %d among them", ids, id)
	}
}

func ids(jobs []queue.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestCompleteManyFencesEachJob(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	for range 3 {
		f.insert(t, jobOpts{})
	}
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 3, Lease: time.Minute})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %v %d", err, len(jobs))
	}
	stale := testutil.LeaseOf(jobs[1])
	stale.Token-- // a token this job never had as current
	errs, err := f.client.CompleteMany(f.ctx, []queue.Completion{
		{Lease: testutil.LeaseOf(jobs[0]), Result: json.RawMessage(`{"n":0}`)},
		{Lease: stale, Result: json.RawMessage(`{"n":1}`)},
		{Lease: testutil.LeaseOf(jobs[2])},
		{Lease: queue.Lease{JobID: 999999, Token: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], queue.ErrLeaseLost) || errs[2] != nil || !errors.Is(errs[3], queue.ErrNotFound) {
		t.Fatalf("per-completion errors %v", errs)
	}
	for i, want := range []queue.State{queue.StateSucceeded, queue.StateRunning, queue.StateSucceeded} {
		got, _ := f.client.Get(f.ctx, jobs[i].ID)
		if got.State != want {
			t.Fatalf("job %d is %s, want %s", i, got.State, want)
		}
	}
	if got, _ := f.client.Get(f.ctx, jobs[0].ID); string(got.Result) != `{"n": 0}` {
		t.Fatalf("result %s", got.Result)
	}
	counts, _ := f.client.Counts(f.ctx)
	if counts.Completions != 2 || counts.Refused != 1 {
		t.Fatalf("counts %+v", counts)
	}
}
