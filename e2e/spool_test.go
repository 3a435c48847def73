package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
)

// artifactNames are job id's artifacts in the order they were stored.
func (e *env) artifactNames(id int64) []string {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, "SELECT name FROM artifacts WHERE job_id = $1 ORDER BY id", id)
	if err != nil {
		e.t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

func stepNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("step-%02d.png", i+1)
	}
	return names
}

// spoolFiles are the artifacts waiting in a worker's spool directory (its
// lock files aside).
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "lock" {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Caddy restarted mid-job, in front of a remote worker: the uploads that
// met the outage wait in the worker's spool and go again when Caddy is
// back; the job succeeds in its one attempt with every screenshot stored,
// in order, and the spool is empty afterwards.
func TestCaddyRestartMidJobLosesNoScreenshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	proxy := e.startCaddy(shippedCaddyfile(t))
	spool := t.TempDir()
	w := e.spawn("worker home-spool", []string{"--server-url", proxy.url(), "--token", e.workerToken("home-spool"),
		"--spool-dir", spool, "--lease", "30s"})

	// Each step is a screenshot, then a progress event. Stopped just
	// after a step's progress, Caddy is away when the next step's
	// screenshot is sent (a second later), and for 5 s. On a loaded
	// machine the stop can come late, after the next screenshot, so that
	// the outage meets a progress instead (which the sim waits on, so no
	// screenshot is sent during it): then Caddy is stopped again after a
	// later progress, at most three times in all.
	const steps = 16
	id := e.submit(map[string]any{"app": "com.example.caddy", "sim": map[string]any{"steps": steps, "step_ms": 1000}})
	progress := func() int {
		return e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'progress'", id)
	}
	met := func() bool { return strings.Contains(w.out.String(), "op=\"artifact step-") }
	for outage := 1; outage <= 3 && !met(); outage++ {
		after := max(progress()+1, 2)
		e.eventually("the job's next progress", 30*time.Second, func() bool { return progress() >= after })
		proxy.stop()
		time.Sleep(5 * time.Second)
		proxy.start()
		e.t.Logf("outage %d after progress %d: an upload met it: %v", outage, after, met())
	}

	d := e.waitFor(id, 60*time.Second, client.StateSucceeded, client.StateDead)
	if d.State != client.StateSucceeded || d.Attempt != 1 {
		t.Fatalf("the job ended %s in attempt %d, want succeeded in its first", d.State, d.Attempt)
	}
	if got, want := e.artifactNames(id), stepNames(steps); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("screenshots stored %v, want %v", got, want)
	}
	var result struct{ Screenshots int }
	if err := json.Unmarshal(d.Result, &result); err != nil || result.Screenshots != steps {
		t.Fatalf("result %s, want %d screenshots", d.Result, steps)
	}
	if !met() {
		t.Fatalf("no upload met the outage: the test proved nothing\n%s", w.out.String())
	}
	if files := spoolFiles(t, spool); len(files) != 0 {
		t.Fatalf("the spool still holds %v after the job", files)
	}
}

// A spool too small for a screenshot: the job still succeeds, and each
// screenshot given up is recorded on the attempt's timeline (the job's
// API and page) with its name and why.
func TestSpoolFullIsRecordedOnTheAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	spool := t.TempDir()
	e.startWorker("spool-full", "--artifacts", e.artifacts, "--spool-dir", spool, "--spool-max", "100")

	id := e.submit(map[string]any{"app": "com.example.full", "sim": map[string]any{"steps": 2, "step_ms": 50}})
	d := e.waitFor(id, 30*time.Second, client.StateSucceeded, client.StateDead)
	if d.State != client.StateSucceeded {
		t.Fatalf("the job ended %s", d.State)
	}
	var lost []string
	for _, ev := range d.Events {
		var detail struct{ Message string }
		_ = json.Unmarshal(ev.Detail, &detail)
		if ev.Type == "progress" && strings.Contains(detail.Message, "not stored") {
			if ev.Attempt == nil || *ev.Attempt != 1 {
				t.Errorf("record %q not tied to attempt 1", detail.Message)
			}
			lost = append(lost, detail.Message)
		}
	}
	want := []string{
		"artifact step-01.png not stored: artifact spool full (100 bytes at most)",
		"artifact step-02.png not stored: artifact spool full (100 bytes at most)",
	}
	if strings.Join(lost, "|") != strings.Join(want, "|") {
		t.Fatalf("the timeline records %q, want %q", lost, want)
	}
	if n := len(d.Artifacts); n != 0 {
		t.Fatalf("%d artifacts stored from a spool that holds none", n)
	}
	if files := spoolFiles(t, spool); len(files) != 0 {
		t.Fatalf("the spool holds %v", files)
	}
}

// A direct worker's job spans a fast restart of PostgreSQL and then a
// read-only window (default_transaction_read_only, with the pool's
// sessions terminated so that it reconnects into it): every fenced write
// of the attempt is retried through both, and the attempt succeeds with
// every step's progress and screenshot, in order.
func TestDirectWorkerRidesOutRestartAndReadOnly(t *testing.T) {
	t.Parallel()
	cfg, url := privateCluster(t)
	e := newEnvOn(t, url)
	e.startServer()
	w := e.startWorker("pg-direct", "--artifacts", e.artifacts, "--spool-dir", t.TempDir(),
		"--lease", "30s", "--heartbeat", "1s")

	const steps = 30
	id := e.submitSoon(map[string]any{"app": "com.example.outage", "sim": map[string]any{"steps": steps, "step_ms": 300}})
	progress := func() int {
		return e.countSoon("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'progress'", id)
	}
	e.eventually("the job runs", 30*time.Second, func() bool { return progress() >= 3 })
	stopPostgres(t, cfg, "fast")
	time.Sleep(time.Second)
	startCluster(t, cfg)

	before := progress()
	e.eventually("the job goes on after the restart", 30*time.Second, func() bool { return progress() >= before+2 })
	admin, err := pgx.Connect(e.ctx, strings.Replace(url, "dbname=leasehold", "dbname=postgres", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	readOnly := func(on bool) {
		t.Helper()
		if _, err := admin.Exec(e.ctx, fmt.Sprintf("ALTER DATABASE leasehold SET default_transaction_read_only = %t", on)); err != nil {
			t.Fatal(err)
		}
		// Settings reach new sessions only: end the worker's, so that its
		// pool reconnects into the window.
		if _, err := admin.Exec(e.ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'leasehold' AND pid <> pg_backend_pid()"); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(true)
	time.Sleep(3 * time.Second)
	readOnly(false)

	e.eventually("the job ends", 60*time.Second, func() bool {
		return e.countSoon("SELECT count(*) FROM jobs WHERE id = $1 AND state IN ('succeeded', 'dead')", id) == 1
	})
	var state string
	var attempts int
	if err := e.pool.QueryRow(e.ctx, "SELECT state, attempt FROM jobs WHERE id = $1", id).Scan(&state, &attempts); err != nil {
		t.Fatal(err)
	}
	if state != "succeeded" || attempts != 1 {
		t.Fatalf("the job ended %s in attempt %d, want succeeded in its first", state, attempts)
	}
	for step := 1; step <= steps; step++ {
		if n := e.count("SELECT count(*) FROM job_timeline WHERE job_id = $1 AND type = 'progress' AND detail->>'message' LIKE $2",
			id, fmt.Sprintf("step %d: %%", step)); n != 1 {
			t.Errorf("step %d has %d progress events, want 1", step, n)
		}
	}
	if got, want := e.artifactNames(id), stepNames(steps); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("screenshots stored %v, want %v", got, want)
	}
	// A progress write waits for the screenshots handed over before it
	// (the timeline keeps the executor's order), so the outage may meet
	// either; one of them must have, or the test proved nothing.
	if out := w.out.String(); !strings.Contains(out, "op=progress") && !strings.Contains(out, `op="artifact `) {
		t.Fatalf("no write of the attempt met an outage: the test proved nothing\n%s", out)
	}
}

// A worker killed while its uploads wait (the server is away) leaves them
// in its spool directory; the next worker started on the same
// --spool-dir removes them, since that worker's leases are gone too.
func TestKilledWorkersSpoolIsCleanedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	server := e.startServer()
	spool := t.TempDir()
	w := e.spawn("worker home-killed", []string{"--server-url", e.apiURL, "--token", e.workerToken("home-killed"),
		"--spool-dir", spool, "--lease", "30s"})
	// Each step waits, uploads its screenshot, then reports progress. The
	// server must die while a step waits, so that the next screenshot
	// meets the outage and is spooled: a kill that lands on the progress
	// call instead blocks the sim there (progress is retried until the
	// lease ends) and nothing is spooled. 2 s steps leave the test 2 s
	// after the first progress to kill the server; with 300 ms a loaded
	// machine once missed that window.
	//
	// The kill waits for the server to have answered the first progress,
	// not only for the progress to be stored: a kill between its commit
	// and its answer (a CI run: the worker's progress call got EOF) blocks
	// the sim on that call's retries just the same.
	id := e.submit(map[string]any{"app": "com.example.killed", "sim": map[string]any{"steps": 20, "step_ms": 2000}})
	answered := fmt.Sprintf("path=/api/v1/worker/jobs/%d/progress status=204", id)
	e.eventually("the job's first progress is answered", 30*time.Second, func() bool {
		return strings.Contains(server.out.String(), answered)
	})
	time.Sleep(200 * time.Millisecond) // the answer's way back to the worker
	server.signal(t, syscall.SIGKILL)
	_ = server.wait(t, 10*time.Second)
	e.eventually("a screenshot waits in the spool", 10*time.Second, func() bool { return len(spoolFiles(t, spool)) > 0 })
	w.signal(t, syscall.SIGKILL)
	_ = w.wait(t, 10*time.Second)
	left := spoolFiles(t, spool)

	e.startWorker("next", "--artifacts", e.artifacts, "--spool-dir", spool)
	e.eventually("the killed worker's spool is removed", 10*time.Second, func() bool {
		for _, f := range left {
			if _, err := os.Stat(f); err == nil {
				return false
			}
		}
		return true
	})
}
