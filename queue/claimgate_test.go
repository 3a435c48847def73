package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One notification wakes every waiting long poll. Only a few claim at a
// time, and once a claim that began after the notification comes back
// empty, the others skip theirs: three jobs for forty waiters cost a
// handful of claims, not forty. A later notification is claimed for again.
func TestClaimGateSkipsClaimsOnceTheJobsAreGone(t *testing.T) {
	t.Parallel()
	n := NewJobNotifier(nil, nil)
	gate := NewClaimGate(n, 4)
	var available, claims atomic.Int64
	claim := func() ([]Job, error) {
		claims.Add(1)
		time.Sleep(2 * time.Millisecond) // a claim statement takes a moment
		if available.Add(-1) >= 0 {
			return []Job{{ID: 1}}, nil
		}
		available.Add(1)
		return nil, nil
	}
	p := ClaimParams{Queues: []string{"default"}}
	round := func(waiters int, jobs int64) (got int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ready := sync.WaitGroup{}
		var wg sync.WaitGroup
		var won atomic.Int64
		for range waiters {
			ready.Add(1)
			wg.Go(func() {
				w := n.Waiter()
				ready.Done()
				if err := w.Wait(ctx, p.Queues); err != nil {
					t.Error(err)
					return
				}
				jobs, err := gate.Claim(ctx, w, p, claim)
				if err != nil {
					t.Error(err)
				}
				won.Add(int64(len(jobs)))
			})
		}
		ready.Wait()
		available.Store(jobs)
		n.publish("default")
		wg.Wait()
		return won.Load()
	}

	if got := round(40, 3); got != 3 {
		t.Fatalf("the waiters got %d jobs, want 3", got)
	}
	if c := claims.Load(); c > 3+4 {
		t.Fatalf("%d claims for 3 jobs and 40 waiters, want at most the 3 that win and one per slot", c)
	}
	// A new notification is not skipped because of the old empty claim.
	claims.Store(0)
	if got := round(10, 2); got != 2 {
		t.Fatalf("after a second notification the waiters got %d jobs, want 2", got)
	}
	if c := claims.Load(); c < 2 || c > 2+4 {
		t.Fatalf("%d claims for the second notification", c)
	}
}

// A long poll's first claim is skipped when a claim of the same key came
// back empty after the last notification: the polls of an idle fleet that
// end and begin again cost nothing. A notification published since (of
// any queue), another key, or a first claim that found jobs each claim.
func TestClaimGateFirstSkipsOnlyWhatNothingCanHaveChanged(t *testing.T) {
	t.Parallel()
	n := NewJobNotifier(nil, nil)
	gate := NewClaimGate(n, 4)
	var claims, available int
	claim := func() ([]Job, error) {
		claims++
		if available > 0 {
			available--
			return []Job{{ID: 1}}, nil
		}
		return nil, nil
	}
	p := ClaimParams{Queues: []string{"default"}}
	first := func(p ClaimParams) int {
		jobs, err := gate.First(n.Waiter(), p, claim)
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	n.publish("") // the listener's first session
	if first(p); claims != 1 {
		t.Fatalf("%d claims for the first poll, want 1", claims)
	}
	for range 5 {
		first(p)
	}
	if claims != 1 {
		t.Fatalf("%d claims after five more polls with nothing published, want still 1", claims)
	}
	if first(ClaimParams{Queues: []string{"default"}, Devices: []string{"pixel"}}); claims != 2 {
		t.Fatalf("another key: %d claims, want 2", claims)
	}
	n.publish("other") // any notification: the gate does not judge its queues
	available = 1
	if got := first(p); got != 1 || claims != 3 {
		t.Fatalf("after a notification: got %d jobs in %d claims, want 1 in 3", got, claims)
	}
	// A claim that found a job records nothing: the next poll claims.
	if first(p); claims != 4 {
		t.Fatalf("after a claim that took a job: %d claims, want 4", claims)
	}
	if first(p); claims != 4 {
		t.Fatalf("after that one came back empty: %d claims, want still 4", claims)
	}
}

// Time alone can make a job claimable (an availability window opens, a
// rate-limit window ends) without any notification, so an empty claim
// is trusted only for the gate's memory: within it, the next polls of
// the key skip their first claim; after it, one claims again.
func TestClaimGateForgetsEmptyClaimsAfterItsMemory(t *testing.T) {
	t.Parallel()
	n := NewJobNotifier(nil, nil)
	gate := NewClaimGate(n, 4)
	gate.memory = 300 * time.Millisecond
	var claims atomic.Int64
	empty := func() ([]Job, error) { claims.Add(1); return nil, nil }
	p := ClaimParams{Queues: []string{"phones"}, Devices: []string{"pixel7"}}

	if _, err := gate.First(n.Waiter(), p, empty); err != nil || claims.Load() != 1 {
		t.Fatalf("first poll: %d claims (%v), want 1", claims.Load(), err)
	}
	for range 5 {
		if _, err := gate.First(n.Waiter(), p, empty); err != nil {
			t.Fatal(err)
		}
	}
	if got := claims.Load(); got != 1 {
		t.Fatalf("polls within the memory made %d claims, want the first only", got)
	}
	time.Sleep(350 * time.Millisecond)
	opened := func() ([]Job, error) { claims.Add(1); return []Job{{ID: 7}}, nil }
	jobs, err := gate.First(n.Waiter(), p, opened)
	if err != nil || len(jobs) != 1 || claims.Load() != 2 {
		t.Fatalf("a poll past the memory: %d jobs, %d claims (%v); want the job, 2 claims", len(jobs), claims.Load(), err)
	}
	if ClaimGateMemory > 30*time.Second {
		t.Fatalf("ClaimGateMemory %v: a job opened by time alone would wait longer than the online window", ClaimGateMemory)
	}
}
