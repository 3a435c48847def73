package maintenance_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// A schedule keeps every field POST /jobs takes: the tick's job has the
// schedule's concurrency key and limit, so scheduled runs on one phone
// cannot overlap.
func TestScheduleKeepsTheConcurrencyKey(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	clock := testutil.NewClock(testutil.UTC("2026-12-01T01:59:50Z"))
	key, limit := "phone:R5CT", int32(2)
	s, err := f.client.CreateSchedule(f.ctx, queue.NewSchedule{Name: "nightly", Cron: "0 2 * * *",
		Job: queue.NewJob{Kind: "noop", ConcurrencyKey: &key, ConcurrencyLimit: &limit}}, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s.Job.ConcurrencyKey == nil || *s.Job.ConcurrencyKey != key || s.Job.ConcurrencyLimit != limit {
		t.Fatalf("stored job %+v, want key %s limit %d", s.Job, key, limit)
	}
	clock.Set(testutil.UTC("2026-12-01T02:00:00Z"))
	if _, err := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: clock.Now}).RunDue(f.ctx); err != nil {
		t.Fatal(err)
	}
	if s, err = f.client.Schedule(f.ctx, "nightly"); err != nil || s.LastJobID == nil {
		t.Fatalf("after the tick: %+v, %v", s, err)
	}
	job, err := f.client.Get(f.ctx, *s.LastJobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.ConcurrencyKey == nil || *job.ConcurrencyKey != key || job.ConcurrencyLimit != limit {
		t.Fatalf("the tick's job has key %v limit %d, want %s and %d", job.ConcurrencyKey, job.ConcurrencyLimit, key, limit)
	}
}
