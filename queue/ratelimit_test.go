package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// insertRated inserts n jobs of queue q naming keys.
func (f *fixture) insertRated(t *testing.T, n int, q string, priority int32, keys ...string) []queue.Job {
	t.Helper()
	batch := make([]queue.NewJob, n)
	for i := range batch {
		batch[i] = queue.NewJob{Kind: "test", Queue: q, Priority: priority, Payload: json.RawMessage(`{}`), RateLimits: keys}
	}
	jobs, err := f.client.InsertMany(f.ctx, batch)
	if err != nil {
		t.Fatalf("inserting: %v", err)
	}
	return jobs
}

func (f *fixture) setBudgets(t *testing.T, key string, budgets ...string) queue.RateLimit {
	t.Helper()
	rl, err := f.client.SetRateLimit(f.ctx, key, budgets, "user:tester")
	if err != nil {
		t.Fatalf("setting budgets of %s: %v", key, err)
	}
	return rl
}

// dbDay is the database clock's day (UTC), the window of a N/day budget.
func (f *fixture) dbDay(t *testing.T) string {
	t.Helper()
	var day string
	if err := f.pool.QueryRow(f.ctx, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')").Scan(&day); err != nil {
		t.Fatal(err)
	}
	return day
}

// nextDay is the database clock, rounded down to the minute, plus a day:
// a time the tests name (queue.Client.At) so that no real window edge
// falls inside a test.
func (f *fixture) nextDay(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := f.pool.QueryRow(f.ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now.Add(24 * time.Hour).Truncate(time.Minute).Add(10 * time.Second)
}

// claimConcurrently has claimers goroutines claim from queue q with c
// until a round of all of them finds nothing, and returns what they took.
func claimConcurrently(t *testing.T, f *fixture, c *queue.Client, claimers int, q string) []queue.Job {
	t.Helper()
	var mu sync.Mutex
	var got []queue.Job
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range claimers {
		wg.Go(func() {
			empty := 0
			for empty < 3 {
				jobs, err := c.Claim(f.ctx, queue.ClaimParams{WorkerID: "w" + string(rune('a'+w%26)), Queues: []string{q}, Limit: 3, Lease: time.Minute})
				if err != nil {
					failed.Store(err)
					return
				}
				if len(jobs) == 0 {
					empty++
					continue
				}
				mu.Lock()
				got = append(got, jobs...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("claiming: %v", err)
	}
	return got
}

func TestRateLimitExactUnderConcurrentClaimers(t *testing.T) {
	t.Parallel()
	f := setup(t, 70)
	f.setBudgets(t, "llm:openai", "50/min", "10000/day")
	f.insertRated(t, 500, "default", 0, "llm:openai")
	t1 := f.nextDay(t)

	// 64 claimers at once, in one window: exactly the budget, each job once.
	first := claimConcurrently(t, f, f.client.At(t1), 64, "default")
	if len(first) != 50 {
		t.Fatalf("64 claimers took %d jobs in one window of a 50/min budget, want exactly 50", len(first))
	}
	seen := map[int64]bool{}
	for _, j := range first {
		if seen[j.ID] {
			t.Fatalf("job %d claimed twice", j.ID)
		}
		seen[j.ID] = true
	}
	// The next minute's window gives 50 more, and no more.
	second := claimConcurrently(t, f, f.client.At(t1.Add(time.Minute)), 64, "default")
	if len(second) != 50 {
		t.Fatalf("the next window gave %d jobs, want 50", len(second))
	}
	for _, j := range second {
		if seen[j.ID] {
			t.Fatalf("job %d claimed twice", j.ID)
		}
	}
	rls, err := f.client.At(t1.Add(time.Minute)).RateLimits(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rls) != 1 || len(rls[0].Budgets) != 2 || rls[0].Budgets[0].Used != 50 || rls[0].Budgets[1].Used != 100 {
		t.Fatalf("budgets after two windows = %+v, want 50 of the minute and 100 of the day spent", rls)
	}
	if want := t1.Add(time.Minute).Truncate(time.Minute).Add(time.Minute); !rls[0].Budgets[0].WindowEnd.Equal(want) {
		t.Errorf("minute window ends %v, want %v", rls[0].Budgets[0].WindowEnd, want)
	}
}

func TestRateLimitedJobDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.setBudgets(t, "spent", "1/h")
	held := f.insertRated(t, 30, "default", 0, "spent")
	unlimited := f.insertRated(t, 5, "default", 1, "no-budget-set")
	free := f.insertLimited(t, 5, limited{queue: "default", priority: 2})
	at := f.client.At(f.nextDay(t))

	var got []queue.Job
	for range 3 {
		jobs, err := at.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 20, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, jobs...)
	}
	if len(got) != 11 {
		t.Fatalf("claimed %d jobs, want 11: one of the spent key's, 5 of a key without budget, 5 free", len(got))
	}
	count := map[int64]int{}
	for _, j := range got {
		count[j.ID]++
	}
	n := 0
	for _, j := range held {
		n += count[j.ID]
	}
	if n != 1 {
		t.Errorf("%d jobs of the 1/h key claimed, want 1", n)
	}
	for _, j := range append(unlimited, free...) {
		if count[j.ID] != 1 {
			t.Errorf("job %d (behind the spent key's) claimed %d times, want once", j.ID, count[j.ID])
		}
	}
}

func TestRateLimitJobWithTwoKeysNeedsBoth(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.setBudgets(t, "a", "3/min")
	f.setBudgets(t, "b", "2/min")
	both := f.insertRated(t, 5, "default", 0, "a", "b")
	onlyA := f.insertRated(t, 5, "default", 1, "a")
	onlyB := f.insertRated(t, 5, "default", 2, "b")
	at := f.client.At(f.nextDay(t))
	got := claimConcurrently(t, f, at, 4, "default")
	which := map[int64]string{}
	for _, j := range both {
		which[j.ID] = "ab"
	}
	for _, j := range onlyA {
		which[j.ID] = "a"
	}
	for _, j := range onlyB {
		which[j.ID] = "b"
	}
	n := map[string]int{}
	for _, j := range got {
		n[which[j.ID]]++
	}
	// Two jobs of both keys spend b; a has one unit left for a job of a.
	if n["ab"] != 2 || n["a"] != 1 || n["b"] != 0 {
		t.Fatalf("claimed %v, want 2 of both keys, 1 of a alone, none of b alone", n)
	}
}

func TestWhyWaitingRateLimited(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w1", []string{"phones"}, nil, "")
	f.setBudgets(t, "llm:openai", "2/h", "100/day")
	jobs := f.insertRated(t, 3, "phones", 0, "llm:openai")
	// Before anything is spent the job is ready.
	wantKind(t, f.why(t, jobs[2].ID), queue.WaitReady)
	f.claimAll(t, "w1", nil, 2)

	w := f.why(t, jobs[2].ID)
	wantKind(t, w, queue.WaitRateLimited)
	if w.Key != "llm:openai" || w.Until == nil {
		t.Fatalf("waiting = %+v, want key llm:openai and an until", w)
	}
	var now time.Time
	if err := f.pool.QueryRow(f.ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	if want := now.Truncate(time.Hour).Add(time.Hour); !w.Until.Equal(want) {
		t.Errorf("until = %v, want the hour window's end %v", w.Until, want)
	}
	// Raising the budget lets it run.
	f.setBudgets(t, "llm:openai", "3/h")
	wantKind(t, f.why(t, jobs[2].ID), queue.WaitReady)
}

func TestRateLimitValidation(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", queue.MaxRateLimitKey+1)
	nine := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}
	key := "k"
	for name, tc := range map[string]struct {
		keys  []string
		ckey  *string
		field string
	}{
		"TooMany":    {nine, nil, "rate_limits"},
		"Empty":      {[]string{"a", ""}, nil, "rate_limits[1]"},
		"TooLong":    {[]string{long}, nil, "rate_limits[0]"},
		"Control":    {[]string{"a\nb"}, nil, "rate_limits[0]"},
		"Duplicate":  {[]string{"a", "b", "a"}, nil, "rate_limits[2]"},
		"KeyTooLong": {[]string{"a"}, new(strings.Repeat("k", queue.MaxConcurrencyKey+1)), "concurrency_key"},
	} {
		t.Run(name, func(t *testing.T) {
			nj := queue.NewJob{Kind: "test", RateLimits: tc.keys, ConcurrencyKey: tc.ckey}
			var ve *queue.ValidationError
			if err := nj.Normalize(); !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("Normalize = %v, want a validation error of %s", err, tc.field)
			}
		})
	}
	ok := queue.NewJob{Kind: "test", RateLimits: nine[:8]}
	if err := ok.Normalize(); err != nil {
		t.Fatalf("8 keys: %v", err)
	}
	withKey := queue.NewJob{Kind: "test", RateLimits: []string{"a"}, ConcurrencyKey: &key}
	if err := withKey.Normalize(); err != nil {
		t.Fatalf("rate limits with a concurrency key: %v", err)
	}

	for in, want := range map[string]queue.Budget{
		"60/min": {60, time.Minute}, " 5 / s ": {5, time.Second}, "10000/day": {10000, 24 * time.Hour}, "7/h": {7, time.Hour},
	} {
		if got, err := queue.ParseBudget(in); err != nil || got != want {
			t.Errorf("ParseBudget(%q) = %v, %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "60", "0/min", "-1/min", "60/week", "1e3/min", "99999999999/min", "/min", "60/"} {
		if got, err := queue.ParseBudget(in); err == nil {
			t.Errorf("ParseBudget(%q) = %v, want an error", in, got)
		}
	}
}

func TestSetRateLimitSemantics(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	var ve *queue.ValidationError
	if _, err := f.client.SetRateLimit(f.ctx, "k", []string{"1/min", "2/min"}, "t"); !errors.As(err, &ve) || ve.Field != "budgets[1]" {
		t.Errorf("two budgets for one window: %v, want a validation error of budgets[1]", err)
	}
	if _, err := f.client.SetRateLimit(f.ctx, "", []string{"1/min"}, "t"); !errors.As(err, &ve) || ve.Field != "key" {
		t.Errorf("empty key: %v", err)
	}
	rl := f.setBudgets(t, "k", "10/day", "60/min")
	if len(rl.Budgets) != 2 || rl.Budgets[0].String() != "60/min" || rl.Budgets[1].String() != "10/day" || *rl.Budgets[0].UpdatedBy != "user:tester" {
		t.Fatalf("set = %+v", rl)
	}
	// Replacing drops the windows not named.
	rl = f.setBudgets(t, "k", "5/s")
	if len(rl.Budgets) != 1 || rl.Budgets[0].String() != "5/s" {
		t.Fatalf("replaced = %+v", rl)
	}
	if err := f.client.DeleteRateLimit(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := f.client.DeleteRateLimit(f.ctx, "k"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := f.client.RateLimit(f.ctx, "k"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("deleted key: %v, want ErrNotFound", err)
	}
}

// A worker whose queues have limits (a capped queue) claims through the
// limited claim, which must still find the rate-limited jobs of its other
// queue, and leave the capped queue's rate-limited jobs alone.
func TestRateLimitedJobsBesideALimitedQueue(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	two := int32(2)
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: &two})
	f.insertLimited(t, 5, limited{queue: "capped"})
	f.insertLimited(t, 3, limited{queue: "capped", key: "k", limit: 1})
	at := f.client.At(f.nextDay(t))
	claim := func() []queue.Job {
		jobs, err := at.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"capped", "llm"}, Limit: 50, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	// The client learns that limits apply, and that no rate-limited job
	// is due: from now on its claims are limited ones.
	got := append(claim(), claim()...)
	f.setBudgets(t, "llm", "4/h")
	rated := f.insertRated(t, 6, "llm", 0, "llm")
	for range 4 {
		got = append(got, claim()...)
	}
	n := map[string]int{}
	for _, j := range got {
		n[j.Queue]++
	}
	if n["llm"] != 4 {
		t.Errorf("claimed %d of the 1/h key's %d jobs beside a capped queue, want 4 (its budget)", n["llm"], len(rated))
	}
	if n["capped"] != 2 {
		t.Errorf("claimed %d of the capped queue, want 2 (its cap)", n["capped"])
	}
}

// A schedule's job keeps its rate-limit keys for every tick (through the
// JSON it is stored as), and they are checked as a submitted job's.
func TestScheduleJobKeepsRateLimits(t *testing.T) {
	t.Parallel()
	sj, err := queue.ScheduleJobOf(queue.NewJob{Kind: "test", RateLimits: []string{"llm:openai", "llm:all"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(sj)
	if err != nil {
		t.Fatal(err)
	}
	var stored queue.ScheduleJob
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if got := stored.NewJob().RateLimits; strings.Join(got, ",") != "llm:openai,llm:all" {
		t.Fatalf("tick job rate_limits = %v", got)
	}
	var ve *queue.ValidationError
	if _, err := queue.ScheduleJobOf(queue.NewJob{Kind: "test", RateLimits: []string{"a", "a"}}); !errors.As(err, &ve) || ve.Field != "job.rate_limits[1]" {
		t.Fatalf("duplicate key in a schedule's job: %v", err)
	}
}

// Rate limits combine with queue caps and concurrency keys: a job that
// names rate-limit keys in a capped queue, or with a concurrency key, is
// claimed only within the cap and the key's limit as well as its budgets,
// counted together with the jobs that name none; a paused queue's are not
// claimed; a queue where such jobs wait can be capped. Its wait reason is
// the limit that holds it.
func TestRateLimitsCombineWithCapsAndKeys(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	f.seen(t, "w", []string{"phones"}, nil, "")
	f.setBudgets(t, "llm:x", "3/day")
	llm := []string{"llm:x"}
	// The queue is capped while rate-limited jobs wait in it.
	f.insertLimited(t, 2, limited{queue: "phones", rates: []string{"llm:free"}})
	f.patch(t, queue.QueuePatch{MaxRunning: new(int32(2))})
	f.insertLimited(t, 2, limited{queue: "phones"})
	claim := func() []queue.Job {
		t.Helper()
		var got []queue.Job
		for range 3 { // the first claims learn which limits apply
			jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"phones"}, Limit: 50, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, jobs...)
		}
		return got
	}
	capped := claim()
	if len(capped) != 2 {
		t.Fatalf("claimed %d jobs of a queue capped at 2 (rated and not), want 2", len(capped))
	}
	waiting, _, err := f.client.List(f.ctx, queue.Filter{Queue: "phones", State: queue.StatePending}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(waiting) != 2 {
		t.Fatalf("%d jobs wait behind the cap, want 2", len(waiting))
	}
	for _, j := range waiting {
		wantKind(t, f.why(t, j.ID), queue.WaitQueueAtCap)
	}
	f.patch(t, queue.QueuePatch{ClearMaxRunning: true})
	if got := claim(); len(got) != 2 {
		t.Fatalf("claimed %d jobs once the cap was removed, want the other 2", len(got))
	}

	// One job per phone, whether the job names rate-limit keys or not:
	// the running job holds the key for both kinds.
	rated := f.insertLimited(t, 3, limited{queue: "phones", key: "pixel-1", limit: 1, rates: llm})
	f.insertLimited(t, 2, limited{queue: "phones", key: "pixel-1", limit: 1})
	f.insertLimited(t, 3, limited{queue: "phones", key: "pixel-2", limit: 2, rates: []string{"llm:free"}})
	got := claim()
	n := map[string]int{}
	var pixel1 queue.Job
	for _, j := range got {
		n[*j.ConcurrencyKey]++
		if *j.ConcurrencyKey == "pixel-1" {
			pixel1 = j
		}
	}
	if n["pixel-1"] != 1 || n["pixel-2"] != 2 || len(got) != 3 {
		t.Fatalf("claimed %v, want 1 of pixel-1 (limit 1) and 2 of pixel-2 (limit 2)", n)
	}
	for _, j := range rated {
		if j.ID != pixel1.ID {
			wantKind(t, f.why(t, j.ID), queue.WaitKeyHeld)
		}
	}
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(pixel1), nil); err != nil {
		t.Fatal(err)
	}
	if next := claim(); len(next) != 1 || *next[0].ConcurrencyKey != "pixel-1" {
		t.Fatalf("after pixel-1's job ended claimed %d jobs, want one of pixel-1", len(next))
	}

	// The budget holds for keyed jobs: llm:x allows 3 a day, and 5
	// pixels with room ask for more.
	for i := range 5 {
		f.insertLimited(t, 1, limited{queue: "phones", key: fmt.Sprintf("phone-%d", i), limit: 1, rates: llm})
	}
	day := f.dbDay(t)
	claim()
	var started int
	if err := f.pool.QueryRow(f.ctx, "SELECT count(*) FROM jobs WHERE 'llm:x' = ANY(rate_limits) AND attempt > 0").Scan(&started); err != nil {
		t.Fatal(err)
	}
	if f.dbDay(t) == day && started != 3 {
		t.Fatalf("%d jobs of a 3/day key were started, want 3", started)
	}

	// A paused queue's rated keyed jobs are not claimed.
	f.insertLimited(t, 2, limited{queue: "held", key: "pixel-9", limit: 1, rates: []string{"llm:free"}})
	f.patchQueue(t, "held", queue.QueuePatch{Paused: new(true)})
	if jobs := f.claim(t, "w2", 10, "held"); len(jobs) != 0 {
		t.Fatalf("claimed %d jobs of a paused queue", len(jobs))
	}
}
