package queue_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// replayFixture builds an attempt's events and screenshots on a clock of
// whole seconds from t0.
type replayFixture struct {
	t0     time.Time
	events []queue.Event
	shots  []queue.Artifact
}

func (f *replayFixture) progress(sec int, step int32, msg string) {
	n := int32(1)
	d := map[string]any{"message": msg, "progress": 0.5}
	if step > 0 {
		d["step"] = step
	}
	b, _ := json.Marshal(d)
	f.events = append(f.events, queue.Event{At: f.t0.Add(time.Duration(sec) * time.Second), Type: "progress", Attempt: &n, Detail: b})
}

func (f *replayFixture) shot(sec int, step int32) {
	a := queue.Artifact{ID: int64(len(f.shots) + 1), Attempt: 1, Kind: queue.ArtifactScreenshot,
		Name: fmt.Sprintf("s%d.png", len(f.shots)+1), CreatedAt: f.t0.Add(time.Duration(sec) * time.Second)}
	if step > 0 {
		a.Step = &step
	}
	f.shots = append(f.shots, a)
}

func (f *replayFixture) messages() []string {
	var got []string
	for _, s := range queue.ReplaySteps(1, f.t0, f.events, f.shots) {
		got = append(got, s.Message)
	}
	return got
}

func checkMessages(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		t.Fatalf("step messages = %q, want %q", got, want)
	}
}

// A stepped screenshot uploaded before its step's progress (as every
// executor that shoots, then reports, does) gets its own step's message,
// not the previous step's.
func TestReplayStepsByStep(t *testing.T) {
	f := replayFixture{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := int32(1); i <= 3; i++ {
		f.shot(int(2*i), i)
		f.progress(int(2*i)+1, i, fmt.Sprintf("step %d", i))
	}
	f.events = append(f.events, queue.Event{At: f.t0.Add(10 * time.Second), Type: "completed"})
	checkMessages(t, f.messages(), "step 1", "step 2", "step 3")

	// The latest message of the step wins, and the stepper keeps a
	// stepped shot until a greater step (or the end) has come.
	f = replayFixture{t0: f.t0}
	f.shot(1, 1)
	f.progress(2, 1, "step 1 first")
	f.progress(3, 1, "step 1 again")
	f.progress(4, 0, "unstepped")
	checkMessages(t, f.messages(), "step 1 again")
	s := queue.NewReplayStepper(1, f.t0, f.shots)
	for _, e := range f.events {
		if got := s.Event(e); len(got) != 0 {
			t.Fatalf("step formed before its step was over: %+v", got)
		}
	}
	if s.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", s.Pending())
	}
}

// Screenshots without a step keep the time pairing: the latest progress
// at or before the screenshot.
func TestReplayStepsByTime(t *testing.T) {
	f := replayFixture{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.progress(1, 0, "open settings")
	f.shot(2, 0)
	f.progress(3, 0, "tap wifi")
	f.shot(3, 0) // at the same time as its progress: paired with it
	f.shot(5, 0) // after the last event
	checkMessages(t, f.messages(), "open settings", "tap wifi", "tap wifi")
}

// Mixed: stepped and unstepped shots in one attempt, in upload order; a
// stepped shot whose step never reports falls back to the time pairing.
func TestReplayStepsMixed(t *testing.T) {
	f := replayFixture{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.progress(1, 0, "warming up")
	f.shot(2, 1)
	f.shot(3, 0) // unstepped, between step 1's shot and its progress
	f.progress(4, 1, "step 1")
	f.shot(5, 2) // step 2 never reports: "step 1" was the latest before it
	f.progress(6, 0, "between")
	f.shot(7, 3)
	f.progress(8, 3, "step 3")
	checkMessages(t, f.messages(), "step 1", "warming up", "step 1", "step 3")
}
