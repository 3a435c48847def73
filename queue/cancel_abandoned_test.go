package queue_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// TestCancelEndsAbandonedLeases: cancelling a running job whose worker
// will never hear it (its token revoked, or offline: no presence and no
// heartbeat of the job within queue.OnlineWindow) ends it cancelled at
// once, and the old owner's writes are refused; a job of a worker that is
// alive, by presence or by its heartbeats, is only asked to stop.
func TestCancelEndsAbandonedLeases(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	claimAt := func(worker string, silent bool) queue.Job {
		t.Helper()
		f.insert(t, jobOpts{})
		j := testutil.ClaimJob(t, f.ctx, f.client, worker, "default", time.Hour)
		if silent { // its last heartbeat was two online windows ago
			if _, err := f.pool.Exec(f.ctx, `UPDATE jobs SET heartbeat_at = now() - $2 * interval '1 millisecond' WHERE id = $1`,
				j.ID, 2*queue.OnlineWindow.Milliseconds()); err != nil {
				t.Fatal(err)
			}
		}
		return j
	}
	store := apitoken.NewStore(f.pool)
	if _, _, err := store.Create(f.ctx, "stolen", apitoken.RoleWorker); err != nil {
		t.Fatal(err)
	}
	offline := claimAt("offline", true)     // neither presence nor heartbeat for a minute
	revoked := claimAt("stolen", false)     // heartbeated just now, but revoked
	present := claimAt("present", true)     // its heartbeats are old, but it reports presence
	beating := claimAt("heartbeats", false) // no presence, but heartbeats this job
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "present", Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Revoke(f.ctx, "stolen"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		job    queue.Job
		ended  bool
		reason string
	}{
		{offline, true, "worker offline"},
		{revoked, true, "worker token revoked"},
		{present, false, ""},
		{beating, false, ""},
	} {
		j, err := f.client.CancelOne(f.ctx, tc.job.ID, "token:admin")
		if err != nil {
			t.Fatalf("cancelling job %d of %s: %v", tc.job.ID, *tc.job.LeaseOwner, err)
		}
		owner := *tc.job.LeaseOwner
		if !tc.ended {
			if j.State != queue.StateRunning || !j.CancelRequested {
				t.Errorf("job of %s: %s, cancel_requested %v; want running, asked to stop", owner, j.State, j.CancelRequested)
			}
			continue
		}
		if j.State != queue.StateCancelled {
			t.Errorf("job of %s: %s; want cancelled at once", owner, j.State)
			continue
		}
		if _, err := f.client.Heartbeat(f.ctx, testutil.LeaseOf(tc.job)); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("heartbeat of %s after the cancel: %v; want ErrLeaseLost", owner, err)
		}
		if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(tc.job), json.RawMessage(`{}`)); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("completion of %s after the cancel: %v; want ErrLeaseLost", owner, err)
		}
		d, err := f.client.Detail(f.ctx, tc.job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Attempts) != 1 || d.Attempts[0].Outcome == nil || *d.Attempts[0].Outcome != "cancelled" || d.Attempts[0].EndedAt == nil {
			t.Errorf("job of %s: attempts %+v; want one, ended cancelled", owner, d.Attempts)
		}
		found := false
		for _, e := range d.Events {
			var detail struct{ Reason, Worker string }
			_ = json.Unmarshal(e.Detail, &detail)
			found = found || (e.Type == "cancelled" && detail.Reason == tc.reason && detail.Worker == owner)
		}
		if !found {
			t.Errorf("job of %s: no cancelled event with reason %q: %+v", owner, tc.reason, d.Events)
		}
	}
}
