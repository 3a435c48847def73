package queue

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/db/dbtest"
)

// The reaper's wake-ups reach it through the job notifier's session: a
// claim's notification of a lease ending sooner than the reaper's planned
// look wakes it; one ending later does not.
func TestReaperWakesOnTheJobListenersSession(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := NewJobNotifier(pool, nil)
	wakes := n.ReaperWakes()
	go n.Run(ctx)
	far := time.Now().Add(time.Hour)
	// Listening asks for a look now: what was sent before is lost.
	if woke, err := wakes.Sleep(ctx, far); !woke || err != nil {
		t.Fatalf("after connecting: woke %v, %v", woke, err)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_notify('leasehold_reaper', '300')`); err != nil {
		t.Fatal(err)
	}
	if woke, err := wakes.Sleep(ctx, far); !woke || err != nil {
		t.Fatalf("a lease ending in 300ms, the reaper looking in an hour: woke %v, %v", woke, err)
	}
	// A lease ending after the planned look changes nothing.
	wakes.note("3600000")
	if woke, err := wakes.Sleep(ctx, time.Now().Add(20*time.Millisecond)); woke || err != nil {
		t.Fatalf("a lease ending in an hour, the reaper looking in 20ms: woke %v, %v", woke, err)
	}
	// Job notifications still reach job waiters.
	w := n.Waiter()
	if _, err := pool.Exec(ctx, `SELECT pg_notify('leasehold_jobs', 'q')`); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(ctx, []string{"q"}); err != nil {
		t.Fatal(err)
	}
}
