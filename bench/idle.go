package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const idleDB = "leasehold_idle"

// idleWarmup lets programs finish starting before the idle window opens:
// migrations, first presence writes, listeners, and the autovacuum
// launcher's first visit of a fresh database (tens of analyze
// transactions in the first seconds, counted as commits like any other).
// Both systems get the same warm-up.
const idleWarmup = 15 * time.Second

// idle measures what an idle deployment costs PostgreSQL: a Leasehold
// server plus one idle direct worker, then one idle River client with its
// defaults, each on an empty database of its own, over window.
func (b *bench) idle(ctx context.Context, window time.Duration) error {
	if err := b.idleLeasehold(ctx, window); err != nil {
		return err
	}
	return b.idleRiver(ctx, window)
}

func (b *bench) idleLeasehold(ctx context.Context, window time.Duration) error {
	if err := b.admin.freshDatabase(ctx, idleDB); err != nil {
		return err
	}
	url := b.admin.urlFor(idleDB)
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(b.tmp, "idle.log"))
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
	serverEnv := []string{
		"DATABASE_URL=" + url, "LEASEHOLD_API_TOKEN=lh_bench_idle_token", "LEASEHOLD_ADMIN_PASSWORD=bench-idle-password",
	}
	if len(b.webhooks) > 0 {
		// A receiver that takes everything; idle, nothing should reach it.
		hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		defer hooks.Close()
		serverEnv = append(serverEnv, "LEASEHOLD_WEBHOOK_URL="+hooks.URL, "LEASEHOLD_WEBHOOK_SECRET=bench-idle-webhook-secret",
			"LEASEHOLD_WEBHOOK_EVENTS="+strings.Join(b.webhooks, ","))
	}
	server, serverExited, err := start("server", serverEnv, "--addr", addr, "--artifacts", filepath.Join(b.tmp, "artifacts"), "--log-format", "json")
	if err != nil {
		return err
	}
	defer stopProcess(server, serverExited)
	if err := waitReady(ctx, "http://"+addr+"/health/ready"); err != nil {
		return fmt.Errorf("server: %w (log in %s)", err, logFile.Name())
	}
	withSchedule := ""
	if b.idleSchedule != "" {
		if err := createSchedule(ctx, "http://"+addr, "lh_bench_idle_token", b.idleSchedule); err != nil {
			return err
		}
		withSchedule = " with a schedule " + strconv.Quote(b.idleSchedule)
	}
	worker, workerExited, err := start("worker", nil, append([]string{"--id", "idle-worker", "--executor", "noop",
		"--database-url", url, "--artifacts", filepath.Join(b.tmp, "artifacts"), "--log-format", "json"}, b.workerArgs...)...)
	if err != nil {
		return err
	}
	defer stopProcess(worker, workerExited)
	var dashboard *http.Client
	if b.streams > 0 {
		if dashboard, err = signIn(ctx, "http://"+addr, "bench-idle-password"); err != nil {
			return err
		}
	}

	commits, err := b.idleWindow(ctx, idleDB, url, window)
	if err != nil {
		return err
	}
	serverRSS, err := rssMiB(server.Process.Pid)
	if err != nil {
		return err
	}
	workerRSS, err := rssMiB(worker.Process.Pid)
	if err != nil {
		return err
	}
	if len(b.webhooks) > 0 {
		fmt.Printf("(webhooks configured: %s)\n", strings.Join(b.webhooks, ","))
	}
	fmt.Printf("idle Leasehold server%s + 1 direct worker over %v: %d commits, %.2f transactions/s; RSS server %.1f MiB, worker %.1f MiB\n",
		withSchedule, window, commits, float64(commits)/window.Seconds(), serverRSS, workerRSS)
	if b.streams == 0 {
		return nil
	}
	// The same, with dashboards open: their streams must cost PostgreSQL
	// nothing (one LISTEN serves them all) and the server little memory.
	streamsCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := openStreams(streamsCtx, dashboard, "http://"+addr, b.streams); err != nil {
		return err
	}
	for i := range 2 { // the second window: long after the streams opened
		commits, err = b.idleWindow(ctx, idleDB, url, window)
		if err != nil {
			return err
		}
		withRSS, err := rssMiB(server.Process.Pid)
		if err != nil {
			return err
		}
		fmt.Printf("idle with %d open event streams, window %d, over %v: %d commits, %.2f transactions/s; RSS server %.1f MiB (%+.1f MiB)\n",
			b.streams, i+1, window, commits, float64(commits)/window.Seconds(), withRSS, withRSS-serverRSS)
	}
	return nil
}

// createSchedule gives the idle server a schedule, through its API.
func createSchedule(ctx context.Context, base, token, cron string) error {
	body := fmt.Sprintf(`{"name":"idle","cron":%s,"job":{"kind":"noop"}}`, strconv.Quote(cron))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/schedules", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("creating the idle schedule: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("creating the idle schedule: status %d", res.StatusCode)
	}
	return nil
}

func (b *bench) idleRiver(ctx context.Context, window time.Duration) error {
	if err := b.admin.freshDatabase(ctx, riverDB); err != nil {
		return err
	}
	url := b.admin.urlFor(riverDB)
	pool, err := openRiverPool(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	mg, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return err
	}
	if _, err := mg.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrating river: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
		Workers: workers,
		Logger:  quiet,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = client.Stop(context.Background()) }()
	commits, err := b.idleWindow(ctx, riverDB, url, window)
	if err != nil {
		return err
	}
	fmt.Printf("idle River client (defaults) over %v: %d commits, %.2f transactions/s\n",
		window, commits, float64(commits)/window.Seconds())
	return nil
}

// idleWindow counts the commits in name during window, after the warm-up.
// Idle backends flush their statistics within about a second, so both
// readings lag by at most that much.
func (b *bench) idleWindow(ctx context.Context, name, url string, window time.Duration) (int64, error) {
	return b.countWindow(ctx, url, window, func(ctx context.Context) (int64, error) {
		st, err := b.admin.read(ctx, name)
		return st.commits, err
	})
}

// countWindow returns how far count grew during window, after the
// warm-up, with the statement report of that window when asked for.
func (b *bench) countWindow(ctx context.Context, url string, window time.Duration, count func(context.Context) (int64, error)) (int64, error) {
	time.Sleep(idleWarmup)
	if b.statements {
		if err := resetStatements(ctx, url); err != nil {
			return 0, err
		}
	}
	before, err := count(ctx)
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	after, err := count(ctx)
	if err != nil {
		return 0, err
	}
	if b.statements {
		if err := b.admin.statementReport(ctx, url, window.Seconds(), "second"); err != nil {
			return 0, err
		}
	}
	return after - before, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after 30s", url)
}

// rssMiB is a process's resident set size from /proc.
func rssMiB(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
