package client_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/leasehold/leasehold/client"
)

func TestSchedules(t *testing.T) {
	t.Parallel()
	f := setup(t)
	s, err := f.client.CreateSchedule(f.ctx, client.NewSchedule{
		Name: "nightly", Cron: "30 2 * * *", Timezone: "Europe/Berlin",
		Job: client.NewJob{Kind: "report", Queue: "reports", Payload: []byte(`{"app":"com.example.notes"}`)},
	})
	if err != nil || s.Name != "nightly" || s.Job.Queue != "reports" || s.Job.MaxAttempts == nil || *s.Job.MaxAttempts != 5 || s.NextRunAt == nil {
		t.Fatalf("created %+v, %v", s, err)
	}
	var ce *client.Error
	if _, err := f.client.CreateSchedule(f.ctx, client.NewSchedule{Name: "nightly", Cron: "@daily", Job: client.NewJob{Kind: "x"}}); !errors.As(err, &ce) || ce.Status != http.StatusConflict {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := f.client.CreateSchedule(f.ctx, client.NewSchedule{Name: "bad", Cron: "@often", Job: client.NewJob{Kind: "x"}}); !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Field != "cron" {
		t.Fatalf("bad cron: %v", err)
	}
	paused := true
	if s, err = f.client.UpdateSchedule(f.ctx, "nightly", client.SchedulePatch{Paused: &paused}); err != nil || !s.Paused || s.NextRunAt != nil {
		t.Fatalf("paused %+v, %v", s, err)
	}
	list, err := f.client.Schedules(f.ctx)
	if err != nil || len(list) != 1 || list[0].Name != "nightly" || !list[0].Paused {
		t.Fatalf("list %+v, %v", list, err)
	}
	if s, err = f.client.Schedule(f.ctx, "nightly"); err != nil || s.Cron != "30 2 * * *" {
		t.Fatalf("get %+v, %v", s, err)
	}
	if err := f.client.DeleteSchedule(f.ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Schedule(f.ctx, "nightly"); !client.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
}
