package maintenance_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/pgcluster"
	"github.com/leasehold/leasehold/maintenance"
)

// The database restarts, several times, as in a day of failovers: each
// time the reaper plays its role again within a second of the database
// accepting connections, however long it was away and however often.
// (The retries of a lock session used to back off to 5 s; and the first
// statements after an outage failed on pooled connections that died with
// the old server, which ended the session and handed the role over once
// more.)
func TestRolesBackWithinASecondOfARestart(t *testing.T) {
	t.Parallel()
	root, err := os.MkdirTemp("", "lh-leader-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil { // as root, the cluster runs as postgres
		t.Fatal(err)
	}
	cfg := pgcluster.Config{Dir: filepath.Join(root, "pg"), Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func() *pgcluster.Cluster {
		c, err := pgcluster.Start(ctx, cfg)
		if errors.Is(err, pgcluster.ErrNoPostgres) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cluster := start()
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	pool, err := db.Open(ctx, db.PoolConfig{URL: cluster.URL("leasehold"), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := db.Migrate(pool); err != nil {
		t.Fatal(err)
	}
	reaper := maintenance.NewReaper(pool, maintenance.ReaperConfig{Logger: slog.New(slog.DiscardHandler)})
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = reaper.Run(rctx) }()
	waitFor(t, "reaper active", reaper.Active)

	for i, away := range []time.Duration{3 * time.Second, time.Second, 4 * time.Second} {
		if err := cluster.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "reaper inactive with the database down", func() bool { return !reaper.Active() })
		time.Sleep(away)
		cluster = start()
		back := time.Now()
		for !reaper.Active() {
			if time.Since(back) > time.Second {
				t.Fatalf("restart %d (away %v): the reaper was not back within 1s of the database", i+1, away)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("restart %d (away %v): reaper back after %v", i+1, away, time.Since(back).Round(time.Millisecond))
		// It stays: no second hand-over after the first.
		time.Sleep(2 * time.Second)
		if !reaper.Active() {
			t.Fatalf("restart %d: the reaper lost its role again after coming back", i+1)
		}
	}
}
