package queue

import (
	"encoding/json"
	"time"
)

// ReplayStep is one step of an attempt's replay: the job page shows it,
// and an attempt's bundle lists it.
//
// How steps are formed: an attempt's steps are its screenshots in upload
// order (artifact id). Each is paired with the latest progress event of
// the same attempt whose time is at or before the screenshot's
// created_at: the action the agent had announced when the screen was
// taken. Progress after the last screenshot belongs to no step; an
// attempt without screenshots has no steps.
type ReplayStep struct {
	Shot Artifact
	// Message is the paired event's detail.message; "" for none.
	Message string
	// Elapsed is the screenshot's time from the attempt's start.
	Elapsed time.Duration
}

// ReplaySteps forms the steps of the attempt that started at start from
// events and artifacts, which may hold other attempts' too (they are
// skipped); both are in time order, as the queue returns them.
func ReplaySteps(number int32, start time.Time, events []Event, artifacts []Artifact) []ReplayStep {
	s := NewReplayStepper(number, start, artifacts)
	var steps []ReplayStep
	for _, e := range events {
		steps = append(steps, s.Event(e)...)
	}
	return append(steps, s.Rest()...)
}

// ReplayStepper forms the steps of ReplaySteps from events given one at a
// time, so that an attempt's events need not all be in memory at once.
type ReplayStepper struct {
	number  int32
	start   time.Time
	shots   []Artifact
	message string
}

// NewReplayStepper starts the steps of the attempt that started at start;
// artifacts may hold other attempts' too, in upload order.
func NewReplayStepper(number int32, start time.Time, artifacts []Artifact) *ReplayStepper {
	s := &ReplayStepper{number: number, start: start}
	for _, a := range artifacts {
		if a.Attempt == number && a.Kind == ArtifactScreenshot {
			s.shots = append(s.shots, a)
		}
	}
	return s
}

// Event takes the next event in time order and returns the steps it
// completes: those of the screenshots taken before it.
func (s *ReplayStepper) Event(e Event) []ReplayStep {
	var steps []ReplayStep
	for len(s.shots) > 0 && e.At.After(s.shots[0].CreatedAt) {
		steps = append(steps, s.step())
	}
	if e.Type == "progress" && e.Attempt != nil && *e.Attempt == s.number {
		s.message = progressMessage(e.Detail)
	}
	return steps
}

// Pending is how many screenshots have no step yet.
func (s *ReplayStepper) Pending() int { return len(s.shots) }

// Rest returns the steps after the last event.
func (s *ReplayStepper) Rest() []ReplayStep {
	var steps []ReplayStep
	for len(s.shots) > 0 {
		steps = append(steps, s.step())
	}
	return steps
}

func (s *ReplayStepper) step() ReplayStep {
	a := s.shots[0]
	s.shots = s.shots[1:]
	return ReplayStep{Shot: a, Message: s.message, Elapsed: max(a.CreatedAt.Sub(s.start), 0)}
}

// progressMessage is a progress event's message, "" when it has none.
func progressMessage(detail json.RawMessage) string {
	var d struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(detail, &d)
	return d.Message
}
