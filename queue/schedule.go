package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/db"
)

// Errors of schedules.
var (
	// ErrScheduleNotFound means no schedule has that name.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrScheduleExists means the name is taken.
	ErrScheduleExists = errors.New("a schedule of that name exists already")
)

// Schedule makes a job at every tick of its cron expression.
type Schedule struct {
	Name     string
	Cron     string
	Timezone string
	Job      ScheduleJob
	Paused   bool
	// NextRunAt is the next tick to fire (nil while paused); LastRunAt
	// the last tick enqueued, as LastJobID.
	NextRunAt *time.Time
	LastRunAt *time.Time
	LastJobID *int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ScheduleJob is the job a schedule makes: every field of a submitted job
// but run_at and idempotency_key, which each tick sets (and refuses).
type ScheduleJob struct {
	Kind          string          `json:"kind"`
	Queue         string          `json:"queue"`
	Priority      int32           `json:"priority"`
	Payload       json.RawMessage `json:"payload"`
	MaxAttempts   *int32          `json:"max_attempts"`
	TimeoutMs     *int32          `json:"timeout_ms"`
	BackoffBaseMs *int32          `json:"backoff_base_ms"`
	BackoffMaxMs  *int32          `json:"backoff_max_ms"`
	// ConcurrencyKey and ConcurrencyLimit go on each tick's job, so that
	// scheduled runs on one phone do not overlap. A schedule stored
	// before they were kept has neither: no key, limit 1.
	ConcurrencyKey   *string `json:"concurrency_key"`
	ConcurrencyLimit int32   `json:"concurrency_limit"`
	// RateLimits go on each tick's job (none in a schedule stored before
	// rate limits existed).
	RateLimits []string `json:"rate_limits,omitempty"`
}

// NewJob is the job of one tick, before Normalize.
func (sj ScheduleJob) NewJob() NewJob {
	return NewJob{
		Kind: sj.Kind, Queue: sj.Queue, Priority: sj.Priority, Payload: sj.Payload,
		MaxAttempts: sj.MaxAttempts, TimeoutMs: sj.TimeoutMs,
		BackoffBaseMs: sj.BackoffBaseMs, BackoffMaxMs: sj.BackoffMaxMs,
		ConcurrencyKey: sj.ConcurrencyKey, ConcurrencyLimit: &sj.ConcurrencyLimit,
		RateLimits: sj.RateLimits,
	}
}

// ScheduleJobOf checks nj with the rules of every submitted job and
// returns it as a schedule's job, defaults filled in. Errors name the
// field under "job.".
func ScheduleJobOf(nj NewJob) (ScheduleJob, error) {
	if nj.RunAt != nil {
		return ScheduleJob{}, invalid("job.run_at", "is set by each tick; a schedule's job takes none")
	}
	if nj.IdempotencyKey != nil {
		return ScheduleJob{}, invalid("job.idempotency_key", "is schedule:NAME:TICK for each tick; a schedule's job takes none")
	}
	if err := nj.Normalize(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return ScheduleJob{}, ve.under("job.")
		}
		return ScheduleJob{}, err
	}
	return ScheduleJob{
		Kind: nj.Kind, Queue: nj.Queue, Priority: nj.Priority, Payload: nj.Payload,
		MaxAttempts: nj.MaxAttempts, TimeoutMs: nj.TimeoutMs,
		BackoffBaseMs: nj.BackoffBaseMs, BackoffMaxMs: nj.BackoffMaxMs,
		ConcurrencyKey: nj.ConcurrencyKey, ConcurrencyLimit: *nj.ConcurrencyLimit,
		RateLimits: nj.RateLimits,
	}, nil
}

// NewSchedule is a schedule as created.
type NewSchedule struct {
	Name     string
	Cron     string
	Timezone string // "" is UTC
	Job      NewJob
	Paused   bool
}

// SchedulePatch changes a schedule; nil fields stay as they are.
type SchedulePatch struct {
	Paused   *bool
	Cron     *string
	Timezone *string
	Job      *NewJob
}

// ScheduleKey is the idempotency key of a schedule's job for one tick.
func ScheduleKey(name string, tick time.Time) string {
	return "schedule:" + name + ":" + tick.UTC().Format(time.RFC3339)
}

// ValidScheduleName reports whether name may name a schedule.
func ValidScheduleName(name string) bool { return namePattern.MatchString(name) }

// CreateSchedule checks ns and stores it; its first tick is the first
// after now. The active scheduler is woken.
func (c *Client) CreateSchedule(ctx context.Context, ns NewSchedule, now time.Time) (Schedule, error) {
	if !namePattern.MatchString(ns.Name) {
		return Schedule{}, invalid("name", "must match [a-z0-9_.-]{1,64}")
	}
	if ns.Timezone == "" {
		ns.Timezone = "UTC"
	}
	cron, err := ParseCron(ns.Cron, ns.Timezone)
	if err != nil {
		return Schedule{}, err
	}
	sj, err := ScheduleJobOf(ns.Job)
	if err != nil {
		return Schedule{}, err
	}
	job, err := json.Marshal(sj)
	if err != nil {
		return Schedule{}, fmt.Errorf("encoding schedule job: %w", err)
	}
	var next *time.Time
	if !ns.Paused {
		next = tickPtr(cron.Next(now))
	}
	var row db.Schedule
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		var err error
		row, err = q.ScheduleInsert(ctx, db.ScheduleInsertParams{
			Name: ns.Name, Cron: ns.Cron, Timezone: ns.Timezone, Job: job, Paused: ns.Paused, NextRunAt: next,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrScheduleExists
		}
		if err != nil {
			return fmt.Errorf("inserting schedule: %w", inputRefused(err, ""))
		}
		err = audit.Write(ctx, q, audit.Entry{Action: "schedule.create", Target: "schedule:" + ns.Name,
			Detail: map[string]any{"cron": ns.Cron, "timezone": ns.Timezone, "paused": ns.Paused, "job": json.RawMessage(job)}})
		if err != nil {
			return err
		}
		return notifySchedules(ctx, q, ns.Name)
	})
	if err != nil {
		return Schedule{}, err
	}
	return scheduleFromRow(row)
}

// Schedule reads one schedule.
func (c *Client) Schedule(ctx context.Context, name string) (Schedule, error) {
	row, err := c.q.ScheduleGet(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return Schedule{}, ErrScheduleNotFound
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("reading schedule: %w", err)
	}
	return scheduleFromRow(row)
}

// Schedules lists every schedule by name.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	rows, err := c.q.ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	out := make([]Schedule, 0, len(rows))
	for _, r := range rows {
		s, err := scheduleFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// UpdateSchedule applies p. A new cron or timezone, or a resume, makes the
// next tick the first after now: ticks missed while paused are not caught
// up. The active scheduler is woken.
func (c *Client) UpdateSchedule(ctx context.Context, name string, p SchedulePatch, now time.Time) (Schedule, error) {
	var row db.Schedule
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		cur, err := q.ScheduleGetForUpdate(ctx, name)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrScheduleNotFound
		}
		if err != nil {
			return fmt.Errorf("reading schedule: %w", err)
		}
		params := db.ScheduleUpdateParams{
			Name: name, Cron: cur.Cron, Timezone: cur.Timezone, Job: cur.Job, Paused: cur.Paused, NextRunAt: cur.NextRunAt,
		}
		recompute := false
		if p.Cron != nil {
			params.Cron, recompute = *p.Cron, true
		}
		if p.Timezone != nil {
			params.Timezone, recompute = *p.Timezone, true
			if params.Timezone == "" {
				params.Timezone = "UTC"
			}
		}
		cron, err := ParseCron(params.Cron, params.Timezone)
		if err != nil {
			return err
		}
		if p.Job != nil {
			sj, err := ScheduleJobOf(*p.Job)
			if err != nil {
				return err
			}
			if params.Job, err = json.Marshal(sj); err != nil {
				return fmt.Errorf("encoding schedule job: %w", err)
			}
		}
		if p.Paused != nil {
			recompute = recompute || params.Paused != *p.Paused
			params.Paused = *p.Paused
		}
		switch {
		case params.Paused:
			params.NextRunAt = nil
		case recompute || params.NextRunAt == nil:
			params.NextRunAt = tickPtr(cron.Next(now))
		}
		if row, err = q.ScheduleUpdate(ctx, params); err != nil {
			return fmt.Errorf("updating schedule: %w", inputRefused(err, ""))
		}
		err = audit.Write(ctx, q, audit.Entry{Action: "schedule.update", Target: "schedule:" + name,
			Detail: map[string]any{"cron": params.Cron, "timezone": params.Timezone, "paused": params.Paused, "job": json.RawMessage(params.Job)}})
		if err != nil {
			return err
		}
		return notifySchedules(ctx, q, name)
	})
	if err != nil {
		return Schedule{}, err
	}
	return scheduleFromRow(row)
}

// DeleteSchedule removes a schedule; the jobs it made stay.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		n, err := q.ScheduleDelete(ctx, name)
		if err != nil {
			return fmt.Errorf("deleting schedule: %w", err)
		}
		if n == 0 {
			return ErrScheduleNotFound
		}
		if err := audit.Write(ctx, q, audit.Entry{Action: "schedule.delete", Target: "schedule:" + name}); err != nil {
			return err
		}
		return notifySchedules(ctx, q, name)
	})
}

func notifySchedules(ctx context.Context, q *db.Queries, name string) error {
	if err := q.ScheduleNotify(ctx, name); err != nil {
		return fmt.Errorf("waking the scheduler: %w", err)
	}
	return nil
}

func scheduleFromRow(r db.Schedule) (Schedule, error) {
	s := Schedule{
		Name: r.Name, Cron: r.Cron, Timezone: r.Timezone, Paused: r.Paused,
		NextRunAt: r.NextRunAt, LastRunAt: r.LastRunAt, LastJobID: r.LastJobID,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if err := json.Unmarshal(r.Job, &s.Job); err != nil {
		return Schedule{}, fmt.Errorf("decoding the job of schedule %s: %w", r.Name, err)
	}
	s.Job.ConcurrencyLimit = max(s.Job.ConcurrencyLimit, 1)
	return s, nil
}
