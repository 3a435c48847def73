package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/db/pgcluster"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
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
	ctx, cfg, cluster, pool := privateCluster(t)
	pool2, err := db.Open(ctx, db.PoolConfig{URL: pool.Config().ConnString(), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	// Two processes compete for the role, as two servers do.
	holder := runReapers(t, ctx, pool, pool2)
	waitFor(t, "a reaper active", func() bool { return holder() >= 0 })
	// The server's listener for long polls and live pages comes back too.
	jobs := queue.NewJobNotifier(pool, slog.New(slog.DiscardHandler))
	nctx, stopJobs := context.WithCancel(ctx)
	defer stopJobs()
	go jobs.Run(nctx)

	for i, away := range []time.Duration{3 * time.Second, time.Second, 4 * time.Second} {
		if err := cluster.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// Woken by the listener's next connection: it publishes to all.
		waiter := jobs.Waiter()
		waitFor(t, "reapers inactive with the database down", func() bool { return holder() < 0 })
		time.Sleep(away)
		cluster = dbtest.StartCluster(t, ctx, cfg)
		back := time.Now()
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		err := waiter.Wait(wctx, []string{"default"})
		cancel()
		if err != nil {
			t.Fatalf("restart %d (away %v): the job listener was not back within 1s: %v", i+1, away, err)
		}
		for holder() < 0 {
			if time.Since(back) > time.Second {
				t.Fatalf("restart %d (away %v): no reaper back within 1s of the database", i+1, away)
			}
			time.Sleep(2 * time.Millisecond)
		}
		first := holder()
		t.Logf("restart %d (away %v): reaper %d back after %v", i+1, away, first, time.Since(back).Round(time.Millisecond))
		// It stays where it is: no second hand-over after the first.
		for since := time.Now(); time.Since(since) < 2*time.Second; time.Sleep(2 * time.Millisecond) {
			if h := holder(); h != first {
				t.Fatalf("restart %d: %v after coming back the role moved from reaper %d to %d", i+1, time.Since(back).Round(time.Millisecond), first, h)
			}
		}
	}
}

// runReapers runs a reaper on each pool until the test ends; the function
// returned says which one is active (-1: none).
func runReapers(t *testing.T, ctx context.Context, pools ...*pgxpool.Pool) func() int {
	t.Helper()
	quiet := maintenance.ReaperConfig{Logger: slog.New(slog.DiscardHandler)}
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	var reapers []*maintenance.Reaper
	for _, p := range pools {
		r := maintenance.NewReaper(p, quiet)
		reapers = append(reapers, r)
		go func() { _ = r.Run(rctx) }()
	}
	return func() int {
		for i, r := range reapers {
			if r.Active() {
				return i
			}
		}
		return -1
	}
}

// The database freezes (every process of the cluster stopped, as a hung
// VM or SIGSTOP) for longer than a lock session's idle timeout, with two
// processes competing for the reaper's role. Once it thaws, one of them
// plays the role within a second, and the role then stays where it is:
// one hand-over, not a second one seconds later.
func TestRoleHandedOverOnceAfterAFreeze(t *testing.T) {
	t.Parallel()
	ctx, cfg, _, pool := privateCluster(t)
	pool2, err := db.Open(ctx, db.PoolConfig{URL: pool.Config().ConnString(), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	holder := runReapers(t, ctx, pool, pool2)
	waitFor(t, "a reaper active", func() bool { return holder() >= 0 })

	pids := clusterPIDs(t, cfg)
	signal(t, pids, syscall.SIGSTOP)
	thawed := false
	defer func() {
		if !thawed {
			signal(t, pids, syscall.SIGCONT)
		}
	}()
	time.Sleep(7 * time.Second) // beyond the lock sessions' 5 s idle timeout
	signal(t, pids, syscall.SIGCONT)
	thawed = true
	back := time.Now()
	for holder() < 0 || time.Since(back) < 200*time.Millisecond {
		if time.Since(back) > time.Second && holder() < 0 {
			t.Fatal("no reaper active within 1s of the database thawing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	first := holder()
	t.Logf("reaper %d active %v after the thaw", first, time.Since(back).Round(time.Millisecond))
	for time.Since(back) < 6*time.Second {
		if h := holder(); h != first {
			t.Fatalf("%v after the thaw the role moved from reaper %d to %d: handed over a second time", time.Since(back).Round(time.Millisecond), first, h)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// privateCluster starts a PostgreSQL cluster of the test's own, which it
// may stop, restart and freeze without touching the machine's server, and
// returns a migrated pool on it.
func privateCluster(t *testing.T) (context.Context, pgcluster.Config, *pgcluster.Cluster, *pgxpool.Pool) {
	t.Helper()
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
	t.Cleanup(cancel)
	cluster := dbtest.StartCluster(t, ctx, cfg)
	pool, err := db.Open(ctx, db.PoolConfig{URL: cluster.URL("leasehold"), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := db.Migrate(pool); err != nil {
		t.Fatal(err)
	}
	return ctx, cfg, cluster, pool
}

// clusterPIDs are the postmaster of cfg's cluster and its children.
func clusterPIDs(t *testing.T, cfg pgcluster.Config) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cfg.Dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(raw), "\n", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Skipf("listing the postmaster's children: %v", err)
	}
	pids := []int{pid}
	for _, f := range strings.Fields(string(children)) {
		if c, err := strconv.Atoi(f); err == nil {
			pids = append(pids, c)
		}
	}
	return pids
}

func signal(t *testing.T, pids []int, sig syscall.Signal) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("signalling %d: %v", pid, err)
		}
	}
}
