package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// schedulerMaxSleep bounds the active scheduler's sleep, so that a clock
// stepped by NTP, or a notification lost with its connection, costs at
// most this much delay; an idle scheduler costs one read per this.
const schedulerMaxSleep = 15 * time.Minute

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	Logger *slog.Logger
	// Now is the clock ticks are measured by (default time.Now); tests
	// pass their own.
	Now func() time.Time
	// OnFire is called for every tick enqueued (metrics, tests).
	OnFire func(Fired)
}

// Fired is one tick of a schedule, enqueued as a job.
type Fired struct {
	Schedule string
	Tick     time.Time
	JobID    int64
	// Existed means the tick's job was there already (another scheduler
	// enqueued it, or this one before a crash).
	Existed bool
}

// Scheduler enqueues the jobs of schedules. Every server runs one; one is
// active (the "scheduler" leader role, see lead), the others wait on
// standby without holding a snapshot. The active one sleeps until the
// next tick of any schedule and is woken by LISTEN when a schedule is
// created, changed or deleted. A tick's job has the idempotency key
// schedule:NAME:TICK, so two schedulers (a frozen holder and its
// successor) still make one job per tick; ticks missed while no scheduler
// ran make one job, for the latest of them.
type Scheduler struct {
	pool   *pgxpool.Pool
	client *Client
	q      *db.Queries
	cfg    SchedulerConfig
	active atomic.Bool
}

// NewScheduler returns a Scheduler for pool's database.
func NewScheduler(pool *pgxpool.Pool, cfg SchedulerConfig) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{pool: pool, client: NewClient(pool, cfg.Logger), q: db.New(pool), cfg: cfg}
}

// Active reports whether this scheduler holds the role now.
func (s *Scheduler) Active() bool { return s.active.Load() }

// Run schedules while it holds the scheduler role, until ctx ends, taking
// the role again after errors.
func (s *Scheduler) Run(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for {
		err := lead(ctx, s.pool, "scheduler", s.lead)
		if ctx.Err() != nil {
			return nil
		}
		s.cfg.Logger.Warn("scheduler session ended", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// lead is the active scheduler: it listens on a connection of its own,
// like the active reaper, and runs its statements on the pool.
func (s *Scheduler) lead(ctx context.Context) error {
	s.active.Store(true)
	defer s.active.Store(false)
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting scheduler listener: %w", err)
	}
	defer conn.Close(context.Background())
	if err := db.New(conn).ListenSchedules(ctx); err != nil {
		return fmt.Errorf("listening for schedule changes: %w", err)
	}
	s.cfg.Logger.Info("scheduler active")
	for {
		next, err := s.RunDue(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		wait := schedulerMaxSleep
		if !next.IsZero() {
			wait = min(max(next.Sub(s.cfg.Now()), 0), schedulerMaxSleep)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, err = conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
		case err != nil:
			return fmt.Errorf("waiting for schedule changes: %w", err)
		}
	}
}

// RunDue enqueues the job of every schedule whose next tick has come by
// the scheduler's clock: one job per schedule, for the latest tick due
// (the one catch-up after a downtime). It returns the earliest next tick
// of any schedule, or the zero time when none is due ever (none, or all
// paused).
func (s *Scheduler) RunDue(ctx context.Context) (time.Time, error) {
	rows, err := s.q.ScheduleList(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading schedules: %w", err)
	}
	now := s.cfg.Now()
	var earliest time.Time
	for _, r := range rows {
		if r.Paused || r.NextRunAt == nil {
			continue
		}
		next := *r.NextRunAt
		if !next.After(now) {
			if next, err = s.fire(ctx, r, now); err != nil {
				return time.Time{}, err
			}
		}
		if !next.IsZero() && (earliest.IsZero() || next.Before(earliest)) {
			earliest = next
		}
	}
	return earliest, nil
}

// fire enqueues the latest due tick of r and returns its next tick (the
// zero time when there is none, or when the schedule changed meanwhile and
// the caller's next pass reads it again: it was notified).
func (s *Scheduler) fire(ctx context.Context, r db.Schedule, now time.Time) (time.Time, error) {
	log := s.cfg.Logger.With("schedule", r.Name)
	sched, err := scheduleFromRow(r)
	if err != nil {
		log.Error("skipping schedule", "err", err)
		return time.Time{}, nil
	}
	cron, err := ParseCron(r.Cron, r.Timezone)
	if err != nil {
		log.Error("skipping schedule with an invalid cron", "cron", r.Cron, "timezone", r.Timezone, "err", err)
		return time.Time{}, nil
	}
	tick, ok := cron.Prev(r.NextRunAt.Add(-time.Nanosecond), now)
	if !ok { // next_run_at is no tick of the cron (edited by hand)
		tick = *r.NextRunAt
	}
	nj := sched.Job.NewJob()
	nj.IdempotencyKey = ptr(ScheduleKey(r.Name, tick))
	nj.Schedule = &r.Name
	job, existed, err := s.client.Insert(ctx, nj)
	switch {
	case errors.Is(err, ErrIdempotencyConflict):
		// The tick's job exists with other contents: the schedule's job
		// changed after it was enqueued. It is the tick's job all the same.
		log.Warn("the tick's job exists with other contents", "tick", tick, "job_id", job.ID)
	case err != nil:
		var ve *ValidationError
		if errors.As(err, &ve) {
			log.Error("skipping a tick whose job is invalid", "tick", tick, "err", err)
			return s.advance(ctx, r, tick, nil, cron.Next(now))
		}
		return time.Time{}, fmt.Errorf("enqueuing schedule %s: %w", r.Name, err)
	}
	log.Info("schedule fired", "tick", tick.Format(time.RFC3339), "job_id", job.ID, "existed", existed)
	if s.cfg.OnFire != nil {
		s.cfg.OnFire(Fired{Schedule: r.Name, Tick: tick, JobID: job.ID, Existed: existed})
	}
	return s.advance(ctx, r, tick, &job.ID, cron.Next(now))
}

func (s *Scheduler) advance(ctx context.Context, r db.Schedule, tick time.Time, jobID *int64, next time.Time) (time.Time, error) {
	n, err := s.q.ScheduleFired(ctx, db.ScheduleFiredParams{
		Name: r.Name, Expected: r.NextRunAt, Tick: &tick, JobID: jobID, NextRunAt: tickPtr(next),
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("recording schedule %s: %w", r.Name, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return next, nil
}

// tickPtr is a tick to store: none when the cron has no more.
func tickPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
