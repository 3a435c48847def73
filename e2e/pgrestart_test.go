package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/db/pgcluster"
)

// privateCluster starts a PostgreSQL cluster of the test's own, which it
// may restart at will without touching the machine's server.
func privateCluster(t *testing.T) (pgcluster.Config, string) {
	t.Helper()
	root, err := os.MkdirTemp("", "lh-pgrestart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// As root the cluster runs as the postgres user, who must reach it.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := pgcluster.Config{Dir: filepath.Join(root, "pg"), Logger: slog.New(slog.DiscardHandler)}
	return cfg, startCluster(t, cfg).URL("leasehold")
}

func startCluster(t *testing.T, cfg pgcluster.Config) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return dbtest.StartCluster(t, ctx, cfg)
}

// stopPostgres shuts the cluster down the way pg_ctl stop -m mode does
// (fast: SIGINT, immediate: SIGQUIT to the postmaster) and waits until
// the postmaster is gone.
func stopPostgres(t *testing.T, cfg pgcluster.Config, mode string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cfg.Dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(raw), "\n", 2)[0])
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	sig := map[string]syscall.Signal{"fast": syscall.SIGINT, "immediate": syscall.SIGQUIT}[mode]
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signalling the postmaster: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not stop (%s) within 30s", mode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countSoon is count for a database that may be restarting: it retries
// until the query answers.
func (e *env) countSoon(sql string, args ...any) int {
	e.t.Helper()
	for {
		var n int
		err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n)
		if err == nil {
			return n
		}
		if e.ctx.Err() != nil {
			e.t.Fatalf("%s: %v", sql, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submitSoon is submit through a server whose database may have just
// restarted: a connection it held from before may fail once (500).
func (e *env) submitSoon(payload map[string]any) int64 {
	e.t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		e.t.Fatal(err)
	}
	noBackoff := int32(0)
	deadline := time.Now().Add(15 * time.Second)
	for {
		job, err := e.client().Submit(e.ctx, client.NewJob{Kind: "app_investigation", BackoffBaseMs: &noBackoff, Payload: raw})
		if err == nil {
			return job.ID
		}
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.Status < 500 || time.Now().After(deadline) {
			e.t.Fatalf("submit: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PostgreSQL restarts, with a fast and then an immediate shutdown, while
// direct workers are busy: jobs that finished their work meanwhile are
// completed when the database is back, within their leases. No job's work
// runs twice: a command that logs each run it finishes proves it (and the
// database's attempts are counted too).
func TestPostgresRestartRunsNoFinishedWorkAgain(t *testing.T) {
	t.Parallel()
	cfg, url := privateCluster(t)
	e := newEnvOn(t, url)
	e.startServer()
	dir := t.TempDir()
	done := filepath.Join(dir, "done")
	script := filepath.Join(dir, "work.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\nsleep 0.4\necho \"$LEASEHOLD_JOB_ID $LEASEHOLD_ATTEMPT\" >> "+done+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var workers []*proc
	// The property holds for an outage shorter than the lease: beyond it
	// the database refuses the outcome and the work runs again, as it
	// should. An immediate shutdown's restart (crash recovery) took more
	// than 10 s under CI's load, so the lease is 30 s.
	for _, id := range []string{"pg-w1", "pg-w2"} {
		workers = append(workers, e.startWorker(id, "--executor", "exec", "--exec", script, "--artifacts", e.artifacts,
			"--concurrency", "4", "--lease", "30s", "--heartbeat", "1s"))
	}

	var all []int64
	for _, mode := range []string{"fast", "immediate"} {
		var ids []int64
		for i := range 24 {
			ids = append(ids, e.submitSoon(map[string]any{"app": "com.example.restart", "n": i}))
		}
		all = append(all, ids...)
		e.eventually("some jobs of the round succeed", 30*time.Second, func() bool {
			return e.countSoon("SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'succeeded'", ids) >= 4
		})
		stopPostgres(t, cfg, mode)
		time.Sleep(2 * time.Second) // down for a while: work finishes meanwhile
		startCluster(t, cfg)
		deadline := time.Now().Add(60 * time.Second)
		for e.countSoon("SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'succeeded'", ids) < len(ids) {
			if time.Now().After(deadline) {
				t.Fatalf("after the %s restart, %d of %d jobs succeeded", mode,
					e.countSoon("SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'succeeded'", ids), len(ids))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	raw, err := os.ReadFile(done)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[int64][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		job, attempt, _ := strings.Cut(line, " ")
		id, _ := strconv.ParseInt(job, 10, 64)
		runs[id] = append(runs[id], attempt)
	}
	retried := 0
	for _, w := range workers {
		retried += strings.Count(w.out.String(), "retrying until")
	}
	multi := 0
	for _, id := range all {
		if len(runs[id]) != 1 {
			t.Errorf("job %d finished its work in attempts %v, want exactly once", id, runs[id])
		}
		attempts := e.countSoon("SELECT count(*) FROM job_attempts WHERE job_id = $1", id)
		completed := e.countSoon("SELECT count(*) FROM job_attempts WHERE job_id = $1 AND outcome = 'succeeded'", id)
		if completed != 1 {
			t.Errorf("job %d has %d succeeded attempts", id, completed)
		}
		if attempts > 1 {
			multi++
		}
	}
	if retried == 0 {
		t.Fatal("no outcome write met the outage: the test proved nothing")
	}
	t.Logf("%d jobs, each finished its work once; %d outcome writes retried through the restarts; %d jobs had a lost claim (more than one attempt)",
		len(all), retried, multi)
}
