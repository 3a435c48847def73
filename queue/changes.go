package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/db"
)

// ChangeKind says what a Change is about.
type ChangeKind string

// The kinds of change the database announces on leasehold_events
// (migration 000013), plus ChangesMissed.
const (
	// ChangeJobs: jobs were submitted, changed state, attempt or cancel
	// request, or were deleted.
	ChangeJobs ChangeKind = "jobs"
	// ChangeJobActivity: something new on jobs' pages, such as a progress
	// message, another event or an artifact.
	ChangeJobActivity ChangeKind = "job"
	// ChangeWorker: a worker reported its presence.
	ChangeWorker ChangeKind = "worker"
	// ChangesMissed: the listener (re)connected, and whatever changed
	// while it was not listening went unannounced.
	ChangesMissed ChangeKind = "missed"
)

// Change is one notification of what changed in the database, whoever
// wrote it: a server, a direct worker, another server's reaper.
type Change struct {
	Kind ChangeKind
	// JobIDs are the jobs concerned (ChangeJobs, ChangeJobActivity); nil
	// when a statement changed too many to name.
	JobIDs []int64
	// States are the states the jobs had before or have after (ChangeJobs).
	States []State
	// WorkerID is the worker that reported (ChangeWorker), and
	// WorkerChanged whether it is new or anything but its last-seen time
	// changed.
	WorkerID      string
	WorkerChanged bool
}

// changesChannel is where the triggers of migration 000013 notify.
const changesChannel = "leasehold_events"

// parseChange reads a leasehold_events payload.
func parseChange(payload string) (Change, error) {
	var p struct {
		K   ChangeKind `json:"k"`
		IDs []int64    `json:"ids"`
		S   []State    `json:"s"`
		ID  string     `json:"id"`
		C   bool       `json:"c"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		return Change{}, fmt.Errorf("reading change %.100q: %w", payload, err)
	}
	switch p.K {
	case ChangeJobs, ChangeJobActivity, ChangeWorker:
	default:
		return Change{}, fmt.Errorf("unknown change kind %.40q", p.K)
	}
	return Change{Kind: p.K, JobIDs: p.IDs, States: p.S, WorkerID: p.ID, WorkerChanged: p.C}, nil
}

// Watch tells the database that server has open event streams, for ttl:
// until then the live triggers notify (without any watcher they send
// nothing, so that a queue nobody looks at pays nothing for live updates).
func (c *Client) Watch(ctx context.Context, server string, ttl time.Duration) error {
	if err := c.q.LiveWatch(ctx, db.LiveWatchParams{Server: server, TtlMs: ttl.Milliseconds()}); err != nil {
		return fmt.Errorf("watching changes: %w", err)
	}
	return nil
}

// Unwatch ends server's watch.
func (c *Client) Unwatch(ctx context.Context, server string) error {
	if err := c.q.LiveUnwatch(ctx, server); err != nil {
		return fmt.Errorf("unwatching changes: %w", err)
	}
	return nil
}
