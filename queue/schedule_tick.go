package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/db"
)

// ScheduleEntry is a schedule as the scheduler reads it. Err is why its
// job could not be read (Job is zero then): one such schedule stops no
// other.
type ScheduleEntry struct {
	Schedule
	Err error
}

// ScheduleEntries lists every schedule by name, for the scheduler.
func (c *Client) ScheduleEntries(ctx context.Context) ([]ScheduleEntry, error) {
	rows, err := c.q.ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading schedules: %w", err)
	}
	out := make([]ScheduleEntry, 0, len(rows))
	for _, r := range rows {
		s, err := scheduleFromRow(r)
		if err != nil {
			s = Schedule{
				Name: r.Name, Cron: r.Cron, Timezone: r.Timezone, Paused: r.Paused,
				NextRunAt: r.NextRunAt, LastRunAt: r.LastRunAt, LastJobID: r.LastJobID,
				CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
			}
		}
		out = append(out, ScheduleEntry{Schedule: s, Err: err})
	}
	return out, nil
}

// EnqueueTick inserts the job of s for tick, with the idempotency key
// ScheduleKey(s.Name, tick): existed reports that the tick's job was
// there already. An ErrIdempotencyConflict comes with the job that holds
// the key (the schedule's job changed after the tick was enqueued).
func (c *Client) EnqueueTick(ctx context.Context, s Schedule, tick time.Time) (job Job, existed bool, err error) {
	nj := s.Job.NewJob()
	nj.IdempotencyKey = ptr(ScheduleKey(s.Name, tick))
	nj.Schedule = &s.Name
	return c.Insert(ctx, nj)
}

// RecordTick records that s fired for tick (as jobID; nil when the tick
// was skipped) and moves it to next (the zero time: no more ticks). It
// reports false when s changed since it was read: nothing was recorded.
func (c *Client) RecordTick(ctx context.Context, s Schedule, tick time.Time, jobID *int64, next time.Time) (bool, error) {
	n, err := c.q.ScheduleFired(ctx, db.ScheduleFiredParams{
		Name: s.Name, Expected: s.NextRunAt, Tick: &tick, JobID: jobID, NextRunAt: tickPtr(next),
	})
	if err != nil {
		return false, fmt.Errorf("recording schedule %s: %w", s.Name, err)
	}
	return n > 0, nil
}

// tickPtr is a tick to store: none when the cron has no more.
func tickPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
