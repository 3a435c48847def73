package queue_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// An attempt keeps its newest ProgressKept progress events (issue 17: 2,000
// messages of 64 KB made one attempt's reads cost a gigabyte). The write
// past the cap deletes the oldest; one progress_dropped event counts them
// and stands on the timeline where they were, before the kept ones. The
// count is exact when the lease holder writes concurrently.
func TestProgressCappedPerAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	job := f.insert(t, jobOpts{})
	held := f.claimOne(t, "w1", time.Minute)
	l := queue.Lease{JobID: held.ID, Token: held.LeaseToken, WorkerID: "w1"}
	const extra = 30
	for i := range queue.ProgressKept + extra {
		if err := f.client.Progress(f.ctx, l, 0.5, fmt.Sprintf("step %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	progress, dropped := f.progressOf(t, job.ID)
	if len(progress) != queue.ProgressKept || progress[0] != fmt.Sprintf("step %d", extra) ||
		progress[len(progress)-1] != fmt.Sprintf("step %d", queue.ProgressKept+extra-1) {
		t.Fatalf("kept %d progress events, %q … %q; want the newest %d", len(progress), progress[0], progress[len(progress)-1], queue.ProgressKept)
	}
	if dropped != extra {
		t.Fatalf("progress_dropped counts %d, want %d", dropped, extra)
	}

	// Concurrent writes of the same lease: still the cap, still one count.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if err := f.client.Progress(f.ctx, l, 0.5, fmt.Sprintf("concurrent %d.%d", g, i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	progress, dropped = f.progressOf(t, job.ID)
	if len(progress) != queue.ProgressKept || dropped != extra+40 {
		t.Fatalf("after concurrent writes: %d kept, %d dropped; want %d, %d", len(progress), dropped, queue.ProgressKept, extra+40)
	}

	// A refused write (stale token) neither writes nor drops.
	stale := queue.Lease{JobID: held.ID, Token: held.LeaseToken + 1, WorkerID: "w1"}
	if err := f.client.Progress(f.ctx, stale, 0.5, "stale"); err == nil {
		t.Fatal("a stale token's progress was accepted")
	}
	if _, d := f.progressOf(t, job.ID); d != extra+40 {
		t.Fatalf("a refused write changed the count to %d", d)
	}
}

// progressOf reads the job's progress messages in timeline order and the
// count of its progress_dropped event, which must come before them all
// and be the only one.
func (f *fixture) progressOf(t *testing.T, jobID int64) (messages []string, dropped int) {
	t.Helper()
	d, err := f.client.Detail(f.ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range d.Events {
		switch e.Type {
		case "progress":
			var p struct{ Message string }
			if err := json.Unmarshal(e.Detail, &p); err != nil {
				t.Fatal(err)
			}
			messages = append(messages, p.Message)
		case "progress_dropped":
			seen++
			if len(messages) > 0 {
				t.Fatalf("progress_dropped after %d kept progress events, want before them", len(messages))
			}
			var p struct{ Dropped, Kept int }
			if err := json.Unmarshal(e.Detail, &p); err != nil {
				t.Fatal(err)
			}
			if p.Kept != queue.ProgressKept {
				t.Fatalf("progress_dropped says %d kept, want %d", p.Kept, queue.ProgressKept)
			}
			dropped = p.Dropped
		}
	}
	if seen > 1 {
		t.Fatalf("%d progress_dropped events, want one", seen)
	}
	return messages, dropped
}
