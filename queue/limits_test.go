package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// limited is a job to insert for the limit tests.
type limited struct {
	queue    string
	key      string
	limit    int32
	priority int32
	rates    []string // rate-limit keys
}

func (f *fixture) insertLimited(t *testing.T, n int, l limited) []queue.Job {
	t.Helper()
	batch := make([]queue.NewJob, n)
	for i := range batch {
		nj := queue.NewJob{Kind: "test", Queue: l.queue, Priority: l.priority, Payload: json.RawMessage(`{}`),
			BackoffBaseMs: new(int32)}
		if l.key != "" {
			nj.ConcurrencyKey = &l.key
		}
		if l.limit > 0 {
			nj.ConcurrencyLimit = &l.limit
		}
		nj.RateLimits = l.rates
		batch[i] = nj
	}
	jobs, err := f.client.InsertMany(f.ctx, batch)
	if err != nil {
		t.Fatalf("inserting: %v", err)
	}
	return jobs
}

func (f *fixture) patchQueue(t *testing.T, name string, p queue.QueuePatch) queue.QueueInfo {
	t.Helper()
	q, err := f.client.PatchQueue(f.ctx, name, p, "user:tester")
	if err != nil {
		t.Fatalf("patching queue %s: %v", name, err)
	}
	return q
}

func (f *fixture) claim(t *testing.T, worker string, limit int, queues ...string) []queue.Job {
	t.Helper()
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: queues, Limit: limit, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claiming: %v", err)
	}
	return jobs
}

func TestPausedQueueIsNeverClaimedAndResumeWakesAWorker(t *testing.T) {
	t.Parallel()
	f := setup(t, 24)
	f.patchQueue(t, "held", queue.QueuePatch{Paused: new(true)})
	f.insertLimited(t, 200, limited{queue: "held"})
	f.insertLimited(t, 20, limited{queue: "held", key: "k", limit: 5})

	// 16 claimers hammer the paused queue, with a free queue beside it
	// that they must keep draining.
	free := f.insertLimited(t, 300, limited{queue: "free", priority: 5})
	var wrong atomic.Int64
	var got atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for got.Load() < int64(len(free)) {
				jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{
					WorkerID: fmt.Sprintf("w%d", w), Queues: []string{"held", "free"}, Limit: 1 + rand.IntN(8), Lease: time.Minute,
				})
				if err != nil {
					t.Error(err)
					return
				}
				for _, j := range jobs {
					if j.Queue == "held" {
						wrong.Add(1)
					}
					got.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// And a while more on the paused queue alone.
	for range 50 {
		if jobs := f.claim(t, "late", 10, "held"); len(jobs) > 0 {
			wrong.Add(int64(len(jobs)))
		}
	}
	if wrong.Load() > 0 {
		t.Fatalf("%d jobs of a paused queue were claimed", wrong.Load())
	}
	if got.Load() != int64(len(free)) {
		t.Fatalf("claimed %d jobs of the free queue, want %d", got.Load(), len(free))
	}
	q, err := f.client.Queue(f.ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Paused || q.PausedBy == nil || *q.PausedBy != "user:tester" || q.PausedAt == nil || q.Pending != 220 || q.Running != 0 {
		t.Fatalf("paused queue reads %+v", q)
	}

	// A worker waits for the queue as an idle worker does; resume wakes it.
	n := queue.NewJobNotifier(f.pool, nil)
	nctx, stop := context.WithCancel(f.ctx)
	defer stop()
	go n.Run(nctx)
	w := n.Waiter()
	for w.Wait(f.ctx, []string{"held"}) != nil { // the listener's first wake-up: it is listening now
	}
	woken := make(chan time.Time, 1)
	go func() {
		if err := w.Wait(f.ctx, []string{"held"}); err == nil {
			woken <- time.Now()
		}
	}()
	resumed := time.Now()
	f.patchQueue(t, "held", queue.QueuePatch{Paused: new(false)})
	select {
	case at := <-woken:
		jobs := f.claim(t, "woken", 50, "held")
		took := time.Since(resumed)
		t.Logf("resume to wake-up %v, to %d jobs claimed %v", at.Sub(resumed), len(jobs), took)
		// 5 keyed (limit 5) and 45 of the rest, in claim order.
		if len(jobs) != 50 {
			t.Fatalf("claimed %d jobs after resume, want 50", len(jobs))
		}
		if took > time.Second {
			t.Fatalf("claimed %v after resume", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("resume woke no waiting worker")
	}
	q, _ = f.client.Queue(f.ctx, "held")
	if q.Paused || q.PausedBy == nil || q.Running != 50 || q.Pending != 170 {
		t.Fatalf("resumed queue reads %+v", q)
	}
}

// interval is one attempt as a claimer saw it: within the time the
// database held the job running, so overlaps seen here are real.
type interval struct {
	group      string
	start, end time.Time
}

// checkLimits fails the test for each limit that was exceeded, and for
// each under which nothing ran (most is maxOverlap's answer).
func checkLimits(t *testing.T, most, limits map[string]int) {
	t.Helper()
	for g, limit := range limits {
		if most[g] > limit {
			t.Errorf("%s: %d ran at once, limit %d", g, most[g], limit)
		}
		if most[g] == 0 {
			t.Errorf("%s: nothing ran", g)
		}
	}
}

// maxOverlap is the most intervals of one group open at one moment.
func maxOverlap(intervals []interval) map[string]int {
	type edge struct {
		at   time.Time
		open int
	}
	byGroup := map[string][]edge{}
	for _, iv := range intervals {
		byGroup[iv.group] = append(byGroup[iv.group], edge{iv.start, 1}, edge{iv.end, -1})
	}
	most := map[string]int{}
	for g, edges := range byGroup {
		// Ends before starts at the same instant: touching is not overlapping.
		slices.SortFunc(edges, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.open - b.open
		})
		open := 0
		for _, e := range edges {
			open += e.open
			most[g] = max(most[g], open)
		}
	}
	return most
}

func TestLimitsHoldUnderConcurrentClaimers(t *testing.T) {
	t.Parallel()
	f := setup(t, 72)
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: new(int32(2))})
	// 2,000 jobs: a capped queue (some of its jobs keyed too), 14 phones
	// with a limit of 1 and an account with a limit of 3. Each limit
	// makes at most about 120 rounds of claims, so that the test measures
	// the limits rather than how slowly one key's jobs take turns on a
	// busy machine.
	f.insertLimited(t, 200, limited{queue: "capped"})
	f.insertLimited(t, 50, limited{queue: "capped", key: "both", limit: 1}) // under both limits
	limits := map[string]int{"queue:capped": 2, "key:both": 1, "key:account-3": 3}
	for i := range 14 {
		key := fmt.Sprintf("phone-%d", i)
		f.insertLimited(t, 100, limited{queue: "keyed", key: key, limit: 1})
		limits["key:"+key] = 1
	}
	f.insertLimited(t, 350, limited{queue: "keyed", key: "account-3", limit: 3})
	const total = 2000
	// Longer than the fixture's two minutes: under the race detector on a
	// loaded machine a claim can take a tenth of a second.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var intervals []interval
	var finished atomic.Int64
	var claimNanos, claims atomic.Int64
	defer func() {
		t.Logf("%d claims, %v each on average", claims.Load(), time.Duration(claimNanos.Load()/max(claims.Load(), 1)))
	}()
	var wg sync.WaitGroup
	deadline := time.Now().Add(4 * time.Minute)
	for w := range 64 {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", w)
			idle := 10 * time.Millisecond
			for finished.Load() < total && time.Now().Before(deadline) {
				t0 := time.Now()
				jobs, err := f.client.Claim(ctx, queue.ClaimParams{
					WorkerID: worker, Queues: []string{"capped", "keyed"}, Limit: 1 + rand.IntN(3), Lease: time.Minute,
				})
				claimNanos.Add(int64(time.Since(t0)))
				claims.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					// Idle, as a polling worker is: it waits longer after
					// each empty answer, up to a second. With a fixed few
					// milliseconds, 64 claimers kept the database busy
					// answering "nothing" until each claim took 635 ms on
					// CI and the jobs did not finish in four minutes.
					time.Sleep(idle/2 + rand.N(idle/2))
					idle = min(2*idle, time.Second)
					continue
				}
				idle = 10 * time.Millisecond
				start := time.Now()
				time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
				end := time.Now()
				for _, j := range jobs {
					var groups []string
					if j.Queue == "capped" {
						groups = append(groups, "queue:capped")
					}
					if j.ConcurrencyKey != nil {
						groups = append(groups, "key:"+*j.ConcurrencyKey)
					}
					// Most succeed; some fail and come back (backoff 0),
					// some are released: every way an attempt ends must
					// free its room.
					var err error
					switch r := rand.IntN(10); {
					case r == 0 && j.Attempt < 3:
						_, err = f.client.Fail(ctx, testutil.LeaseOf(j), "flaky", true)
					case r == 1 && j.Attempt < 3:
						_, err = f.client.Release(ctx, testutil.LeaseOf(j))
					default:
						_, err = f.client.Complete(ctx, testutil.LeaseOf(j), nil)
						finished.Add(1)
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, g := range groups {
						intervals = append(intervals, interval{group: g, start: start, end: end})
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if finished.Load() != total {
		t.Fatalf("%d of %d jobs finished", finished.Load(), total)
	}
	most := maxOverlap(intervals)
	t.Logf("most at once: %v over %d attempts", most, len(intervals))
	checkLimits(t, most, limits)
	// The test would see a breach: the account key's limit of 3 is reached.
	if most["key:account-3"] < 2 {
		t.Errorf("account-3 never ran two at once (%d): the claimers did not contend", most["key:account-3"])
	}
}

func TestLimitedJobsDoNotHoldBackTheOthers(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: new(int32(1))})
	f.patchQueue(t, "paused", queue.QueuePatch{Paused: new(true)})
	// The limited ones come first in claim order.
	f.insertLimited(t, 30, limited{queue: "default", key: "k", priority: -2})
	f.insertLimited(t, 30, limited{queue: "capped", priority: -2})
	f.insertLimited(t, 30, limited{queue: "paused", priority: -2})
	f.insertLimited(t, 2, limited{queue: "default", key: "other", priority: -1})
	f.insertLimited(t, 100, limited{queue: "default", priority: 5})
	queues := []string{"default", "capped", "paused"}

	first := f.claim(t, "a", 3, queues...)
	if len(first) != 3 {
		t.Fatalf("first claim took %d jobs, want 3", len(first))
	}
	counts := func(jobs []queue.Job) map[string]int {
		m := map[string]int{}
		for _, j := range jobs {
			switch {
			case j.ConcurrencyKey != nil:
				m["key:"+*j.ConcurrencyKey]++
			default:
				m[j.Queue]++
			}
		}
		return m
	}
	// A full batch, filled past every job a limit holds back.
	batch := f.claim(t, "b", 60, queues...)
	all := counts(append(batch, first...))
	want := map[string]int{"key:k": 1, "capped": 1, "key:other": 1, "default": 60}
	if len(batch) != 60 || !maps.Equal(all, want) {
		t.Fatalf("claims took %v (batch of %d), want %v", all, len(batch), want)
	}
	// The rest of the free jobs, though the limited ones still wait.
	start := time.Now()
	rest := f.claim(t, "c", 100, queues...)
	if len(rest) != 40 {
		t.Fatalf("last claim took %d jobs, want the 40 free ones left", len(rest))
	}
	t.Logf("last claim %v", time.Since(start))
}

func TestEveryEndOfAKeyedAttemptFreesItsKey(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	f.insertLimited(t, 6, limited{queue: "default", key: "phone", limit: 1})
	next := func(t *testing.T, lease time.Duration) queue.Job {
		t.Helper()
		jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 5, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 {
			t.Fatalf("claimed %d keyed jobs, want 1", len(jobs))
		}
		if more := f.claim(t, "w2", 5, "default"); len(more) != 0 {
			t.Fatalf("a second job of the key was claimed while one runs")
		}
		return jobs[0]
	}

	// Completion.
	j := next(t, time.Minute)
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(j), nil); err != nil {
		t.Fatal(err)
	}
	// A permanent failure (dead); then its manual retry waits its turn.
	j = next(t, time.Minute)
	dead, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "broken", false)
	if err != nil || dead.State != queue.StateDead {
		t.Fatalf("fail: %v %v", dead.State, err)
	}
	// Cancel of a running job, acknowledged by its worker.
	j = next(t, time.Minute)
	if _, err := f.client.CancelOne(f.ctx, j.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if more := f.claim(t, "w2", 5, "default"); len(more) != 0 {
		t.Fatal("a job asked to stop still holds its key until it stops")
	}
	if _, err := f.client.AckCancel(f.ctx, testutil.LeaseOf(j)); err != nil {
		t.Fatal(err)
	}
	// An expired lease, reaped.
	j = next(t, 100*time.Millisecond)
	r := maintenance.NewReaper(f.pool, maintenance.ReaperConfig{})
	rctx, stop := context.WithCancel(f.ctx)
	defer stop()
	go func() { _ = r.Run(rctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := f.client.Get(f.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != queue.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired keyed job was not reaped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	j = next(t, time.Minute) // the reaped one or the next: either way, one
	// The dead one retried by hand waits while its key is taken.
	if _, err := f.client.RetryOne(f.ctx, dead.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if more := f.claim(t, "w2", 5, "default"); len(more) != 0 {
		t.Fatal("a retried job ran beside another of its key")
	}
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(j), nil); err != nil {
		t.Fatal(err)
	}
	next(t, time.Minute)
}

func TestFreedKeyWakesWaitingWorkers(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	f.insertLimited(t, 2, limited{queue: "default", key: "phone"})
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: new(int32(1))})
	f.insertLimited(t, 2, limited{queue: "capped"})
	n := queue.NewJobNotifier(f.pool, nil)
	nctx, stop := context.WithCancel(f.ctx)
	defer stop()
	go n.Run(nctx)
	w := n.Waiter()
	for w.Wait(f.ctx, []string{"default"}) != nil {
	}
	for _, q := range []string{"default", "capped"} {
		held := f.claim(t, "a", 5, q)
		if len(held) != 1 || len(f.claim(t, "b", 5, q)) != 0 {
			t.Fatalf("%s: the limit did not hold", q)
		}
		w := n.Waiter()
		woken := make(chan struct{})
		go func() {
			if w.Wait(f.ctx, []string{q}) == nil {
				close(woken)
			}
		}()
		if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(held[0]), nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-woken:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: a completion that freed room woke nobody", q)
		}
		if len(f.claim(t, "b", 5, q)) != 1 {
			t.Fatalf("%s: the next job was not claimable", q)
		}
	}
}

func TestPatchQueueSemantics(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	q := f.patchQueue(t, "fresh", queue.QueuePatch{MaxRunning: new(int32(3))})
	if q.Paused || q.MaxRunning == nil || *q.MaxRunning != 3 || q.PausedBy != nil {
		t.Fatalf("created: %+v", q)
	}
	q = f.patchQueue(t, "fresh", queue.QueuePatch{Paused: new(true)})
	if !q.Paused || *q.MaxRunning != 3 || q.PausedBy == nil || *q.PausedBy != "user:tester" {
		t.Fatalf("paused: %+v", q)
	}
	pausedAt := *q.PausedAt
	q, err := f.client.PatchQueue(f.ctx, "fresh", queue.QueuePatch{Paused: new(true)}, "token:other")
	if err != nil || *q.PausedBy != "user:tester" || !q.PausedAt.Equal(pausedAt) {
		t.Fatalf("pausing again changed who paused: %+v %v", q, err)
	}
	q = f.patchQueue(t, "fresh", queue.QueuePatch{ClearMaxRunning: true})
	if !q.Paused || q.MaxRunning != nil {
		t.Fatalf("cleared: %+v", q)
	}
	q = f.patchQueue(t, "fresh", queue.QueuePatch{})
	if !q.Paused || q.MaxRunning != nil {
		t.Fatalf("empty patch changed something: %+v", q)
	}
	for _, bad := range []string{"", "Upper", "a b", string(make([]byte, 65))} {
		if _, err := f.client.PatchQueue(f.ctx, bad, queue.QueuePatch{}, "x"); err == nil {
			t.Errorf("queue name %q accepted", bad)
		}
	}
	if _, err := f.client.PatchQueue(f.ctx, "fresh", queue.QueuePatch{MaxRunning: new(int32(-1))}, "x"); err == nil {
		t.Error("negative cap accepted")
	}
	list, err := f.client.Queues(f.ctx)
	if err != nil || len(list) != 1 || list[0].Name != "fresh" {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// A queue whose every job is running is listed, with its count: the skip
// through jobs_queue_id_idx, which holds no running job, cannot see it.
func TestQueuesListsQueuesWhoseJobsAllRun(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.insertLimited(t, 2, limited{queue: "busy"})
	f.insertLimited(t, 3, limited{queue: "mixed"})
	if got := len(f.claim(t, "w1", 2, "busy")); got != 2 {
		t.Fatalf("claimed %d of busy's 2 jobs", got)
	}
	if got := len(f.claim(t, "w2", 1, "mixed")); got != 1 {
		t.Fatalf("claimed %d of mixed's jobs, want 1", got)
	}
	f.patchQueue(t, "only-settings", queue.QueuePatch{MaxRunning: new(int32(2))})
	list, err := f.client.Queues(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	type counts struct{ pending, running int64 }
	got := map[string]counts{}
	var names []string
	for _, q := range list {
		got[q.Name] = counts{q.Pending, q.Running}
		names = append(names, q.Name)
	}
	want := map[string]counts{"busy": {0, 2}, "mixed": {2, 1}, "only-settings": {0, 0}}
	if !maps.Equal(got, want) || !slices.IsSorted(names) {
		t.Fatalf("queues %v (in order %v), want %v by name", got, names, want)
	}
}
