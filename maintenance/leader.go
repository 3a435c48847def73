package maintenance

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/queue"
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
// statement at a time in it: up to 10 standbys together try the lock
// about once every leaderStandbyPoll, more each every 2.5 s (standbyTry,
// standbyWait), and the holder sends a keep-alive every leaderKeepAlive. Between those
// statements the connection holds no snapshot, and since nothing
// commits, an idle standby or holder adds no transactions to the
// database either.
//
// A holder that dies loses the lock with its connection, and a standby
// takes over after about leaderStandbyPoll. A holder that freezes (SIGSTOP, a
// hung VM) stops its keep-alives; the server ends its idle transaction
// after leaderIdleTimeout, and the lock passes on.
const (
	leaderIdleTimeout = 5 * time.Second
	leaderKeepAlive   = leaderIdleTimeout / 3
	leaderStandbyPoll = 250 * time.Millisecond
)

// standbyTry is a standby's one statement for the lock of key: it tries
// the lock, and counts the database's other standbys of the same role,
// the sessions idle in their transaction whose last statement was this
// one (it begins with a comment naming the role's key, so that
// pg_stat_activity tells them apart). A transaction reads
// pg_stat_activity once and keeps what it read until it ends, and this
// session's never does: the statement drops what it read
// (pg_stat_clear_snapshot), so that the next one reads afresh. A
// session of another database user shows no statement text to a user
// without pg_read_all_stats and is not counted: such a standby only
// polls more often.
//
// The count sets how often each standby tries (standbyWait): every
// standby trying every leaderStandbyPoll made 100 direct workers send 400
// statements a second to an idle database, 4,000 for 1,000 workers.
func standbyTry(key int64) string {
	mark := fmt.Sprintf("/* leasehold standby %d */", key)
	return fmt.Sprintf(`%s SELECT pg_try_advisory_lock(%d),
	(SELECT count(*)::int FROM pg_stat_activity
	 WHERE datname = current_database() AND pid <> pg_backend_pid()
	   AND state = 'idle in transaction' AND query LIKE '%s%%'),
	pg_stat_clear_snapshot()`, mark, key, mark)
}

// standbyWait is how long one of n standbys waits before it tries the
// lock again: leaderStandbyPoll × n, at most standbyMaxWait, at a random
// point between half and one and a half of that. Up to 10 standbys
// together try about once per leaderStandbyPoll whatever their number,
// at random moments; after the holder's end the first try of any of
// them comes after about leaderStandbyPoll × n/(n+1) on average, below
// leaderStandbyPoll as when each tried every leaderStandbyPoll (one
// standby alone: 375 ms at most).
func standbyWait(n int) time.Duration {
	return time.Duration(float64(min(leaderStandbyPoll*time.Duration(max(n, 1)), standbyMaxWait)) * (0.5 + rand.Float64()))
}

// standbyMaxWait bounds a standby's mean wait: its session must send a
// statement within leaderIdleTimeout (at most 1.5 × standbyMaxWait apart,
// with room for a late timer), or the server ends it. That is what makes
// a frozen process (SIGSTOP) lose its sessions, and a frozen direct
// worker drop out of the online window (queue.WorkersSeenBySession).
// Beyond 10 standbys each tries every 2.5 s on average: 100 direct
// workers' standbys try 40 times a second together (each every 250 ms:
// 400).
const standbyMaxWait = leaderIdleTimeout / 2

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
	// session, when set, is the lock session's application_name (else
	// the pool's); open is whether that session is connected and in its
	// transaction, on standby or holding the role.
	session string
	open    atomic.Bool
}

// Role is the leader role the service plays.
func (l *leader) Role() string { return l.role }

// Active reports whether this process holds the role now.
func (l *leader) Active() bool { return l.active.Load() }

// Reconnecting: a database that comes back (a restart, a promoted
// standby) must find every role played again within a second, so the
// retries of a role's session never wait more than leaderRetryMax. A
// role's work that fails because the database is unavailable for now
// (queue.Unavailable) is retried on the same lock session, as soon:
// after an outage the pool still holds connections that died with the
// old server, and each fails once; ending the session for it handed the
// role to another process a second time, seconds after the first.
const (
	leaderRetryMin = 25 * time.Millisecond
	leaderRetryMax = 250 * time.Millisecond
)

// run plays the role until ctx ends: it waits for the role, runs fn while
// the role is held, and takes the role again after errors, with backoff.
func (l *leader) run(ctx context.Context, fn func(context.Context) error) error {
	retry := backoff{}
	for {
		held := false
		err := lead(ctx, l.pool, l.role, l.session, &l.open, func(ctx context.Context) error {
			// Active from the moment the role is held: the hand-over is done.
			held = true
			l.active.Store(true)
			defer l.active.Store(false)
			return l.work(ctx, fn)
		})
		if ctx.Err() != nil {
			return nil
		}
		if held {
			retry = backoff{} // a session that played the role starts afresh
		}
		delay := retry.next()
		l.logger.Warn(l.role+" session ended", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// work runs fn while the role is held, again after each error that heals
// (queue.Unavailable); any other error ends the session.
func (l *leader) work(ctx context.Context, fn func(context.Context) error) error {
	retry := backoff{}
	for {
		err := fn(ctx)
		if ctx.Err() != nil || !queue.Unavailable(err) {
			return err
		}
		delay := retry.next()
		l.logger.Warn(l.role+" failed, database unavailable", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// backoff doubles from leaderRetryMin to leaderRetryMax.
type backoff struct{ delay time.Duration }

func (b *backoff) next() time.Duration {
	b.delay = min(max(2*b.delay, leaderRetryMin), leaderRetryMax)
	return b.delay
}

// lead waits until this process holds role, then runs fn with a context
// that ends when ctx ends or the role is lost. It returns when fn returns
// or the role is lost. The lock session is named appName (the pool's name
// when empty), and open is true while it is in its transaction.
func lead(ctx context.Context, pool *pgxpool.Pool, role, appName string, open *atomic.Bool, fn func(context.Context) error) error {
	cfg := pool.Config().ConnConfig.Copy()
	if appName != "" {
		cfg.RuntimeParams["application_name"] = appName
	}
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
	open.Store(true)
	defer open.Store(false)
	try := standbyTry(leaderKey(role))
	for {
		var held bool
		var others int
		tctx, cancel := context.WithTimeout(ctx, leaderIdleTimeout)
		err := conn.QueryRow(tctx, try).Scan(&held, &others, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("trying the %s lock: %w", role, err)
		}
		if held {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(standbyWait(1 + others)):
		}
	}
	// A keep-alive at once: until its next statement, the session would
	// still look like a standby to the others' count.
	kctx, cancel := context.WithTimeout(ctx, leaderIdleTimeout)
	_, err = conn.Exec(kctx, "SELECT 1")
	cancel()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errLeadershipLost, role, err)
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
			// A server that does not answer within leaderIdleTimeout has
			// ended this session's transaction, and with it the lock, by
			// the time it answers (or is frozen): give the role up.
			kctx, cancel := context.WithTimeout(ctx, leaderIdleTimeout)
			_, err := conn.Exec(kctx, "SELECT 1")
			cancel()
			if err != nil {
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
