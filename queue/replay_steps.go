package queue

import (
	"encoding/json"
	"time"
)

// ReplayStep is one step of an attempt's replay: the job page shows it,
// and an attempt's bundle lists it.
//
// How steps are formed: an attempt's steps are its screenshots in upload
// order (artifact id). A screenshot the executor named a step of (its
// Step) is paired with the latest progress event of the same attempt
// whose detail.step is that step, even one written after the screenshot
// (an executor takes a step's screen, then reports it). Any other
// screenshot, and a stepped one whose step has no progress, is paired
// with the latest progress event of the attempt whose time is at or
// before the screenshot's created_at: the action the agent had announced
// when the screen was taken. Progress after the last screenshot belongs
// to no step; an attempt without screenshots has no steps.
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
// time, so that an attempt's events need not all be in memory at once:
// it holds the attempt's screenshots still without a step and one
// message each.
//
// A screenshot's step is complete once an event after its created_at has
// come (its time pairing is known) and, for a stepped one, once a
// progress event of a greater step has come (its own step's messages are
// over), or at the end (Rest). Steps are returned in upload order, so a
// stepped screenshot waiting for its message holds back the ones after
// it.
type ReplayStepper struct {
	number  int32
	start   time.Time
	shots   []replayShot
	timed   int // shots[:timed] have their time pairing
	message string
	maxStep int32 // the greatest detail.step of the attempt's progress so far
}

// replayShot is a screenshot waiting for its step.
type replayShot struct {
	a         Artifact
	byTime    string // the time pairing's message, once timed
	byStep    string // the latest message of its step's progress
	stepFound bool   // byStep is set
}

// NewReplayStepper starts the steps of the attempt that started at start;
// artifacts may hold other attempts' too, in upload order.
func NewReplayStepper(number int32, start time.Time, artifacts []Artifact) *ReplayStepper {
	s := &ReplayStepper{number: number, start: start}
	for _, a := range artifacts {
		if a.Attempt == number && a.Kind == ArtifactScreenshot {
			s.shots = append(s.shots, replayShot{a: a})
		}
	}
	return s
}

// Event takes the next event in time order and returns the steps it
// completes.
func (s *ReplayStepper) Event(e Event) []ReplayStep {
	// Upload order is time order but for ties and clock steps: the time
	// pairing walks the shots in order, as it always has.
	for s.timed < len(s.shots) && e.At.After(s.shots[s.timed].a.CreatedAt) {
		s.shots[s.timed].byTime = s.message
		s.timed++
	}
	if e.Type == "progress" && e.Attempt != nil && *e.Attempt == s.number {
		message, step := progressDetail(e.Detail)
		s.message = message
		if step > 0 {
			for i := range s.shots {
				if sh := &s.shots[i]; sh.a.Step != nil && *sh.a.Step == step {
					sh.byStep, sh.stepFound = message, true
				}
			}
			s.maxStep = max(s.maxStep, step)
		}
	}
	var steps []ReplayStep
	for len(s.shots) > 0 && s.ready(s.shots[0]) {
		steps = append(steps, s.step())
	}
	return steps
}

// ready says whether the first shot's step is complete (see ReplayStepper).
func (s *ReplayStepper) ready(sh replayShot) bool {
	if sh.a.Step == nil {
		return s.timed > 0
	}
	return s.maxStep > *sh.a.Step && (sh.stepFound || s.timed > 0)
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

// step forms the first shot's step.
func (s *ReplayStepper) step() ReplayStep {
	sh := s.shots[0]
	s.shots = s.shots[1:]
	message := s.message // a shot not yet timed: every event so far was at or before it
	if s.timed > 0 {
		message = sh.byTime
		s.timed--
	}
	if sh.stepFound {
		message = sh.byStep
	}
	return ReplayStep{Shot: sh.a, Message: message, Elapsed: max(sh.a.CreatedAt.Sub(s.start), 0)}
}

// progressDetail is a progress event's message ("" when it has none) and
// step (0 when it names none).
func progressDetail(detail json.RawMessage) (message string, step int32) {
	var d struct {
		Message string `json:"message"`
		Step    int32  `json:"step"`
	}
	_ = json.Unmarshal(detail, &d)
	return d.Message, max(d.Step, 0)
}
