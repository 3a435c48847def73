package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// countingBackend counts the claims and the presences of a direct
// worker.
type countingBackend struct {
	worker.Direct
	claims, seen atomic.Int64
}

func (b *countingBackend) WorkerSeen(ctx context.Context, p queue.Presence) error {
	b.seen.Add(1)
	return b.Direct.WorkerSeen(ctx, p)
}

func (b *countingBackend) Claim(ctx context.Context, p queue.ClaimParams) (worker.Claim, error) {
	b.claims.Add(1)
	return b.Direct.Claim(ctx, p)
}

// An idle direct worker's fallback polls skip their claims while nothing
// was published since its last empty claim: a fleet waiting costs the
// database nothing per poll. A notified job is claimed at once, and a job
// that came without any notification is still found within
// maxSkippedPolls polls.
func TestDirectWorkerPollsSkipWhileNothingWasPublished(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := &countingBackend{Direct: worker.Direct{Client: f.client}}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	w := worker.New(worker.Config{ID: "poller", Poll: 20 * time.Millisecond, Executor: executor.Noop{}, Backend: b, Pool: f.pool})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// The listener connects and publishes that it may have missed
	// something; the worker claims on that. Once it is listening and the
	// claims have stopped for 10 polls, the worker is idle.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var listening int
		if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND query LIKE '-- name: Listen%'`).Scan(&listening); err != nil { // not '%LISTEN …%', which matched this very query on the pool's other connections
			t.Fatal(err)
		}
		n := b.claims.Load()
		time.Sleep(200 * time.Millisecond)
		if listening > 0 && n > 0 && b.claims.Load() == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not settle: listening %d, %d claims", listening, b.claims.Load())
		}
	}
	// 60 polls: every 30th claims (maxSkippedPolls), and one more is
	// allowed for a publish the settling above did not wait out on a
	// stalled machine. A worker that claimed on every poll makes ~60.
	before := b.claims.Load()
	time.Sleep(1200 * time.Millisecond)
	if idle := b.claims.Load() - before; idle > 3 {
		t.Fatalf("%d claims in 60 idle polls, want at most 3", idle)
	}
	job := f.submit(t, `{}`, 1) // notifies
	f.waitState(t, job.ID, queue.StateSucceeded)

	// Without a notification (as SQL written by hand would), within
	// 30 polls of 20ms and a margin.
	var id int64
	if err := f.pool.QueryRow(f.ctx, `INSERT INTO jobs (kind, payload) VALUES ('noop', '{}') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, id, queue.StateSucceeded)
}
