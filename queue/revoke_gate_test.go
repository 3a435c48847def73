package queue_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// TestClaimGatedOnWorkerToken: a claim made with a worker token takes
// nothing once the token is revoked, on the fast and the limited path,
// even when the revoke commits while the claim runs (the claim waits for
// it and reads the token again), and says why (ErrTokenRevoked).
func TestClaimGatedOnWorkerToken(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	store := apitoken.NewStore(f.pool)
	_, tok, err := store.Create(f.ctx, "rv", apitoken.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	p := queue.ClaimParams{WorkerID: "rv", Queues: []string{"default"}, Limit: 10, Lease: time.Hour, TokenID: tok.ID}

	f.insert(t, jobOpts{})
	if jobs, err := f.client.Claim(f.ctx, p); err != nil || len(jobs) != 1 {
		t.Fatalf("claim with an active token: %d jobs, %v; want 1", len(jobs), err)
	}
	// Nothing to take, token active: no jobs, no error.
	if jobs, err := f.client.Claim(f.ctx, p); err != nil || len(jobs) != 0 {
		t.Fatalf("empty claim with an active token: %d jobs, %v", len(jobs), err)
	}

	free := f.insert(t, jobOpts{})
	key := "k"
	keyed, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "test", Payload: json.RawMessage(`{}`), ConcurrencyKey: &key})
	if err != nil {
		t.Fatal(err)
	}

	// A revoke in progress: its update holds the token's row. The claim
	// starts before it commits and must not take a job after it.
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(f.ctx) }()
	if _, err := tx.Exec(f.ctx, `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, tok.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		jobs []queue.Job
		err  error
	}
	done := make(chan result, 1)
	go func() {
		jobs, err := f.client.Claim(f.ctx, p)
		done <- result{jobs, err}
	}()
	// The claim waits for the revoke's lock on the token's row.
	testutil.Eventually(t, 10*time.Second, "the claim to wait for the revoke", func() bool {
		var n int
		err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM api_tokens%'`).Scan(&n)
		return err == nil && n > 0
	})
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if !errors.Is(r.err, queue.ErrTokenRevoked) || len(r.jobs) != 0 {
			t.Fatalf("claim racing the revoke: %d jobs, %v; want none, ErrTokenRevoked", len(r.jobs), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the claim did not return within 10 s of the revoke's commit")
	}

	// After the revoke, on both paths (the keyed job is claimed by the
	// limited one).
	for i := 0; i < 2; i++ {
		if jobs, err := f.client.Claim(f.ctx, p); !errors.Is(err, queue.ErrTokenRevoked) || len(jobs) != 0 {
			t.Fatalf("claim %d after the revoke: %d jobs, %v; want none, ErrTokenRevoked", i, len(jobs), err)
		}
	}
	for _, id := range []int64{free.ID, keyed.ID} {
		j, err := f.client.Get(f.ctx, id)
		if err != nil || j.State != queue.StatePending {
			t.Errorf("job %d: %s, %v; want pending", id, j.State, err)
		}
	}
	// A direct claim is gated by no token.
	if jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "rv", Queues: []string{"default"}, Limit: 10}); err != nil || len(jobs) != 2 {
		t.Fatalf("direct claim: %d jobs, %v; want 2", len(jobs), err)
	}
}
