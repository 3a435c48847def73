package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

func TestReaperReclaimsAfterDeadlineNeverBefore(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	reaped := make(chan queue.Reaped, 10)
	r := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{OnReap: func(rp queue.Reaped) { reaped <- rp }})
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	job := f.insert(t, testutil.Job{MaxAttempts: 2})
	dying := f.insert(t, testutil.Job{MaxAttempts: 1})
	claimed, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 2, Lease: 300 * time.Millisecond})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v %d", err, len(claimed))
	}
	got := map[int64]queue.Reaped{}
	for len(got) < 2 {
		select {
		case rp := <-reaped:
			got[rp.JobID] = rp
		case <-time.After(10 * time.Second):
			t.Fatal("reaper did not reclaim within 10s")
		}
	}
	for _, rp := range got {
		if rp.ReapedAt.Before(rp.LeaseUntil) {
			t.Fatalf("job %d reclaimed at %v, before its deadline %v", rp.JobID, rp.ReapedAt, rp.LeaseUntil)
		}
	}
	if got[job.ID].State != queue.StatePending || got[dying.ID].State != queue.StateDead {
		t.Fatalf("states after reclaim: %s %s", got[job.ID].State, got[dying.ID].State)
	}
	d, _ := f.client.Detail(f.ctx, job.ID)
	a := d.Attempts[0]
	if *a.Outcome != "lease_expired" || !a.EndedAt.Equal(got[job.ID].ReapedAt) || a.LeaseUntil == nil {
		t.Fatalf("attempt after reclaim: %+v", a)
	}
	counts, _ := f.client.Counts(f.ctx)
	if counts.Expired != 2 || counts.Jobs[queue.StateDead] != 1 {
		t.Fatalf("counts %+v", counts)
	}
}

func TestReaperFailover(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	ctx1, stop1 := context.WithCancel(f.ctx)
	ctx2, stop2 := context.WithCancel(f.ctx)
	defer stop2()
	r1 := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
	r2 := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
	done1 := make(chan struct{})
	go func() { _ = r1.Run(ctx1); close(done1) }()
	waitFor(t, "first reaper active", r1.Active)
	go func() { _ = r2.Run(ctx2) }()
	time.Sleep(200 * time.Millisecond)
	if r2.Active() {
		t.Fatal("two reapers active at once")
	}
	stop1()
	<-done1
	waitFor(t, "standby reaper active", r2.Active)
	f.insert(t, testutil.Job{})
	j := f.claimOne(t, "w", 100*time.Millisecond)
	waitFor(t, "standby reclaims", func() bool {
		got, _ := f.client.Get(f.ctx, j.ID)
		return got.State == queue.StatePending
	})
}
