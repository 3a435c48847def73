package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
)

// MaxQueueCap bounds a queue's max_running (more is no cap at all).
const MaxQueueCap = 1_000_000

// maxQueues is how many queues GET /api/v1/queues lists at most.
const maxQueues = 1000

// QueueInfo is a queue's settings and how many of its jobs wait and run.
type QueueInfo struct {
	Name   string
	Paused bool
	// PausedBy and PausedAt describe the latest pause (kept after a resume).
	PausedBy *string
	PausedAt *time.Time
	// MaxRunning caps the queue's running jobs; nil: no cap.
	MaxRunning *int32
	// Pending is exact up to PendingCountCap; past it, Pending is
	// PendingCountCap and PendingOver is true.
	Pending     int64
	PendingOver bool
	Running     int64
}

// PendingCountCap is how far a queue's pending jobs are counted.
const PendingCountCap = 100_000

func queueInfo(name string, paused bool, pausedBy *string, pausedAt *time.Time, maxRunning *int32, pending, running int64) QueueInfo {
	return QueueInfo{
		Name: name, Paused: paused, PausedBy: pausedBy, PausedAt: pausedAt, MaxRunning: maxRunning,
		Pending: min(pending, PendingCountCap), PendingOver: pending > PendingCountCap, Running: running,
	}
}

// QueuePatch changes a queue's settings; nil fields stay as they are.
type QueuePatch struct {
	Paused *bool
	// ClearMaxRunning removes the cap; otherwise a non-nil MaxRunning sets it.
	MaxRunning      *int32
	ClearMaxRunning bool
}

// CheckQueueName refuses a name no job could have, with the rule jobs
// are held to.
func CheckQueueName(name string) error {
	if !namePattern.MatchString(name) {
		return invalid("name", "a queue name must match [a-z0-9_.-]{1,64}")
	}
	return nil
}

// Queues lists every queue that has jobs or settings, by name.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	rows, err := c.q.QueueList(ctx, maxQueues)
	if err != nil {
		return nil, fmt.Errorf("listing queues: %w", err)
	}
	queues := make([]QueueInfo, len(rows))
	for i, r := range rows {
		queues[i] = queueInfo(r.Name, r.Paused, r.PausedBy, r.PausedAt, r.MaxRunning, r.Pending, r.Running)
	}
	return queues, nil
}

// Queue is one queue; a queue with neither jobs nor settings comes back
// unpaused and uncapped.
func (c *Client) Queue(ctx context.Context, name string) (QueueInfo, error) {
	if err := CheckQueueName(name); err != nil {
		return QueueInfo{}, err
	}
	r, err := c.q.QueueGet(ctx, name)
	if err != nil {
		return QueueInfo{}, fmt.Errorf("reading queue %s: %w", name, err)
	}
	return queueInfo(r.Name, r.Paused, r.PausedBy, r.PausedAt, r.MaxRunning, r.Pending, r.Running), nil
}

// PatchQueue changes a queue's settings, creating them for a queue that
// has none, and records who paused it. A queue left claimable (resumed,
// its cap raised or cleared) wakes its idle workers at once.
func (c *Client) PatchQueue(ctx context.Context, name string, p QueuePatch, actor string) (QueueInfo, error) {
	if err := CheckQueueName(name); err != nil {
		return QueueInfo{}, err
	}
	if p.MaxRunning != nil && (*p.MaxRunning < 0 || *p.MaxRunning > MaxQueueCap) {
		return QueueInfo{}, invalid("max_running", "must be null or between 0 and %d", MaxQueueCap)
	}
	var s db.QueueSetting
	err := audit.Change(ctx, c.pool, c.q, func(q *db.Queries) (audit.Entry, error) {
		var err error
		s, err = q.QueueSettingsUpsert(ctx, db.QueueSettingsUpsertParams{
			Name: name, Paused: p.Paused, Actor: actor,
			SetMaxRunning: p.ClearMaxRunning || p.MaxRunning != nil, MaxRunning: p.MaxRunning,
		})
		if err != nil {
			return audit.Entry{}, fmt.Errorf("changing queue %s: %w", name, inputRefused(err, ""))
		}
		detail := map[string]any{}
		if p.Paused != nil {
			detail["paused"] = *p.Paused
		}
		if p.MaxRunning != nil {
			detail["max_running"] = *p.MaxRunning
		} else if p.ClearMaxRunning {
			detail["max_running"] = nil
		}
		return audit.Entry{Action: "queue.update", Target: "queue:" + name, Detail: detail}, nil
	})
	if err != nil {
		return QueueInfo{}, err
	}
	if !s.Paused {
		c.notifyJobs(ctx, []string{name})
	}
	return c.Queue(ctx, name)
}
