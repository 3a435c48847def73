package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// fleetDB is the fleet measurement's database.
const fleetDB = "leasehold_fleet"

// fleetConfig is what -idle measures with -remote or -direct: a server,
// remote workers, direct worker processes and open dashboards.
type fleetConfig struct {
	remote  int // simulated remote workers, in this process
	direct  int // direct worker processes
	streams int // /events streams opened for the second measurement
	// latency is how many jobs to submit one by one, after the idle
	// windows, to measure how fast a new job reaches an idle worker.
	latency int
}

// fleet measures what an idle fleet costs PostgreSQL: a Leasehold server,
// f.remote remote workers and f.direct direct workers, over window, then
// again with f.streams open event streams; then how long a new job takes
// to reach an idle worker.
//
// Remote workers are worker.Worker values with the Remote backend, each
// with a worker token of its own, all in this process: each makes the
// HTTP calls a remote worker process makes (whoami, a long-poll claim at a
// time, presence every interval), only without a process per worker.
// Direct workers are cmd/worker processes, each with its own pool and
// listener, as in production.
//
// The server is started with --max-connections 8192 and
// --max-connections-per-client -1: every simulated remote worker comes
// from 127.0.0.1, and a thousand of them hold more connections than the
// per-client default (half of --max-connections) allows one address;
// and --max-streams-per-session 1000, as every stream is of one session.
func (b *bench) fleet(ctx context.Context, window time.Duration, f fleetConfig) error {
	if err := b.admin.roomForFleet(ctx, f.direct); err != nil {
		return err
	}
	if err := b.admin.freshDatabase(ctx, fleetDB); err != nil {
		return err
	}
	url := b.admin.urlFor(fleetDB)
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	logFile, err := os.Create(filepath.Join(b.tmp, "fleet.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	start := func(name string, env []string, args ...string) (*exec.Cmd, chan error, error) {
		cmd := exec.Command(filepath.Join(b.tmp, name), args...)
		cmd.Env = childEnv(env...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			return nil, nil, fmt.Errorf("starting %s: %w", name, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return cmd, exited, nil
	}
	const adminToken = "lh_bench_fleet_token"
	server, serverExited, err := start("server", []string{
		"DATABASE_URL=" + url, "LEASEHOLD_API_TOKEN=" + adminToken, "LEASEHOLD_ADMIN_PASSWORD=bench-idle-password",
	}, "--addr", addr, "--artifacts", filepath.Join(b.tmp, "artifacts"), "--log-format", "json",
		"--max-connections", "8192", "--max-connections-per-client", "-1", "--max-streams-per-session", "1000")
	if err != nil {
		return err
	}
	defer stopProcess(server, serverExited)
	if err := waitReady(ctx, base+"/health/ready"); err != nil {
		return fmt.Errorf("server: %w (log in %s)", err, logFile.Name())
	}

	// Worker tokens, before anything is measured.
	pool, err := openLeasehold(ctx, url, 2)
	if err != nil {
		return err
	}
	secrets := make([]string, f.remote)
	tokens := apitoken.NewStore(pool)
	for i := range f.remote {
		if secrets[i], _, err = tokens.Create(ctx, fmt.Sprintf("remote-%04d", i), apitoken.RoleWorker); err != nil {
			pool.Close()
			return err
		}
	}
	pool.Close()

	// One connection per long poll and per presence, as processes of
	// their own would have.
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = 4 * max(f.remote, 1)
	}
	ran := make(chan ranJob, 64)
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopWorkers(); wg.Wait() }()
	for i := range f.remote {
		remote, err := worker.NewRemote(base, secrets[i], quiet)
		if err != nil {
			return err
		}
		w := worker.New(worker.Config{ID: fmt.Sprintf("remote-%04d", i), Backend: remote, Executor: recorder{ran}, Logger: quiet})
		wg.Go(func() { _ = w.Run(wctx) })
	}
	for i := range f.direct {
		cmd, exited, err := start("worker", nil, "--id", fmt.Sprintf("direct-%03d", i), "--executor", "noop",
			"--database-url", url, "--artifacts", filepath.Join(b.tmp, "artifacts"), "--log-format", "json")
		if err != nil {
			return err
		}
		defer stopProcess(cmd, exited)
	}
	what := fmt.Sprintf("server + %d remote + %d direct workers", f.remote, f.direct)

	tx, err := b.fleetWindow(ctx, url, window)
	if err != nil {
		return err
	}
	fmt.Printf("idle %s over %v: %d transactions, %.2f/s\n", what, window, tx, float64(tx)/window.Seconds())
	if f.streams > 0 {
		dashboard, err := signIn(ctx, base, "bench-idle-password")
		if err != nil {
			return err
		}
		streamsCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := openStreams(streamsCtx, dashboard, base, f.streams); err != nil {
			return err
		}
		tx, err := b.fleetWindow(ctx, url, window)
		if err != nil {
			return err
		}
		fmt.Printf("idle %s + %d event streams over %v: %d transactions, %.2f/s\n", what, f.streams, window, tx, float64(tx)/window.Seconds())
	}
	if f.latency > 0 && f.remote+f.direct > 0 {
		if err := b.fleetLatency(ctx, url, base, adminToken, f.latency, ran, f.remote > 0); err != nil {
			return err
		}
	}
	return nil
}

// sessionsPerDirectWorker is what an idle cmd/worker holds: three of its
// pool and its reaper's lock session (counted in pg_stat_activity).
const sessionsPerDirectWorker = 4

// roomForFleet fails at once when PostgreSQL cannot take direct more
// direct workers' sessions and the server's: past max_connections their
// connects are refused and they retry, and the run waited for them
// without an end (seen: Debian's default of 100 against 100 workers).
func (a *admin) roomForFleet(ctx context.Context, direct int) error {
	var limit, reserved, used int
	err := a.conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int,
		(SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&limit, &reserved, &used)
	if err != nil {
		return fmt.Errorf("reading max_connections: %w", err)
	}
	need := direct*sessionsPerDirectWorker + 20 // the server's pool and listener, the bench's own
	if free := limit - reserved - used; need > free {
		return fmt.Errorf("%d direct workers and the server need about %d connections; PostgreSQL has %d free of max_connections %d: raise it (ALTER SYSTEM SET max_connections = %d, then restart PostgreSQL)",
			direct, need, free, limit, limit+need-free)
	}
	return nil
}

// fleetWindow counts the transactions (commits and rollbacks) of the
// fleet's database over window, after the warm-up.
func (b *bench) fleetWindow(ctx context.Context, url string, window time.Duration) (int64, error) {
	return b.countWindow(ctx, url, window, func(ctx context.Context) (int64, error) {
		return b.admin.transactions(ctx, fleetDB)
	})
}

// transactions is xact_commit + xact_rollback of name.
func (a *admin) transactions(ctx context.Context, name string) (int64, error) {
	if _, err := a.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, fmt.Errorf("clearing stats snapshot: %w", err)
	}
	var n int64
	if err := a.conn.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", name).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	return n, nil
}

// ranJob is a job a simulated remote worker began to run, and when.
type ranJob struct {
	id int64
	at time.Time
}

// recorder is the simulated remote workers' executor: it tells when a job
// starts, and succeeds at once.
type recorder struct{ ran chan<- ranJob }

func (r recorder) Run(_ context.Context, j queue.Job, _ worker.Reporter) (json.RawMessage, error) {
	select {
	case r.ran <- ranJob{id: j.ID, at: time.Now()}:
	default:
	}
	return json.RawMessage(`{}`), nil
}

// fleetLatency submits n jobs one at a time through the API, each once
// the fleet is idle again, and prints the median and worst time from the
// submission to the claim: by the database clock (the job's created_at to
// its attempt_started_at, for any worker) and, with remote workers, from
// sending the submission until a remote worker's executor began it.
func (b *bench) fleetLatency(ctx context.Context, url, base, token string, n int, ran <-chan ranJob, remote bool) error {
	pool, err := openLeasehold(ctx, url, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	var byDB, byWorker []time.Duration
	txBefore, err := b.admin.transactions(ctx, fleetDB)
	if err != nil {
		return err
	}
	began := time.Now()
	polls := 0 // the bench's own reads of the job, each a transaction
	for range n {
		time.Sleep(300 * time.Millisecond) // every worker back in its wait
		sent := time.Now()
		id, err := submitNoop(ctx, base, token)
		if err != nil {
			return err
		}
		if remote {
			timeout := time.After(30 * time.Second)
		wait:
			for {
				select {
				case r := <-ran:
					if r.id == id {
						byWorker = append(byWorker, r.at.Sub(sent))
						break wait
					}
				case <-timeout:
					return fmt.Errorf("job %d not run within 30s", id)
				}
			}
		}
		var ms float64
		deadline := time.Now().Add(30 * time.Second)
		for {
			polls++
			err := pool.QueryRow(ctx, `SELECT extract(epoch FROM attempt_started_at - created_at) * 1000
				FROM jobs WHERE id = $1 AND attempt_started_at IS NOT NULL`, id).Scan(&ms)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("job %d not claimed within 30s: %w", id, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		byDB = append(byDB, time.Duration(ms*float64(time.Millisecond)))
	}
	// Backends report their counts within a second of going idle.
	time.Sleep(1500 * time.Millisecond)
	txAfter, err := b.admin.transactions(ctx, fleetDB)
	if err != nil {
		return err
	}
	fmt.Printf("new job to idle worker, %d jobs: created_at to claim (database clock) p50 %s, max %s\n", n, p50(byDB), slices.Max(byDB))
	fmt.Printf("  transactions per job, submission to completion, the idle fleet's over those %v included: %.2f\n",
		time.Since(began).Round(100*time.Millisecond), float64(txAfter-txBefore-int64(polls))/float64(n))
	if len(byWorker) > 0 {
		fmt.Printf("new job to idle remote worker, %d jobs: POST sent to executor start p50 %s, max %s\n", len(byWorker), p50(byWorker), slices.Max(byWorker))
	}
	return nil
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(10 * time.Microsecond)
}

// submitNoop submits one no-op job to the default queue; its id.
func submitNoop(ctx context.Context, base, token string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/jobs", strings.NewReader(`{"kind":"noop"}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("submitting: %w", err)
	}
	defer res.Body.Close()
	var out struct {
		ID int64 `json:"id"`
	}
	if res.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("submitting: status %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("submitting: %w", err)
	}
	return out.ID, nil
}
