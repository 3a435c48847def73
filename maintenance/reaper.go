package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
)

// reapBatch bounds one reclaim statement; more are run until none is left.
const reapBatch = 1000

// reaperMaxSleep bounds the active reaper's sleep; claims of shorter
// leases wake it (see queue.ReaperMaxSleep).
const reaperMaxSleep = queue.ReaperMaxSleep

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	Logger *slog.Logger
	// OnReap is called for every reclaimed job (metrics).
	OnReap func(queue.Reaped)
	// Slack is added to each deadline so that the database clock has
	// surely passed it when the reaper wakes. Default 1ms.
	Slack time.Duration
	// Wakes, when set, is where the process's one listening session
	// (queue.JobNotifier.ReaperWakes) hands the reaper its wake-ups;
	// unset, the active reaper listens on a session of its own.
	Wakes *queue.ReaperWakes
	// Worker is the id of the direct worker this reaper runs in: its lock
	// session is named after it (queue.PresenceSessionName), so that while
	// the session is open the active reaper records the worker alive and
	// the worker need not write its own presence (see SessionOpen).
	Worker string
	// PresenceEvery is how often the active reaper records direct
	// workers alive by their sessions (default
	// queue.SessionPresenceEvery).
	PresenceEvery time.Duration
}

// Reaper takes back expired leases within milliseconds of their deadline,
// and announces scheduled jobs (retries after their backoff) when they
// fall due.
// Every server and direct worker runs one; one of them is active (the
// "reaper" leader role, see lead) and the others wait on standby without
// holding a snapshot, so reclaiming goes on as long as any of them lives.
// The active one sleeps until the earliest lease deadline or the next
// scheduled job, by the database clock, and is woken by LISTEN when a claim
// makes a lease that ends sooner, or a retry is scheduled.
type Reaper struct {
	leader
	client *queue.Client
	cfg    ReaperConfig
}

// NewReaper returns a Reaper for pool's database.
func NewReaper(pool *pgxpool.Pool, cfg ReaperConfig) *Reaper {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Slack <= 0 {
		cfg.Slack = time.Millisecond
	}
	if cfg.PresenceEvery <= 0 {
		cfg.PresenceEvery = queue.SessionPresenceEvery
	}
	var session string
	if cfg.Worker != "" {
		session = queue.PresenceSessionName(cfg.Worker)
	}
	return &Reaper{
		leader: leader{role: "reaper", pool: pool, logger: cfg.Logger, session: session},
		client: queue.NewClient(pool, cfg.Logger), cfg: cfg,
	}
}

// Run reaps while it holds the reaper role, until ctx ends, taking the
// role again after errors.
func (r *Reaper) Run(ctx context.Context) error { return r.run(ctx, r.reap) }

// SessionOpen reports whether this reaper's lock session is open, on
// standby or active: while it is, and cfg.Worker names the worker, the
// active reaper (of whichever process) records that worker alive.
func (r *Reaper) SessionOpen() bool { return r.open.Load() }

// reap is the active reaper: it hears its wake-ups from cfg.Wakes, or on
// a listening connection of its own, and runs its statements on the pool.
func (r *Reaper) reap(ctx context.Context) error {
	sleep := func(ctx context.Context, until time.Time) (bool, error) { return r.cfg.Wakes.Sleep(ctx, until) }
	if r.cfg.Wakes == nil {
		conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
		if err != nil {
			return fmt.Errorf("connecting reaper listener: %w", err)
		}
		defer conn.Close(context.Background())
		if err := db.New(conn).ListenReaper(ctx); err != nil {
			return fmt.Errorf("listening for wake-ups: %w", err)
		}
		sleep = func(ctx context.Context, until time.Time) (bool, error) { return r.sleep(ctx, conn, until) }
	}
	r.cfg.Logger.Info("reaper active")
	// Direct workers' presence goes on beside the reaping, on its own
	// clock, so that it never wakes the reaping loop (a wake-up is two
	// statements).
	pctx, stopPresence := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.recordSessions(pctx) })
	defer wg.Wait()
	defer stopPresence()
	// Each look announces the scheduled jobs that fell due since the one
	// before (queue.NextDeadlines); the first, those that fell due while
	// no reaper was active.
	var since *time.Time
	for {
		if err := r.reapAll(ctx); err != nil {
			return err
		}
		next, err := r.client.NextDeadlines(ctx, since)
		if err != nil {
			return err
		}
		since = &next.Checked
		if next.Announced {
			r.cfg.Logger.Debug("announced scheduled jobs that fell due")
		}
		// Awake when the next lease ends or the next scheduled job is
		// due, so that it is announced the moment it is, rather than at
		// the workers' next poll.
		wait := min(min(next.Lease, next.Due, reaperMaxSleep)+r.cfg.Slack, reaperMaxSleep)
		// A past deadline whose row another transaction holds was skipped;
		// look again shortly rather than spin.
		wait = max(wait, time.Millisecond)
		if _, err := sleep(ctx, time.Now().Add(wait)); err != nil {
			return err
		}
	}
}

// sleep waits until until for a notification on conn that asks the reaper
// to look again sooner. A claim's notification carries how soon its
// earliest new lease can end (ms); one that ends after the planned
// wake-up changes nothing and is ignored. woke reports a wake-up before
// until.
func (r *Reaper) sleep(ctx context.Context, conn *pgx.Conn, until time.Time) (woke bool, err error) {
	for {
		wctx, cancel := context.WithDeadline(ctx, until)
		msg, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("waiting for wake-ups: %w", err)
		}
		ms, perr := strconv.ParseFloat(msg.Payload, 64)
		if perr != nil || time.Now().Add(time.Duration(ms*float64(time.Millisecond))).Before(until) {
			return true, nil
		}
	}
}

// recordSessions records direct workers alive by their open lock
// sessions every cfg.PresenceEvery until ctx ends: one statement for the
// whole direct fleet. A failure is logged and the next tick tries again.
func (r *Reaper) recordSessions(ctx context.Context) {
	tick := time.NewTicker(r.cfg.PresenceEvery)
	defer tick.Stop()
	for {
		if _, err := r.client.WorkersSeenBySession(ctx); err != nil && ctx.Err() == nil {
			level := slog.LevelWarn
			if queue.Unavailable(err) {
				level = slog.LevelDebug // the reaping loop says so already
			}
			r.cfg.Logger.Log(ctx, level, "recording direct workers' presence", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r *Reaper) reapAll(ctx context.Context) error {
	for {
		reaped, err := r.client.ReapExpired(ctx, reapBatch)
		for _, rp := range reaped {
			msg := "reclaimed expired lease"
			if rp.NotDelivered {
				msg = "hand-over never confirmed: not delivered, not counted"
			}
			r.cfg.Logger.Info(msg, "job_id", rp.JobID, "next_state", rp.State, "past_deadline", rp.ReapedAt.Sub(rp.LeaseUntil))
			if r.cfg.OnReap != nil {
				r.cfg.OnReap(rp)
			}
		}
		if err != nil {
			return err
		}
		if len(reaped) < reapBatch {
			return nil
		}
	}
}
