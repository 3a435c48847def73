package worker_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A direct worker listens on one session, its reaper's wake-ups included:
// PostgreSQL wakes every listening session of the database for every
// notification on any channel, each wake a transaction, so a second one
// doubled what each job announced and each freed limit cost.
func TestDirectWorkerListensOnOneSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// A lease of a worker that went away, in a queue this one does not
	// take: reclaiming it shows the worker's reaper active.
	gone := f.submitTo(t, "elsewhere")
	claimed, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "gone", Queues: []string{"elsewhere"}, Limit: 1, Lease: 300 * time.Millisecond})
	if err != nil || len(claimed) != 1 || claimed[0].ID != gone.ID {
		t.Fatalf("claim: %v %v", err, claimed)
	}
	// The worker's own lease is long enough for a loaded machine: a 1 s
	// one expired there before its heartbeat landed (a CI run), and the
	// job went dead; this test is about sessions, not lease timing.
	f.start(t, worker.Config{Lease: 5 * time.Second, Reaper: true})
	f.waitState(t, gone.ID, queue.StatePending)
	// And a job announced reaches it: its job listener listens.
	job := f.submit(t, `{"steps":1,"step_ms":1}`, 1)
	f.waitState(t, job.ID, queue.StateSucceeded)

	var listening int
	if err := f.pool.QueryRow(f.ctx, `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ~ '(^|\n)\s*LISTEN '`).Scan(&listening); err != nil {
		t.Fatal(err)
	}
	if listening != 1 {
		t.Fatalf("%d sessions of the direct worker listen, want 1", listening)
	}
}

func (f *fixture) submitTo(t *testing.T, q string) queue.Job {
	t.Helper()
	job, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop", Queue: q, Payload: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return job
}
