package maintenance_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// BenchmarkReclaimDelay measures how long after its deadline an expired
// lease is taken back: the reclaim time (the attempt's ended_at) minus
// lease_until, both from the database clock.
func BenchmarkReclaimDelay(b *testing.B) {
	pool, err := pgxpool.New(context.Background(), dbtest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	client := queue.NewClient(pool, nil)
	reaped := make(chan queue.Reaped, 1)
	r := maintenance.NewReaper(pool, maintenance.ReaperConfig{OnReap: func(rp queue.Reaped) { reaped <- rp }})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = r.Run(rctx) }()
	for !r.Active() {
		time.Sleep(time.Millisecond)
	}
	var delays []time.Duration
	for b.Loop() {
		if _, _, err := client.Insert(ctx, queue.NewJob{Kind: "noop"}); err != nil {
			b.Fatal(err)
		}
		if _, err := client.Claim(ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 1, Lease: 100 * time.Millisecond}); err != nil {
			b.Fatal(err)
		}
		select {
		case rp := <-reaped:
			delays = append(delays, rp.ReapedAt.Sub(rp.LeaseUntil))
		case <-time.After(10 * time.Second):
			b.Fatal("lease not reclaimed within 10s")
		}
	}
	slices.Sort(delays)
	at := func(p float64) float64 {
		return float64(delays[min(len(delays)-1, int(p*float64(len(delays))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(float64(delays[len(delays)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op")
}
