package queue_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// The webhooks migration (11), with those after it, upgrades a populated database without
// announcing its past (no event for jobs already dead), records nothing
// until a server enables events, goes down leaving the jobs as they were,
// and comes up again.
func TestWebhookMigrationUpgradesAndDowngrades(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg := f.migratedTo(t, 8)
	// Version 8's rows, written as version 8 had them (today's code
	// needs the later columns): three pending jobs, a dead one, and one
	// running under w's lease.
	if _, err := f.pool.Exec(f.ctx, `
		INSERT INTO jobs (kind, state, attempt, counted_attempts, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, finished_at, last_error)
		VALUES ('t', 'pending', 0, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL),
		       ('t', 'pending', 0, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL),
		       ('t', 'pending', 0, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL),
		       ('t', 'dead', 1, 1, 'w', 6, now(), now(), now(), now(), 'bad input'),
		       ('t', 'running', 1, 0, 'w', 7, now(), now(), now() + interval '1 hour', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	owner := "w"
	running := queue.Job{ID: 5, LeaseToken: 7, LeaseOwner: &owner}
	// Up to the latest version: today's code runs on the upgraded data.
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	if got := f.outbox(t); len(got) != 0 {
		t.Fatalf("the upgrade wrote %v", got)
	}
	// Off until configured: a job that dies now writes nothing.
	f.killJob(t)
	if got := f.outbox(t); len(got) != 0 {
		t.Fatalf("webhooks unconfigured, outbox %v", got)
	}
	if err := f.client.ConfigureWebhooks(f.ctx, []string{queue.WebhookJobSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(running), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.outbox(t); got["job.succeeded"] != 1 || len(got) != 1 {
		t.Fatalf("outbox %v, want one job.succeeded", got)
	}

	if err := mg.To(8); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM pg_class WHERE relname LIKE 'webhook%'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d webhook relations left after down", tables)
	}
	counts, err := f.client.Counts(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Three of the four pending jobs are left: killJob took one.
	if counts.Jobs[queue.StateDead] != 2 || counts.Jobs[queue.StateSucceeded] != 1 || counts.Jobs[queue.StatePending] != 3 {
		t.Fatalf("counts after down %v", counts.Jobs)
	}
	// Version 8 goes on without the triggers: a job finishes as it did,
	// and writes no outbox row (there is no outbox).
	if _, err := f.pool.Exec(f.ctx, `UPDATE jobs SET state = 'dead', finished_at = now() WHERE id = 2 AND state = 'pending'`); err != nil {
		t.Fatalf("a transition on version 8: %v", err)
	}
	if counts, err = f.client.Counts(f.ctx); err != nil || counts.Jobs[queue.StateDead] != 3 {
		t.Fatalf("counts after a transition on version 8: %v %v", counts.Jobs, err)
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
}
