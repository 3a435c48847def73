package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// TestLimitsHoldUnderBatchClaims is TestLimitsHoldUnderConcurrentClaimers
// with claims as a busy direct worker makes them: up to 40 jobs at once,
// over a capped queue, keyed jobs (one per phone), a free queue and a
// paused one together, completed in batches. A batch claim takes its
// limited jobs and its free ones in one transaction; half the workers
// complete each batch with CompleteManyThenClaim, which claims their
// next jobs in the completions' transaction. Jobs that name rate-limit
// keys are among them, under the same cap and keys (claimed by the
// rate-limited claim, which takes the same locks), and 40 of them spend
// a tight budget of 25 a day. None of it may let a limit or the budget
// run over, or a paused queue's job be claimed.
func TestLimitsHoldUnderBatchClaims(t *testing.T) {
	t.Parallel()
	f := setup(t, 72)
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: new(int32(8))})
	f.patchQueue(t, "held", queue.QueuePatch{Paused: new(true)})
	f.setBudgets(t, "llm:tight", "25/day")
	day := f.dbDay(t)
	llm := []string{"llm:any"}
	f.insertLimited(t, 200, limited{queue: "capped"})
	f.insertLimited(t, 100, limited{queue: "capped", rates: llm})
	limits := map[string]int{"queue:capped": 8}
	for i := range 30 {
		key := fmt.Sprintf("phone-%d", i)
		f.insertLimited(t, 15, limited{queue: "keyed", key: key, limit: 1})
		f.insertLimited(t, 5, limited{queue: "keyed", key: key, limit: 1, rates: llm})
		limits["key:"+key] = 1
	}
	for i := range 4 {
		key := fmt.Sprintf("tight-%d", i)
		f.insertLimited(t, 10, limited{queue: "keyed", key: key, limit: 1, rates: []string{"llm:tight", "llm:any"}})
		limits["key:"+key] = 1
	}
	f.insertLimited(t, 300, limited{queue: "free"})
	f.insertLimited(t, 100, limited{queue: "held"})
	f.insertLimited(t, 10, limited{queue: "held", key: "held-phone", limit: 1})
	f.insertLimited(t, 10, limited{queue: "held", key: "held-phone", limit: 1, rates: llm})
	const total = 300 + 30*20 + 25 + 300
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var intervals []interval
	var finished, paused, freeInBatch, thenClaimed, tight atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(4 * time.Minute)
	for w := range 64 {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", w)
			params := func() queue.ClaimParams {
				return queue.ClaimParams{
					WorkerID: worker, Queues: []string{"capped", "keyed", "free", "held"}, Limit: 1 + rand.IntN(40), Lease: time.Minute,
				}
			}
			var next []queue.Job // claimed with the last completions
			for finished.Load() < total && time.Now().Before(deadline) {
				jobs := next
				next = nil
				if len(jobs) == 0 {
					var err error
					if jobs, err = f.client.Claim(ctx, params()); err != nil {
						t.Error(err)
						return
					}
				}
				if len(jobs) == 0 {
					time.Sleep(time.Duration(2000+rand.IntN(3000)) * time.Microsecond)
					continue
				}
				limited, free := false, false
				for _, j := range jobs {
					limited = limited || j.Queue != "free"
					free = free || j.Queue == "free"
				}
				if limited && free {
					freeInBatch.Add(1)
				}
				start := time.Now()
				time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
				end := time.Now()
				cs := make([]queue.Completion, len(jobs))
				mu.Lock()
				for i, j := range jobs {
					cs[i] = queue.Completion{Lease: testutil.LeaseOf(j)}
					if j.Queue == "held" {
						paused.Add(1)
					}
					if j.Queue == "capped" {
						intervals = append(intervals, interval{group: "queue:capped", start: start, end: end})
					}
					if j.ConcurrencyKey != nil {
						intervals = append(intervals, interval{group: "key:" + *j.ConcurrencyKey, start: start, end: end})
					}
					if slices.Contains(j.RateLimits, "llm:tight") {
						tight.Add(1)
					}
				}
				mu.Unlock()
				var errs []error
				var err error
				if w%2 == 1 {
					errs, next, err = f.client.CompleteManyThenClaim(ctx, cs, params())
					thenClaimed.Add(int64(len(next)))
				} else {
					errs, err = f.client.CompleteMany(ctx, cs)
				}
				if err = errors.Join(append(errs, err)...); err != nil {
					t.Error(err)
					return
				}
				finished.Add(int64(len(jobs)))
			}
		})
	}
	wg.Wait()
	if paused.Load() > 0 {
		t.Fatalf("%d jobs of a paused queue were claimed", paused.Load())
	}
	if f.dbDay(t) != day {
		t.Skip("the budget's day window ended during the test")
	}
	if tight.Load() != 25 {
		t.Errorf("%d jobs of the 25/day key were claimed, want exactly 25", tight.Load())
	}
	if finished.Load() != total {
		t.Fatalf("%d of %d jobs finished", finished.Load(), total)
	}
	most := maxOverlap(intervals)
	keyMost := 0
	for g, n := range most {
		if g != "queue:capped" {
			keyMost = max(keyMost, n)
		}
	}
	t.Logf("most at once: capped queue %d, any key %d; %d claims took limited and free jobs together; %d jobs claimed by completions",
		most["queue:capped"], keyMost, freeInBatch.Load(), thenClaimed.Load())
	if thenClaimed.Load() == 0 {
		t.Error("no completion claimed a job")
	}
	checkLimits(t, most, limits)
	// The test would see a breach: the cap is reached.
	if most["queue:capped"] < 2 {
		t.Errorf("the capped queue never ran two at once (%d): the claimers did not contend", most["queue:capped"])
	}
	q, err := f.client.Queue(f.ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if q.Pending != 120 || q.Running != 0 {
		t.Fatalf("paused queue reads %+v", q)
	}
}
