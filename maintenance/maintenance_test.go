package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

type fixture struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	client *queue.Client
}

func setup(t *testing.T, maxConns int) *fixture {
	t.Helper()
	pool := testutil.NewPool(t, maxConns)
	return &fixture{ctx: testutil.Context(t), pool: pool, client: queue.NewClient(pool, nil)}
}

// insert inserts a job; unlike the queue's default, its retries are due
// at once unless o says otherwise.
func (f *fixture) insert(t *testing.T, o testutil.Job) queue.Job {
	t.Helper()
	if o.BackoffBaseMs == nil {
		o.BackoffBaseMs = ptr(int32(0))
	}
	return testutil.InsertJob(t, f.ctx, f.client, o)
}

func (f *fixture) claimOne(t *testing.T, worker string, lease time.Duration) queue.Job {
	t.Helper()
	return testutil.ClaimJob(t, f.ctx, f.client, worker, "default", lease)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, what, cond)
}

func ptr[T any](v T) *T { return &v }

// assertCountsExact compares the trigger-kept counts with COUNT(*).
func assertCountsExact(t *testing.T, f *fixture) {
	t.Helper()
	counts, err := f.client.Counts(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range queue.States {
		var n int64
		if err := f.pool.QueryRow(f.ctx, "SELECT count(*) FROM jobs WHERE state = $1", string(st)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if counts.Jobs[st] != n {
			t.Fatalf("count of %s is %d, COUNT(*) says %d", st, counts.Jobs[st], n)
		}
	}
}
