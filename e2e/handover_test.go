package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

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
	shipped := shippedCaddyfile(t)
	const handover = 5 * time.Second
	for _, tc := range []struct {
		name      string
		caddyfile string
		handedTo  bool // the dead worker's poll surely got the job
	}{
		{"ShippedCaddyfile", shipped, false},
		{"ClaimStreamedAsBefore", strings.Replace(shipped, "@stream path /events /events/*",
			"@stream path /events /events/* /api/v1/worker/claim", 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.handedTo && tc.caddyfile == shipped {
				t.Fatal("the Caddyfile's @stream line changed: update this test's variant")
			}
			e := newEnv(t)
			e.startServer()
			e.apiURL = e.startCaddy(tc.caddyfile).url() // workers and the client go through Caddy
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
