package maintenance

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A role that exactly one process of a database plays at a time (the
// reaper, the pruner, the scheduler, the webhook sender) is a session-level advisory lock, held on a connection of
// its own.
//
// Nobody waits for that lock inside a statement: a statement that waits
// holds a snapshot (backend_xmin) the whole time, and for as long as a
// standby waits nothing anywhere in the database could be pruned or
// vacuumed. (LOCK TABLE is no way out: its name lookup holds a catalog
// snapshot while it waits.) Instead each lock connection keeps one
// transaction open that never gets a transaction id, and runs one short
// statement at a time in it: a standby tries the lock every
// leaderStandbyPoll, the holder sends a keep-alive every leaderKeepAlive.
// Between those statements the connection holds no snapshot, and since
// nothing commits, an idle standby or holder adds no transactions to the
// database either.
//
// A holder that dies loses the lock with its connection, and a standby
// takes over within leaderStandbyPoll. A holder that freezes (SIGSTOP, a
// hung VM) stops its keep-alives; the server ends its idle transaction
// after leaderIdleTimeout, and the lock passes on.
const (
	leaderIdleTimeout = 5 * time.Second
	leaderKeepAlive   = leaderIdleTimeout / 3
	leaderStandbyPoll = 250 * time.Millisecond
)

// errLeadershipLost means the holder's lock connection failed: another
// process may hold the role now.
var errLeadershipLost = errors.New("leadership lost")

// leaderKey is the advisory lock of a role, the same in every process.
func leaderKey(role string) int64 {
	h := fnv.New64a()
	h.Write([]byte("leasehold:" + role))
	return int64(h.Sum64())
}

// leader plays one role: a service embeds it for its Role and Active.
type leader struct {
	role   string
	pool   *pgxpool.Pool
	logger *slog.Logger
	active atomic.Bool
}

// Role is the leader role the service plays.
func (l *leader) Role() string { return l.role }

// Active reports whether this process holds the role now.
func (l *leader) Active() bool { return l.active.Load() }

// run plays the role until ctx ends: it waits for the role, runs fn while
// the role is held, and takes the role again after errors, with backoff.
func (l *leader) run(ctx context.Context, fn func(context.Context) error) error {
	delay := 100 * time.Millisecond
	for {
		err := lead(ctx, l.pool, l.role, func(ctx context.Context) error {
			// Active from the moment the role is held: the hand-over is done.
			l.active.Store(true)
			defer l.active.Store(false)
			return fn(ctx)
		})
		if ctx.Err() != nil {
			return nil
		}
		l.logger.Warn(l.role+" session ended", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// lead waits until this process holds role, then runs fn with a context
// that ends when ctx ends or the role is lost. It returns when fn returns
// or the role is lost.
func lead(ctx context.Context, pool *pgxpool.Pool, role string, fn func(context.Context) error) error {
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(leaderIdleTimeout.Milliseconds())
	// Each statement takes its own short snapshot, whatever the
	// database's default isolation.
	cfg.RuntimeParams["default_transaction_isolation"] = "read committed"
	// The extended protocol leaves a finished statement's portal, and with
	// it its snapshot, open until the next one: the simple protocol
	// releases both when the statement ends.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.RuntimeParams["client_encoding"] = "UTF8" // pgx's simple protocol needs it
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connecting for the %s role: %w", role, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("beginning the %s role's transaction: %w", role, err)
	}
	key := leaderKey(role)
	for {
		var held bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&held); err != nil {
			return fmt.Errorf("trying the %s lock: %w", role, err)
		}
		if held {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(leaderStandbyPoll):
		}
	}

	work, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- fn(work) }()
	tick := time.NewTicker(leaderKeepAlive)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
				stop()
				<-done
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("%w: %s: %v", errLeadershipLost, role, err)
			}
		}
	}
}
