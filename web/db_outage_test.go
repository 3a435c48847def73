package web_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/httpx"
)

// adminConn is a connection to the test server's maintenance database
// (TEST_DATABASE_URL), from where a test database's settings can change
// and its backends be ended while the database itself refuses writes.
func adminConn(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TEST_DATABASE_URL is not set")
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// setReadOnly turns default_transaction_read_only of f's database on or
// off, as a failover tool or a maintenance window does, and ends its
// sessions so that the server's new ones take the setting.
func (f *fixture) setReadOnly(t *testing.T, admin *pgx.Conn, on bool) {
	t.Helper()
	name := f.pool.Config().ConnConfig.Database
	stmt := "ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " SET default_transaction_read_only = on"
	if !on {
		stmt = "ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " RESET default_transaction_read_only"
	}
	if _, err := admin.Exec(f.ctx, stmt); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(f.ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
}

// wantUnavailable checks a 503 that tells the client to retry.
func wantUnavailable(t *testing.T, r *response) {
	t.Helper()
	r.want(t, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After: %v", r.header)
	}
	if body := r.json(t); body["code"] != string(api.CodeUnavailable) {
		t.Errorf("code = %v, want %q: %s", body["code"], api.CodeUnavailable, r.body)
	}
}

// While the database refuses writes, readiness says so and why, reads
// still work (authenticating cannot record the token's use, and must not
// need to), and writes answer 503 with Retry-After, never 500. Once writes
// are accepted again, readiness is 200.
func TestReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	f := setup(t)
	admin := adminConn(t, f.ctx)
	b := f.signIn(t, "alice")
	form := b.newJobForm(t)
	// A token never used yet: authenticating tries to record its use.
	reader, _, err := f.tokens.Create(f.ctx, "reader", apitoken.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.setReadOnly(t, admin, false) }) // DROP DATABASE must not find it read-only
	f.setReadOnly(t, admin, true)

	// The first requests may meet pooled connections that were ended:
	// those answer 503 too, never 500.
	var ready *response
	testutil.Eventually(t, 10*time.Second, "readiness naming the read-only database", func() bool {
		ready = f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"})
		if ready.status != http.StatusServiceUnavailable {
			t.Fatalf("readiness %d on a read-only database: %s", ready.status, ready.body)
		}
		return ready.json(t)["database"] == "read-only"
	})
	if body := ready.json(t); body["status"] != "not ready" {
		t.Errorf("readiness body = %s", ready.body)
	}

	f.do(t, call{method: http.MethodGet, path: "/api/v1/stats", token: reader}).want(t, http.StatusOK)
	f.get(t, "/api/v1/jobs").want(t, http.StatusOK)
	f.do(t, call{method: http.MethodGet, path: "/api/v1/worker/whoami", token: f.worker}).want(t, http.StatusOK)
	if !strings.Contains(f.logs.String(), "recording token use") {
		t.Errorf("the refused record of the token's use was not logged:\n%s", f.logs.String())
	}

	wantUnavailable(t, f.post(t, "/api/v1/jobs", `{"kind":"noop"}`))
	wantUnavailable(t, f.post(t, "/api/v1/jobs/batch", `{"jobs":[{"kind":"noop"}]}`))
	wantUnavailable(t, f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{}`, token: f.worker}))

	// Pages read, and a submitted form answers a plain 503 page.
	b.get(t, "/jobs").want(t, http.StatusOK)
	page := b.post(t, "/jobs/new", form).want(t, http.StatusServiceUnavailable)
	if page.header.Get("Retry-After") == "" || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.body), "Unavailable for a moment") {
		t.Errorf("page answer: %v\n%s", page.header, page.body)
	}

	f.setReadOnly(t, admin, false)
	testutil.Eventually(t, 10*time.Second, "readiness 200 once writes are accepted", func() bool {
		return f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).status == http.StatusOK
	})
	testutil.Eventually(t, 5*time.Second, "submissions accepted again", func() bool {
		return f.post(t, "/api/v1/jobs", `{"kind":"noop"}`).status == http.StatusCreated
	})
}

// A database that cannot be reached answers 503 with Retry-After on the
// API, the worker API and the pages, and readiness says it is unavailable.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Nothing listens on port 1.
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	srv := httptest.NewServer(web.New(web.Config{
		Pool: pool, Queue: queue.NewClient(pool, logger), Tokens: apitoken.NewStore(pool), Logger: logger,
		ArtifactsDir: t.TempDir(), Auth: auth.New(pool, logger),
	}))
	defer srv.Close()
	f := &fixture{ctx: ctx, srv: srv, admin: "lh_whatever", logs: logs}

	ready := f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).want(t, http.StatusServiceUnavailable)
	if db, _ := ready.json(t)["database"].(string); !strings.HasPrefix(db, "unavailable: ") {
		t.Errorf("readiness = %s", ready.body)
	}
	wantUnavailable(t, f.get(t, "/api/v1/stats"))
	wantUnavailable(t, f.post(t, "/api/v1/jobs", `{"kind":"noop"}`))
	wantUnavailable(t, f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{}`, token: "lh_worker"}))

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/jobs", nil)
	req.AddCookie(&http.Cookie{Name: httpx.SessionCookie, Value: "x"})
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
		res.Header.Get("Retry-After") == "" {
		t.Errorf("page answered %d %v", res.StatusCode, res.Header)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("an outage logged as a server fault:\n%s", logs.String())
	}
}

// A submission whose statement is stuck (here: waiting for another
// session's uncommitted job with the same idempotency key, as it would on
// a frozen primary) ends within the request deadline with 503, and is not
// committed after its client was told so. (On a server that answers, pgx
// cancels the statement as it gives up; TestFrozenSubmissionRollsBack
// shows the case where the cancel cannot reach the server.)
func TestStuckSubmissionIsBoundedAndRolledBack(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{requestTimeout: time.Second})
	f.get(t, "/api/v1/stats").want(t, http.StatusOK) // the token's use is recorded before

	other, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(context.Background())
	if _, err := other.Exec(f.ctx, `INSERT INTO jobs (kind, idempotency_key) VALUES ('noop', 'one'), ('noop', 'batch')`); err != nil {
		t.Fatal(err)
	}
	for path, body := range map[string]string{
		"/api/v1/jobs":       `{"kind":"noop","idempotency_key":"one"}`,
		"/api/v1/jobs/batch": `{"jobs":[{"kind":"noop","idempotency_key":"batch"}]}`,
	} {
		start := time.Now()
		r := f.post(t, path, body)
		took := time.Since(start)
		wantUnavailable(t, r)
		if took > 3*time.Second {
			t.Errorf("%s answered after %v, want about the 1 s request deadline", path, took)
		}
	}
	// The other session gives up its jobs: the abandoned statements go on,
	// and insert theirs, in transactions that were never committed.
	if err := other.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "abandoned inserts ended", func() bool {
		var n int
		err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n == 0
	})
	time.Sleep(200 * time.Millisecond)
	var jobs int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM jobs`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 0 {
		t.Fatalf("%d jobs committed after their clients were answered 503", jobs)
	}
	f.post(t, "/api/v1/jobs", `{"kind":"noop","idempotency_key":"one"}`).want(t, http.StatusCreated)
}

// freezer relays TCP connections to PostgreSQL and can stop relaying, as
// a stopped (SIGSTOP) server looks to its clients: bytes sent are not
// answered, and nothing reaches the server until it thaws. It freezes by
// itself when a client sends marker. While frozen it closes new
// connections at once (a frozen server would leave them unanswered): pgx's
// cancel request, sent on a connection of its own, then fails quickly
// instead of after its 15 s.
type freezer struct {
	ln      net.Listener
	network string // of target: tcp, or unix for a cluster's socket
	target  string
	marker  []byte
	mu      sync.Mutex
	thaw    chan struct{} // closed while not frozen
}

func newFreezer(t *testing.T, network, target string, marker string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &freezer{ln: ln, network: network, target: target, marker: []byte(marker), thaw: make(chan struct{})}
	close(f.thaw)
	go f.serve()
	return f
}

func (f *freezer) frozen() (bool, chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thaw:
		return false, f.thaw
	default:
		return true, f.thaw
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thaw:
		f.thaw = make(chan struct{})
	default:
	}
}

func (f *freezer) unfreeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thaw:
	default:
		close(f.thaw)
	}
}

func (f *freezer) serve() {
	for {
		client, err := f.ln.Accept()
		if err != nil {
			return
		}
		if frozen, _ := f.frozen(); frozen {
			client.Close()
			continue
		}
		server, err := net.Dial(f.network, f.target)
		if err != nil {
			client.Close()
			continue
		}
		go f.relay(client, server, true)
		go f.relay(server, client, false)
	}
}

// relay copies from src to dst, holding each chunk while frozen.
func (f *freezer) relay(src, dst net.Conn, fromClient bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient && bytes.Contains(buf[:n], f.marker) {
				f.freeze()
			}
			_, thaw := f.frozen()
			<-thaw
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A submission sent to a frozen primary is answered 503 at the request
// deadline; when the primary thaws and runs what it was sent, the
// submission must not commit: its COMMIT was never sent. (A statement run
// outside a transaction commits by itself, which made a job of a request
// whose client had been told it failed.)
func TestFrozenSubmissionRollsBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := dbtest.NewDatabase(t)
	direct, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "frozen-7f3a9c"
	// The machine's server on TCP, or the private cluster's socket (a
	// fresh clone without TEST_DATABASE_URL).
	network, target := testutil.DialTarget(cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	proxy := newFreezer(t, network, target, marker)
	addr := proxy.ln.Addr().(*net.TCPAddr)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(addr.Port)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	secret, _, err := apitoken.NewStore(direct).Create(ctx, "admin", apitoken.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.New(web.Config{
		Pool: pool, Queue: queue.NewClient(pool, logger), Tokens: apitoken.NewStore(pool), Logger: logger,
		ArtifactsDir: t.TempDir(), Auth: auth.New(pool, logger), RequestTimeout: time.Second,
	}))
	defer srv.Close()
	f := &fixture{ctx: ctx, srv: srv, admin: secret, logs: logs}
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	}()
	f.post(t, "/api/v1/jobs", `{"kind":"noop","idempotency_key":"warm-up"}`).want(t, http.StatusCreated)

	start := time.Now()
	wantUnavailable(t, f.post(t, "/api/v1/jobs", `{"kind":"noop","idempotency_key":"`+marker+`"}`))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("answered after %v, want about the 1 s request deadline", took)
	}
	if frozen, _ := proxy.frozen(); !frozen {
		t.Fatal("the submission never reached the relay: the test froze nothing")
	}
	proxy.unfreeze()
	// The server now gets what it was sent, and the client's goodbye.
	testutil.Eventually(t, 10*time.Second, "the relayed statement ran", func() bool {
		var n int
		err := direct.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`).Scan(&n)
		return err == nil && n == 0
	})
	time.Sleep(300 * time.Millisecond)
	var n int
	if err := direct.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE idempotency_key = $1`, marker).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the abandoned submission committed after its client was answered 503 (%d job)", n)
	}
}
