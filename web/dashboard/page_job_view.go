package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
)

// jobPageEvents bounds the events a job page shows: a long investigation
// writes a progress event per step, and the newest are the ones that
// matter while watching.
const jobPageEvents = 200

// jobPageEventChars is where the database cuts each string of an event's
// detail for the page (which shows jobPageDetailLimit bytes of it): the
// API and the attempt's bundle have them whole.
const jobPageEventChars = 1000

// jobPageDetailLimit bounds one event's or effect's JSON in the tables;
// the API has it whole.
const jobPageDetailLimit = 600

// newJobPageView maps a job and its history to the detail page's view.
func newJobPageView(d queue.JobDetail) templates.JobPageView {
	j := d.Job
	p := jobPagePayload(j.Payload)
	v := templates.JobPageView{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, Priority: j.Priority,
		App: p["app"], StoreURL: p["store_url"], Device: p["device"], Instructions: p["instructions"],
		State: string(j.State), Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CountedAttempts: j.CountedAttempts,
		CancelRequested: j.CancelRequested, RunAt: j.RunAt, CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt,
		EventsTotal: len(d.Events), Schedule: listDeref(j.Schedule),
		Permanent: j.State == queue.StateDead && queue.DiedPermanently(d.Events),
	}
	payload := panelJSON.show(j.Payload)
	v.Payload, v.PayloadNote = payload.Text, payload.note(int64(len(j.Payload)), j.ID, panelJSON)
	if j.State == queue.StateRunning {
		v.LeaseUntil = j.LeaseUntil
		if j.LeaseOwner != nil {
			v.LeaseOwner = *j.LeaseOwner
		}
	}
	if len(j.Result) > 0 && !bytes.Equal(j.Result, []byte("null")) {
		result := panelJSON.show(j.Result)
		v.Result, v.ResultNote = result.Text, result.note(int64(len(j.Result)), j.ID, panelJSON)
	}
	if j.LastError != nil {
		v.LastError = *j.LastError
	}

	shots := map[int32][]templates.JobArtifact{}
	files := map[int32][]templates.JobArtifact{}
	for _, a := range d.Artifacts { // ordered by attempt, then upload
		ja := templates.JobArtifact{ID: a.ID, Name: a.Name, Size: jobPageSize(a.Size)}
		if a.Kind == queue.ArtifactScreenshot {
			ja.Step = len(shots[a.Attempt]) + 1
			shots[a.Attempt] = append(shots[a.Attempt], ja)
		} else {
			files[a.Attempt] = append(files[a.Attempt], ja)
		}
	}
	var counted int32
	for _, a := range d.Attempts {
		switch {
		case a.Outcome == nil:
		case *a.Outcome == "failed" || *a.Outcome == "lease_expired":
			counted++
		case *a.Outcome == "released" || *a.Outcome == "cancelled" || *a.Outcome == "not_delivered":
			v.CountedDiffers = true
		}
	}
	// A manual retry starts a fresh budget: fewer count than failed.
	v.CountedDiffers = v.CountedDiffers || counted != j.CountedAttempts

	v.Attempts = make([]templates.JobAttempt, 0, len(d.Attempts))
	for i := len(d.Attempts) - 1; i >= 0; i-- {
		a := d.Attempts[i]
		ja := templates.JobAttempt{
			Number: a.Number, WorkerID: a.WorkerID, LeaseToken: a.LeaseToken, StartedAt: a.StartedAt,
			HeartbeatAt: a.HeartbeatAt, EndedAt: a.EndedAt, Outcome: "unfinished",
			Screenshots: shots[a.Number], Files: files[a.Number],
		}
		switch {
		case a.Outcome != nil:
			ja.Outcome = *a.Outcome
		case j.State == queue.StateRunning && j.Attempt == a.Number:
			ja.Outcome = "running"
		}
		if a.EndedAt != nil {
			ja.Duration = jobPageDuration(a.EndedAt.Sub(a.StartedAt))
		}
		if a.Error != nil {
			ja.Error = *a.Error
		}
		v.Attempts = append(v.Attempts, ja)
	}

	if cp := j.Checkpoint; cp != nil {
		v.Checkpoint = &templates.JobCheckpoint{Step: cp.Step, Attempt: cp.Attempt, At: cp.At}
	}
	// Where each attempt resumed, from its resumed event (among the
	// page's events: an attempt's comes first, at its claim).
	for _, e := range d.Events {
		if e.Type != "resumed" || e.Attempt == nil {
			continue
		}
		var r struct{ Step *int }
		if json.Unmarshal(e.Detail, &r) != nil || r.Step == nil {
			continue
		}
		for i := range v.Attempts {
			if v.Attempts[i].Number == *e.Attempt {
				v.Attempts[i].ResumedAfter = r.Step
			}
		}
	}
	for i := len(d.Events) - 1; i >= 0; i-- {
		if e := d.Events[i]; e.Type == "retried" {
			var by struct{ By string }
			if json.Unmarshal(e.Detail, &by) == nil && by.By != "" {
				v.RetriedBy, v.RetriedAt = by.By, e.At
			}
			break
		}
	}
	for i := len(d.Events) - 1; i >= 0 && len(v.Events) < jobPageEvents; i-- {
		e := d.Events[i]
		je := templates.JobEvent{At: e.At, Type: e.Type, Detail: jobPageCompact(e.Detail)}
		if e.Attempt != nil {
			je.Attempt = *e.Attempt
		}
		v.Events = append(v.Events, je)
	}
	for _, e := range d.Effects {
		v.Effects = append(v.Effects, templates.JobEffect{
			Key: e.Key, Attempt: e.Attempt, State: e.State, Result: jobPageCompact(e.Result), CreatedAt: e.CreatedAt,
		})
	}
	v.Usage = jobUsageView(j, d.Usage)
	return v
}

// jobPagePayload reads the payload's text fields one by one, so that a
// payload of another kind (or a field of another type) shows what it can.
func jobPagePayload(payload json.RawMessage) map[string]string {
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(payload, &obj)
	out := map[string]string{}
	for _, k := range []string{"app", "store_url", "device", "instructions"} {
		var s string
		if json.Unmarshal(obj[k], &s) == nil {
			out[k] = s
		}
	}
	return out
}

// jobPageCompact is JSON on one line, bounded like a table cell; empty
// for none.
func jobPageCompact(raw json.RawMessage) string {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte("{}")) {
		return ""
	}
	return escapeBidi(cellJSON.show(raw).Text)
}

// escapeBidi writes the bidirectional formatting characters of JSON text
// as \u escapes, which mean the same in JSON: an override in a progress
// message then shows as what it is instead of reversing the rest of the
// row.
func escapeBidi(s string) string {
	if !strings.ContainsFunc(s, isBidiControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isBidiControl(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isBidiControl(r rune) bool {
	switch {
	case r == '\u061c', r == '\u200e', r == '\u200f':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// jobPageDuration says how long an attempt ran, as precisely as is
// useful.
func jobPageDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
}

// jobPageSize is a file size for people.
func jobPageSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/1000_000)
	}
}
