package db_test

import (
	"context"
	"encoding/json"
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
	pool, err := pgxpool.New(ctx, dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (kind) SELECT 't' FROM generate_series(1, 5000)`); err != nil {
		t.Fatal(err)
	}
	probe := func(queues ...string) (bool, int) {
		t.Helper()
		var any bool
		if err := pool.QueryRow(ctx, db.JobClaimLimitedAnySQL, queues).Scan(&any); err != nil {
			t.Fatal(err)
		}
		var plan []struct {
			Plan struct {
				Hits int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		var out []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+db.JobClaimLimitedAnySQL, queues).Scan(&out); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("reading the plan: %v: %s", err, out)
		}
		return any, plan[0].Plan.Hits + plan[0].Plan.Read
	}
	if any, buffers := probe("default"); any || buffers > 20 {
		t.Fatalf("no keyed job pending: any=%v after %d buffers, want false after a few (5,000 pending jobs)", any, buffers)
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
}
