package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// A direct worker's reaper names its lock session after the worker, and
// the active reaper records every worker so named alive: here one reaper
// is both. Once it stops, its session is gone and nobody records the
// worker any more.
func TestReaperRecordsDirectWorkersBySession(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "direct-1", Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	setOld := func() {
		t.Helper()
		if _, err := f.pool.Exec(f.ctx, "UPDATE workers SET last_seen = now() - interval '1 hour'"); err != nil {
			t.Fatal(err)
		}
	}
	fresh := func() bool {
		var ok bool
		if err := f.pool.QueryRow(f.ctx, "SELECT last_seen > now() - interval '10 seconds' FROM workers WHERE id = 'direct-1'").Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	setOld()
	r := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{Worker: "direct-1", PresenceEvery: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	waitFor(t, "the reaper's lock session open", r.SessionOpen)
	waitFor(t, "the worker recorded alive by its session", fresh)
	// Recorded again and again, not once.
	setOld()
	waitFor(t, "the worker recorded alive again", fresh)

	cancel()
	<-done
	if r.SessionOpen() {
		t.Fatal("session still open after the reaper stopped")
	}
	// Another process's active reaper no longer sees it.
	other := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{PresenceEvery: 50 * time.Millisecond})
	ctx2, cancel2 := context.WithCancel(f.ctx)
	done2 := make(chan struct{})
	go func() { _ = other.Run(ctx2); close(done2) }()
	defer func() { cancel2(); <-done2 }()
	waitFor(t, "the other reaper active", other.Active)
	setOld()
	time.Sleep(300 * time.Millisecond) // six of its presence ticks
	if fresh() {
		t.Fatal("a stopped worker's presence recorded by another reaper")
	}
}
