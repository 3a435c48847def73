package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// Issue 17: one bundle of an attempt with 2,000 progress messages of
// 64 KB took 1.33 GB of the server's memory, three at once 3.1 GB. The
// progress cap keeps new attempts at 200, but rows written before it (or
// by SQL, as here) must not cost their size either: three bundles at once
// of such an attempt keep the server process's peak resident set (VmHWM,
// the kernel's own count) under 100 MB, and each is complete.
func TestBundlesOfAHugeAttemptStayUnder100MB(t *testing.T) {
	e := newEnv(t)
	server := e.startServer()
	job, err := e.client().Submit(e.ctx, client.NewJob{Kind: "noop", Queue: "nobody-takes-this", Payload: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	const events, messageBytes = 2000, 65536
	if _, err := e.pool.Exec(e.ctx, `
		INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, ended_at, outcome, error)
		VALUES ($1, 1, 'w1', 1, now() - interval '1 hour', now(), 'failed', 'gave up')`, job.ID); err != nil {
		t.Fatal(err)
	}
	// Messages of random hex: what compresses in the database is still
	// 64 KB a row once read, and a bundle's zip of them is still half
	// their size. Each row is its own 64 KB slice of one 128 KB random
	// pool (a slice starts far enough from the last that deflate's 32 KB
	// window cannot reuse it): one md5 per 32 bytes of pool, not per 32
	// bytes of every row, which under a loaded CI took 2.5 of the test's
	// 3 minutes.
	inserted := time.Now()
	if _, err := e.pool.Exec(e.ctx, `
		INSERT INTO events (job_id, type, attempt, at, detail)
		SELECT $1, 'progress', 1, now() - interval '1 hour' + i * interval '1 ms',
		       jsonb_build_object('progress', 0.5, 'message', substr(pool.hex, 1 + (i * 7919) % $2, $2))
		FROM (SELECT string_agg(md5(k::text || ':' || random()::text), '') AS hex
		      FROM generate_series(1, 2 * $2 / 32) k) pool,
		     generate_series(1, $3) i`, job.ID, messageBytes, events); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events inserted in %v", events, time.Since(inserted).Round(time.Millisecond))
	before := vmHWM(t, server.cmd.Process.Pid)

	// The test process must not be what runs out of time: each bundle
	// goes to a file, not memory, and a program without the race detector
	// checks them. The downloads have their own 3 minutes, whatever the
	// insert took of the env's.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	files := make([]string, 3)
	start := time.Now()
	for i := range files {
		files[i] = filepath.Join(dir, fmt.Sprintf("bundle-%d.zip", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := download(ctx, e, fmt.Sprintf("%s/api/v1/jobs/%d/attempts/1/bundle", e.apiURL, job.ID), files[i]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	peak := vmHWM(t, server.cmd.Process.Pid)
	t.Logf("three bundles in %v; server VmHWM %d MB before, %d MB after", time.Since(start).Round(time.Millisecond), before>>20, peak>>20)
	if t.Failed() {
		return
	}
	if peak >= 100<<20 {
		t.Fatalf("server peak RSS %d MB with three bundles of a %d-event attempt, want under 100 MB", peak>>20, events)
	}
	checked := time.Now()
	checkHugeManifests(t, files, events, messageBytes)
	t.Logf("the bundles checked in %v", time.Since(checked).Round(time.Millisecond))
}

// download writes the answer to an authenticated GET into a file.
func download(ctx context.Context, e *env, url, name string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, res.StatusCode)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return f.Close()
}

// checkHugeManifests runs bundlecheck on each bundle: every event and
// every progress event is there, whole.
func checkHugeManifests(t *testing.T, files []string, events, messageBytes int) {
	t.Helper()
	check := filepath.Join(t.TempDir(), "bundlecheck")
	if out, err := exec.Command("go", "build", "-o", check, "./internal/bundlecheck").CombinedOutput(); err != nil {
		t.Fatalf("building bundlecheck: %v\n%s", err, out)
	}
	for _, name := range files {
		if out, err := exec.Command(check, name, strconv.Itoa(events), strconv.Itoa(messageBytes)).CombinedOutput(); err != nil {
			t.Errorf("%s: %v: %s", filepath.Base(name), err, out)
		}
	}
}

// vmHWM is a process's peak resident set size in bytes, as the kernel
// counts it.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}
