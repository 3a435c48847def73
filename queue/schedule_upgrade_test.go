package queue_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
)

// The schedules migration (10) upgrades a database that holds jobs, and
// its down migration takes schedules away again without losing a job.
func TestSchedulesMigrationUpgradesAndDowngrades(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg := f.migratedTo(t, 8)
	if _, err := f.pool.Exec(f.ctx, `INSERT INTO jobs (kind, state, finished_at, idempotency_key)
		VALUES ('t', 'pending', NULL, 'k1'), ('t', 'succeeded', now(), NULL), ('t', 'dead', now(), NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		j, err := f.client.Get(f.ctx, id)
		if err != nil || j.Schedule != nil {
			t.Fatalf("job %d after the upgrade: %+v, %v", id, j, err)
		}
	}
	now := testutil.UTC("2026-12-01T00:00:00Z")
	f.schedule(t, "s", "@hourly", "", now)
	clock := testutil.NewClock(now.Add(time.Hour))
	if _, err := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: clock.Now}).RunDue(f.ctx); err != nil {
		t.Fatal(err)
	}
	if keys := f.scheduledJobs(t, "s"); len(keys) != 1 {
		t.Fatalf("scheduled jobs %v", keys)
	}
	assertCountsExact(t, f)

	if err := mg.To(8); err != nil {
		t.Fatalf("down from schedules with a schedule and its job: %v", err)
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d jobs after the down migration (%v), want 4", n, err)
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
}
