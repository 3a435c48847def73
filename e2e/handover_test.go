package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testutil"
)

// startCaddy runs Caddy in front of e's server with caddyfile (the shipped
// deploy/Caddyfile, or a variant of it) on plain HTTP on a free port, and
// returns its URL. The site address and the upstream come from the
// environment, as in production (LEASEHOLD_DOMAIN, LEASEHOLD_UPSTREAM);
// a global block turns off Caddy's admin endpoint (one port for every
// Caddy of the machine), and its autosave goes to a directory of the test.
func (e *env) startCaddy(caddyfile string) string {
	e.t.Helper()
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		e.t.Skip("caddy is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := e.t.TempDir()
	config := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(config, []byte("{\n\tadmin off\n}\n\n"+caddyfile), 0o600); err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(caddy, "run", "--config", config, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir,
		"LEASEHOLD_DOMAIN=http://"+addr, "LEASEHOLD_UPSTREAM="+e.addr)
	out := &testutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if e.t.Failed() {
			e.t.Logf("--- output of caddy ---\n%s", out.String())
		}
	})
	url := "http://" + addr
	e.eventually("caddy proxies the server", 20*time.Second, func() bool {
		resp, err := http.Get(url + "/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}

// A remote worker behind Caddy is stopped while idle on its long poll and
// a job for its phone comes 2 s later, before the replacement worker is
// up (a routine restart). The job never spends an attempt on the worker
// that has gone (SPEC lease rule 11): 0 counted attempts, no lease
// expiry, and it runs on the new worker within about 2 s of the hand-over
// deadline (5 s). With the shipped Caddyfile the dead worker's poll ends
// within about 2 s; with the Caddyfile of before, which streamed the
// claim (flush_interval -1) and so held the dead poll for 25 s, the job is
// handed to the dead worker and must come back not_delivered.
func TestStoppedRemoteWorkerBehindCaddyStrandsNoJob(t *testing.T) {
	t.Parallel()
	shipped, err := os.ReadFile("../deploy/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	const handover = 5 * time.Second
	for _, tc := range []struct {
		name      string
		caddyfile string
		handedTo  bool // the dead worker's poll surely got the job
	}{
		{"ShippedCaddyfile", string(shipped), false},
		{"ClaimStreamedAsBefore", strings.Replace(string(shipped), "@stream path /events /events/*",
			"@stream path /events /events/* /api/v1/worker/claim", 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.handedTo && tc.caddyfile == string(shipped) {
				t.Fatal("the Caddyfile's @stream line changed: update this test's variant")
			}
			e := newEnv(t)
			e.startServer()
			e.apiURL = e.startCaddy(tc.caddyfile) // workers and the client go through Caddy
			first := e.startRemoteWorker("phone-old", e.workerToken("phone-old"))
			// A first job, so that the worker's next claim (its long poll)
			// is known to be on its way: a slot claims again as soon as
			// its executor ends, before the outcome is written.
			warmUp := e.submit(map[string]any{"app": "com.example.warm", "sim": map[string]any{"steps": 1, "step_ms": 10}})
			e.waitFor(warmUp, 30*time.Second, client.StateSucceeded)
			time.Sleep(time.Second) // into its long poll, at the server
			first.signal(t, syscall.SIGTERM)
			if err := first.wait(t, 10*time.Second); err != nil {
				t.Fatalf("the idle worker's exit: %v", err)
			}

			time.Sleep(2 * time.Second)
			job := e.submit(map[string]any{"app": "com.example.notes", "sim": map[string]any{"steps": 1, "step_ms": 100}})
			submitted := time.Now()
			second := e.startRemoteWorker("phone-new", e.workerToken("phone-new"))
			d := e.waitFor(job, 30*time.Second, client.StateSucceeded)
			took := time.Since(submitted)

			if d.CountedAttempts != 0 {
				t.Fatalf("%d counted attempts, want 0", d.CountedAttempts)
			}
			var undelivered int
			for _, a := range d.Attempts[:len(d.Attempts)-1] {
				if a.Outcome == nil || *a.Outcome != "not_delivered" || a.WorkerID != "phone-old" {
					t.Fatalf("attempt %d by %s ended %v, want only not_delivered hand-overs to the stopped worker",
						a.Number, a.WorkerID, a.Outcome)
				}
				undelivered++
			}
			if tc.handedTo && undelivered != 1 {
				t.Fatalf("%d hand-overs to the stopped worker, want the one its held poll took", undelivered)
			}
			if last := d.Attempts[len(d.Attempts)-1]; last.WorkerID != "phone-new" {
				t.Fatalf("succeeded on %s, want phone-new", last.WorkerID)
			}
			for _, ev := range d.Events {
				if ev.Type == "lease_expired" || ev.Type == "failed" {
					t.Fatalf("event %s on the job: %v", ev.Type, ev.Detail)
				}
			}
			// Within about 2 s of the hand-over deadline, the 100 ms job
			// and the new worker's start-up included.
			if took > handover+2*time.Second {
				t.Fatalf("the job succeeded %v after it was submitted, want within %v", took, handover+2*time.Second)
			}
			t.Logf("succeeded %v after submission, %d hand-overs not delivered", took.Round(time.Millisecond), undelivered)
			second.signal(t, syscall.SIGTERM)
		})
	}
}
