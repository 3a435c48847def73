package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/cron"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
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
	leader
	client *queue.Client
	cfg    SchedulerConfig
}

// NewScheduler returns a Scheduler for pool's database.
func NewScheduler(pool *pgxpool.Pool, cfg SchedulerConfig) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{
		leader: leader{role: "scheduler", pool: pool, logger: cfg.Logger},
		client: queue.NewClient(pool, cfg.Logger), cfg: cfg,
	}
}

// Run schedules while it holds the scheduler role, until ctx ends, taking
// the role again after errors.
func (s *Scheduler) Run(ctx context.Context) error { return s.run(ctx, s.lead) }

// lead is the active scheduler: it listens on a connection of its own,
// like the active reaper, and runs its statements on the pool.
func (s *Scheduler) lead(ctx context.Context) error {
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
	rows, err := s.client.ScheduleEntries(ctx)
	if err != nil {
		return time.Time{}, err
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
func (s *Scheduler) fire(ctx context.Context, r queue.ScheduleEntry, now time.Time) (time.Time, error) {
	log := s.cfg.Logger.With("schedule", r.Name)
	if r.Err != nil {
		log.Error("skipping schedule", "err", r.Err)
		return time.Time{}, nil
	}
	spec, err := cron.Parse(r.Cron, r.Timezone)
	if err != nil {
		log.Error("skipping schedule with an invalid cron", "cron", r.Cron, "timezone", r.Timezone, "err", err)
		return time.Time{}, nil
	}
	tick, ok := spec.Prev(r.NextRunAt.Add(-time.Nanosecond), now)
	if !ok { // next_run_at is no tick of the cron (edited by hand)
		tick = *r.NextRunAt
	}
	job, existed, err := s.client.EnqueueTick(ctx, r.Schedule, tick)
	switch {
	case errors.Is(err, queue.ErrIdempotencyConflict):
		// The tick's job exists with other contents: the schedule's job
		// changed after it was enqueued. It is the tick's job all the same.
		log.Warn("the tick's job exists with other contents", "tick", tick, "job_id", job.ID)
	case err != nil:
		var ve *queue.ValidationError
		if errors.As(err, &ve) {
			log.Error("skipping a tick whose job is invalid", "tick", tick, "err", err)
			return s.advance(ctx, r, tick, nil, spec.Next(now))
		}
		return time.Time{}, fmt.Errorf("enqueuing schedule %s: %w", r.Name, err)
	}
	log.Info("schedule fired", "tick", tick.Format(time.RFC3339), "job_id", job.ID, "existed", existed)
	if s.cfg.OnFire != nil {
		s.cfg.OnFire(Fired{Schedule: r.Name, Tick: tick, JobID: job.ID, Existed: existed})
	}
	return s.advance(ctx, r, tick, &job.ID, spec.Next(now))
}

func (s *Scheduler) advance(ctx context.Context, r queue.ScheduleEntry, tick time.Time, jobID *int64, next time.Time) (time.Time, error) {
	recorded, err := s.client.RecordTick(ctx, r.Schedule, tick, jobID, next)
	if err != nil || !recorded {
		return time.Time{}, err
	}
	return next, nil
}
