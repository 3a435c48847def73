package queue_test

import (
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// The limits migration (9), and those after it, upgrade a populated
// database of version 8:
// its jobs have no key, run on, and are claimed by the fast path; and it
// goes down again with limits in use, and back up.
func TestLimitsMigrationUpgradesAndRollsBack(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg := f.migratedTo(t, 8)
	if _, err := f.pool.Exec(f.ctx, `
		INSERT INTO jobs (kind, queue, state, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, finished_at)
		VALUES ('t', 'default', 'pending', 0, NULL, 0, NULL, NULL, NULL, NULL),
		       ('t', 'default', 'pending', 0, NULL, 0, NULL, NULL, NULL, NULL),
		       ('t', 'default', 'running', 1, 'w1', 11, now(), now(), now() + interval '1 min', NULL),
		       ('t', 'other', 'succeeded', 1, 'w1', 12, now(), now(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	// Up to the latest version: today's code runs on the upgraded data.
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	qs, err := f.client.Queues(f.ctx)
	if err != nil || len(qs) != 2 || qs[0].Name != "default" || qs[0].Pending != 2 || qs[0].Running != 1 {
		t.Fatalf("queues after the upgrade: %+v %v", qs, err)
	}
	jobs := f.claim(t, "w2", 5, "default")
	if len(jobs) != 2 || jobs[0].ConcurrencyKey != nil || jobs[0].ConcurrencyLimit != 1 {
		t.Fatalf("claimed after the upgrade: %+v", jobs)
	}
	// In use, then down: the settings and the keys go, the jobs stay.
	f.patchQueue(t, "default", queue.QueuePatch{Paused: new(true)})
	f.insertLimited(t, 2, limited{queue: "default", key: "k"})
	if err := mg.To(8); err != nil {
		t.Fatalf("down: %v", err)
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, "SELECT count(*) FROM jobs").Scan(&n); err != nil || n != 6 {
		t.Fatalf("jobs after down: %d %v", n, err)
	}
	if err := mg.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
	// The pool's connections prepared the claim before the down migration
	// changed the types of jobs' columns (migration 16's domains), and
	// PostgreSQL refuses such a prepared statement once (pgx then drops
	// it): as after a real upgrade, the programs start on new connections.
	f.pool.Reset()
	if got := f.claim(t, "w3", 5, "default"); len(got) != 2 {
		t.Fatalf("claimed %d jobs after down and up, want the 2 that were keyed", len(got))
	}
}
