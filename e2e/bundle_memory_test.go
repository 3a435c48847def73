package e2e

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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
	// 64 KB a row once read.
	if _, err := e.pool.Exec(e.ctx, `
		INSERT INTO events (job_id, type, attempt, at, detail)
		SELECT $1, 'progress', 1, now() - interval '1 hour' + i * interval '1 ms',
		       jsonb_build_object('progress', 0.5, 'message',
		           left((SELECT string_agg(md5(i::text || ':' || k::text || random()::text), '') FROM generate_series(1, $2 / 32 + 1) k), $2))
		FROM generate_series(1, $3) i`, job.ID, messageBytes, events); err != nil {
		t.Fatal(err)
	}
	before := vmHWM(t, server.cmd.Process.Pid)

	var wg sync.WaitGroup
	start := time.Now()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/attempts/1/bundle", e.apiURL, job.ID), nil)
			req.Header.Set("Authorization", "Bearer "+e.token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil || res.StatusCode != http.StatusOK {
				t.Errorf("bundle: status %d, %v", res.StatusCode, err)
				return
			}
			checkHugeManifest(t, body, events, messageBytes)
		}()
	}
	wg.Wait()
	peak := vmHWM(t, server.cmd.Process.Pid)
	t.Logf("three bundles in %v; server VmHWM %d MB before, %d MB after", time.Since(start).Round(time.Millisecond), before>>20, peak>>20)
	if peak >= 100<<20 {
		t.Fatalf("server peak RSS %d MB with three bundles of a %d-event attempt, want under 100 MB", peak>>20, events)
	}
}

// checkHugeManifest reads attempt.json of a bundle without keeping its
// messages: every event and every progress event is there, whole.
func checkHugeManifest(t *testing.T, body []byte, events, messageBytes int) {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Errorf("not a zip (%d bytes): %v", len(body), err)
		return
	}
	for _, f := range zr.File {
		if f.Name != "attempt.json" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Error(err)
			return
		}
		defer rc.Close()
		type event struct {
			Type   string `json:"type"`
			Detail struct {
				Message string `json:"message"`
			} `json:"detail"`
		}
		var m struct {
			Attempt struct {
				Number int `json:"number"`
			} `json:"attempt"`
			Events   []event `json:"events"`
			Progress []event `json:"progress"`
		}
		if err := json.NewDecoder(rc).Decode(&m); err != nil {
			t.Errorf("attempt.json: %v", err)
			return
		}
		if m.Attempt.Number != 1 || len(m.Progress) != events || len(m.Events) < events {
			t.Errorf("attempt.json: attempt %d, %d events, %d progress; want 1, ≥%d, %d", m.Attempt.Number, len(m.Events), len(m.Progress), events, events)
		}
		for _, e := range m.Progress {
			if len(e.Detail.Message) != messageBytes {
				t.Errorf("a progress message of %d bytes in the bundle, want %d", len(e.Detail.Message), messageBytes)
				return
			}
		}
		return
	}
	t.Error("no attempt.json in the bundle")
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
