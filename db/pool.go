package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolConfig says how to reach the database.
type PoolConfig struct {
	URL string
	// AppName becomes application_name, so that each program's
	// connections can be told apart in pg_stat_activity.
	AppName  string
	MaxConns int32
	Logger   *slog.Logger
	// CustomPlans makes PostgreSQL plan every execution with its actual
	// parameters. The dashboard's and the API's lists filter optionally
	// ("@state IS NULL OR state = @state"); a cached generic plan cannot
	// use the index of the filter given and scans the whole table. The
	// statements stay prepared: only planning is repeated.
	CustomPlans bool
	// ConnectTimeout bounds each connection attempt to each host of the
	// URL (default DefaultConnectTimeout); a connect_timeout in the URL
	// wins.
	ConnectTimeout time.Duration
	// StatementTimeout is the server-side statement_timeout of every
	// connection (default DefaultStatementTimeout; negative: none); a
	// statement_timeout in the URL wins. It cannot bound a server that is
	// frozen: callers bound their contexts as well.
	StatementTimeout time.Duration
	// NoWait returns the pool without waiting for the database to answer:
	// a read replica that is down must not hold up the server's start
	// (its reads go to the primary until it answers).
	NoWait bool
}

// Defaults of PoolConfig.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultStatementTimeout = 30 * time.Second
)

// Open returns a pool once the target database answers SELECT 1. A server
// that accepts connections is not yet a usable database (it may still be
// starting, or the database may not exist yet), so it retries with
// exponential backoff until ctx ends. It gives up at once on what waiting
// cannot heal: a role that does not exist or a refused password.
func Open(ctx context.Context, cfg PoolConfig) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if cfg.AppName != "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = cfg.AppName
	}
	if cfg.CustomPlans {
		pcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, DefaultConnectTimeout)
	}
	if _, set := pcfg.ConnConfig.RuntimeParams["statement_timeout"]; !set && cfg.StatementTimeout >= 0 {
		pcfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(cmp.Or(cfg.StatementTimeout, DefaultStatementTimeout).Milliseconds())
	}
	// PostgreSQL compiles a statement to machine code (JIT) once its
	// plan's estimated cost passes jit_above_cost, as the queue list's
	// estimates do at a million jobs: the compile took 25 ms of a 40 ms
	// /jobs/new (BenchmarkPagesAtScale) whose statement runs in a few.
	// Every statement here is short, so JIT is off unless the URL sets it.
	if _, set := pcfg.ConnConfig.RuntimeParams["jit"]; !set {
		pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	// pgxpool pings a connection idle for over a second before handing it
	// out, and PostgreSQL counts each ping as a transaction: an idle server
	// and worker made more pings than statements. A connection broken
	// while idle still fails its first query, which every caller retries.
	//
	// After an outage (a restart, a failover) every idle connection is
	// dead, and each would fail one request. So once a statement has lost
	// its connection, every connection idle since before that is pinged
	// before it is handed out: a dead one fails its ping, not a request,
	// and the pool takes another.
	var lost atomic.Int64 // time.Time.UnixNano of the last connection lost
	if pcfg.ConnConfig.Tracer == nil {
		pcfg.ConnConfig.Tracer = lostTracer{lost: &lost}
	}
	pcfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		idleSince := time.Now().Add(-p.IdleDuration).UnixNano()
		return p.IdleDuration > time.Minute || idleSince <= lost.Load()
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("creating pool: %w", err)
	}
	if cfg.NoWait {
		return pool, nil
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := WaitReady(ctx, pool, logger); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// lostTracer records when a statement ended with its connection closed.
type lostTracer struct{ lost *atomic.Int64 }

func (lostTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (t lostTracer) TraceQueryEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err != nil && conn.IsClosed() {
		t.lost.Store(time.Now().UnixNano())
	}
}

// WaitReady blocks until SELECT 1 succeeds on the pool's database, ctx
// ends, or the server refuses the role or password.
func WaitReady(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	delay := 50 * time.Millisecond
	var answered error // the last attempt's error that ctx did not cut short
	for attempt := 1; ; attempt++ {
		_, err := New(pool).Ping(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// An attempt that ctx cut short says only that it was cut
			// short: name what the server answered before ("database
			// does not exist"), which is what the operator must fix.
			if answered != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
				err = answered
			}
			return fmt.Errorf("waiting for database: %w", errors.Join(ctx.Err(), err))
		}
		answered = err
		if reason := unrecoverable(err); reason != "" {
			return fmt.Errorf("%s: waiting will not help, fix the database URL or the server's roles: %w", reason, err)
		}
		logger.Warn("database not ready", "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for database: %w", errors.Join(ctx.Err(), err))
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// unrecoverable says why err cannot heal by waiting, or "" when it may: a
// database that does not exist yet (3D000) or a server that refuses
// connections while it starts are worth waiting for; a refused role or
// password stays refused.
func unrecoverable(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	switch pgErr.Code {
	case "28000": // invalid_authorization_specification, also "role … does not exist"
		return "the database refuses this role"
	case "28P01": // invalid_password
		return "the database refuses this password"
	}
	return ""
}
