package testutil

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/queue"
)

// CreateSchedule creates schedule name of a report job (queue nightly) as
// of now, and fails the test if it cannot.
func CreateSchedule(t testing.TB, ctx context.Context, c *queue.Client, name, cron, tz string, now time.Time) queue.Schedule {
	t.Helper()
	s, err := c.CreateSchedule(ctx, queue.NewSchedule{
		Name: name, Cron: cron, Timezone: tz,
		Job: queue.NewJob{Kind: "report", Queue: "nightly", Payload: json.RawMessage(`{"app":"com.example.notes"}`)},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ScheduledJobs lists the idempotency keys of the jobs schedule name
// made, in the order they were made.
func ScheduledJobs(t testing.TB, ctx context.Context, pool *pgxpool.Pool, name string) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT idempotency_key FROM jobs WHERE schedule = $1 ORDER BY id`, name)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// KillJob inserts a job, claims it and fails it for good, so that it goes
// dead (and, where webhooks are on, records job.dead).
func KillJob(t testing.TB, ctx context.Context, c *queue.Client) queue.Job {
	t.Helper()
	InsertJob(t, ctx, c, Job{MaxAttempts: 3})
	j := ClaimJob(t, ctx, c, "w", "default", time.Minute)
	got, err := c.Fail(ctx, LeaseOf(j), "bad input", false)
	if err != nil || got.State != queue.StateDead {
		t.Fatalf("failing for good: %v %v", got.State, err)
	}
	return got
}

// WebhookOutbox counts the webhook outbox's events by type.
func WebhookOutbox(t testing.TB, ctx context.Context, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT type, count(*)::int FROM webhook_outbox GROUP BY type`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	var typ string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&typ, &n}, func() error { got[typ] = n; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return got
}
