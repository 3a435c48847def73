package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/queue"
)

const soakDB = "leasehold_soak"

// soak holds 200 jobs running for window under two direct workers (100
// slots each, a heartbeat every 300 ms) with two servers beside them, and
// prints once a minute what heartbeats leave behind: the jobs table's
// size, the share of its updates that were HOT, its dead row versions,
// and the oldest snapshot any backend of the database holds.
func (b *bench) soak(ctx context.Context, window time.Duration) error {
	if err := b.admin.freshDatabase(ctx, soakDB); err != nil {
		return err
	}
	url := b.admin.urlFor(soakDB)
	logFile, err := os.Create(filepath.Join(b.tmp, "soak.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	start := func(name string, env []string, args ...string) error {
		cmd := exec.Command(filepath.Join(b.tmp, name), args...)
		cmd.Env = childEnv(env...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", name, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		b.stops = append(b.stops, func() { stopProcess(cmd, exited) })
		return nil
	}
	defer func() {
		for _, stop := range b.stops {
			stop()
		}
	}()
	for i := range 2 {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		if err := start("server", []string{"DATABASE_URL=" + url, "LEASEHOLD_ADMIN_PASSWORD=bench-soak-password"},
			"--addr", addr, "--artifacts", filepath.Join(b.tmp, "artifacts"), "--log-format", "json"); err != nil {
			return err
		}
		if err := waitReady(ctx, "http://"+addr+"/health/ready"); err != nil {
			return fmt.Errorf("server %d: %w (log in %s)", i+1, err, logFile.Name())
		}
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	client := queue.NewClient(pool, quiet)
	jobs := make([]queue.NewJob, 200)
	for i := range jobs {
		jobs[i] = queue.NewJob{Kind: "soak", Payload: json.RawMessage(`{"sim":{"hang":true,"step_ms":60000}}`)}
	}
	if _, err := client.InsertMany(ctx, jobs); err != nil {
		return err
	}
	for i := range 2 {
		if err := start("worker", nil, "--id", fmt.Sprintf("soak-%d", i+1), "--executor", "sim",
			"--concurrency", "100", "--lease", "3s", "--heartbeat", "300ms",
			"--database-url", url, "--artifacts", filepath.Join(b.tmp, "artifacts"), "--log-format", "json"); err != nil {
			return err
		}
	}

	fmt.Printf("soak: 200 jobs held by 2 direct workers (heartbeat 300 ms) beside 2 servers, for %v\n", window)
	fmt.Println("| minute | running | jobs table | HOT updates | dead rows | oldest backend_xmin |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: |")
	var oldest time.Duration
	sample := time.NewTicker(time.Second)
	defer sample.Stop()
	began := time.Now()
	for minute := 1; time.Since(began) < window; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sample.C:
		}
		// The oldest snapshot is sampled every second; the table once a
		// minute.
		var age time.Duration
		if err := pool.QueryRow(ctx, `
			SELECT COALESCE(max(CASE WHEN state = 'active' THEN now() - query_start ELSE now() - xact_start END)
			                FILTER (WHERE backend_xmin IS NOT NULL), '0')
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&age); err != nil {
			return err
		}
		oldest = max(oldest, age)
		if time.Since(began) < time.Duration(minute)*time.Minute {
			continue
		}
		var running, size, upd, hot, dead int64
		if err := pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM jobs WHERE state = 'running'), pg_table_size('jobs'),
			       n_tup_upd, n_tup_hot_upd, n_dead_tup
			FROM pg_stat_user_tables WHERE relname = 'jobs'`).Scan(&running, &size, &upd, &hot, &dead); err != nil {
			return err
		}
		share := 0.0
		if upd > 0 {
			share = 100 * float64(hot) / float64(upd)
		}
		fmt.Printf("| %d | %d | %d KiB | %.1f %% of %d | %d | %v |\n", minute, running, size/1024, share, upd, dead, oldest.Round(time.Millisecond))
		oldest = 0
		minute++
	}
	return nil
}
