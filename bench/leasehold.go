package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/queue"
)

const leaseholdDB = "leasehold_bench"

// buildBinaries builds cmd/worker and cmd/server of the working tree at
// repo into dir.
func buildBinaries(ctx context.Context, repo, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/worker", "./cmd/server")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building Leasehold's binaries in %s: %w", repo, err)
	}
	return nil
}

// childEnv is this process's environment without anything that would
// configure a Leasehold program behind the benchmark's back.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LEASEHOLD_") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// openLeasehold connects to a Leasehold database.
func openLeasehold(ctx context.Context, url string, conns int32) (*pgxpool.Pool, error) {
	return db.Open(ctx, db.PoolConfig{URL: url, AppName: "leasehold-bench", MaxConns: conns, Logger: quiet})
}

// fillLeasehold creates a fresh, migrated database holding n pending
// no-op jobs.
func (b *bench) fillLeasehold(ctx context.Context, n int) (string, error) {
	if err := b.admin.freshDatabase(ctx, leaseholdDB); err != nil {
		return "", err
	}
	url := b.admin.urlFor(leaseholdDB)
	pool, err := openLeasehold(ctx, url, 4)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := db.Migrate(pool); err != nil {
		return "", err
	}
	client := queue.NewClient(pool, quiet)
	if err := client.ConfigureWebhooks(ctx, b.webhooks); err != nil {
		return "", err
	}
	for left := n; left > 0; {
		batch := make([]queue.NewJob, min(left, queue.MaxBatch))
		for i := range batch {
			batch[i] = queue.NewJob{Kind: "noop"}
			if b.keys > 0 {
				key := fmt.Sprintf("key-%d", (n-left+i)%b.keys)
				batch[i].ConcurrencyKey = &key
			}
			if b.rated {
				batch[i].RateLimits = []string{"bench:llm"}
			}
		}
		if _, err := client.InsertMany(ctx, batch); err != nil {
			return "", fmt.Errorf("inserting jobs: %w", err)
		}
		left -= len(batch)
	}
	if b.rated {
		if _, err := client.SetRateLimit(ctx, "bench:llm", []string{"1000000000/min"}, "bench"); err != nil {
			return "", fmt.Errorf("setting the rate limit: %w", err)
		}
	}
	if b.maxRunning > 0 {
		limit := int32(b.maxRunning)
		if _, err := client.PatchQueue(ctx, "default", queue.QueuePatch{MaxRunning: &limit}, "bench"); err != nil {
			return "", fmt.Errorf("capping the queue: %w", err)
		}
	}
	return url, nil
}

// runLeasehold drains n no-op jobs with one worker process (cmd/worker,
// --executor noop --concurrency 200), timed from starting the process until
// the counters show all n succeeded.
func (b *bench) runLeasehold(ctx context.Context, n int) (result, error) {
	url, err := b.fillLeasehold(ctx, n)
	if err != nil {
		return result{}, err
	}
	if err := prepare(ctx, url, b.statements); err != nil {
		return result{}, err
	}
	before, err := b.admin.settledRead(ctx, leaseholdDB)
	if err != nil {
		return result{}, err
	}

	// One connection polls the counters, as rarely as the clock allows:
	// each poll is one commit, taken out of the figures, and reads the
	// counter rows (a few hundred buffer touches once they have churned),
	// which stay in them.
	monCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return result{}, err
	}
	monCfg.MaxConns = 1
	mon, err := pgxpool.NewWithConfig(ctx, monCfg)
	if err != nil {
		return result{}, err
	}
	defer mon.Close()
	counts := queue.NewClient(mon, quiet)

	logPath := filepath.Join(b.tmp, "worker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return result{}, err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(b.tmp, "worker"),
		"--id", "bench-worker", "--executor", "noop", "--concurrency", "200",
		"--database-url", url, "--artifacts", filepath.Join(b.tmp, "artifacts"), "--log-format", "json")
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	exited := make(chan error, 1)

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("starting worker: %w", err)
	}
	go func() { exited <- cmd.Wait() }()
	polls := int64(0)
	var elapsed time.Duration
	for {
		c, err := counts.Counts(ctx)
		polls++
		if err != nil {
			stopProcess(cmd, exited)
			return result{}, err
		}
		if c.Jobs[queue.StateSucceeded] >= int64(n) {
			elapsed = time.Since(start)
			break
		}
		select {
		case err := <-exited:
			return result{}, fmt.Errorf("worker exited before the drain ended (%v); see %s", err, logPath)
		case <-ctx.Done():
			stopProcess(cmd, exited)
			return result{}, ctx.Err()
		case <-time.After(nextPoll(c.Jobs[queue.StateSucceeded], int64(n), time.Since(start))):
		}
	}
	stopProcess(cmd, exited)
	mon.Close()
	after, err := b.admin.settledRead(ctx, leaseholdDB)
	if err != nil {
		return result{}, err
	}
	r := result{system: "Leasehold", jobs: n, elapsed: elapsed, work: after.sub(before),
		clientCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	r.work.commits -= polls
	r.polls = polls
	if b.statements {
		if err := b.admin.statementReport(ctx, url, float64(n), "job"); err != nil {
			return result{}, err
		}
	}
	if err := verifyLeasehold(ctx, url, n); err != nil {
		return result{}, err
	}
	return r, nil
}

// stopProcess ends the worker as an operator would (SIGTERM: no claims,
// running jobs finish), and kills it if it does not stop.
func stopProcess(cmd *exec.Cmd, exited <-chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func verifyLeasehold(ctx context.Context, url string, n int) error {
	pool, err := openLeasehold(ctx, url, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	c, err := queue.NewClient(pool, quiet).Counts(ctx)
	if err != nil {
		return err
	}
	if c.Jobs[queue.StateSucceeded] != int64(n) || c.Jobs[queue.StatePending] != 0 || c.Jobs[queue.StateRunning] != 0 {
		return errors.New("leasehold: not every job succeeded exactly once: " + fmt.Sprint(c.Jobs))
	}
	return nil
}

var quiet = slog.New(slog.DiscardHandler)

// nextPoll waits about half the time the drain still needs at its rate so
// far, between pollEvery and maxPollWait: few polls, and the end is seen
// within pollEvery.
func nextPoll(done, total int64, elapsed time.Duration) time.Duration {
	if done <= 0 {
		return 4 * pollEvery
	}
	left := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
	return min(max(left/2, pollEvery), maxPollWait)
}
