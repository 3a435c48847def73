package maintenance_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// tarpit is a webhook endpoint that holds the requests hang says to hold
// until the sender gives up on them, and answers the others 200. It counts
// the 200s per job.
type tarpit struct {
	srv     *httptest.Server
	hang    atomic.Pointer[func(jobID int64) bool]
	hanging atomic.Int32
	mu      sync.Mutex
	ok      map[int64]int
}

func newTarpit(t *testing.T, hang func(jobID int64) bool) *tarpit {
	t.Helper()
	tp := &tarpit{ok: map[int64]int{}}
	tp.hang.Store(&hang)
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev struct {
			Job struct {
				ID int64 `json:"id"`
			} `json:"job"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		if (*tp.hang.Load())(ev.Job.ID) {
			tp.hanging.Add(1)
			defer tp.hanging.Add(-1)
			select { // longer than any timeout of these tests
			case <-req.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		tp.mu.Lock()
		tp.ok[ev.Job.ID]++
		tp.mu.Unlock()
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

// delivered is how many of ids were answered 200 at least once.
func (tp *tarpit) delivered(ids []int64) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	n := 0
	for _, id := range ids {
		if tp.ok[id] > 0 {
			n++
		}
	}
	return n
}

// runSender runs a sender on pool until the returned stop is called (or
// the test ends).
func runSender(t *testing.T, f *fixture, pool *pgxpool.Pool, url string, cfg maintenance.WebhookSenderConfig) (stop func()) {
	t.Helper()
	cfg.Webhook = queue.WebhookConfig{URL: url, Secret: testWebhookSecret, Events: []string{queue.WebhookJobDead}}
	s := maintenance.NewWebhookSender(pool, cfg)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// killJobs makes n dead jobs (n job.dead events) and returns their ids.
func (f *fixture) killJobs(t *testing.T, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = f.killJob(t).ID
	}
	return ids
}

// A receiver that never answers some events (a tarpit) holds one slot per
// request, not every delivery: the other events all go out while those
// requests still hang. Before, each batch of 16 waited for its slowest,
// and nothing else was sent until the tarpit's requests timed out.
func TestWebhookTarpitHoldsOnlyItsSlots(t *testing.T) {
	t.Parallel()
	f := setup(t, 32)
	if err := f.client.ConfigureWebhooks(f.ctx, []string{queue.WebhookJobDead}); err != nil {
		t.Fatal(err)
	}
	slow := f.killJobs(t, 4) // the oldest events: first in line
	fast := f.killJobs(t, 200)
	slowSet := map[int64]bool{}
	for _, id := range slow {
		slowSet[id] = true
	}
	tp := newTarpit(t, func(id int64) bool { return slowSet[id] })
	const timeout = 8 * time.Second
	start := time.Now()
	runSender(t, f, f.pool, tp.srv.URL, maintenance.WebhookSenderConfig{Timeout: timeout, Concurrency: 16})

	// Both, before the first tarpit request could have timed out: the
	// 200 delivered, and the 4 held. The fourth may reach the tarpit a
	// moment after the last fast answer (a CI run saw 3 hanging at that
	// instant), which is no waiting on it; what must not happen is that
	// the 200 wait for the tarpit's timeout.
	testutil.Eventually(t, timeout, "the 200 other events delivered while the tarpit hangs", func() bool {
		return tp.delivered(fast) == len(fast) && tp.hanging.Load() == int32(len(slow))
	})
	elapsed := time.Since(start)
	if h := tp.hanging.Load(); h != int32(len(slow)) || elapsed >= timeout {
		t.Fatalf("after %v, %d tarpit requests hang, want %d: the others waited for them", elapsed, h, len(slow))
	}
	t.Logf("200 events delivered in %v while %d requests hung", elapsed.Round(time.Millisecond), len(slow))
}

// A receiver that keeps failing leaves one webhook.failed row per event on
// the timeline, updated at each attempt (its count, last status, next
// try), not a row per attempt: before, 24 h of retries wrote about 150.
func TestWebhookRetriesShareOneTimelineRow(t *testing.T) {
	t.Parallel()
	f := setup(t, 16)
	r := newReceiver(t, always(http.StatusInternalServerError))
	stop := startSenderStoppable(t, f, r, maintenance.WebhookSenderConfig{BaseDelay: 5 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAge: time.Hour})
	ids := f.killJobs(t, 5)
	const attempts = 12
	waitFor(t, "12 attempts of every event", func() bool {
		per := map[int64]int{}
		for _, d := range r.deliveries() {
			per[d.event.Job.ID]++
		}
		for _, id := range ids {
			if per[id] < attempts {
				return false
			}
		}
		return true
	})
	stop()
	per := map[int64]int{}
	for _, d := range r.deliveries() {
		per[d.event.Job.ID]++
	}
	for _, id := range ids {
		evs := f.webhookEvents(t, id)
		if len(evs) != 1 || evs[0].Type != "webhook.failed" {
			t.Fatalf("job %d: %d attempts left %d timeline rows (first %s), want one webhook.failed", id, per[id], len(evs), evs[0].Type)
		}
		var detail struct {
			Attempt int             `json:"attempt"`
			Status  int             `json:"status"`
			NextAt  *time.Time      `json:"next_at"`
			LastAt  *time.Time      `json:"last_at"`
			EventID string          `json:"event_id"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(evs[0].Detail, &detail); err != nil {
			t.Fatal(err)
		}
		// The last attempt may have been cut short by the stop: counted, not
		// recorded.
		if detail.Attempt < attempts-1 || detail.Attempt > per[id] || detail.Attempt < per[id]-1 ||
			detail.Status != 500 || detail.NextAt == nil || detail.LastAt == nil || detail.EventID == "" {
			t.Fatalf("job %d: %d attempts sent, timeline row %s", id, per[id], evs[0].Detail)
		}
	}
}

// startSenderStoppable is startSender with a stop.
func startSenderStoppable(t *testing.T, f *fixture, r *receiver, cfg maintenance.WebhookSenderConfig) (stop func()) {
	t.Helper()
	if err := f.client.ConfigureWebhooks(f.ctx, []string{queue.WebhookJobDead}); err != nil {
		t.Fatal(err)
	}
	return runSender(t, f, f.pool, r.srv.URL+"/hook", cfg)
}

// A sender that dies with every slot in a request (its database
// connections cut: it can neither record nor release anything) loses no
// event: once their hold ends the next sender sends them, at least once,
// and a tarpit still holding two events holds back nothing else.
func TestWebhookSenderCrashMidDeliveryLosesNone(t *testing.T) {
	t.Parallel()
	f := setup(t, 32)
	if err := f.client.ConfigureWebhooks(f.ctx, []string{queue.WebhookJobDead}); err != nil {
		t.Fatal(err)
	}
	slow := f.killJobs(t, 2)
	fast := f.killJobs(t, 100)
	slowSet := map[int64]bool{}
	for _, id := range slow {
		slowSet[id] = true
	}
	tp := newTarpit(t, func(int64) bool { return true }) // the first sender's requests all hang
	const timeout = 5 * time.Second
	network, target := testutil.DialTarget(f.pool.Config().ConnConfig.Host, f.pool.Config().ConnConfig.Port)
	proxy := newTCPProxy(t, network, target)
	cfgA := f.pool.Config().Copy()
	cfgA.ConnConfig.Host, cfgA.ConnConfig.Port, cfgA.ConnConfig.Fallbacks = "127.0.0.1", proxy.port(), nil
	poolA, err := pgxpool.NewWithConfig(f.ctx, cfgA)
	if err != nil {
		t.Fatal(err)
	}
	stopA := runSender(t, f, poolA, tp.srv.URL, maintenance.WebhookSenderConfig{Timeout: timeout, Concurrency: 16, Hold: time.Second})
	waitFor(t, "16 requests under way", func() bool { return tp.hanging.Load() == 16 })

	proxy.cut() // the crash: nothing more reaches the database
	stopA()
	poolA.Close()
	hang := func(id int64) bool { return slowSet[id] }
	tp.hang.Store(&hang)
	start := time.Now()
	runSender(t, f, f.pool, tp.srv.URL, maintenance.WebhookSenderConfig{Timeout: timeout, Concurrency: 16})
	testutil.Eventually(t, timeout-time.Second, "every event but the tarpit's delivered after the crash", func() bool {
		return tp.delivered(fast) == len(fast)
	})
	t.Logf("100 events delivered %v after the crash", time.Since(start).Round(time.Millisecond))
	waitFor(t, "only the tarpit's events left", func() bool { return f.outbox(t)["job.dead"] == len(slow) })
}

// tcpProxy forwards connections to a PostgreSQL server until cut, when it
// drops them all and refuses new ones, as a crashed process's would end.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func newTCPProxy(t *testing.T, network, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial(network, target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.dead {
				p.mu.Unlock()
				c.Close()
				s.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
