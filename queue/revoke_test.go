package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// TestEndLeasesOfRevokedWorker: ending a worker's leases makes the reaper
// take its jobs back at once (the attempt ends lease_expired, the job
// retries), refuses the old holder's writes, and leaves other workers'
// leases alone.
func TestEndLeasesOfRevokedWorker(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	gone := f.insert(t, jobOpts{maxAttempts: 3})
	l1 := testutil.LeaseOf(f.claimOne(t, "w1", time.Hour))
	f.insert(t, jobOpts{})
	l2 := testutil.LeaseOf(f.claimOne(t, "w2", time.Hour))

	reaped := make(chan queue.Reaped, 4)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	reaper := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{OnReap: func(r queue.Reaped) { reaped <- r }})
	go func() { _ = reaper.Run(ctx) }()

	ended, err := f.client.EndLeasesOf(f.ctx, "w1")
	if err != nil || len(ended) != 1 || ended[0] != gone.ID {
		t.Fatalf("ended %v, %v; want job %d", ended, err, gone.ID)
	}
	if _, err := f.client.Heartbeat(f.ctx, l1); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("heartbeat of the revoked worker: %v, want ErrLeaseLost", err)
	}
	select {
	case r := <-reaped:
		if r.JobID != gone.ID || r.State != queue.StatePending {
			t.Fatalf("reaped %+v, want job %d back to pending", r, gone.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reaper did not take the job back within 10 s of a one-hour lease being ended")
	}
	d, err := f.client.Detail(f.ctx, gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o := d.Attempts[0].Outcome; o == nil || *o != "lease_expired" {
		t.Errorf("attempt outcome %v, want lease_expired", o)
	}
	var revoked bool
	for _, e := range d.Events {
		revoked = revoked || e.Type == "lease_revoked"
	}
	if !revoked {
		t.Errorf("no lease_revoked event: %+v", d.Events)
	}
	if _, err := f.client.Heartbeat(f.ctx, l2); err != nil {
		t.Errorf("the other worker's lease: %v", err)
	}
	if again, err := f.client.EndLeasesOf(f.ctx, "w1"); err != nil || len(again) != 0 {
		t.Errorf("second time: %v, %v", again, err)
	}
}

// TestWorkerSeenBoundsDevices: a worker's record holds at most 32 device
// labels.
func TestWorkerSeenBoundsDevices(t *testing.T) {
	t.Parallel()
	f := setup(t, 2)
	many := make([]string, queue.MaxWorkerDevices+1)
	for i := range many {
		many[i] = "d"
	}
	var ve *queue.ValidationError
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "w", Devices: many, Queues: []string{"default"}}); !errors.As(err, &ve) || ve.Field != "devices" {
		t.Errorf("%d devices: %v", len(many), err)
	}
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "w", Devices: many[:queue.MaxWorkerDevices], Queues: []string{"default"}}); err != nil {
		t.Errorf("%d devices: %v", queue.MaxWorkerDevices, err)
	}
}
