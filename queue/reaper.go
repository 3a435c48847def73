package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// reapBatch bounds one reclaim statement; more are run until none is left.
const reapBatch = 1000

// reaperMaxSleep bounds the active reaper's sleep. A lease that ends
// later cannot be missed: the reaper wakes before its deadline and plans
// again. Claims of shorter leases, retries and scheduled jobs announce
// their deadlines by NOTIFY. So an idle reaper costs two statements per
// reaperMaxSleep, and the default 30 s lease is claimed without a
// notification.
const reaperMaxSleep = 30 * time.Second

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
// Every server and direct worker runs one; one of them is active (the
// "reaper" leader role, see lead) and the others wait on standby without
// holding a snapshot, so reclaiming goes on as long as any of them lives.
// The active one sleeps until the earliest lease deadline or the next
// scheduled job, by the database clock, and is woken by LISTEN when a claim
// makes a lease that ends sooner, or a retry is scheduled.
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

// session waits for the reaper role, then reaps until the role or its
// connections are lost.
func (r *Reaper) session(ctx context.Context) error {
	return lead(ctx, r.pool, "reaper", r.reap)
}

// reap is the active reaper: it holds a listening connection of its own
// and runs its statements on the pool.
func (r *Reaper) reap(ctx context.Context) error {
	// Active from the moment the role is held: the hand-over is done.
	r.active.Store(true)
	defer r.active.Store(false)
	conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting reaper listener: %w", err)
	}
	defer conn.Close(context.Background())
	if err := db.New(conn).ListenReaper(ctx); err != nil {
		return fmt.Errorf("listening for wake-ups: %w", err)
	}
	r.cfg.Logger.Info("reaper active")
	q := db.New(r.pool)
	for {
		if err := r.reapAll(ctx, q); err != nil {
			return err
		}
		next, err := q.JobNextDeadline(ctx)
		if err != nil {
			return fmt.Errorf("reading next deadline: %w", err)
		}
		wait := untilMs(next.LeaseWaitMs) + r.cfg.Slack
		// A retry whose backoff ends, or a job scheduled for later, is
		// announced the moment it is due rather than at the workers' next
		// poll.
		due := untilMs(next.DueWaitMs) + r.cfg.Slack
		wakeForDue := due < wait
		wait = min(wait, due, reaperMaxSleep)
		// A past deadline whose row another transaction holds was skipped;
		// look again shortly rather than spin.
		wait = max(wait, time.Millisecond)
		woke, err := r.sleep(ctx, conn, wait)
		if err != nil {
			return err
		}
		if !woke && wakeForDue {
			if err := q.JobNotify(ctx, ""); err != nil {
				return fmt.Errorf("announcing due jobs: %w", err)
			}
		}
	}
}

// sleep waits up to wait for a notification that asks the reaper to look
// again sooner. A claim's notification carries how soon its earliest new
// lease can end (ms); one that ends after the planned wake-up changes
// nothing and is ignored. woke reports a wake-up before wait ran out.
func (r *Reaper) sleep(ctx context.Context, conn *pgx.Conn, wait time.Duration) (woke bool, err error) {
	until := time.Now().Add(wait)
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
		rows, err := q.JobReapExpired(ctx, db.JobReapExpiredParams{Max: reapBatch})
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
			// A job back to pending is due soon; one that ended may have
			// freed room under a limit for the jobs waiting behind it.
			queues[rp.Queue] = true
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
