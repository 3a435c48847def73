package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// reaperLockKey is the advisory lock that makes one reaper active across
// every server and worker process of a database ("LEASEHOL").
const reaperLockKey = 0x4c45415345484f4c

// reapBatch bounds one reclaim statement; more are run until none is left.
const reapBatch = 1000

// reaperMaxSleep bounds the reaper's wait between two looks at the
// deadlines. A new lease that ends after it cannot be missed, so only
// claims with a shorter lease wake the reaper (see Client.Claim); and a
// frozen reaper's idle session is ended by idle_session_timeout, so its
// lock passes on.
const reaperMaxSleep = time.Second

// Reaped is one job taken back from an expired lease.
type Reaped struct {
	JobID      int64
	Queue      string
	State      State // pending, dead or cancelled
	LeaseUntil time.Time
	ReapedAt   time.Time
}

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	Logger *slog.Logger
	// OnReap is called for every reclaimed job (metrics).
	OnReap func(Reaped)
	// Slack is added to each deadline so that the database clock has
	// surely passed it when the reaper wakes. Default 1ms.
	Slack time.Duration
}

// Reaper takes back expired leases within milliseconds of their deadline,
// and announces scheduled jobs (retries after their backoff) when they
// fall due.
// Every server and direct worker runs one; an advisory lock keeps one
// active and the others on standby, so reclaiming goes on as long as any
// of them lives. The active one sleeps until the earliest lease deadline
// or the next scheduled job (by the database clock), at most
// reaperMaxSleep, and is woken early by LISTEN when a lease shorter than
// that is made or a retry is scheduled.
type Reaper struct {
	pool   *pgxpool.Pool
	client *Client
	cfg    ReaperConfig
	active atomic.Bool
}

// NewReaper returns a Reaper for pool's database.
func NewReaper(pool *pgxpool.Pool, cfg ReaperConfig) *Reaper {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Slack <= 0 {
		cfg.Slack = time.Millisecond
	}
	return &Reaper{pool: pool, client: NewClient(pool, cfg.Logger), cfg: cfg}
}

// Active reports whether this reaper holds the lock now.
func (r *Reaper) Active() bool { return r.active.Load() }

// Run reaps until ctx ends, reconnecting with backoff after errors.
func (r *Reaper) Run(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for {
		err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		r.cfg.Logger.Warn("reaper session ended", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// session holds one dedicated connection: wait for the lock, then reap.
func (r *Reaper) session(ctx context.Context) error {
	cfg := r.pool.Config().ConnConfig.Copy()
	// A reaper that freezes (SIGSTOP, a hung VM) would keep the lock while
	// reaping nothing; the server ends its idle session and the lock
	// passes to a standby.
	cfg.RuntimeParams["idle_session_timeout"] = fmt.Sprint((5 * reaperMaxSleep).Milliseconds())
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connecting reaper: %w", err)
	}
	defer conn.Close(context.Background())
	q := db.New(conn)
	if err := q.ReaperLock(ctx, reaperLockKey); err != nil {
		return fmt.Errorf("taking reaper lock: %w", err)
	}
	r.active.Store(true)
	defer r.active.Store(false)
	r.cfg.Logger.Info("reaper active")
	if err := q.ListenReaper(ctx); err != nil {
		return fmt.Errorf("listening for wake-ups: %w", err)
	}
	for {
		if err := r.reapAll(ctx, q); err != nil {
			return err
		}
		next, err := q.JobNextDeadline(ctx)
		if err != nil {
			return fmt.Errorf("reading next deadline: %w", err)
		}
		wait := min(reaperMaxSleep, untilMs(next.LeaseWaitMs)+r.cfg.Slack)
		// A retry whose backoff ends, or a job scheduled for later, is
		// announced the moment it is due rather than at the workers' next
		// poll.
		due := untilMs(next.DueWaitMs) + r.cfg.Slack
		wakeForDue := due < wait
		wait = min(wait, due)
		// A past deadline whose row another transaction holds was skipped;
		// look again shortly rather than spin.
		wait = max(wait, time.Millisecond)
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, err = conn.WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			if wakeForDue {
				if err := q.JobNotify(ctx, ""); err != nil {
					return fmt.Errorf("announcing due jobs: %w", err)
				}
			}
		case err != nil:
			return fmt.Errorf("waiting for wake-ups: %w", err)
		}
	}
}

// untilMs turns a wait the database computed into a duration; +Inf (no
// deadline) becomes the longest sleep.
func untilMs(ms float64) time.Duration {
	if math.IsInf(ms, 1) || ms > float64(reaperMaxSleep/time.Millisecond) {
		return reaperMaxSleep
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func (r *Reaper) reapAll(ctx context.Context, q *db.Queries) error {
	for {
		rows, err := q.JobReapExpired(ctx, reapBatch)
		if err != nil {
			return fmt.Errorf("reaping expired leases: %w", err)
		}
		queues := map[string]bool{}
		for _, row := range rows {
			rp := Reaped{JobID: row.ID, Queue: row.Queue, State: State(row.State), ReapedAt: row.ReapedAt}
			if row.LeaseUntil != nil {
				rp.LeaseUntil = *row.LeaseUntil
			}
			r.cfg.Logger.Info("reclaimed expired lease", "job_id", rp.JobID, "next_state", rp.State,
				"past_deadline", rp.ReapedAt.Sub(rp.LeaseUntil))
			if r.cfg.OnReap != nil {
				r.cfg.OnReap(rp)
			}
			if rp.State == StatePending {
				queues[rp.Queue] = true
			}
		}
		if len(queues) > 0 {
			if err := q.JobNotify(ctx, strings.Join(mapKeys(queues), ",")); err != nil {
				return fmt.Errorf("waking workers: %w", err)
			}
		}
		if len(rows) < reapBatch {
			return nil
		}
	}
}
