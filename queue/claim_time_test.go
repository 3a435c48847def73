package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
)

// TestAttemptStartsWhenItsClaimTakesIt: a claim that waits inside its
// transaction dates the attempt from when it took the job, not from when
// the transaction began (now()). Its counts may rely on a completion
// committed while it waited, and an attempt dated from before that
// completion looks on the timeline as if it ran beside the attempt whose
// room it took: two at once on a phone of limit 1 (e2e
// TestRateLimitedPhonesRunOneAtATime saw three in a queue capped at 2).
// The claims here wait as they do in use: a rate-limited one for the
// budgets another claimer holds, a limited one for its worker token's row
// (which a revoke holds).
func TestAttemptStartsWhenItsClaimTakesIt(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	_, tok, err := apitoken.NewStore(f.pool).Create(f.ctx, "stamp", apitoken.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	f.setBudgets(t, "llm:stamp", "1000/day")
	p := queue.ClaimParams{WorkerID: "stamp", Queues: []string{"default"}, Limit: 10, Lease: time.Minute, TokenID: tok.ID}
	// The rate-limited claim as a worker makes it (the first statement
	// waits for the budgets, the second takes the job).
	claim := func() ([]int64, error) {
		for range 5 {
			jobs, err := f.client.Claim(f.ctx, p)
			if err != nil || len(jobs) > 0 {
				var ids []int64
				for _, j := range jobs {
					ids = append(ids, j.ID)
				}
				return ids, err
			}
		}
		return nil, nil
	}
	// The limited claim's second statement, in a transaction that began
	// before it (as its first statement's does): a worker's own claim
	// would wait for its token in the fast claim first, in a transaction
	// of its own.
	limitedClaim := func() ([]int64, error) {
		tx, err := f.pool.Begin(f.ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		rows, err := db.New(tx).JobClaimLimited(f.ctx, db.JobClaimLimitedParams{
			TokenID: &tok.ID, WorkerID: "stamp", Devices: []string{}, Queues: []string{"default"},
			LockedKeys: []string{"pixel-k"}, LockedKeyLimits: []int32{1}, Max: 10, LeaseMs: 60_000, WakeBelowMs: 1,
		})
		if err != nil {
			return nil, err
		}
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids, tx.Commit(f.ctx)
	}

	for _, c := range []struct {
		name  string
		job   limited
		hold  string // what another transaction holds, so that the claim waits
		args  []any
		claim func() ([]int64, error)
	}{
		{"rate-limited", limited{queue: "default", key: "pixel-r", limit: 1, rates: []string{"llm:stamp"}},
			`SELECT 1 FROM rate_limit_budgets WHERE key = 'llm:stamp' FOR UPDATE`, nil, claim},
		{"limited", limited{queue: "default", key: "pixel-k", limit: 1},
			`SELECT 1 FROM api_tokens WHERE id = $1 FOR UPDATE`, []any{tok.ID}, limitedClaim},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := f.insertLimited(t, 1, c.job)[0]
			hold, err := f.pool.Begin(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = hold.Rollback(context.Background()) }()
			if _, err := hold.Exec(f.ctx, c.hold, c.args...); err != nil {
				t.Fatal(err)
			}
			var holder int32
			if err := hold.QueryRow(f.ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
				t.Fatal(err)
			}

			type result struct {
				ids []int64
				err error
			}
			done := make(chan result, 1)
			go func() {
				ids, err := c.claim()
				done <- result{ids, err}
			}()
			// The claim waits for the holder (a lock wait PostgreSQL can
			// see) in the transaction that takes the job.
			deadline := time.Now().Add(10 * time.Second)
			for {
				var waiting bool
				if err := f.pool.QueryRow(f.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`, holder).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if waiting {
					break
				}
				select {
				case r := <-done:
					t.Fatalf("the claim ended without waiting for the holder: %v, %v", r.ids, r.err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("no claim waited for the holder")
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			var released time.Time
			if err := hold.QueryRow(f.ctx, `SELECT clock_timestamp()`).Scan(&released); err != nil {
				t.Fatal(err)
			}
			if err := hold.Commit(f.ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || len(r.ids) != 1 || r.ids[0] != job.ID {
				t.Fatalf("claimed %v, %v; want job %d", r.ids, r.err, job.ID)
			}
			var started, beat, until time.Time
			if err := f.pool.QueryRow(f.ctx, `SELECT attempt_started_at, heartbeat_at, lease_until FROM jobs WHERE id = $1`, job.ID).Scan(&started, &beat, &until); err != nil {
				t.Fatal(err)
			}
			if started.Before(released) {
				t.Fatalf("the attempt starts at %v, %v before the claim stopped waiting", started, released.Sub(started))
			}
			if !beat.Equal(started) || !until.Equal(started.Add(time.Minute)) {
				t.Fatalf("heartbeat %v and lease %v, want the attempt's start %v and a minute after it", beat, until, started)
			}
		})
	}
}
