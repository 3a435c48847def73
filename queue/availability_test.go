package queue_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/window"
)

// TestWindowSQLMatchesGo holds availability_closes, which the claim
// statements use, to window.Window.ClosesAt, which the wait reasons use:
// every 37 minutes through weeks with each clock change of Europe/Berlin
// and America/New_York in 2026.
func TestWindowSQLMatchesGo(t *testing.T) {
	t.Parallel()
	f := setup(t, 2)
	for _, text := range []string{
		"mon-fri 22:00-07:00, sat-sun 00:00-24:00 Europe/Berlin",
		"sun 01:00-04:00, sat 23:00-02:30 Europe/Berlin",
		"sat-sun 20:00-08:00 America/New_York",
		"sun 00:00-03:00 America/New_York",
		"mon-sun 00:00-24:00 UTC",
		"wed 12:00-13:00",
	} {
		w, err := window.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, week := range []string{"2026-03-05", "2026-03-26", "2026-10-22", "2026-10-29"} {
			start, _ := time.Parse("2006-01-02", week)
			for at := start; at.Before(start.Add(6 * 24 * time.Hour)); at = at.Add(37 * time.Minute) {
				// Times where a clock changes are wall-clock times that do
				// not exist or exist twice: both sides must agree there too.
				wantC, wantOpen := w.ClosesAt(at)
				gotC, gotOpen, err := f.client.WindowClosesSQL(f.ctx, w, at)
				if err != nil {
					t.Fatal(err)
				}
				if gotOpen != wantOpen || !gotC.Equal(wantC) {
					t.Fatalf("%q at %s: SQL open %v closes %s, Go open %v closes %s", text, at, gotOpen, gotC, wantOpen, wantC)
				}
			}
		}
	}
}

func TestSetAvailabilityRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t, 2)
	for _, tc := range []struct{ scope, name, text, field string }{
		{"phone", "pixel7", "mon 09:00-10:00", "scope"},
		{"device", "pixel 7", "mon 09:00-10:00", "name"},
		{"device", "pixel7", "mon 09:00-25:00", "window"},
	} {
		_, err := f.client.SetAvailability(f.ctx, tc.scope, tc.name, tc.text, "user:admin")
		var v *queue.ValidationError
		if !errors.As(err, &v) || v.Field != tc.field {
			t.Errorf("SetAvailability(%q, %q, %q) = %v, want a ValidationError on %s", tc.scope, tc.name, tc.text, err, tc.field)
		}
	}
	if err := f.client.ClearAvailability(f.ctx, "device", "none"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("clearing a window never set: %v, want ErrNotFound", err)
	}
}

// berlin is t as wall-clock time in Europe/Berlin.
func berlin(t *testing.T, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestClaimRespectsWindows: the claim statement itself, with an injected
// clock, takes nothing for a label or a worker outside its window, nor a
// job whose timeout runs past the window's end. 2026-12-02 is a
// Wednesday.
func TestClaimRespectsWindows(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	if _, err := f.client.SetAvailability(f.ctx, queue.ScopeDevice, "pixel7", "mon-fri 22:00-07:00 Europe/Berlin", "user:admin"); err != nil {
		t.Fatal(err)
	}
	insert := func(payload string, timeout int32) queue.Job {
		nj := queue.NewJob{Kind: "test", Queue: "phones", Payload: json.RawMessage(payload)}
		if timeout > 0 {
			nj.TimeoutMs = &timeout
		}
		j, _, err := f.client.Insert(f.ctx, nj)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	claim := func(at time.Time, worker string, devices ...string) []queue.Job {
		t.Helper()
		jobs, err := f.client.At(at).Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{"phones"}, Devices: devices, Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	pixel := insert(`{"device":"pixel7"}`, 0)
	long := insert(`{"device":"pixel7"}`, int32((2 * time.Hour).Milliseconds()))
	free := insert(`{}`, 0)

	// Daytime: pixel7's jobs wait, and so does a job naming no device
	// for the worker that drives pixel7. A worker without the label takes
	// the free one.
	noon := berlin(t, "2026-12-09 12:00")
	if got := claim(noon, "w-pixel", "pixel7"); len(got) != 0 {
		t.Fatalf("claimed %d jobs outside the window, want none", len(got))
	}
	if got := claim(noon, "w-other", "moto"); len(got) != 1 || got[0].ID != free.ID {
		t.Fatalf("other worker claimed %v, want job %d", got, free.ID)
	}
	// 06:00: open for another hour, too short for the 2 h job.
	if got := claim(berlin(t, "2026-12-10 06:00"), "w-pixel", "pixel7"); len(got) != 1 || got[0].ID != pixel.ID {
		t.Fatalf("claimed %v at 06:00, want job %d alone", got, pixel.ID)
	}
	if got := claim(berlin(t, "2026-12-10 22:30"), "w-pixel", "pixel7"); len(got) != 1 || got[0].ID != long.ID {
		t.Fatalf("claimed %v at 22:30, want job %d", got, long.ID)
	}

	// A worker's own window holds back everything it would claim.
	if _, err := f.client.SetAvailability(f.ctx, queue.ScopeWorker, "w-other", "sat-sun 00:00-24:00 Europe/Berlin", ""); err != nil {
		t.Fatal(err)
	}
	insert(`{}`, 0)
	if got := claim(noon, "w-other", "moto"); len(got) != 0 {
		t.Fatalf("worker outside its own window claimed %d jobs", len(got))
	}
	if got := claim(berlin(t, "2026-12-12 12:00"), "w-other", "moto"); len(got) != 1 {
		t.Fatalf("worker inside its window claimed %d jobs, want 1", len(got))
	}
	if err := f.client.ClearAvailability(f.ctx, queue.ScopeWorker, "w-other"); err != nil {
		t.Fatal(err)
	}
	list, err := f.client.Availabilities(f.ctx)
	if err != nil || len(list) != 1 || list[0].Name != "pixel7" || list[0].Window.Zone != "Europe/Berlin" || *list[0].UpdatedBy != "user:admin" {
		t.Fatalf("Availabilities = %+v, %v; want pixel7's alone", list, err)
	}
}
