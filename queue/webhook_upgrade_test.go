package queue_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
)

// The webhooks migration (11) upgrades a populated database without
// announcing its past (no event for jobs already dead), records nothing
// until a server enables events, goes down leaving the jobs as they were,
// and comes up again.
func TestWebhookMigrationUpgradesAndDowngrades(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg, err := db.NewMigrator(f.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	if err := mg.To(8); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.insert(t, jobOpts{})
	}
	f.killJob(t)
	running := f.claimOne(t, "w", time.Minute)
	if err := mg.To(11); err != nil {
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
	if _, err := f.client.Complete(f.ctx, leaseOf(running), nil); err != nil {
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
	if counts.Jobs[queue.StateDead] != 2 || counts.Jobs[queue.StateSucceeded] != 1 || counts.Jobs[queue.StatePending] != 2 {
		t.Fatalf("counts after down %v", counts.Jobs)
	}
	j := f.claimOne(t, "w", time.Minute)
	if _, err := f.client.Complete(f.ctx, leaseOf(j), nil); err != nil {
		t.Fatalf("completing on version 8: %v", err)
	}
	if err := mg.To(11); err != nil {
		t.Fatal(err)
	}
}
