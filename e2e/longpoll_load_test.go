package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	lhclient "github.com/leasehold/leasehold/client" // "client" is an http.Client below
)

// Bounds of the load test. The server never holds more PostgreSQL
// connections than its pool (cmd/server: 32) plus its six sessions of
// its own (the job notifier's LISTEN; the reaper, pruner and scheduler
// roles' locks; the active reaper's and the active scheduler's LISTEN),
// however many workers wait on its long poll.
const (
	loadClients      = 1000
	serverPoolMax    = 32
	serverOwnConns   = 6
	maxServerRSS     = 400 << 20
	maxGoroutinesPer = 4 // per waiting client: its connection's, and net/http's background read
)

// serverGauges reads the server's own figures from /metrics.
func (e *env) serverGauges() (goroutines, rss float64) {
	e.t.Helper()
	resp, err := http.Get(e.apiURL + "/metrics")
	if err != nil {
		e.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_goroutines":
			goroutines, _ = strconv.ParseFloat(value, 64)
		case "process_resident_memory_bytes":
			rss, _ = strconv.ParseFloat(value, 64)
		}
	}
	if goroutines == 0 || rss == 0 {
		e.t.Fatal("/metrics has no go_goroutines or process_resident_memory_bytes")
	}
	return goroutines, rss
}

// A thousand remote workers long-poll one server at once, on loopback:
// the server's goroutines grow with the connections (a few each), its
// memory stays modest, and its PostgreSQL connections stay within its
// pool, because a waiting claim holds no connection. Jobs submitted
// meanwhile still reach the waiting workers at once.
func TestThousandLongPollingWorkersStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	e := newEnv(t)
	server := e.startServer()
	idleGoroutines, idleRSS := e.serverGauges()

	tokens := apitoken.NewStore(e.pool)
	secrets := make([]string, loadClients)
	for i := range secrets {
		var err error
		if secrets[i], _, err = tokens.Create(e.ctx, fmt.Sprintf("load-%04d", i), apitoken.RoleWorker); err != nil {
			t.Fatal(err)
		}
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: loadClients + 10}}
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	var (
		waiting, claimed, failures atomic.Int64
		wg                         sync.WaitGroup
	)
	post := func(ctx context.Context, secret, path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.apiURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		return client.Do(req)
	}
	for _, secret := range secrets {
		wg.Go(func() {
			for ctx.Err() == nil {
				waiting.Add(1)
				resp, err := post(ctx, secret, "/api/v1/worker/claim", `{"queues":["load"],"wait_ms":30000,"lease_ms":60000}`)
				waiting.Add(-1)
				if err != nil {
					if ctx.Err() == nil {
						failures.Add(1)
						time.Sleep(100 * time.Millisecond)
					}
					continue
				}
				var out struct {
					Jobs []struct {
						ID         int64 `json:"id"`
						LeaseToken int64 `json:"lease_token"`
					} `json:"jobs"`
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
					failures.Add(1)
					continue
				}
				for _, j := range out.Jobs {
					claimed.Add(1)
					r, err := post(ctx, secret, fmt.Sprintf("/api/v1/worker/jobs/%d/complete", j.ID), fmt.Sprintf(`{"lease_token":%d}`, j.LeaseToken))
					if err == nil {
						io.Copy(io.Discard, r.Body)
						r.Body.Close()
					}
				}
			}
		})
	}

	var peakGoroutines, peakRSS float64
	var peakConns, peakBusy int
	sample := func() {
		g, rss := e.serverGauges()
		var conns, busy int
		// Busy is running a statement: the roles' lock sessions rest idle in
		// a transaction that holds no snapshot (queue/leader.go).
		if err := e.pool.QueryRow(e.ctx, `SELECT count(*), count(*) FILTER (WHERE state NOT IN ('idle', 'idle in transaction'))
			FROM pg_stat_activity WHERE application_name = 'leasehold-server' AND datname = current_database()`).Scan(&conns, &busy); err != nil {
			t.Fatal(err)
		}
		peakGoroutines, peakRSS = max(peakGoroutines, g), max(peakRSS, rss)
		peakConns, peakBusy = max(peakConns, conns), max(peakBusy, busy)
	}
	e.eventually("every client waits on the long poll", 60*time.Second, func() bool {
		return waiting.Load() == loadClients
	})
	// The last requests reach their wait: the server has run every first
	// claim (on a loaded machine that takes seconds) and stays quiet for a
	// second, ten samples in a row.
	quiet := 0
	e.eventually("the server's first claims are done", 30*time.Second, func() bool {
		var busy int
		if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE state NOT IN ('idle', 'idle in transaction'))
			FROM pg_stat_activity WHERE application_name = 'leasehold-server' AND datname = current_database()`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if quiet = quiet + 1; busy != 0 {
			quiet = 0
		}
		time.Sleep(100 * time.Millisecond)
		return quiet >= 10
	})
	for range 10 {
		sample()
		time.Sleep(300 * time.Millisecond)
	}
	waitingGoroutines, waitingBusy := peakGoroutines, peakBusy

	// Work arrives while they all wait: each job reaches one of them.
	const jobs = 100
	batch := make([]lhclient.NewJob, jobs)
	for i := range batch {
		batch[i] = lhclient.NewJob{Kind: "load", Queue: "load"}
	}
	commits := func() int {
		return e.count("SELECT xact_commit::int FROM pg_stat_database WHERE datname = current_database()")
	}
	commitsBefore := commits()
	submitted := time.Now()
	if _, err := e.client().SubmitBatch(e.ctx, batch); err != nil {
		t.Fatalf("batch submit: %v", err)
	}
	for e.count("SELECT count(*) FROM jobs WHERE queue = 'load' AND state = 'succeeded'") < jobs {
		if time.Since(submitted) > 30*time.Second {
			t.Fatalf("%d of %d jobs succeeded within 30s", e.count("SELECT count(*) FROM jobs WHERE queue = 'load' AND state = 'succeeded'"), jobs)
		}
		sample()
		time.Sleep(50 * time.Millisecond)
	}
	drained := time.Since(submitted)
	drainCommits := commits() - commitsBefore
	for range 5 {
		sample()
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()

	t.Logf("%d long-polling workers: server goroutines %.0f idle, %.0f waiting, %.0f peak; RSS %.1f MiB idle, %.1f MiB peak; "+
		"server's PostgreSQL connections peak %d (pool max %d + %d own), busy while all waited %d, busy peak %d; "+
		"%d jobs claimed and completed %v after submission, %d commits meanwhile; %d failed requests",
		loadClients, idleGoroutines, waitingGoroutines, peakGoroutines, idleRSS/(1<<20), peakRSS/(1<<20),
		peakConns, serverPoolMax, serverOwnConns, waitingBusy, peakBusy, claimed.Load(), drained.Round(time.Millisecond), drainCommits, failures.Load())
	if peakConns > serverPoolMax+serverOwnConns {
		t.Errorf("the server held %d PostgreSQL connections, more than its pool's %d and its own %d", peakConns, serverPoolMax, serverOwnConns)
	}
	// A waiting claim holds no connection: while all wait, nothing runs
	// but, at most, a role's keep-alive caught by the sample.
	if waitingBusy > 1 {
		t.Errorf("%d of the server's connections were busy while every claim waited", waitingBusy)
	}
	if peakGoroutines > float64(maxGoroutinesPer*loadClients+500) {
		t.Errorf("%.0f server goroutines for %d clients", peakGoroutines, loadClients)
	}
	if peakRSS > maxServerRSS {
		t.Errorf("server RSS %.1f MiB, over %d MiB", peakRSS/(1<<20), maxServerRSS>>20)
	}
	if n := failures.Load(); n > 0 {
		t.Errorf("%d requests failed", n)
	}
	if !server.alive() {
		t.Fatal("the server died")
	}
}
