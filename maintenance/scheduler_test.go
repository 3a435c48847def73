package maintenance_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

func (f *fixture) schedule(t *testing.T, name, cron, tz string, now time.Time) queue.Schedule {
	t.Helper()
	return testutil.CreateSchedule(t, f.ctx, f.client, name, cron, tz, now)
}

func (f *fixture) scheduledJobs(t *testing.T, name string) []string {
	t.Helper()
	return testutil.ScheduledJobs(t, f.ctx, f.pool, name)
}

func TestSchedulerTickEnqueuesOneJob(t *testing.T) {
	t.Parallel()
	f := setup(t, 20)
	clock := testutil.NewClock(testutil.UTC("2026-12-01T01:59:50Z"))
	f.schedule(t, "nightly", "0 2 * * *", "", clock.Now())
	sch := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: clock.Now})

	next, err := sch.RunDue(f.ctx)
	if err != nil || !next.Equal(testutil.UTC("2026-12-01T02:00:00Z")) {
		t.Fatalf("RunDue = %v, %v; want the next tick 02:00", next, err)
	}
	if keys := f.scheduledJobs(t, "nightly"); len(keys) != 0 {
		t.Fatalf("jobs before the tick: %v", keys)
	}
	clock.Set(testutil.UTC("2026-12-01T02:00:00Z"))
	// Ten schedulers at once (as if the role had passed while one still
	// ran): the tick is one job.
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: clock.Now})
			if _, err := s.RunDue(f.ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	keys := f.scheduledJobs(t, "nightly")
	if len(keys) != 1 || keys[0] != "schedule:nightly:2026-12-01T02:00:00Z" {
		t.Fatalf("jobs %v, want one with key schedule:nightly:2026-12-01T02:00:00Z", keys)
	}
	s, err := f.client.Schedule(f.ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if !s.NextRunAt.Equal(testutil.UTC("2026-12-02T02:00:00Z")) || !s.LastRunAt.Equal(testutil.UTC("2026-12-01T02:00:00Z")) || s.LastJobID == nil {
		t.Fatalf("after the tick: next %v, last %v, job %v", s.NextRunAt, s.LastRunAt, s.LastJobID)
	}
	job, err := f.client.Get(f.ctx, *s.LastJobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.Schedule == nil || *job.Schedule != "nightly" || job.Kind != "report" || job.Queue != "nightly" || job.State != queue.StatePending {
		t.Fatalf("the tick's job: %+v", job)
	}
	// The same moment again: nothing new.
	if _, err := sch.RunDue(f.ctx); err != nil {
		t.Fatal(err)
	}
	if keys := f.scheduledJobs(t, "nightly"); len(keys) != 1 {
		t.Fatalf("jobs %v after a second pass", keys)
	}
}

// Ticks missed while no scheduler ran make one job: the latest of them.
func TestSchedulerCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	clock := testutil.NewClock(testutil.UTC("2026-12-01T01:30:00Z"))
	f.schedule(t, "hourly", "@hourly", "", clock.Now())
	f.schedule(t, "fast", "@every 1s", "", clock.Now())
	sch := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: clock.Now})
	clock.Set(testutil.UTC("2026-12-01T05:10:00.5Z")) // down from 01:30 to 05:10
	next, err := sch.RunDue(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if keys := f.scheduledJobs(t, "hourly"); len(keys) != 1 || keys[0] != "schedule:hourly:2026-12-01T05:00:00Z" {
		t.Fatalf("hourly jobs after the downtime: %v, want the 05:00 tick alone", keys)
	}
	if keys := f.scheduledJobs(t, "fast"); len(keys) != 1 || keys[0] != "schedule:fast:2026-12-01T05:10:00Z" {
		t.Fatalf("@every 1s jobs after the downtime: %v, want the 05:10:00 tick alone", keys)
	}
	if !next.Equal(testutil.UTC("2026-12-01T05:10:01Z")) {
		t.Fatalf("next wake-up %v, want 05:10:01", next)
	}
	s, _ := f.client.Schedule(f.ctx, "hourly")
	if !s.NextRunAt.Equal(testutil.UTC("2026-12-01T06:00:00Z")) {
		t.Fatalf("hourly next %v, want 06:00", s.NextRunAt)
	}
}

// PATCH of the cron recomputes the next tick from now; pause clears it,
// and resume does not catch up the ticks missed while paused.
func TestScheduleUpdateRecomputesNextRun(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	clock := testutil.NewClock(testutil.UTC("2026-12-01T10:00:00Z"))
	s := f.schedule(t, "s", "@daily", "", clock.Now())
	if !s.NextRunAt.Equal(testutil.UTC("2026-12-02T00:00:00Z")) {
		t.Fatalf("next %v", s.NextRunAt)
	}
	clock.Set(testutil.UTC("2026-12-01T10:20:00Z"))
	s, err := f.client.UpdateSchedule(f.ctx, "s", queue.SchedulePatch{Cron: ptr("*/5 * * * *")}, clock.Now())
	if err != nil || !s.NextRunAt.Equal(testutil.UTC("2026-12-01T10:25:00Z")) || s.Cron != "*/5 * * * *" {
		t.Fatalf("after PATCH cron: %+v, %v", s, err)
	}
	s, err = f.client.UpdateSchedule(f.ctx, "s", queue.SchedulePatch{Timezone: ptr("Asia/Kolkata")}, clock.Now())
	if err != nil || !s.NextRunAt.Equal(testutil.UTC("2026-12-01T10:20:00Z").Add(5*time.Minute)) {
		t.Fatalf("after PATCH timezone (+05:30: */5 still lands on :25): %v, %v", s.NextRunAt, err)
	}
	s, err = f.client.UpdateSchedule(f.ctx, "s", queue.SchedulePatch{Paused: ptr(true)}, clock.Now())
	if err != nil || !s.Paused || s.NextRunAt != nil {
		t.Fatalf("after pause: %+v, %v", s, err)
	}
	clock.Set(testutil.UTC("2026-12-01T13:02:00Z"))
	sch := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: clock.Now})
	if next, err := sch.RunDue(f.ctx); err != nil || !next.IsZero() {
		t.Fatalf("RunDue while paused = %v, %v", next, err)
	}
	s, err = f.client.UpdateSchedule(f.ctx, "s", queue.SchedulePatch{Paused: ptr(false)}, clock.Now())
	if err != nil || s.Paused || !s.NextRunAt.Equal(testutil.UTC("2026-12-01T13:05:00Z")) {
		t.Fatalf("after resume: %+v, %v", s, err)
	}
	if _, err := sch.RunDue(f.ctx); err != nil {
		t.Fatal(err)
	}
	if keys := f.scheduledJobs(t, "s"); len(keys) != 0 {
		t.Fatalf("jobs %v: resume caught up ticks missed while paused", keys)
	}
	// A new job applies from the next tick; other fields stay.
	s, err = f.client.UpdateSchedule(f.ctx, "s", queue.SchedulePatch{Job: &queue.NewJob{Kind: "other"}}, clock.Now())
	if err != nil || s.Job.Kind != "other" || s.Job.Queue != "default" || s.Cron != "*/5 * * * *" || !s.NextRunAt.Equal(testutil.UTC("2026-12-01T13:05:00Z")) {
		t.Fatalf("after PATCH job: %+v, %v", s, err)
	}
	if err := f.client.DeleteSchedule(f.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Schedule(f.ctx, "s"); !errors.Is(err, queue.ErrScheduleNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := f.client.UpdateSchedule(f.ctx, "s", queue.SchedulePatch{}, clock.Now()); !errors.Is(err, queue.ErrScheduleNotFound) {
		t.Fatalf("PATCH of a deleted schedule: %v", err)
	}
	if err := f.client.DeleteSchedule(f.ctx, "s"); !errors.Is(err, queue.ErrScheduleNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// Stepping the scheduler's clock through both of Berlin's clock changes:
// a daily 02:30 makes one job a day.
func TestSchedulerBerlinDSTOneJobADay(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	for _, tc := range []struct {
		name, from string
		want       []string
	}{
		{"spring", "2026-03-27T12:00:00Z", []string{
			"schedule:spring:2026-03-28T01:30:00Z", "schedule:spring:2026-03-29T01:30:00Z", "schedule:spring:2026-03-30T00:30:00Z"}},
		{"autumn", "2026-10-23T12:00:00Z", []string{
			"schedule:autumn:2026-10-24T00:30:00Z", "schedule:autumn:2026-10-25T00:30:00Z", "schedule:autumn:2026-10-26T01:30:00Z"}},
	} {
		clock := testutil.NewClock(testutil.UTC(tc.from))
		f.schedule(t, tc.name, "30 2 * * *", "Europe/Berlin", clock.Now())
		sch := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: clock.Now})
		for end := clock.Now().Add(3 * 24 * time.Hour); clock.Now().Before(end); clock.Add(10 * time.Minute) {
			if _, err := sch.RunDue(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
		got := f.scheduledJobs(t, tc.name)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: jobs %v, want %v", tc.name, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: job %d %s, want %s", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}

// The active scheduler sleeps until the next tick, and a change to a
// schedule wakes it: a daily schedule patched to @every 1s fires within
// about a second, not at midnight.
func TestSchedulerWokenByChange(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	fired := make(chan maintenance.Fired, 100)
	sch := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{OnFire: func(fd maintenance.Fired) { fired <- fd }})
	done := make(chan struct{})
	go func() { _ = sch.Run(ctx); close(done) }()
	f.schedule(t, "w", "@daily", "", time.Now())
	deadline := time.Now().Add(10 * time.Second)
	for !sch.Active() {
		if time.Now().After(deadline) {
			t.Fatal("scheduler never became active")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // asleep until midnight now
	if _, err := f.client.UpdateSchedule(f.ctx, "w", queue.SchedulePatch{Cron: ptr("@every 1s")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case fd := <-fired:
		if fd.Schedule != "w" || fd.Existed {
			t.Fatalf("fired %+v", fd)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no tick within 3 s of the change")
	}
	cancel()
	<-done
}
