package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// BenchmarkThroughput measures no-op jobs per second end to end: a bulk
// insert, then 4 worker instances with 16 slots each drain the queue
// through claim, heartbeat-free completion and the state triggers.
func BenchmarkThroughput(b *testing.B) {
	const perLoop = 5000
	f := benchSetup(b)
	for i := range 4 {
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		w := worker.NewDirect(f.pool, nil, worker.Config{
			ID: fmt.Sprintf("bench-%d", i), Concurrency: 16, Lease: time.Minute, Executor: executor.Noop{}, Logger: slog.New(slog.DiscardHandler),
		})
		go func() { _ = w.Run(ctx) }()
	}
	var total time.Duration
	loops := 0
	for b.Loop() {
		b.StopTimer()
		batch := make([]queue.NewJob, perLoop)
		for i := range batch {
			batch[i] = queue.NewJob{Kind: "noop"}
		}
		before, _ := f.client.Counts(f.ctx)
		b.StartTimer()
		start := time.Now()
		if _, err := f.client.InsertMany(f.ctx, batch); err != nil {
			b.Fatal(err)
		}
		for {
			c, err := f.client.Counts(f.ctx)
			if err != nil {
				b.Fatal(err)
			}
			if c.Jobs[queue.StateSucceeded]-before.Jobs[queue.StateSucceeded] == perLoop {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		total += time.Since(start)
		loops++
	}
	b.ReportMetric(float64(loops*perLoop)/total.Seconds(), "jobs/s")
}

// BenchmarkSubmitToRunning measures the time from an insert returning to
// the executor starting, for an idle worker whose poll is far too slow to
// matter: the notification path alone.
func BenchmarkSubmitToRunning(b *testing.B) {
	f := benchSetup(b)
	started := make(chan time.Time, 1)
	exec := executorFunc(func(ctx context.Context, job queue.Job, r worker.Reporter) (json.RawMessage, error) {
		started <- time.Now()
		return nil, nil
	})
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() {
		_ = worker.NewDirect(f.pool, nil, worker.Config{ID: "bench", Lease: time.Minute, Poll: time.Hour, Executor: exec, Logger: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	time.Sleep(200 * time.Millisecond)
	var lat []time.Duration
	for b.Loop() {
		_, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "noop"})
		submitted := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-started:
			lat = append(lat, at.Sub(submitted))
		case <-time.After(10 * time.Second):
			b.Fatal("job not started within 10s")
		}
		time.Sleep(5 * time.Millisecond) // let the worker go idle again
	}
	reportPercentiles(b, lat)
}

// benchSetup sizes the pool as cmd/worker does for 4×16 slots.
func benchSetup(b *testing.B) *fixture {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return &fixture{ctx: ctx, pool: pool, client: queue.NewClient(pool, nil)}
}

func reportPercentiles(b *testing.B, ds []time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op")
}
