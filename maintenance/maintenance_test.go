package maintenance_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/queue"
)

type fixture struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	client *queue.Client
}

func setup(t *testing.T, maxConns int) *fixture {
	t.Helper()
	url := dbtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &fixture{ctx: ctx, pool: pool, client: queue.NewClient(pool, nil)}
}

type jobOpts struct {
	kind, queue    string
	payload        string
	maxAttempts    int32
	backoffBase    int32
	backoffMax     int32
	idempotencyKey string
	timeoutMs      int32
}

func (f *fixture) insert(t *testing.T, o jobOpts) queue.Job {
	t.Helper()
	nj := queue.NewJob{Kind: cmpOr(o.kind, "test"), Queue: o.queue, Payload: json.RawMessage(cmpOr(o.payload, `{}`))}
	if o.maxAttempts > 0 {
		nj.MaxAttempts = &o.maxAttempts
	}
	nj.BackoffBaseMs = &o.backoffBase
	if o.backoffMax > 0 {
		nj.BackoffMaxMs = &o.backoffMax
	}
	if o.idempotencyKey != "" {
		nj.IdempotencyKey = &o.idempotencyKey
	}
	if o.timeoutMs > 0 {
		nj.TimeoutMs = &o.timeoutMs
	}
	job, _, err := f.client.Insert(f.ctx, nj)
	if err != nil {
		t.Fatalf("inserting job: %v", err)
	}
	return job
}

func (f *fixture) claimOne(t *testing.T, worker string, lease time.Duration) queue.Job {
	t.Helper()
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: worker, Queues: []string{"default"}, Limit: 1, Lease: lease})
	if err != nil {
		t.Fatalf("claiming: %v", err)
	}
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	return jobs[0]
}

func leaseOf(j queue.Job) queue.Lease {
	return queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: *j.LeaseOwner}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
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
