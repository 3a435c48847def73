package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/window"
)

// Availability scopes: a window belongs to a device label or to a worker.
const (
	ScopeDevice = "device"
	ScopeWorker = "worker"
)

// Availability is the weekly window of a device label or a worker
// (SPEC "Availability windows"): outside it, the claim statements take
// nothing for it.
type Availability struct {
	Scope, Name string
	Window      *window.Window
	UpdatedAt   time.Time
	UpdatedBy   *string
}

// CheckAvailability checks a scope, a name and a window's text as
// SetAvailability does, and gives the parsed window.
func CheckAvailability(scope, name, text string) (*window.Window, error) {
	if scope != ScopeDevice && scope != ScopeWorker {
		return nil, invalid("scope", "must be %s or %s", ScopeDevice, ScopeWorker)
	}
	if !labelPattern.MatchString(name) {
		return nil, invalid("name", "must match [A-Za-z0-9_.:-]{1,64}")
	}
	w, err := window.Parse(text)
	if err != nil {
		return nil, invalid("window", "%s", err)
	}
	return w, nil
}

// SetAvailability gives the device label or worker name (scope) the
// window text, replacing the one it had; by says who ("user:alice").
func (c *Client) SetAvailability(ctx context.Context, scope, name, text, by string) (Availability, error) {
	w, err := CheckAvailability(scope, name, text)
	if err != nil {
		return Availability{}, err
	}
	starts, ends := make([]int32, len(w.Spans)), make([]int32, len(w.Spans))
	for i, s := range w.Spans {
		starts[i], ends[i] = int32(s.Start), int32(s.End)
	}
	var who *string
	if by != "" {
		who = &by
	}
	var row db.AvailabilityWindow
	err = audit.Change(ctx, c.pool, c.q, func(q *db.Queries) (audit.Entry, error) {
		row, err = q.AvailabilitySet(ctx, db.AvailabilitySetParams{
			Scope: scope, Name: name, Spec: w.Text, Zone: w.Zone, Starts: starts, Ends: ends, UpdatedBy: who,
		})
		if err != nil {
			return audit.Entry{}, fmt.Errorf("setting availability: %w", err)
		}
		return audit.Entry{Action: "availability.set", Target: scope + ":" + name, Detail: map[string]any{"window": w.Text}}, nil
	})
	if err != nil {
		return Availability{}, err
	}
	// A window may now be open where none was, or open wider: idle
	// workers claim again at once instead of at their next poll.
	c.notifyAllQueues(ctx)
	return toAvailability(row)
}

// ClearAvailability removes the window of name (scope): it may claim at
// any time again. ErrNotFound when it had none.
func (c *Client) ClearAvailability(ctx context.Context, scope, name string) error {
	err := audit.Change(ctx, c.pool, c.q, func(q *db.Queries) (audit.Entry, error) {
		n, err := q.AvailabilityDelete(ctx, db.AvailabilityDeleteParams{Scope: scope, Name: name})
		if err != nil {
			return audit.Entry{}, fmt.Errorf("clearing availability: %w", err)
		}
		if n == 0 {
			return audit.Entry{}, ErrNotFound
		}
		return audit.Entry{Action: "availability.clear", Target: scope + ":" + name}, nil
	})
	if err != nil {
		return err
	}
	c.notifyAllQueues(ctx) // as SetAvailability
	return nil
}

// Availabilities lists every window, by scope and name.
func (c *Client) Availabilities(ctx context.Context) ([]Availability, error) {
	rows, err := c.q.AvailabilityList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing availability: %w", err)
	}
	out := make([]Availability, 0, len(rows))
	for _, r := range rows {
		a, err := toAvailability(r)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// toAvailability parses a stored window again: its text is what the
// spans came from, and the zone is needed as a *time.Location.
func toAvailability(r db.AvailabilityWindow) (Availability, error) {
	w, err := window.Parse(r.Spec)
	if err != nil {
		return Availability{}, fmt.Errorf("stored window of %s %s: %w", r.Scope, r.Name, err)
	}
	return Availability{Scope: r.Scope, Name: r.Name, Window: w, UpdatedAt: r.UpdatedAt, UpdatedBy: r.UpdatedBy}, nil
}

// windowSet is every window, by scope and name, for WhyWaiting.
type windowSet map[[2]string]*window.Window

// opensFor is when a claim of worker id (labels devices) could next take
// a job naming device ("" for none): when the worker's window and the
// label's (or, for a job naming none, every label's) are all open at
// once for at least timeout (when not zero), and the window that opens
// last then (nil when all are open now). ok is false if they never are
// (within the weeks looked at).
func (s windowSet) opensFor(id string, devices []string, device string, timeout time.Duration, now time.Time) (at time.Time, last *window.Window, ok bool) {
	var ws []*window.Window
	if w := s[[2]string{ScopeWorker, id}]; w != nil {
		ws = append(ws, w)
	}
	labels := devices
	if device != "" {
		labels = []string{device}
	}
	for _, l := range labels {
		if w := s[[2]string{ScopeDevice, l}]; w != nil {
			ws = append(ws, w)
		}
	}
	// Each pass moves t to the next opening of each window closed at t;
	// when none moves it, all are open at t. Windows that never overlap
	// would move it for ever: 64 passes is the bound.
	t := now
	for range 64 {
		moved := false
		for _, w := range ws {
			if n := w.NextOpen(t); n.After(t) {
				t, moved, last = n, true, w
			}
		}
		if moved {
			continue
		}
		// All open at t: long enough for the timeout? If not, look again
		// from the first of them to close.
		var first time.Time
		var closing *window.Window
		for _, w := range ws {
			if c, _ := w.ClosesAt(t); !c.IsZero() && (first.IsZero() || c.Before(first)) {
				first, closing = c, w
			}
		}
		if timeout <= 0 || first.IsZero() || !first.Before(t.Add(timeout)) {
			return t, last, true
		}
		t, last = first, closing
	}
	return time.Time{}, nil, false
}

// API is the window as the API shows it at now.
func (a Availability) API(now time.Time) api.Availability {
	v := api.Availability{
		Scope: a.Scope, Name: a.Name, Window: a.Window.Text, Zone: a.Window.Zone,
		UpdatedAt: api.Time(a.UpdatedAt), UpdatedBy: a.UpdatedBy,
	}
	closes, open := a.Window.ClosesAt(now)
	v.Open = open
	switch {
	case open && !closes.IsZero():
		v.Closes = api.TimePtr(&closes)
	case !open:
		opens := a.Window.NextOpen(now)
		v.Opens = api.TimePtr(&opens)
	}
	return v
}
