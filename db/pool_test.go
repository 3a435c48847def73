package db_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/db/pgcluster"
)

// urlFor returns a postgres:// URL for database name as role user on the
// test server, built with net/url so that it is right whichever way the
// admin URL reaches that server: over TCP (TEST_DATABASE_URL) or over the
// private cluster's unix socket (a key=value string; the socket directory
// becomes the host query parameter).
func urlFor(t *testing.T, admin, user, name string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", Path: "/" + name}
	q := url.Values{"sslmode": {"disable"}}
	if strings.HasPrefix(cfg.Host, "/") {
		q.Set("host", cfg.Host)
		q.Set("port", strconv.Itoa(int(cfg.Port)))
	} else {
		u.Host = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	u.User = url.User(user)
	if cfg.Password != "" && user == cfg.User {
		u.User = url.UserPassword(user, cfg.Password)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func adminExec(t *testing.T, admin, sql string) error {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), sql)
	return err
}

// The field report's first run failed with `database "…" does not exist`
// right after pg_isready passed: the server answered, the database was not
// there yet. Open must wait for the database itself.
func TestOpenWaitsForTheTargetDatabase(t *testing.T) {
	t.Parallel()
	admin := dbtest.AdminURL(t)
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("lh_late_%d", time.Now().UnixNano())
	lateURL := urlFor(t, admin, cfg.User, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	created := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		if err := adminExec(t, admin, "CREATE DATABASE "+name); err != nil {
			t.Errorf("creating the database: %v", err)
		}
		created <- time.Now()
	}()
	t.Cleanup(func() {
		if err := adminExec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping the database: %v", err)
		}
	})

	pool, err := db.Open(ctx, db.PoolConfig{URL: lateURL, AppName: "leasehold-test"})
	if err != nil {
		t.Fatalf("Open gave up: %v", err)
	}
	defer pool.Close()
	opened := time.Now()
	if at := <-created; opened.Before(at) {
		t.Fatal("Open returned before the database existed")
	}
	var app, current string
	if err := pool.QueryRow(ctx, "SELECT current_setting('application_name'), current_database()").Scan(&app, &current); err != nil {
		t.Fatal(err)
	}
	if app != "leasehold-test" || current != name {
		t.Fatalf("application_name %q, database %q: want leasehold-test on %s", app, current, name)
	}

	// A database that never appears: Open keeps waiting (for the database,
	// not stopped by a malformed URL) until its context ends.
	neverURL := urlFor(t, admin, cfg.User, name+"_never")
	// 2 s, not less: under the race detector on a loaded CI (stop 30's)
	// the first attempt had not been answered after 300 ms, so there was
	// no 3D000 yet to report.
	short, cancelShort := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelShort()
	_, err = db.Open(short, db.PoolConfig{URL: neverURL})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open on a database that never appears: %v; want it to wait on 3D000 (database does not exist) until the deadline", err)
	}
}

// A role that does not exist will not appear by waiting: Open says so at
// once instead of retrying until its context ends.
func TestOpenFailsAtOnceOnAnUnknownRole(t *testing.T) {
	t.Parallel()
	admin := dbtest.AdminURL(t)
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("lh_nobody_%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	began := time.Now()
	_, err = db.Open(ctx, db.PoolConfig{URL: urlFor(t, admin, role, cfg.Database)})
	took := time.Since(began)
	if err == nil {
		t.Fatalf("Open succeeded as role %s, which does not exist", role)
	}
	if errors.Is(err, context.DeadlineExceeded) || took > 5*time.Second {
		t.Fatalf("Open took %v and ended with %v: it should fail at once on an unknown role", took, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28000" {
		t.Fatalf("error %v: want SQLSTATE 28000", err)
	}
	for _, want := range []string{role, "refuses this role"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// After the database restarts, the pool's idle connections are all dead:
// one statement may fail on one of them, and the rest are found dead by a
// ping before they are handed out, not by the requests that get them.
func TestPoolAfterRestartFailsOnce(t *testing.T) {
	t.Parallel()
	root, err := os.MkdirTemp("", "lh-pool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil { // as root, the cluster runs as postgres
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := pgcluster.Config{Dir: filepath.Join(root, "pg"), Logger: slog.New(slog.DiscardHandler)}
	start := func() *pgcluster.Cluster { return dbtest.StartCluster(t, ctx, cfg) }
	cluster := start()
	pool, err := db.Open(ctx, db.PoolConfig{URL: cluster.URL("leasehold"), MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Six idle connections.
	var conns []*pgxpool.Conn
	for range 6 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	start()
	failed := 0
	for range 10 {
		if _, err := db.New(pool).Ping(ctx); err != nil {
			failed++
		}
	}
	if failed > 1 {
		t.Fatalf("%d of 10 statements failed after the restart, want at most 1", failed)
	}
}

// Pools bound every statement (statement_timeout), and say so on their
// connections; migrations, which may rewrite large tables, are not
// bounded: a schema built under a 1 ms bound still builds.
func TestStatementTimeoutSparesMigrations(t *testing.T) {
	t.Parallel()
	admin := dbtest.AdminURL(t)
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("lh_bounded_%d", time.Now().UnixNano())
	if err := adminExec(t, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := adminExec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping the database: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := db.Open(ctx, db.PoolConfig{URL: urlFor(t, admin, cfg.User, name), StatementTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Even this read can outlast 1 ms on a loaded machine (a CI run
	// twice as slow as usual cancelled it): what is checked here is the
	// setting, so a read cancelled (57014) is tried again.
	var setting string
	for try := 1; ; try++ {
		err := pool.QueryRow(ctx, "SELECT current_setting('statement_timeout')").Scan(&setting)
		var pgErr *pgconn.PgError
		if err == nil {
			break
		}
		if !errors.As(err, &pgErr) || pgErr.Code != "57014" || try == 50 {
			t.Fatalf("reading statement_timeout (try %d): %v", try, err)
		}
	}
	if setting != "1ms" {
		t.Errorf("statement_timeout = %q, want 1ms", setting)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_sleep(0.05)"); err == nil {
		t.Error("a 50 ms statement ran under a 1 ms statement_timeout")
	}
	if err := db.Migrate(pool); err != nil {
		t.Fatalf("migrating under a 1 ms statement_timeout: %v", err)
	}

	// The defaults, and a URL's own setting, which wins.
	def, err := db.Open(ctx, db.PoolConfig{URL: urlFor(t, admin, cfg.User, name)})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	if err := def.QueryRow(ctx, "SELECT current_setting('statement_timeout')").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "30s" || def.Config().ConnConfig.ConnectTimeout != db.DefaultConnectTimeout {
		t.Errorf("defaults: statement_timeout %q, connect timeout %v", setting, def.Config().ConnConfig.ConnectTimeout)
	}
	var jit string
	if err := def.QueryRow(ctx, "SELECT current_setting('jit')").Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "off" {
		t.Errorf("defaults: jit %q, want off", jit)
	}
	own, err := db.Open(ctx, db.PoolConfig{URL: urlFor(t, admin, cfg.User, name) + "&jit=on&statement_timeout=5000"})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.QueryRow(ctx, "SELECT current_setting('jit'), current_setting('statement_timeout')").Scan(&jit, &setting); err != nil {
		t.Fatal(err)
	}
	if jit != "on" || setting != "5s" {
		t.Errorf("the URL's own settings: jit %q, statement_timeout %q, want on and 5s", jit, setting)
	}
}
