package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// floodClaims is more than the server's default --max-connections (4096).
const floodClaims = 4100

// A stolen worker token sends 4,100 long polls at once, from an address of
// its own, more than the server's connection slots, and keeps every
// connection it gets. The token keeps only a few claims open, the rest
// refused at once (429) or closed past the client's bound; meanwhile
// /health/live, the sign-in page and another worker's claims answer within
// a second, and a remote worker process runs a job submitted during the
// flood.
func TestOneTokenCannotTakeEveryConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	e := newEnv(t)
	e.startServer() // the defaults: 4096 connections
	flood, honest := e.workerToken("stolen"), e.workerToken("honest")
	worker := e.startRemoteWorker("honest", honest, "--queues", "honest")

	// The flood comes from 127.0.0.2 (all of 127.0.0.0/8 is loopback), the
	// others from 127.0.0.1: two clients, as over the internet.
	var dialed atomic.Int64
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	floodHTTP := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				dialed.Add(1)
			}
			return c, err
		},
		MaxIdleConnsPerHost: 2 * floodClaims, // a hostile client keeps what it gets
	}}
	defer floodHTTP.CloseIdleConnections()
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	var (
		pending, refused, closed, other atomic.Int64
		wg                              sync.WaitGroup
	)
	defer wg.Wait()
	defer stop()
	pending.Store(floodClaims)
	start := time.Now()
	for range floodClaims {
		wg.Go(func() {
			defer pending.Add(-1)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.apiURL+"/api/v1/worker/claim",
				strings.NewReader(`{"queues":["flood"],"wait_ms":30000,"lease_ms":3600000}`))
			req.Header.Set("Authorization", "Bearer "+flood)
			req.Header.Set("Content-Type", "application/json")
			res, err := floodHTTP.Do(req)
			if err != nil {
				closed.Add(1)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "" &&
				strings.Contains(res.Header.Get("Content-Type"), "json") {
				refused.Add(1)
			} else {
				other.Add(1)
			}
		})
	}
	// The flood is in: every claim answered or on a connection of its own
	// (which the kernel completes before the server accepts it).
	for time.Since(start) < 20*time.Second && pending.Load()-dialed.Load() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	t.Logf("after %s: %d connections dialed, %d claims answered or closed", time.Since(start), dialed.Load(), floodClaims-pending.Load())

	// Everyone else, from the other address, for ten seconds of the flood.
	probe := &http.Client{Timeout: time.Second}
	ask := func(what string, req *http.Request) {
		t.Helper()
		began := time.Now()
		res, err := probe.Do(req)
		if err != nil {
			t.Fatalf("%s during the flood: %v (after %s)", what, err, time.Since(began))
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s during the flood: status %d", what, res.StatusCode)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.apiURL+"/health/live", nil)
		ask("GET /health/live", req)
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, e.apiURL+"/login", nil)
		ask("GET /login", req)
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, e.apiURL+"/api/v1/worker/claim", strings.NewReader(`{"queues":["nothing"]}`))
		req.Header.Set("Authorization", "Bearer "+honest)
		req.Header.Set("Content-Type", "application/json")
		ask("another worker's claim", req)
	}
	job, err := e.client().Submit(e.ctx, client.NewJob{Kind: "app_investigation", Queue: "honest",
		Payload: json.RawMessage(`{"app":"com.example.flood","sim":{"steps":1,"step_ms":10}}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(job.ID, 15*time.Second, client.StateSucceeded)
	if !worker.alive() {
		t.Fatal("the honest worker exited")
	}
	// Of the flood, only the token's bound of claims still waits; every
	// other one was answered or its connection closed, at once.
	if n := pending.Load(); n > 4 {
		t.Fatalf("%d claims of the flood still wait, want at most 4 (refused %d, closed %d, other %d)", n, refused.Load(), closed.Load(), other.Load())
	}
	if other.Load() != 0 {
		t.Errorf("%d flood claims answered other than 429 rate_limited", other.Load())
	}
	t.Logf("flood of %d: %d refused 429, %d connections closed, %d waiting", floodClaims, refused.Load(), closed.Load(), pending.Load())
}

// Connections that send nothing (no token needed) from one address, more
// than the server's slots: past the client's bound they are closed at
// once, so /health/live from another address still answers within a
// second.
func TestOneClientCannotTakeEveryConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	e := newEnv(t)
	e.startServer()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range floodClaims {
		wg.Go(func() {
			c, err := dialer.DialContext(e.ctx, "tcp", e.addr)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	probe := &http.Client{Timeout: time.Second}
	for range 8 {
		began := time.Now()
		res, err := probe.Get(e.apiURL + "/health/live")
		if err != nil {
			t.Fatalf("GET /health/live with %d idle connections of one client open: %v (after %s)", len(conns), err, time.Since(began))
		}
		res.Body.Close()
		time.Sleep(250 * time.Millisecond)
	}
}
