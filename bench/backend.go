package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/leasehold/leasehold/queue"
)

// backendBatch is how many jobs each claim of -backend-cpu asks for.
const backendBatch = 100

// backendCPU claims and completes n jobs of each system in batches of
// backendBatch through one connection, one statement after another, and
// prints the CPU its PostgreSQL backend spent per job on each: the cost
// of the statements themselves, apart from the machine's load, batch
// sizes and the consumers' own CPU. It reads /proc/<pid>/schedstat of the
// backend, so PostgreSQL must run on this machine.
func (b *bench) backendCPU(ctx context.Context, n int) error {
	lh, err := b.backendLeasehold(ctx, n)
	if err != nil {
		return err
	}
	rv, err := b.backendRiver(ctx, n)
	if err != nil {
		return err
	}
	fmt.Printf("\n%d no-op jobs claimed and completed %d at a time by one session; PostgreSQL backend CPU per job\n\n", n, backendBatch)
	fmt.Println("| µs per job | Leasehold | River | Leasehold/River |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for i, name := range []string{"claim", "completion", "total"} {
		fmt.Printf("| %s | %.1f | %.1f | %.2f |\n", name, lh[i], rv[i], lh[i]/rv[i])
	}
	return nil
}

// singleSession opens a pool of one connection and the pid of its backend.
func singleSession(ctx context.Context, url string) (*pgxpool.Pool, int, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, 0, err
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	var pid int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		pool.Close()
		return nil, 0, err
	}
	if _, err := backendNs(pid); err != nil {
		pool.Close()
		return nil, 0, fmt.Errorf("reading the backend's CPU (PostgreSQL must run on this machine): %w", err)
	}
	return pool, pid, nil
}

// backendNs is the time the process pid has spent on a CPU.
func backendNs(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, errors.New("empty schedstat")
	}
	return strconv.ParseInt(fields[0], 10, 64)
}

// batch claims up to backendBatch jobs and returns how many, and how to
// complete them.
type batch func() (jobs int, complete func() error, err error)

// measure runs next until n jobs are done, and returns the backend's
// claim, completion and total µs per job.
func measure(pid, n int, next batch) ([3]float64, error) {
	var claimNs, completeNs int64
	done := 0
	for done < n {
		t0, _ := backendNs(pid)
		jobs, complete, err := next()
		if err != nil {
			return [3]float64{}, err
		}
		if jobs == 0 {
			return [3]float64{}, fmt.Errorf("nothing to claim after %d of %d", done, n)
		}
		t1, _ := backendNs(pid)
		if err := complete(); err != nil {
			return [3]float64{}, err
		}
		t2, _ := backendNs(pid)
		claimNs, completeNs, done = claimNs+t1-t0, completeNs+t2-t1, done+jobs
	}
	per := func(ns int64) float64 { return float64(ns) / float64(done) / 1000 }
	return [3]float64{per(claimNs), per(completeNs), per(claimNs + completeNs)}, nil
}

// freshSession fills a database of n jobs with fill, vacuums and analyzes
// it (as before a drain), and opens one session to it.
func freshSession(ctx context.Context, n int, fill func(context.Context, int) (string, error)) (string, *pgxpool.Pool, int, error) {
	url, err := fill(ctx, n)
	if err != nil {
		return "", nil, 0, err
	}
	if err := prepare(ctx, url, false); err != nil {
		return "", nil, 0, err
	}
	pool, pid, err := singleSession(ctx, url)
	return url, pool, pid, err
}

func (b *bench) backendLeasehold(ctx context.Context, n int) ([3]float64, error) {
	url, pool, pid, err := freshSession(ctx, n, b.fillLeasehold)
	if err != nil {
		return [3]float64{}, err
	}
	defer pool.Close()
	client := queue.NewClient(pool, quiet)
	cpu, err := measure(pid, n, func() (int, func() error, error) {
		jobs, err := client.Claim(ctx, queue.ClaimParams{WorkerID: "bench-session", Queues: []string{"default"}, Limit: backendBatch, Lease: time.Minute})
		complete := func() error {
			cs := make([]queue.Completion, len(jobs))
			for i, j := range jobs {
				cs[i] = queue.Completion{Lease: queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: "bench-session"}}
			}
			errs, err := client.CompleteMany(ctx, cs)
			return errors.Join(append(errs, err)...)
		}
		return len(jobs), complete, err
	})
	if err != nil {
		return [3]float64{}, fmt.Errorf("leasehold: %w", err)
	}
	return cpu, verifyLeasehold(ctx, url, n)
}

func (b *bench) backendRiver(ctx context.Context, n int) ([3]float64, error) {
	_, pool, pid, err := freshSession(ctx, n, b.fillRiver)
	if err != nil {
		return [3]float64{}, err
	}
	defer pool.Close()
	exec := riverpgxv5.New(pool).GetExecutor()
	cpu, err := measure(pid, n, func() (int, func() error, error) {
		res, err := exec.JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
			ClientID: "bench-session", MaxAttemptedBy: 100, MaxToLock: backendBatch, Queue: "default"})
		if err != nil {
			return 0, nil, err
		}
		// As River's batch completer sends a batch of successes.
		complete := func() error {
			now := time.Now()
			p := &riverdriver.JobSetStateIfRunningManyParams{}
			for _, j := range res.Jobs {
				p.ID = append(p.ID, j.ID)
				p.Attempt = append(p.Attempt, nil)
				p.ErrData = append(p.ErrData, nil)
				p.FinalizedAt = append(p.FinalizedAt, &now)
				p.MetadataDoMerge = append(p.MetadataDoMerge, false)
				p.MetadataUpdates = append(p.MetadataUpdates, nil)
				p.ScheduledAt = append(p.ScheduledAt, nil)
				p.State = append(p.State, rivertype.JobStateCompleted)
			}
			_, err := exec.JobSetStateIfRunningMany(ctx, p)
			return err
		}
		return len(res.Jobs), complete, nil
	})
	if err != nil {
		return [3]float64{}, fmt.Errorf("river: %w", err)
	}
	var completed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return [3]float64{}, err
	}
	if completed != n {
		return [3]float64{}, fmt.Errorf("river: %d of %d jobs completed", completed, n)
	}
	return cpu, nil
}
