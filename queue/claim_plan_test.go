package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// The claim runs its cached generic plan: PostgreSQL would otherwise plan
// it again on every call (it costs the generic plan higher, not knowing
// the LIMIT), and planning was 3 µs per job claimed.
func TestClaimUsesItsGenericPlan(t *testing.T) {
	t.Parallel()
	f := setup(t, 1) // one connection: the one whose prepared statements are read
	for range 30 {
		f.insert(t, jobOpts{})
	}
	for range 10 {
		jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"default"}, Limit: 3, Lease: time.Minute})
		if err != nil || len(jobs) != 3 {
			t.Fatalf("claimed %d (%v), want 3", len(jobs), err)
		}
	}
	if generic, custom := plansRun(t, f, "JobClaim"); generic != 10 || custom != 0 {
		t.Fatalf("the claim ran %d generic and %d custom plans, want 10 and 0", generic, custom)
	}
}

// plansRun is how many generic and custom plans the statement query (its
// sqlc name) ran on f's one connection, whose plan_cache_mode must be as
// it was: the setting is each claim's transaction's only.
func plansRun(t *testing.T, f *fixture, query string) (generic, custom int64) {
	t.Helper()
	if err := f.pool.QueryRow(f.ctx, `
		SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '-- name: ' || $1 || ' :many%'`, query).Scan(&generic, &custom); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := f.pool.QueryRow(f.ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != "auto" {
		t.Fatalf("plan_cache_mode after the claims: %q %v", mode, err)
	}
	return generic, custom
}

// A limited claim, and the one completions make (CompleteManyThenClaim),
// run their cached generic plans too: PostgreSQL planned JobClaimLimited
// again on most calls, 1.8 ms each, more than it took to run.
func TestLimitedClaimUsesItsGenericPlan(t *testing.T) {
	t.Parallel()
	f := setup(t, 1) // one connection: the one whose prepared statements are read
	f.patchQueue(t, "capped", queue.QueuePatch{MaxRunning: new(int32(3))})
	f.insertLimited(t, 40, limited{queue: "capped"})
	p := queue.ClaimParams{WorkerID: "w1", Queues: []string{"capped"}, Limit: 10, Lease: time.Minute}
	jobs, err := f.client.Claim(f.ctx, p) // learns that a limit applies, then claims within it
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claimed %d (%v), want 3", len(jobs), err)
	}
	for range 10 {
		cs := make([]queue.Completion, len(jobs))
		for i, j := range jobs {
			cs[i] = queue.Completion{Lease: testutil.LeaseOf(j)}
		}
		var errs []error
		errs, jobs, err = f.client.CompleteManyThenClaim(f.ctx, cs, p)
		if err = errors.Join(append(errs, err)...); err != nil || len(jobs) != 3 {
			t.Fatalf("claimed %d (%v), want 3", len(jobs), err)
		}
	}
	if generic, custom := plansRun(t, f, "JobClaimLimited"); generic != 11 || custom != 0 {
		t.Fatalf("the limited claim ran %d generic and %d custom plans, want 11 and 0", generic, custom)
	}
}
