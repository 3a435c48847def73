package dbtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ScaleDatabase returns a database holding n jobs with their attempts and
// events, as a long-lived installation has them: 90% succeeded, 5% dead
// (of five causes, in their failure groups), 3% pending, 1% running, 1%
// cancelled, over 1,000 apps, three timeline entries per job. It is built
// once per size and schema (minutes for a million) and kept for later
// runs; benchmarks only read it.
func ScaleDatabase(tb testing.TB, n int) string {
	tb.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		tb.Fatalf("preparing test database: %v", setupErr)
	}
	name := fmt.Sprintf("%s_scale_%d", template, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		tb.Fatal(err)
	}
	if exists {
		return withDatabase(adminURL, name)
	}
	building := name + "_building"
	for _, sql := range []string{
		"DROP DATABASE IF EXISTS " + building + " WITH (FORCE)",
		fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", building, template),
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			tb.Fatal(err)
		}
	}
	start := time.Now()
	fill, err := pgx.Connect(ctx, withDatabase(adminURL, building))
	if err != nil {
		tb.Fatal(err)
	}
	for _, sql := range scaleSQL(n) {
		if _, err := fill.Exec(ctx, sql); err != nil {
			fill.Close(context.Background())
			tb.Fatalf("filling %s: %v\n%s", building, err, sql)
		}
	}
	fill.Close(context.Background())
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("built %s with %d jobs in %v", name, n, time.Since(start).Round(time.Second))
	return withDatabase(adminURL, name)
}

func scaleSQL(n int) []string {
	return []string{
		fmt.Sprintf(`
INSERT INTO jobs (kind, queue, priority, payload, app, state, attempt, max_attempts, counted_attempts,
                  run_at, lease_owner, lease_until, lease_token, lease_ms, heartbeat_at, attempt_started_at,
                  last_error, result, created_at, finished_at)
SELECT CASE WHEN g %% 10 = 0 THEN 'report' ELSE 'app_investigation' END,
       CASE WHEN g %% 7 = 0 THEN 'urgent' ELSE 'default' END,
       0,
       jsonb_build_object('app', 'com.example.app' || (g %% 1000), 'instructions', 'Open the app and walk through onboarding.' ||
                          CASE WHEN g %% 100000 = 7 THEN ' Then log in as R5CT-tester.' ELSE '' END),
       'com.example.app' || (g %% 1000),
       st, CASE WHEN st = 'pending' THEN 0 ELSE 1 END, 5, CASE WHEN st = 'dead' THEN 1 ELSE 0 END,
       created, CASE WHEN st = 'pending' THEN NULL ELSE 'worker-' || (g %% 20) END,
       CASE WHEN st = 'running' THEN now() + interval '1 hour' WHEN st = 'pending' THEN NULL ELSE created + interval '31 seconds' END,
       g, 30000,
       CASE WHEN st = 'pending' THEN NULL ELSE created + interval '1 second' END,
       CASE WHEN st = 'pending' THEN NULL ELSE created + interval '1 second' END,
       CASE WHEN st = 'dead' THEN CASE g %% 5
           WHEN 0 THEN 'sim: the app crashed on the settings screen (step ' || (g %% 7 + 1) || ')'
           WHEN 1 THEN 'timed out after ' || (g %% 900 + 100) || ' s waiting for the login button on emulator-' || (5554 + g %% 20)
           WHEN 2 THEN 'adb: device R5CT' || (g %% 50) || ' offline at ' || to_char(created, 'YYYY-MM-DD HH24:MI:SS')
           WHEN 3 THEN 'agent gave up: the Sign in screen showed no Continue button (step ' || (g %% 12 + 1) || ')'
           ELSE 'upload of /data/local/tmp/run-' || g || '/screen.png failed: 503' END END,
       CASE WHEN st = 'succeeded' THEN '{"summary":"investigated"}'::jsonb END,
       created,
       CASE WHEN st IN ('succeeded', 'dead', 'cancelled') THEN created + interval '20 seconds' END
FROM (SELECT g, now() - (%[1]d - g) * interval '1 second' AS created,
             (CASE WHEN r < 0.90 THEN 'succeeded' WHEN r < 0.95 THEN 'dead' WHEN r < 0.98 THEN 'pending'
                   WHEN r < 0.99 THEN 'running' ELSE 'cancelled' END)::job_state AS st
      FROM (SELECT g, random() AS r FROM generate_series(1, %[1]d) g) x) s`, n),
		fmt.Sprintf(`SELECT setval('lease_token_seq', %d)`, n+1),
		// Dead letters in their failure groups, as their failures would
		// have put them (five causes, numbers and times varying).
		`UPDATE jobs SET failure_group = failure_group_of(id, attempt, last_error) WHERE state = 'dead'`,
		// As the queue keeps them: the job row describes its latest
		// attempt while it runs or once it succeeded; attempts that ended
		// otherwise are rows; created, claimed and succeeded entries of the
		// timeline are derived when read.
		`INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome, error, failure_group)
SELECT id, 1, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, finished_at,
       CASE state WHEN 'dead' THEN 'failed' WHEN 'cancelled' THEN 'cancelled' END::attempt_outcome,
       last_error, failure_group
FROM jobs WHERE attempt >= 1 AND state IN ('dead', 'cancelled')`,
		`INSERT INTO events (job_id, at, type, attempt, detail)
SELECT id, attempt_started_at + interval '10 seconds', 'progress', 1, '{"message":"opened the app"}'::jsonb
FROM jobs WHERE attempt >= 1`,
		`INSERT INTO events (job_id, at, type, attempt, detail)
SELECT id, finished_at, state::text, 1, '{}'::jsonb FROM jobs WHERE state IN ('dead', 'cancelled')`,
		`INSERT INTO workers (id, queues, last_seen) SELECT 'worker-' || g, '{default}', now() - g * interval '10 seconds' FROM generate_series(0, 19) g`,
		`VACUUM ANALYZE`,
	}
}
