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
	var steps []ReplayStep
	next, message := 0, ""
	for _, a := range artifacts {
		if a.Attempt != number || a.Kind != ArtifactScreenshot {
			continue
		}
		for ; next < len(events) && !events[next].At.After(a.CreatedAt); next++ {
			e := events[next]
			if e.Type == "progress" && e.Attempt != nil && *e.Attempt == number {
				message = progressMessage(e.Detail)
			}
		}
		steps = append(steps, ReplayStep{Shot: a, Message: message, Elapsed: max(a.CreatedAt.Sub(start), 0)})
	}
	return steps
}

// progressMessage is a progress event's message, "" when it has none.
func progressMessage(detail json.RawMessage) string {
	var d struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(detail, &d)
	return d.Message
}
