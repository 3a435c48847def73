package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/dbtest"
)

// The limits probe sent with every claim reads a page or two when no
// keyed job is pending, also on a table never analyzed: before, PostgreSQL
// read every pending job there.
func TestLimitsProbeReadsLittleOnAFreshTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (kind) SELECT 't' FROM generate_series(1, 5000)`); err != nil {
		t.Fatal(err)
	}
	var rated bool
	probe := func(queues ...string) (bool, int) {
		t.Helper()
		var any bool
		if err := pool.QueryRow(ctx, db.JobClaimLimitedAnySQL, queues, nil).Scan(&any, &rated); err != nil {
			t.Fatal(err)
		}
		var plan []struct {
			Plan struct {
				Hits int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		var out []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+db.JobClaimLimitedAnySQL, queues, nil).Scan(&out); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("reading the plan: %v: %s", err, out)
		}
		return any, plan[0].Plan.Hits + plan[0].Plan.Read
	}
	if any, buffers := probe("default"); any || rated || buffers > 20 {
		t.Fatalf("no keyed or rate-limited job pending: any=%v rated=%v after %d buffers, want false after a few (5,000 pending jobs)", any, rated, buffers)
	}
	// Still exact once keyed jobs are pending, in one queue.
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (kind, queue, concurrency_key) VALUES ('t', 'phones', 'pixel7')`); err != nil {
		t.Fatal(err)
	}
	if any, _ := probe("phones"); !any {
		t.Error("a due keyed job in phones: want true")
	}
	if any, _ := probe("default"); any {
		t.Error("the keyed job is in phones, not default: want false")
	}
	// Rate-limited jobs: rated while a key is not spent, and not once it is.
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (kind, queue, rate_limits) VALUES ('t', 'llm', '{llm:x}')`); err != nil {
		t.Fatal(err)
	}
	if _, buffers := probe("llm"); !rated || buffers > 30 {
		t.Errorf("a due rate-limited job in llm: rated=%v after %d buffers, want true after a few", rated, buffers)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO rate_limit_budgets (key, window_s, budget, window_start, used)
		VALUES ('llm:x', 3600, 1, rate_window_start(3600, now()), 1)`); err != nil {
		t.Fatal(err)
	}
	if probe("llm"); rated {
		t.Error("the job's key is spent: want rated false")
	}
	if probe("default"); rated {
		t.Error("the rate-limited job is in llm, not default: want false")
	}
	// A keyed job that names rate-limit keys is the rate-limited claim's
	// (which takes its key's lock too): rated, and no limited claim for it.
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (kind, queue, concurrency_key, rate_limits) VALUES ('t', 'tablets', 'pixel9', '{llm:y}')`); err != nil {
		t.Fatal(err)
	}
	if any, buffers := probe("tablets"); any || !rated || buffers > 30 {
		t.Errorf("a due keyed job that names rate limits: any=%v rated=%v after %d buffers, want false, true after a few", any, rated, buffers)
	}
}

// The claim reads the claim index in order and stops at its limit: of
// 5,000 pending jobs, a claim of 10 reads no more than a few dozen rows of
// jobs with its generic plan, the one every claim runs (JobClaimAndLimits).
// Availability windows had made that plan read and sort every pending job
// (an EXISTS turned semi-join, estimated at one row). A custom plan still
// reads them all on a table this small (it did before windows too): the
// reason the claim forces its generic plan.
func TestClaimReadsOnlyWhatItTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (kind) SELECT 't' FROM generate_series(1, 5000)`); err != nil {
		t.Fatal(err)
	}
	onFreshAndAnalyzed(t, pool, func(conn *pgxpool.Conn, analyzed bool) {
		out, _ := explainGeneric(t, conn, "probe_claim(bigint, text, text[], timestamptz, text[], integer, integer, integer, integer)",
			db.JobClaimSQL, "(NULL, 'w1', '{}', NULL, '{default}', 10, 30000, NULL, 5000)")
		if what, rows := mostRead(t, out); rows > 50 {
			t.Errorf("analyzed %v: a claim of 10 of 5,000 pending jobs read %d rows (%s), want at most 50", analyzed, rows, what)
		} else {
			t.Logf("analyzed %v: at most %d rows (%s)", analyzed, rows, what)
		}
	})
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Rows     int        `json:"Actual Rows"`
	Loops    int        `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

// mostRead is the node of an explained plan (EXPLAIN's JSON) that read or
// sorted the most rows of jobs, and how many over all its loops.
func mostRead(t *testing.T, explained []byte) (what string, rows int) {
	t.Helper()
	var plan []struct{ Plan planNode }
	if err := json.Unmarshal(explained, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("reading the plan: %v: %s", err, explained)
	}
	var most func(n planNode) (string, int)
	most = func(n planNode) (string, int) {
		what, rows := "", 0
		if n.Relation == "jobs" || n.Type == "Sort" {
			what, rows = n.Type+" "+n.Relation, n.Rows*max(n.Loops, 1)
		}
		for _, c := range n.Plans {
			if w, r := most(c); r > rows {
				what, rows = w, r
			}
		}
		return what, rows
	}
	return most(plan[0].Plan)
}

// A limited claim runs its generic plan (db.JobClaimLimitedBegin), and
// that plan reads each capped queue and each key only as far as its room:
// of 5,000 jobs waiting behind a cap of 10 and 20 keys of 100 jobs each,
// a claim reads a few hundred rows of jobs, not every job waiting.
func TestLimitedClaimReadsOnlyWhatItTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `
		INSERT INTO queue_settings (name, max_running) VALUES ('capped', 10);
		INSERT INTO jobs (kind, queue) SELECT 't', 'capped' FROM generate_series(1, 5000);
		INSERT INTO jobs (kind, queue, concurrency_key, concurrency_limit)
		SELECT 't', 'keyed', 'k' || (i % 20), 1 FROM generate_series(1, 2000) i`); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	// each key's limit as the lock statement found it, then the keys
	locked := "'{" + strings.Repeat("1,", len(keys)-1) + "1}', '{" + strings.Join(keys, ",") + "}'"
	onFreshAndAnalyzed(t, pool, func(conn *pgxpool.Conn, analyzed bool) {
		out, claimed := explainGeneric(t, conn, limitedProbe,
			db.JobClaimLimitedSQL, "(NULL, '{capped}', 'w1', '{}', "+locked+", '{capped,keyed}', 100, 30000, NULL, 5000)")
		if claimed != 30 {
			t.Fatalf("analyzed %v: the claim took %d jobs, want 10 capped and one per key", analyzed, claimed)
		}
		if what, rows := mostRead(t, out); rows > 500 {
			t.Errorf("analyzed %v: a limited claim of 30 jobs among 7,000 read %d rows (%s), want at most 500", analyzed, rows, what)
		} else {
			t.Logf("analyzed %v: at most %d rows (%s)", analyzed, rows, what)
		}
	})
}

// limitedProbe is JobClaimLimited's parameters, in order, for PREPARE.
const limitedProbe = "probe_limited(bigint, text[], text, text[], integer[], text[], text[], integer, integer, integer, integer)"

// A round of a keyed drain (CompleteManyThenClaim) completes one running
// job of each key and then, in the same transaction, locks the keys and
// claims their next jobs, while 1,000 jobs of another queue run. Both
// statements count the keys' running jobs, once for all of them: counted
// key by key, on a table analyzed while nothing ran, the planner went
// through jobs_running_id_idx and read every running job, and the jobs
// just completed, once per key.
func TestKeyedRoundCountsEachKeyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	const keys = 50
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
		INSERT INTO jobs (kind, concurrency_key, concurrency_limit)
		SELECT 't', 'k' || (i %% %d), 1 FROM generate_series(1, 2000) i;
		ANALYZE jobs;
		UPDATE jobs SET state = 'running', attempt = 1, lease_owner = 'w0', lease_ms = 60000, lease_token = 1,
		       heartbeat_at = now(), attempt_started_at = now(), lease_until = now() + interval '1 minute'
		WHERE id IN (SELECT min(id) FROM jobs GROUP BY concurrency_key);
		INSERT INTO jobs (kind, queue, state, attempt, lease_owner, lease_ms, lease_token, heartbeat_at, attempt_started_at, lease_until)
		SELECT 't', 'other', 'running', 1, 'w0', 60000, 1, now(), now(), now() + interval '1 minute'
		FROM generate_series(1, 1000)`, keys)); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var names []string
	for i := range keys {
		names = append(names, fmt.Sprintf("k%d", i))
	}
	completed := `UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE state = 'running' AND concurrency_key IS NOT NULL`
	for _, c := range []struct {
		name, probe, statement, args string
		want                         int // jobs running after it
	}{
		{"lock", "probe_lock(text, text[], text[], integer)", db.JobClaimLimitedLockSQL,
			"('w1', '{}', '{default}', 100)", 1000},
		{"claim", limitedProbe, db.JobClaimLimitedSQL,
			"(NULL, '{}', 'w1', '{}', '{" + strings.Repeat("1,", keys-1) + "1}', '{" + strings.Join(names, ",") + "}', '{default}', 100, 30000, NULL, 5000)", 1000 + keys},
	} {
		out, running := explainGeneric(t, conn, c.probe, c.statement, c.args, completed)
		if running != c.want {
			t.Fatalf("%s: %d jobs running after it, want %d", c.name, running, c.want)
		}
		var plan []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("reading the plan: %v: %s", err, out)
		}
		touched := plan[0].Plan.Hit + plan[0].Plan.Read
		t.Logf("%s: %d buffer touches for %d keys", c.name, touched, keys)
		if touched > 30*keys {
			t.Errorf("%s: %d buffer touches for %d keys, want at most %d", c.name, touched, keys, 30*keys)
		}
	}
}

// Rate-limited jobs under a cap or a concurrency key are read only as far
// as their limits have room, by the rate-limited claim, and not at all by
// the limited claim beside them: of 5,000 rated jobs behind a cap of 10,
// 2,000 rated keyed jobs and 2,000 keyed ones (20 keys of each, limit 1),
// and 3,000 rated jobs of a queue without limits, each claim's first
// statement reads a few hundred rows of jobs.
func TestRatedClaimReadsOnlyWhatItTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `
		INSERT INTO queue_settings (name, max_running) VALUES ('capped', 10);
		INSERT INTO jobs (kind, queue, rate_limits) SELECT 't', 'capped', '{llm}' FROM generate_series(1, 5000);
		INSERT INTO jobs (kind, queue, concurrency_key, concurrency_limit, rate_limits)
		SELECT 't', 'keyed', 'r' || (i % 20), 1, '{llm}' FROM generate_series(1, 2000) i;
		INSERT INTO jobs (kind, queue, concurrency_key, concurrency_limit)
		SELECT 't', 'keyed', 'k' || (i % 20), 1 FROM generate_series(1, 2000) i;
		INSERT INTO jobs (kind, queue, rate_limits) SELECT 't', 'open', '{llm}' FROM generate_series(1, 3000)`); err != nil {
		t.Fatal(err)
	}
	onFreshAndAnalyzed(t, pool, func(conn *pgxpool.Conn, analyzed bool) {
		for _, c := range []struct {
			name, probe, statement, args string
			want                         int // rows it returns
		}{
			// 10 capped, one per rated key and 70 of the open queue
			{"rated", "probe_rated(text, text[], timestamptz, text[], integer)", db.JobClaimRatedLockSQL,
				"('w1', '{}', NULL, '{capped,keyed,open}', 100)", 100},
			// the cap with room, the 20 keys without rate limits, and
			// whether rated jobs are due
			{"limited", "probe_lock(text, text[], text[], integer)", db.JobClaimLimitedLockSQL,
				"('w1', '{}', '{capped,keyed,open}', 100)", 22},
		} {
			out, _ := explainGeneric(t, conn, c.probe, c.statement, c.args)
			var plan []struct{ Plan planNode }
			if err := json.Unmarshal(out, &plan); err != nil {
				t.Fatal(err)
			}
			if got := plan[0].Plan.Rows; got != c.want {
				t.Errorf("analyzed %v: the %s claim's first statement returned %d rows, want %d", analyzed, c.name, got, c.want)
			}
			if what, rows := mostRead(t, out); rows > 500 {
				t.Errorf("analyzed %v: the %s claim's first statement read %d rows (%s), want at most 500", analyzed, c.name, rows, what)
			} else {
				t.Logf("analyzed %v: %s: at most %d rows (%s)", analyzed, c.name, rows, what)
			}
		}
	})
}

// onFreshAndAnalyzed calls probe with a connection of pool twice: on jobs
// as inserted, never analyzed (a fresh database after a bulk insert), and
// after ANALYZE. The plans may differ; each must read little.
func onFreshAndAnalyzed(t *testing.T, pool *pgxpool.Pool, probe func(conn *pgxpool.Conn, analyzed bool)) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := conn.Exec(ctx, "ANALYZE jobs"); err != nil {
				t.Fatal(err)
			}
		}
		probe(conn, analyzed)
	}
}

// explainGeneric prepares statement as probe (its name and parameter
// types) on conn, runs it once with args on its generic plan under
// EXPLAIN (ANALYZE, BUFFERS) in a transaction it rolls back, after the
// statements before in that transaction, and returns the plan and how
// many jobs were running after it.
func explainGeneric(t *testing.T, conn *pgxpool.Conn, probe, statement, args string, before ...string) (plan []byte, running int) {
	t.Helper()
	ctx := context.Background()
	name, _, _ := strings.Cut(probe, "(")
	if _, err := conn.Exec(ctx, "PREPARE "+probe+" AS "+statement); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := conn.Exec(ctx, "DEALLOCATE "+name); err != nil {
			t.Fatal(err)
		}
	}()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range before {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE "+name+args).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'running'").Scan(&running); err != nil {
		t.Fatal(err)
	}
	return plan, running
}

// newPool is a pool on a new database of its own, closed with the test.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
