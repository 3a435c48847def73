package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web"
)

// BenchmarkPagesAtScale measures each dashboard page's server time (the
// handler, from request to the last byte, in process) on a database of
// LEASEHOLD_BENCH_JOBS jobs (default 1,000,000) with their attempts and
// events. Target: p95 under 100 ms for every page.
func BenchmarkPagesAtScale(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("LEASEHOLD_BENCH_JOBS")); err == nil && v > 0 {
		n = v
	}
	url := dbtest.ScaleDatabase(b, n)
	ctx := context.Background()
	// As the server opens its pool (cmd/server): custom plans for the
	// optional list filters, no JIT.
	pool, err := db.Open(ctx, db.PoolConfig{URL: url, MaxConns: 32, CustomPlans: true})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	signIn := auth.New(pool, nil)
	if err := signIn.SetPassword(ctx, "bench", "bench-password"); err != nil {
		b.Fatal(err)
	}
	session, _, err := signIn.SignIn(ctx, netip.MustParseAddr("127.0.0.1"), "bench", "bench-password")
	if err != nil {
		b.Fatal(err)
	}
	tokens := apitoken.NewStore(pool)
	secret, _, err := tokens.Create(ctx, fmt.Sprintf("bench-%d", time.Now().UnixNano()), apitoken.RoleAdmin)
	if err != nil {
		b.Fatal(err)
	}
	client := queue.NewClient(pool, nil)
	handler := web.New(web.Config{Pool: pool, Queue: client, Tokens: tokens, Auth: signIn, ArtifactsDir: b.TempDir(),
		Logger: slog.New(slog.DiscardHandler)})

	var deadID, midCursor int64
	if err := pool.QueryRow(ctx, "SELECT max(id) FROM jobs WHERE state = 'dead'").Scan(&deadID); err != nil {
		b.Fatal(err)
	}
	midCursor = int64(n / 2)
	var bigGroup int64
	if err := pool.QueryRow(ctx, "SELECT failure_group FROM jobs WHERE state = 'dead' GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").Scan(&bigGroup); err != nil {
		b.Fatal(err)
	}
	weekAgo := time.Now().Add(-7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	pages := []string{
		"/", "/jobs", "/jobs?state=dead", "/jobs?state=running", "/jobs?app=com.example.app7",
		"/jobs?kind=report&state=succeeded", fmt.Sprintf("/jobs?cursor=%d", midCursor), "/dead",
		fmt.Sprintf("/dead?cursor=%d", midCursor), "/workers", fmt.Sprintf("/jobs/%d", deadID), "/jobs/new", "/queues",
		"/api/v1/jobs?state=dead", "/api/v1/stats", "/api/v1/workers", "/api/v1/queues",
		// Search: a term in one job of 100,000, one in a thousand, one in every job.
		"/jobs?q=r5ct-tester", "/jobs?q=com.example.app777", "/jobs?q=onboarding", "/api/v1/jobs?q=r5ct-tester&state=succeeded",
		// Failure groups: every dead letter's cause counted, one cause's
		// letters, the causes of a week's failed attempts.
		"/api/v1/failure-groups", fmt.Sprintf("/dead?group=%d", bigGroup), fmt.Sprintf("/api/v1/jobs?failure_group=%d", bigGroup),
		"/api/v1/failure-groups?since=" + weekAgo,
	}
	for _, path := range pages {
		b.Run(path, func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.AddCookie(&http.Cookie{Name: "lh_session", Value: session})
				req.Header.Set("Authorization", "")
				if len(path) > 8 && path[:8] == "/api/v1/" {
					req.Header.Set("Authorization", "Bearer "+secret)
				}
				rec := httptest.NewRecorder()
				start := time.Now()
				handler.ServeHTTP(rec, req)
				times = append(times, time.Since(start))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body.String())
				}
			}
			slices.Sort(times)
			pct := func(p float64) float64 {
				return float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.95), "p95-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
