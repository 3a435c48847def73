package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const riverDB = "river_bench"

// River's side of the comparison, tuned for throughput as its docs
// suggest: a short fetch cooldown and as many workers as Leasehold's slots.
const (
	riverMaxWorkers    = 200
	riverFetchCooldown = time.Millisecond
	riverFetchPoll     = 20 * time.Millisecond
	riverPoolConns     = 20
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func openRiverPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = riverPoolConns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// fillRiver creates a fresh, migrated database holding n available no-op
// jobs.
func (b *bench) fillRiver(ctx context.Context, n int) (string, error) {
	if err := b.admin.freshDatabase(ctx, riverDB); err != nil {
		return "", err
	}
	url := b.admin.urlFor(riverDB)
	pool, err := openRiverPool(ctx, url)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	mg, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return "", err
	}
	if _, err := mg.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return "", fmt.Errorf("migrating river: %w", err)
	}
	client, err := river.NewClient(driver, &river.Config{Logger: quiet})
	if err != nil {
		return "", err
	}
	for left := n; left > 0; {
		batch := make([]river.InsertManyParams, min(left, 5000))
		for i := range batch {
			batch[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertMany(ctx, batch); err != nil {
			return "", fmt.Errorf("inserting river jobs: %w", err)
		}
		left -= len(batch)
	}
	return url, nil
}

// runRiver drains n no-op jobs with one River client, timed from
// client.Start until the n-th completion event.
func (b *bench) runRiver(ctx context.Context, n int) (result, error) {
	url, err := b.fillRiver(ctx, n)
	if err != nil {
		return result{}, err
	}
	if err := prepare(ctx, url, b.statements); err != nil {
		return result{}, err
	}
	before, err := b.admin.settledRead(ctx, riverDB)
	if err != nil {
		return result{}, err
	}
	pool, err := openRiverPool(ctx, url)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: riverMaxWorkers}},
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPoll,
		Workers:           workers,
		Logger:            quiet,
	})
	if err != nil {
		return result{}, err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()

	cpuBefore := selfCPU()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, fmt.Errorf("starting river: %w", err)
	}
	timeout := time.After(10 * time.Minute)
	for done := 0; done < n; {
		select {
		case <-events:
			done++
		case <-timeout:
			_ = client.Stop(context.Background())
			return result{}, fmt.Errorf("river: %d of %d completed after 10 minutes", done, n)
		}
	}
	elapsed := time.Since(start)
	if err := client.Stop(ctx); err != nil {
		return result{}, fmt.Errorf("stopping river: %w", err)
	}
	pool.Close()
	cpu := selfCPU() - cpuBefore
	after, err := b.admin.settledRead(ctx, riverDB)
	if err != nil {
		return result{}, err
	}
	r := result{system: "River", jobs: n, elapsed: elapsed, work: after.sub(before), clientCPU: cpu}
	if b.statements {
		if err := b.admin.statementReport(ctx, url, float64(n), "job"); err != nil {
			return result{}, err
		}
	}
	if err := verifyRiver(ctx, url, n); err != nil {
		return result{}, err
	}
	return r, nil
}

func verifyRiver(ctx context.Context, url string, n int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var completed, total int
	if err := conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FROM river_job").
		Scan(&completed, &total); err != nil {
		return fmt.Errorf("counting river jobs: %w", err)
	}
	if completed != n || total != n {
		return fmt.Errorf("river: %d of %d jobs completed (expected %d)", completed, total, n)
	}
	return nil
}

// selfCPU is this process's user+system time: the River client's, since
// it runs in here.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
