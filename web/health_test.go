package web_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestHealth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := setup(t, setupOpts{artifactsDir: dir})

	live := f.do(t, call{method: http.MethodGet, path: "/health/live", token: "-"}).want(t, http.StatusOK)
	if string(live.body) != "{\"status\":\"live\"}\n" {
		t.Errorf("live body = %q", live.body)
	}
	ready := f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).want(t, http.StatusOK)
	if string(ready.body) != "{\"status\":\"ready\",\"database\":\"ok\",\"artifact_storage\":\"ok\"}\n" {
		t.Errorf("ready body = %q", ready.body)
	}
	// The schema check borrows the pool through database/sql; closing
	// that must leave the pool open.
	f.get(t, "/api/v1/stats").want(t, http.StatusOK)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("readiness left %d files in the artifacts directory", len(entries))
	}
}

func TestHealthArtifactsNotWritable(t *testing.T) {
	t.Parallel()
	// Tests may run as root, whom permissions do not stop; nothing can be
	// created under a regular file.
	f := setup(t, setupOpts{artifactsDir: filepath.Join(os.Args[0], "artifacts")})
	res := f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).want(t, http.StatusServiceUnavailable)
	body := res.json(t)
	if body["status"] != "not ready" || body["database"] != "ok" {
		t.Errorf("body = %s", res.body)
	}
	if s, _ := body["artifact_storage"].(string); !strings.HasPrefix(s, "not writable: ") {
		t.Errorf("artifact_storage = %q", body["artifact_storage"])
	}
	if _, ok := body["migrations"]; ok {
		t.Errorf("migrations named though they are fine: %s", res.body)
	}
}

func TestHealthMigrations(t *testing.T) {
	t.Parallel()
	// The schema's record is set by hand: it is what readiness reads, and
	// Migrator.Down cannot run on this schema yet (000001's down script
	// drops the trigger functions before the table whose triggers use them).
	for _, tc := range []struct {
		name, sql, want string
	}{
		{"Behind", `DELETE FROM schema_migrations`, "at 0, want " + itoa(int64(db.SchemaVersion))},
		{"Ahead", `UPDATE schema_migrations SET version = version + 1`, "at " + itoa(int64(db.SchemaVersion)+1) + ", want " + itoa(int64(db.SchemaVersion))},
		{"Dirty", `UPDATE schema_migrations SET dirty = true`, "at " + itoa(int64(db.SchemaVersion)) + " but dirty (a migration failed half way), want " + itoa(int64(db.SchemaVersion))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			if _, err := f.pool.Exec(f.ctx, tc.sql); err != nil {
				t.Fatal(err)
			}
			res := f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).want(t, http.StatusServiceUnavailable)
			body := res.json(t)
			if body["status"] != "not ready" || body["migrations"] != tc.want || body["database"] != "ok" || body["artifact_storage"] != "ok" {
				t.Errorf("body = %s, want migrations %q", res.body, tc.want)
			}
		})
	}
}

func TestHealthDatabaseDown(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.pool.Close()
	res := f.do(t, call{method: http.MethodGet, path: "/health/ready", token: "-"}).want(t, http.StatusServiceUnavailable)
	body := res.json(t)
	if s, _ := body["database"].(string); !strings.HasPrefix(s, "unavailable") || body["artifact_storage"] != "ok" {
		t.Errorf("body = %s", res.body)
	}
	// Liveness does not depend on the database.
	f.do(t, call{method: http.MethodGet, path: "/health/live", token: "-"}).want(t, http.StatusOK)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for range 3 {
		f.submit(t, `{"kind":"noop"}`)
	}
	if _, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.metrics.ObserveReap(queue.Reaped{JobID: 1, State: queue.StatePending, LeaseUntil: now, ReapedAt: now.Add(3 * time.Millisecond)})
	f.metrics.ObserveReap(queue.Reaped{JobID: 2, State: queue.StateDead, LeaseUntil: now, ReapedAt: now.Add(20 * time.Second)})

	res := f.do(t, call{method: http.MethodGet, path: "/metrics", token: "-"}).want(t, http.StatusOK)
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q", ct)
	}
	text := string(res.body)
	for _, line := range []string{
		`leasehold_jobs{state="pending"} 2`,
		`leasehold_jobs{state="running"} 1`,
		`leasehold_jobs{state="succeeded"} 0`,
		`leasehold_jobs{state="dead"} 0`,
		`leasehold_jobs{state="cancelled"} 0`,
		`leasehold_claims_total 1`,
		`leasehold_lease_expiries_total 0`,
		`leasehold_stale_writes_refused_total 0`,
		`leasehold_reaped_total{next_state="pending"} 1`,
		`leasehold_reaped_total{next_state="dead"} 1`,
		`leasehold_reaped_total{next_state="cancelled"} 0`,
		`leasehold_reclaim_delay_seconds_bucket{le="0.0005"} 0`,
		`leasehold_reclaim_delay_seconds_bucket{le="0.005"} 1`,
		`leasehold_reclaim_delay_seconds_bucket{le="10"} 1`,
		`leasehold_reclaim_delay_seconds_bucket{le="+Inf"} 2`,
		`leasehold_reclaim_delay_seconds_count 2`,
		"# TYPE leasehold_claims_total counter",
		"# TYPE leasehold_jobs gauge",
		"# TYPE leasehold_reclaim_delay_seconds histogram",
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}

	// One more job shows at the next scrape: the gauges are read live.
	f.submit(t, `{"kind":"noop"}`)
	res = f.do(t, call{method: http.MethodGet, path: "/metrics", token: "-"}).want(t, http.StatusOK)
	if !strings.Contains(string(res.body), `leasehold_jobs{state="pending"} 3`+"\n") {
		t.Error("leasehold_jobs does not follow inserts")
	}
}
