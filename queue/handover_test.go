package queue_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// Hand-over (SPEC lease rule 11): a job claimed with a hand-over deadline
// runs only that long until its worker confirms it, by its first
// heartbeat or its outcome; one never confirmed ends not_delivered,
// uncounted, due again at once.

const (
	testLease    = 30 * time.Second
	testHandover = 5 * time.Second
)

// handOver claims one job for worker at the named time, with the
// hand-over deadline the worker API gives.
func (f *fixture) handOver(t *testing.T, at time.Time, worker string) queue.Job {
	t.Helper()
	jobs, err := f.client.At(at).Claim(f.ctx, queue.ClaimParams{
		WorkerID: worker, Queues: []string{"default"}, Limit: 1, Lease: testLease, Handover: testHandover,
	})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("handing over: %d jobs, %v", len(jobs), err)
	}
	return jobs[0]
}

// reap reaps at the named time.
func (f *fixture) reapAt(t *testing.T, at time.Time) []queue.Reaped {
	t.Helper()
	reaped, err := f.client.At(at).ReapExpired(f.ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	return reaped
}

func (f *fixture) detail(t *testing.T, id int64) queue.JobDetail {
	t.Helper()
	d, err := f.client.Detail(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func eventTypesOf(d queue.JobDetail) []string {
	var types []string
	for _, e := range d.Events {
		types = append(types, e.Type)
	}
	return types
}

// The lease of a hand-over is the hand-over deadline; the first heartbeat
// gives the full lease, and from then on it is an ordinary lease.
func TestHandoverConfirmedByHeartbeatGetsTheFullLease(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{})
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	job := f.handOver(t, t0, "w1")
	if got := job.LeaseUntil.Sub(t0); got != testHandover {
		t.Fatalf("handed-over lease runs %s, want the hand-over deadline %s", got, testHandover)
	}
	hb, err := f.client.At(t0.Add(time.Second)).Heartbeat(f.ctx, testutil.LeaseOf(job))
	if err != nil {
		t.Fatal(err)
	}
	if hb.Remaining != testLease || !hb.LeaseUntil.Equal(t0.Add(time.Second+testLease)) {
		t.Fatalf("the confirming heartbeat left %s (until %s), want the full lease %s", hb.Remaining, hb.LeaseUntil, testLease)
	}
	if reaped := f.reapAt(t, t0.Add(testHandover+time.Second)); len(reaped) != 0 {
		t.Fatalf("a confirmed hand-over was reaped at its hand-over deadline: %+v", reaped)
	}
	// Past the full lease it expires as any lease does, and counts.
	reaped := f.reapAt(t, t0.Add(time.Second+testLease+time.Millisecond))
	if len(reaped) != 1 || reaped[0].NotDelivered {
		t.Fatalf("reaped %+v, want one lease expiry", reaped)
	}
	d := f.detail(t, job.ID)
	if d.CountedAttempts != 1 || deref(d.Attempts[0].Outcome) != "lease_expired" {
		t.Fatalf("counted %d, outcome %s; want 1, lease_expired", d.CountedAttempts, deref(d.Attempts[0].Outcome))
	}
}

// A direct claim is no hand-over: its lease is the whole lease at once.
func TestDirectClaimIsNoHandover(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{})
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	jobs, err := f.client.At(t0).Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"default"}, Limit: 1, Lease: testLease})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claiming: %d jobs, %v", len(jobs), err)
	}
	if got := jobs[0].LeaseUntil.Sub(t0); got != testLease {
		t.Fatalf("a direct claim's lease runs %s, want %s", got, testLease)
	}
	if reaped := f.reapAt(t, t0.Add(testHandover+time.Second)); len(reaped) != 0 {
		t.Fatalf("a direct claim was reaped at the hand-over deadline: %+v", reaped)
	}
}

// An outcome proves delivery as well as a heartbeat does: written within
// the hand-over deadline, it ends the attempt as usual.
func TestHandoverConfirmedByOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		write   func(f *fixture, c *queue.Client, l queue.Lease) error
		state   queue.State
		counted int32
	}{
		{"Complete", func(f *fixture, c *queue.Client, l queue.Lease) error {
			_, err := c.Complete(f.ctx, l, json.RawMessage(`{"ok":true}`))
			return err
		}, queue.StateSucceeded, 0},
		{"Fail", func(f *fixture, c *queue.Client, l queue.Lease) error {
			_, err := c.Fail(f.ctx, l, "it ran and failed", true)
			return err
		}, queue.StatePending, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, 4)
			f.insert(t, jobOpts{maxAttempts: 3})
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			job := f.handOver(t, t0, "w1")
			if err := tc.write(f, f.client.At(t0.Add(time.Second)), testutil.LeaseOf(job)); err != nil {
				t.Fatal(err)
			}
			if reaped := f.reapAt(t, t0.Add(testHandover+time.Second)); len(reaped) != 0 {
				t.Fatalf("reaped after the outcome: %+v", reaped)
			}
			d := f.detail(t, job.ID)
			if d.State != tc.state || d.CountedAttempts != tc.counted {
				t.Fatalf("job %s with %d counted, want %s with %d", d.State, d.CountedAttempts, tc.state, tc.counted)
			}
		})
	}
}

// A hand-over never confirmed ends not_delivered at its deadline: not
// counted (a job with one attempt is not dead), no lease_expired event,
// no job.failed or job.dead webhook, no expiry in the counters; the job
// is due at once, not after its backoff, and another worker claims it;
// the first worker's token is refused from then on.
func TestHandoverNeverConfirmedIsNotDelivered(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	if err := f.client.ConfigureWebhooks(f.ctx, []string{queue.WebhookJobFailed, queue.WebhookJobDead}); err != nil {
		t.Fatal(err)
	}
	f.insert(t, jobOpts{maxAttempts: 1, backoffBase: 60_000, backoffMax: 60_000})
	before, err := f.client.Counts(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	job := f.handOver(t, t0, "w1")
	if reaped := f.reapAt(t, t0.Add(testHandover-time.Millisecond)); len(reaped) != 0 {
		t.Fatalf("reaped before the hand-over deadline: %+v", reaped)
	}
	at := t0.Add(testHandover + 10*time.Millisecond)
	reaped := f.reapAt(t, at)
	if len(reaped) != 1 || !reaped[0].NotDelivered || reaped[0].State != queue.StatePending {
		t.Fatalf("reaped %+v, want one not delivered, back to pending", reaped)
	}

	d := f.detail(t, job.ID)
	if d.State != queue.StatePending || d.CountedAttempts != 0 || !d.RunAt.Equal(at) || d.LastError != nil {
		t.Fatalf("job %s, %d counted, due %s, last error %v; want pending, 0 counted, due %s (now), no error",
			d.State, d.CountedAttempts, d.RunAt, deref(d.LastError), at)
	}
	if len(d.Attempts) != 1 || deref(d.Attempts[0].Outcome) != "not_delivered" {
		t.Fatalf("attempts %+v, want one not_delivered", d.Attempts)
	}
	types := eventTypesOf(d)
	if !slices.Contains(types, "not_delivered") || slices.Contains(types, "lease_expired") || slices.Contains(types, "failed") {
		t.Fatalf("events %v, want not_delivered and no lease_expired or failed", types)
	}
	if outbox := testutil.WebhookOutbox(t, f.ctx, f.pool); len(outbox) != 0 {
		t.Fatalf("webhook outbox %v, want nothing for an attempt that never was", outbox)
	}
	after, err := f.client.Counts(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Expired != before.Expired {
		t.Fatalf("expired_total went from %d to %d", before.Expired, after.Expired)
	}

	// Claimable at once, by anyone.
	again := f.handOver(t, at, "w2")
	if again.ID != job.ID || again.Attempt != 2 || again.LeaseToken <= job.LeaseToken {
		t.Fatalf("claimed job %d attempt %d token %d, want job %d attempt 2 with a larger token", again.ID, again.Attempt, again.LeaseToken, job.ID)
	}
	// Fencing: w1's token, from the attempt that never was, is refused.
	old := f.client.At(at.Add(time.Millisecond))
	if _, err := old.Heartbeat(f.ctx, testutil.LeaseOf(job)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("the old token's heartbeat: %v, want ErrLeaseLost", err)
	}
	if _, err := old.Complete(f.ctx, testutil.LeaseOf(job), json.RawMessage(`{}`)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("the old token's completion: %v, want ErrLeaseLost", err)
	}
	if _, err := old.Heartbeat(f.ctx, testutil.LeaseOf(again)); err != nil {
		t.Fatalf("the new holder's heartbeat: %v", err)
	}
}

// However often a job is handed over and never received, it keeps its
// whole budget of attempts: the attempt a worker then runs and fails is
// its first counted one.
func TestRepeatedNonDeliveriesSpendNoAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{maxAttempts: 2})
	at := time.Now().UTC().Truncate(time.Millisecond)
	for i := range 5 {
		f.handOver(t, at, "w1")
		at = at.Add(testHandover)
		if reaped := f.reapAt(t, at); len(reaped) != 1 || !reaped[0].NotDelivered {
			t.Fatalf("round %d: reaped %+v, want one not delivered", i, reaped)
		}
	}
	job := f.handOver(t, at, "w1")
	failed, err := f.client.At(at.Add(time.Second)).Fail(f.ctx, testutil.LeaseOf(job), "ran and failed", true)
	if err != nil {
		t.Fatal(err)
	}
	if failed.State != queue.StatePending || failed.CountedAttempts != 1 || failed.Attempt != 6 {
		t.Fatalf("after 5 non-deliveries and a failure: %s, %d counted, attempt %d; want pending, 1 counted, attempt 6",
			failed.State, failed.CountedAttempts, failed.Attempt)
	}
}

// A cancel requested while the job was being handed over ends it
// cancelled when the hand-over lapses.
func TestCancelDuringHandoverEndsCancelled(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{})
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	job := f.handOver(t, t0, "w1")
	if _, err := f.client.CancelOne(f.ctx, job.ID, "test"); err != nil {
		t.Fatal(err)
	}
	reaped := f.reapAt(t, t0.Add(testHandover))
	if len(reaped) != 1 || !reaped[0].NotDelivered || reaped[0].State != queue.StateCancelled {
		t.Fatalf("reaped %+v, want one not delivered, cancelled", reaped)
	}
	d := f.detail(t, job.ID)
	if d.State != queue.StateCancelled || d.CountedAttempts != 0 || d.FinishedAt == nil || deref(d.Attempts[0].Outcome) != "not_delivered" {
		t.Fatalf("job %s, %d counted, finished %v, outcome %s; want cancelled, 0, finished, not_delivered",
			d.State, d.CountedAttempts, d.FinishedAt, deref(d.Attempts[0].Outcome))
	}
}

// A claim whose worker is known to be gone ends its hand-overs at once;
// a confirmed one is left alone.
func TestAbandonedHandoversEndAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insert(t, jobOpts{})
	f.insert(t, jobOpts{})
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{
		WorkerID: "w1", Queues: []string{"default"}, Limit: 2, Lease: testLease, Handover: testHandover,
	})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("handing over: %d jobs, %v", len(jobs), err)
	}
	if _, err := f.client.Heartbeat(f.ctx, testutil.LeaseOf(jobs[1])); err != nil {
		t.Fatal(err)
	}
	n, err := f.client.AbandonHandovers(f.ctx, jobs)
	if err != nil || n != 1 {
		t.Fatalf("abandoned %d, %v; want the unconfirmed one", n, err)
	}
	reaped, err := f.client.ReapExpired(f.ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].JobID != jobs[0].ID || !reaped[0].NotDelivered {
		t.Fatalf("reaped %+v, want job %d not delivered", reaped, jobs[0].ID)
	}
	if d := f.detail(t, jobs[1].ID); d.State != queue.StateRunning {
		t.Fatalf("the confirmed job is %s, want running", d.State)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A limited claim (here, of a capped queue) hands its jobs over as the
// fast path does.
func TestLimitedClaimHandsOver(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	one := int32(1)
	if _, err := f.client.PatchQueue(f.ctx, "default", queue.QueuePatch{MaxRunning: &one}, "user:tester"); err != nil {
		t.Fatal(err)
	}
	f.insert(t, jobOpts{})
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{
		WorkerID: "w1", Queues: []string{"default"}, Limit: 1, Lease: testLease, Handover: testHandover,
	})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("handing over: %d jobs, %v", len(jobs), err)
	}
	if got := jobs[0].LeaseUntil.Sub(*jobs[0].HeartbeatAt); got != testHandover {
		t.Fatalf("a limited hand-over's lease runs %s, want %s", got, testHandover)
	}
	n, err := f.client.AbandonHandovers(f.ctx, jobs)
	if err != nil || n != 1 {
		t.Fatalf("abandoned %d, %v: the limited claim's job is not marked as a hand-over", n, err)
	}
}
