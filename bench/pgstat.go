package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// admin is a connection to the maintenance database named in
// DATABASE_URL. It creates and drops the benchmark databases and reads
// pg_stat_database from outside them, so that reading the figures adds
// nothing to them.
type admin struct {
	conn    *pgx.Conn
	baseURL string
}

func connectAdmin(ctx context.Context, baseURL string) (*admin, error) {
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", baseURL, err)
	}
	return &admin{conn: conn, baseURL: baseURL}, nil
}

// urlFor is DATABASE_URL with its database replaced by name.
func (a *admin) urlFor(name string) string {
	u, err := url.Parse(a.baseURL)
	if err != nil {
		panic(err) // pgx.Connect already parsed it
	}
	u.Path = "/" + name
	return u.String()
}

// freshDatabase drops name if it exists and creates it empty.
func (a *admin) freshDatabase(ctx context.Context, name string) error {
	if err := a.dropDatabase(ctx, name); err != nil {
		return err
	}
	if _, err := a.conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

func (a *admin) dropDatabase(ctx context.Context, name string) error {
	if _, err := a.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// dbStat is one reading of a database's cumulative counters and the
// cluster's WAL position.
type dbStat struct {
	commits  int64 // xact_commit
	writes   int64 // tup_inserted + tup_updated + tup_deleted
	touches  int64 // blks_hit + blks_read
	walBytes int64 // pg_current_wal_lsn() - 0/0
	lsn      string
	// pgCPU is the CPU time of the PostgreSQL server and every backend it
	// reaped, when this program can read its process (the server runs on
	// this machine, as this user or root); it covers the whole cluster.
	pgCPU time.Duration
}

func (s dbStat) sub(o dbStat) dbStat {
	return dbStat{commits: s.commits - o.commits, writes: s.writes - o.writes, touches: s.touches - o.touches,
		walBytes: s.walBytes - o.walBytes, lsn: o.lsn + ".." + s.lsn, pgCPU: s.pgCPU - o.pgCPU}
}

// settle waits until no backend is connected to name any more: a backend
// flushes its pending statistics when it exits, so from then on
// pg_stat_database holds everything done in that database.
func (a *admin) settle(ctx context.Context, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := a.conn.QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name).Scan(&n); err != nil {
			return fmt.Errorf("reading pg_stat_activity: %w", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d backends still connected to %s after 30s", n, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Autovacuum and other helpers flush on their own schedule; give
	// stragglers a moment.
	time.Sleep(200 * time.Millisecond)
	return nil
}

// read takes a fresh reading of name's counters.
func (a *admin) read(ctx context.Context, name string) (dbStat, error) {
	if _, err := a.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return dbStat{}, fmt.Errorf("clearing stats snapshot: %w", err)
	}
	var s dbStat
	err := a.conn.QueryRow(ctx, `
		SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, blks_hit + blks_read,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, pg_current_wal_lsn()::text
		FROM pg_stat_database WHERE datname = $1`, name).Scan(&s.commits, &s.writes, &s.touches, &s.walBytes, &s.lsn)
	if err != nil {
		return dbStat{}, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	s.pgCPU = a.serverCPU(ctx)
	return s, nil
}

// settledRead is settle followed by read.
func (a *admin) settledRead(ctx context.Context, name string) (dbStat, error) {
	if err := a.settle(ctx, name); err != nil {
		return dbStat{}, err
	}
	return a.read(ctx, name)
}

// prepare makes a just-filled database a fair starting point for both
// systems: tables vacuumed and analysed (autovacuum may be off), and, when
// the server preloads it, pg_stat_statements installed and reset.
func prepare(ctx context.Context, dbURL string, statements bool) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return fmt.Errorf("vacuuming: %w", err)
	}
	if !statements {
		return nil
	}
	return resetStatements(ctx, dbURL)
}

// resetStatements installs pg_stat_statements in the database at dbURL
// and forgets every statement seen so far.
func resetStatements(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return fmt.Errorf("installing pg_stat_statements (needs shared_preload_libraries): %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return fmt.Errorf("resetting pg_stat_statements: %w", err)
	}
	return nil
}

// statementReport prints what each statement run in name cost per job,
// heaviest first by buffer touches. Nested statements (trigger bodies)
// appear as well when pg_stat_statements.track = all; they are marked, and
// their cost is also inside the top-level statement that fired them.
func (a *admin) statementReport(ctx context.Context, dbURL string, per float64, unit string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
		SELECT toplevel, calls, rows, shared_blks_hit + shared_blks_read, wal_bytes::bigint, wal_records,
		       total_exec_time, regexp_replace(left(query, 4000), '\s+', ' ', 'g')
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%pg_stat_statements%'
		ORDER BY shared_blks_hit + shared_blks_read DESC`)
	if err != nil {
		return fmt.Errorf("reading pg_stat_statements: %w", err)
	}
	defer rows.Close()
	n := per
	fmt.Printf("\nper statement, per %s (%.0f); * = nested (inside a trigger or function)\n", unit, per)
	u := unit[:1]
	fmt.Printf("%-2s %8s %8s %9s %9s %9s %9s %9s  %s\n", "", "calls", "rows", "rows/call",
		"touches/"+u, "WAL B/"+u, "WALrec/"+u, "µs/"+u, "statement")
	for rows.Next() {
		var (
			top                        bool
			calls, nrows, touches, wal int64
			walRecords                 int64
			execMs                     float64
			query                      string
		)
		if err := rows.Scan(&top, &calls, &nrows, &touches, &wal, &walRecords, &execMs, &query); err != nil {
			return err
		}
		mark := ""
		if !top {
			mark = "*"
		}
		perCall := 0.0
		if calls > 0 {
			perCall = float64(nrows) / float64(calls)
		}
		fmt.Printf("%-2s %8d %8d %9.1f %9.2f %9.1f %9.2f %9.1f  %s\n", mark, calls, nrows, perCall,
			float64(touches)/n, float64(wal)/n, float64(walRecords)/n, execMs*1000/n, shorten(query, 160))
	}
	return rows.Err()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// serverCPU is the user+system time of the postmaster's process tree:
// its own, its live children's, and that of the children it reaped
// (backends that exited). Zero when the server's process is not readable.
func (a *admin) serverCPU(ctx context.Context) time.Duration {
	var dataDir string
	if err := a.conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		return 0
	}
	pidFile, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	if err != nil {
		return 0
	}
	total := procCPU(pid, true)
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, c := range strings.Fields(string(children)) {
		if cpid, err := strconv.Atoi(c); err == nil {
			total += procCPU(cpid, false)
		}
	}
	return total
}

// procCPU reads utime+stime (and, with reaped, cutime+cstime) of pid.
func procCPU(pid int, reaped bool) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 15 {
		return 0
	}
	ticks := int64(0)
	fields := []int{11, 12} // utime, stime (fields 14, 15 of stat)
	if reaped {
		fields = append(fields, 13, 14) // cutime, cstime
	}
	for _, k := range fields {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100
