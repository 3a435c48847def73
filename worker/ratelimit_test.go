package worker_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/executor"
	"github.com/leasehold/leasehold/worker"
)

// A remote worker whose claims the server refuses (429 rate_limited: its
// token has too many open) waits as Retry-After says, longer each time,
// instead of claiming again at its poll period; it never has more than
// one claim open, whatever its concurrency; and once the server takes
// claims again, it claims.
func TestRemoteWorkerObeysRateLimitedClaims(t *testing.T) {
	t.Parallel()
	var (
		mu               sync.Mutex
		claims, open, hi int
		refuse           = true
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/worker/claim" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mu.Lock()
		claims++
		open++
		hi = max(hi, open)
		no := refuse
		mu.Unlock()
		defer func() { mu.Lock(); open--; mu.Unlock() }()
		w.Header().Set("Content-Type", "application/json")
		if no {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":"worker w already has 4 claims open","code":"rate_limited"}`)
			return
		}
		time.Sleep(50 * time.Millisecond) // a short long poll
		_, _ = io.WriteString(w, `{"jobs":[],"waited_ms":0}`)
	}))
	t.Cleanup(srv.Close)
	remote, err := worker.NewRemote(srv.URL, "secret", quiet)
	if err != nil {
		t.Fatal(err)
	}
	remote.ClaimWait = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		_ = worker.New(worker.Config{ID: "w", Backend: remote, Concurrency: 8, Poll: 20 * time.Millisecond,
			Executor: executor.Sim{}, Logger: quiet}).Run(ctx)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })

	time.Sleep(2500 * time.Millisecond)
	mu.Lock()
	refused := claims
	refuse = false
	mu.Unlock()
	// Retry-After 1 s, then 2 s: at most three claims in 2.5 s; at its
	// poll period it would have sent over a hundred.
	if refused > 3 {
		t.Errorf("%d claims in 2.5 s against a server answering 429 with Retry-After 1", refused)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n, most := claims, hi
		mu.Unlock()
		if most > 1 {
			t.Fatalf("the worker had %d claims open at once; it needs one", most)
		}
		if n >= refused+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not claim again once the server took claims (%d claims)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
