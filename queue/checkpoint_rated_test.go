package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// A job that names a rate-limit key is claimed by the rate-limited
// claim, not JobClaim: its retry still receives the checkpoint and the
// timeline still says where it resumed, and the retry spends budget
// like any claim. The claims and the budget's count are read at a time
// the test names, so that no minute's edge falls between the two claims
// (the budget's window is a fixed minute).
func TestCheckpointRateLimitedClaim(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	f.setBudgets(t, "llm:cp", "10/min")
	job := f.insertRated(t, 1, "rated-cp", 0, "llm:cp")[0]
	at := f.client.At(f.nextDay(t))
	first := testutil.ClaimJob(t, f.ctx, at, "w1", "rated-cp", time.Minute)
	if first.ID != job.ID {
		t.Fatalf("claimed %d, want %d", first.ID, job.ID)
	}
	if err := f.client.SaveCheckpoint(f.ctx, testutil.LeaseOf(first), 6, json.RawMessage(`{"screen":"login"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(first), "phone went away", true); err != nil {
		t.Fatal(err)
	}
	second := testutil.ClaimJob(t, f.ctx, at, "w2", "rated-cp", time.Minute) // due: the retry's backoff ends before at
	if second.ID != job.ID || second.Checkpoint == nil || second.Checkpoint.Step != 6 {
		t.Fatalf("rate-limited claim of the retry: job %d checkpoint %+v, want job %d at step 6", second.ID, second.Checkpoint, job.ID)
	}
	got := f.events(t, job.ID, "resumed")
	if len(got) != 1 || got[0].Attempt == nil || *got[0].Attempt != 2 {
		t.Fatalf("resumed events %+v, want one of attempt 2", got)
	}
	var detail struct{ Step int }
	if err := json.Unmarshal(got[0].Detail, &detail); err != nil || detail.Step != 6 {
		t.Fatalf("resumed event detail %s (%v), want step 6", got[0].Detail, err)
	}
	rls, err := at.RateLimits(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var used int64 = -1
	for _, rl := range rls {
		if rl.Key == "llm:cp" {
			used = int64(rl.Budgets[0].Used)
		}
	}
	if used != 2 {
		t.Fatalf("budget used %d, want 2 (two claims)", used)
	}
}
