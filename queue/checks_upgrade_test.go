package queue_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// Migration 16 turns jobs' CHECKs on kind, queue and payload into
// domains: a database of version 15 holding jobs in every state comes
// through with every value, the rules still refuse what they refused
// (on insert and on an update that sets the column), and down restores
// the table's CHECKs.
func TestChecksMigrationKeepsDataAndRules(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	mg := f.migratedTo(t, 15)
	if _, err := f.pool.Exec(f.ctx, `
		INSERT INTO jobs (kind, queue, payload, state, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, finished_at)
		VALUES ('investigate', 'phones', '{"app":"com.example.a"}', 'pending', 0, NULL, 0, NULL, NULL, NULL, NULL),
		       ('investigate', 'phones', '{"app":"com.example.b"}', 'running', 1, 'w1', 11, now(), now(), now() + interval '1 min', NULL),
		       ('t', 'default', '{}', 'succeeded', 1, 'w1', 12, now(), now(), now(), now()),
		       ('t', 'default', '{"n":[1,2]}', 'dead', 2, 'w1', 13, now(), now(), now(), now()),
		       ('t', 'default', '{}', 'cancelled', 1, 'w1', 14, now(), now(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	f.pool.Reset() // new column types: start on new connections, as after an upgrade

	var got string
	if err := f.pool.QueryRow(f.ctx, `
		SELECT string_agg(kind || '/' || queue || '/' || state || '/' || payload::text, ' ' ORDER BY id) FROM jobs`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	want := `investigate/phones/pending/{"app": "com.example.a"} investigate/phones/running/{"app": "com.example.b"} ` +
		`t/default/succeeded/{} t/default/dead/{"n": [1, 2]} t/default/cancelled/{}`
	if got != want {
		t.Fatalf("jobs after the upgrade:\n%s\nwant\n%s", got, want)
	}
	assertCountsExact(t, f)
	if d, err := f.client.Detail(f.ctx, 2); err != nil || len(d.Events) == 0 || d.Events[0].Type != "created" {
		t.Fatalf("the timeline after the upgrade: %+v %v", d.Events, err)
	}

	refused := func(when string) {
		t.Helper()
		for _, sql := range []string{
			`INSERT INTO jobs (kind) VALUES ('Bad Kind')`,
			`INSERT INTO jobs (kind, queue) VALUES ('t', 'no/slash')`,
			`INSERT INTO jobs (kind, payload) VALUES ('t', '[1]')`,
			`UPDATE jobs SET kind = 'x y' WHERE id = 1`,
			`UPDATE jobs SET queue = '' WHERE id = 1`,
			`UPDATE jobs SET payload = '"s"' WHERE id = 1`,
		} {
			_, err := f.pool.Exec(f.ctx, sql)
			if err == nil || !strings.Contains(err.Error(), "check constraint") {
				t.Errorf("%s: %s: %v, want a check violation", when, sql, err)
			}
		}
	}
	refused("up")

	// The hot path on the upgraded table: claim and complete, counted.
	jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w2", Queues: []string{"phones"}, Limit: 5, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || string(jobs[0].Payload) != `{"app": "com.example.a"}` {
		t.Fatalf("claimed %+v (%v)", jobs, err)
	}
	if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(jobs[0]), json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	assertCountsExact(t, f)

	if err := mg.To(15); err != nil {
		t.Fatalf("down: %v", err)
	}
	f.pool.Reset()
	refused("down")
	var constraints int
	if err := f.pool.QueryRow(f.ctx, `
		SELECT count(*) FROM pg_constraint
		WHERE conrelid = 'jobs'::regclass AND conname IN ('jobs_kind_check', 'jobs_queue_check', 'jobs_payload_check')`).Scan(&constraints); err != nil || constraints != 3 {
		t.Fatalf("the table's checks after down: %d %v", constraints, err)
	}
	if err := mg.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
