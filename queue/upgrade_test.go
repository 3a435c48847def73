package queue_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// The hot-path migration (7) upgrades a database of the schema before it,
// holding jobs in every state with their history as that schema wrote it,
// without losing or doubling anything a reader sees.
func TestHotPathMigrationUpgradesHistory(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg := f.migratedTo(t, 6)
	// Jobs as version 6 kept them: every attempt a row from its claim on,
	// every transition an event.
	for _, sql := range []string{
		`INSERT INTO jobs (kind, state, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until,
		                   counted_attempts, last_error, result, finished_at, idempotency_key, created_at)
		 VALUES ('t', 'pending',   0, NULL, 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, now() - interval '9 min'),
		        ('t', 'running',   1, 'w1', 11, now() - interval '8 min', now() - interval '1 s', now() + interval '1 min', 0, NULL, NULL, NULL, 'k-run', now() - interval '9 min'),
		        ('t', 'succeeded', 1, 'w1', 12, now() - interval '8 min', now() - interval '7 min', now() - interval '6 min', 0, NULL, '{"ok":true}', now() - interval '7 min', NULL, now() - interval '9 min'),
		        ('t', 'dead',      2, 'w2', 14, now() - interval '6 min', now() - interval '6 min', now() - interval '5 min', 2, 'boom', NULL, now() - interval '6 min', NULL, now() - interval '9 min'),
		        ('t', 'pending',   1, 'w1', 15, now() - interval '8 min', now() - interval '8 min', now() - interval '7 min', 1, 'lease expired', NULL, NULL, NULL, now() - interval '9 min'),
		        ('t', 'cancelled', 1, 'w1', 16, now() - interval '8 min', now() - interval '8 min', now() - interval '7 min', 0, NULL, NULL, now() - interval '7 min', NULL, now() - interval '9 min'),
		        ('t', 'succeeded', 2, 'w2', 18, now() - interval '5 min', now() - interval '5 min', now() - interval '4 min', 1, 'boom', '{}', now() - interval '5 min', NULL, now() - interval '9 min')`,
		`INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome, error)
		 VALUES (2, 1, 'w1', 11, now() - interval '8 min', NULL, NULL, NULL, NULL, NULL),
		        (3, 1, 'w1', 12, now() - interval '8 min', now() - interval '7 min', now() - interval '6 min', now() - interval '7 min', 'succeeded', NULL),
		        (4, 1, 'w1', 13, now() - interval '8 min', now() - interval '8 min', now() - interval '7 min', now() - interval '7 min', 'failed', 'boom'),
		        (4, 2, 'w2', 14, now() - interval '6 min', now() - interval '6 min', now() - interval '5 min', now() - interval '6 min', 'failed', 'boom'),
		        (5, 1, 'w1', 15, now() - interval '8 min', now() - interval '8 min', now() - interval '7 min', now() - interval '7 min', 'lease_expired', 'lease expired'),
		        (6, 1, 'w1', 16, now() - interval '8 min', now() - interval '8 min', now() - interval '7 min', now() - interval '7 min', 'cancelled', NULL),
		        (7, 1, 'w1', 17, now() - interval '8 min', now() - interval '8 min', now() - interval '7 min', now() - interval '7 min', 'failed', 'boom'),
		        (7, 2, 'w2', 18, now() - interval '5 min', now() - interval '5 min', now() - interval '4 min', now() - interval '5 min', 'succeeded', NULL)`,
		`INSERT INTO events (job_id, at, type, attempt, detail)
		 SELECT id, created_at, 'created', NULL, '{}' FROM jobs`,
		`INSERT INTO events (job_id, at, type, attempt, detail)
		 SELECT job_id, started_at, 'claimed', number, '{}' FROM attempts`,
		`INSERT INTO events (job_id, at, type, attempt, detail)
		 SELECT job_id, ended_at, CASE outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled'
		        WHEN 'lease_expired' THEN 'lease_expired' ELSE 'failed' END, number, '{}'
		 FROM attempts WHERE ended_at IS NOT NULL`,
	} {
		if _, err := f.pool.Exec(f.ctx, sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}

	want := map[int64]struct {
		outcomes []string // "" for a running attempt
		timeline []string
	}{
		1: {nil, []string{"created"}},
		2: {[]string{""}, []string{"created", "claimed"}},
		3: {[]string{"succeeded"}, []string{"created", "claimed", "succeeded"}},
		4: {[]string{"failed", "failed"}, []string{"created", "claimed", "failed", "claimed", "failed"}},
		5: {[]string{"lease_expired"}, []string{"created", "claimed", "lease_expired"}},
		6: {[]string{"cancelled"}, []string{"created", "claimed", "cancelled"}},
		7: {[]string{"failed", "succeeded"}, []string{"created", "claimed", "failed", "claimed", "succeeded"}},
	}
	for id, w := range want {
		d, err := f.client.Detail(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var outcomes, timeline []string
		for i, a := range d.Attempts {
			if int(a.Number) != i+1 {
				t.Fatalf("job %d: attempt %d listed as number %d", id, i+1, a.Number)
			}
			o := ""
			if a.Outcome != nil {
				o = *a.Outcome
			}
			outcomes = append(outcomes, o)
		}
		for _, e := range d.Events {
			timeline = append(timeline, e.Type)
		}
		if !slices.Equal(outcomes, w.outcomes) || !slices.Equal(timeline, w.timeline) {
			t.Errorf("job %d (%s): attempts %q timeline %q; want %q and %q", id, d.State, outcomes, timeline, w.outcomes, w.timeline)
		}
	}
	if d, _ := f.client.Detail(f.ctx, 2); d.Attempts[0].HeartbeatAt == nil || d.Attempts[0].LeaseUntil == nil {
		t.Errorf("the running attempt lost its heartbeat and deadline: %+v", d.Attempts[0])
	}

	// The upgraded database goes on: counts stay exact through new work,
	// and the idempotency key still holds.
	assertCountsExact(t, f)
	if _, existed, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "t", Payload: json.RawMessage(`{}`), IdempotencyKey: ptr("k-run")}); err == nil && !existed {
		t.Fatal("the idempotency key of an upgraded job was taken again")
	}
	for range 3 {
		f.insert(t, jobOpts{})
	}
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w3", Queues: []string{"default"}, Limit: 10, Lease: time.Minute})
	if err != nil || len(jobs) != 5 { // two pending jobs from before and the three new ones
		t.Fatalf("claimed %d (%v), want 5", len(jobs), err)
	}
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(jobs[0]), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(jobs[1]), "again", false); err != nil {
		t.Fatal(err)
	}
	assertCountsExact(t, f)
}

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

func ptr[T any](v T) *T { return &v }

// migratedTo returns a migrator of f's database, which it has taken to
// version (the schema an upgrade test starts from).
func (f *fixture) migratedTo(t *testing.T, version uint) *db.Migrator {
	t.Helper()
	mg, err := db.NewMigrator(f.pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mg.Close() })
	if err := mg.To(version); err != nil {
		t.Fatal(err)
	}
	return mg
}
