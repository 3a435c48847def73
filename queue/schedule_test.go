package queue_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
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

func TestScheduleCreateInvalid(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	now := testutil.UTC("2026-12-01T00:00:00Z")
	good := queue.NewJob{Kind: "report"}
	f.schedule(t, "taken", "@daily", "", now)
	for _, tc := range []struct {
		name  string
		ns    queue.NewSchedule
		field string
	}{
		{"BadName", queue.NewSchedule{Name: "Bad Name", Cron: "@daily", Job: good}, "name"},
		{"EmptyName", queue.NewSchedule{Name: "", Cron: "@daily", Job: good}, "name"},
		{"LongName", queue.NewSchedule{Name: string(make([]byte, 65)), Cron: "@daily", Job: good}, "name"},
		{"BadCron", queue.NewSchedule{Name: "a", Cron: "every day", Job: good}, "cron"},
		{"BadTimezone", queue.NewSchedule{Name: "a", Cron: "@daily", Timezone: "Nowhere/City", Job: good}, "timezone"},
		{"BadKind", queue.NewSchedule{Name: "a", Cron: "@daily", Job: queue.NewJob{Kind: "Bad Kind"}}, "job.kind"},
		{"BadPayload", queue.NewSchedule{Name: "a", Cron: "@daily", Job: queue.NewJob{Kind: "k", Payload: json.RawMessage(`[1]`)}}, "job.payload"},
		{"RunAt", queue.NewSchedule{Name: "a", Cron: "@daily", Job: queue.NewJob{Kind: "k", RunAt: &now}}, "job.run_at"},
		{"IdempotencyKey", queue.NewSchedule{Name: "a", Cron: "@daily", Job: queue.NewJob{Kind: "k", IdempotencyKey: ptr("x")}}, "job.idempotency_key"},
		{"Investigation", queue.NewSchedule{Name: "a", Cron: "@daily", Job: queue.NewJob{Kind: "app_investigation", Payload: json.RawMessage(`{}`)}}, "job.payload.app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.CreateSchedule(f.ctx, tc.ns, now)
			var ve *queue.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("err %v, want a validation error on %s", err, tc.field)
			}
		})
	}
	if _, err := f.client.CreateSchedule(f.ctx, queue.NewSchedule{Name: "taken", Cron: "@hourly", Job: good}, now); !errors.Is(err, queue.ErrScheduleExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, err := f.client.UpdateSchedule(f.ctx, "taken", queue.SchedulePatch{Cron: ptr("* *")}, now); err == nil {
		t.Fatal("PATCH with a bad cron accepted")
	}
	if s, _ := f.client.Schedule(f.ctx, "taken"); s.Cron != "@daily" {
		t.Fatalf("a refused PATCH changed the cron to %q", s.Cron)
	}
}
