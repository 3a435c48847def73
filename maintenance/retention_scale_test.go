package maintenance_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// TestPruneScale measures prunes of 100,000 finished jobs, each with an
// event, a failed attempt and an artifact row, while a worker claims and
// completes jobs one at a time: how long each prune takes and the claim
// latency before and during it. The pruner's settings are compared side
// by side, interleaved, each twice, on the same database: the shipped
// defaults against other batch sizes and duty shares. A measurement, not
// a test of speed: it asserts only that each prune deleted what it should
// and claims went on. Run with LEASEHOLD_PRUNE_SCALE=1
// (LEASEHOLD_PRUNE_SCALE_ROUNDS for more rounds).
func TestPruneScale(t *testing.T) {
	if os.Getenv("LEASEHOLD_PRUNE_SCALE") == "" {
		t.Skip("set LEASEHOLD_PRUNE_SCALE=1 to measure")
	}
	rounds := 2
	if n, err := fmt.Sscan(os.Getenv("LEASEHOLD_PRUNE_SCALE_ROUNDS"), &rounds); n != 1 || err != nil {
		rounds = 2
	}
	f := setup(t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	f.ctx = ctx
	variants := []struct {
		name string
		cfg  maintenance.PrunerConfig
	}{
		{"batch 500, fixed 20 ms pause (before)", maintenance.PrunerConfig{Batch: 500, Pause: 20 * time.Millisecond, Duty: 1}},
		{"batch 500, duty 0.5", maintenance.PrunerConfig{Batch: 500, Duty: 0.5}},
		{"batch 100, fixed 20 ms pause", maintenance.PrunerConfig{Batch: 100, Pause: 20 * time.Millisecond, Duty: 1}},
		{"defaults", maintenance.PrunerConfig{}},
	}
	for round := range rounds {
		for _, v := range variants {
			v.cfg.Retention = maintenance.DefaultRetention()
			took, lats := measurePrune(t, f, v.cfg)
			line := fmt.Sprintf("round %d, %s: pruned 100,000 in %v", round+1, v.name, took.Round(time.Millisecond))
			for i, lat := range lats {
				slices.Sort(lat)
				q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
				line += fmt.Sprintf("; %s %d claims p50 %v p99 %v max %v", []string{"before:", "during:"}[i], len(lat), q(0.5), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond))
			}
			t.Log(line)
		}
	}
}

// measurePrune inserts 100,000 expired jobs with their history and 50,000
// pending ones, claims for 3 s, then prunes with cfg while claiming on,
// and returns the prune's time and the claim latencies before and during
// it.
func measurePrune(t *testing.T, f *fixture, cfg maintenance.PrunerConfig) (time.Duration, [2][]time.Duration) {
	t.Helper()
	const old, pending = 100_000, 50_000
	_, err := f.pool.Exec(f.ctx, `
		WITH j AS (
			INSERT INTO jobs (kind, state, attempt, lease_owner, lease_token, attempt_started_at, created_at, finished_at)
			SELECT 'scale', 'succeeded', 2, 'w', g, now() - interval '9 days', now() - interval '9 days', now() - interval '8 days'
			FROM generate_series(1, $1) g RETURNING id),
		e AS (INSERT INTO events (job_id, type, attempt) SELECT id, 'failed', 1 FROM j),
		a AS (INSERT INTO attempts (job_id, number, worker_id, lease_token, outcome) SELECT id, 1, 'w', 0, 'failed' FROM j)
		INSERT INTO artifacts (job_id, attempt, kind, name, content_type, size, sha256)
		SELECT id, 2, 'screenshot', 's.png', 'image/png', 1000, encode(sha256(id::text::bytea), 'hex') FROM j`, old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(f.ctx, `INSERT INTO jobs (kind) SELECT 'live' FROM generate_series(1, $1)`, pending); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(f.ctx, `VACUUM ANALYZE jobs, events, attempts, artifacts`); err != nil {
		t.Fatal(err)
	}

	var stop, pruning atomic.Bool
	latencies := make(chan [2][]time.Duration)
	go func() {
		var lat [2][]time.Duration // before the prune, during it
		for !stop.Load() {
			phase := 0
			if pruning.Load() {
				phase = 1
			}
			start := time.Now()
			jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"default"}, Limit: 1, Lease: time.Minute})
			lat[phase] = append(lat[phase], time.Since(start))
			if err != nil || len(jobs) != 1 {
				t.Errorf("claim: %v, %d jobs", err, len(jobs))
				break
			}
			if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(jobs[0]), nil); err != nil {
				t.Error(err)
				break
			}
		}
		latencies <- lat
	}()
	time.Sleep(3 * time.Second) // a baseline before the prune starts
	p := maintenance.NewPruner(f.pool, cfg)
	pruning.Store(true)
	start := time.Now()
	res, err := p.Prune(f.ctx, maintenance.PruneOptions{})
	took := time.Since(start)
	stop.Store(true)
	lats := <-latencies
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs[queue.StateSucceeded] != old {
		t.Fatalf("pruned %v, want %d succeeded", res.Jobs, old)
	}
	for _, lat := range lats {
		if len(lat) == 0 {
			t.Fatal("no claims")
		}
	}
	assertCountsExact(t, f)
	// This round's claimed jobs go, and those it left pending, so that
	// every round claims from the same number and the next prune's scan
	// (in id order, ending at the first job too young to go) does not end
	// at a job this round finished.
	if _, err := f.pool.Exec(f.ctx, `DELETE FROM jobs WHERE kind = 'live'`); err != nil {
		t.Fatal(err)
	}
	return took, lats
}
