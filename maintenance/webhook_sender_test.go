package maintenance_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/webhooksig"
)

const testWebhookSecret = "test-webhook-secret-0123456789"

// receiver is a webhook endpoint that records every request and answers
// with what answer returns for the n-th one (1-based).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []delivery
	answer func(n int) int
}

type delivery struct {
	at     time.Time
	sig    string
	body   []byte
	event  webhookBody
	status int
}

type webhookBody struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	At     time.Time       `json:"at"`
	Job    *api.Job        `json:"job"`
	Worker json.RawMessage `json:"worker"`
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		d := delivery{at: time.Now(), sig: req.Header.Get(webhooksig.Header), body: body}
		if err := json.Unmarshal(body, &d.event); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		r.mu.Lock()
		r.got = append(r.got, d)
		n := len(r.got)
		d.status = r.answer(n)
		r.got[n-1].status = d.status
		r.mu.Unlock()
		w.WriteHeader(d.status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func always(status int) func(int) int { return func(int) int { return status } }

// startSender configures events and runs a sender to r until the test ends.
func startSender(t *testing.T, f *fixture, r *receiver, cfg maintenance.WebhookSenderConfig, events ...string) *maintenance.WebhookSender {
	t.Helper()
	if err := f.client.ConfigureWebhooks(f.ctx, events); err != nil {
		t.Fatal(err)
	}
	cfg.Webhook = queue.WebhookConfig{URL: r.srv.URL + "/hook", Secret: testWebhookSecret, Events: events}
	s := maintenance.NewWebhookSender(f.pool, cfg)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (f *fixture) killJob(t *testing.T) queue.Job {
	t.Helper()
	return testutil.KillJob(t, f.ctx, f.client)
}

func (f *fixture) outbox(t *testing.T) map[string]int {
	t.Helper()
	return testutil.WebhookOutbox(t, f.ctx, f.pool)
}

// webhookEvents is the job's timeline entries of the sender.
func (f *fixture) webhookEvents(t *testing.T, id int64) []queue.Event {
	t.Helper()
	d, err := f.client.Detail(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var evs []queue.Event
	for _, e := range d.Events {
		if strings.HasPrefix(e.Type, "webhook.") {
			evs = append(evs, e)
		}
	}
	return evs
}

func TestWebhookDeadJobDeliveredOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	r := newReceiver(t, always(http.StatusNoContent))
	var ok atomic.Int32
	startSender(t, f, r, maintenance.WebhookSenderConfig{OnDelivery: func(good bool) {
		if good {
			ok.Add(1)
		}
	}}, queue.WebhookJobDead)
	job := f.killJob(t)

	waitFor(t, "delivery", func() bool { return len(r.deliveries()) > 0 })
	waitFor(t, "outbox emptied", func() bool { return len(f.outbox(t)) == 0 })
	time.Sleep(300 * time.Millisecond) // a duplicate would come now
	got := r.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	d := got[0]
	if err := webhooksig.Verify(testWebhookSecret, d.sig, d.body, time.Now(), time.Minute); err != nil {
		t.Fatalf("signature %q: %v", d.sig, err)
	}
	if err := webhooksig.Verify("not-the-secret-0123456789", d.sig, d.body, time.Now(), time.Minute); err == nil {
		t.Fatal("a wrong secret verifies")
	}
	if d.event.ID == "" || d.event.Type != "job.dead" || d.event.Job == nil || d.event.Job.ID != job.ID ||
		d.event.Job.State != api.StateDead || d.event.Worker != nil {
		t.Fatalf("body %s", d.body)
	}
	if d.event.At.IsZero() || d.event.At.Before(job.CreatedAt) {
		t.Fatalf("event at %v, job created %v", d.event.At, job.CreatedAt)
	}
	if ok.Load() != 1 {
		t.Fatalf("OnDelivery(ok) %d times, want 1", ok.Load())
	}
	evs := f.webhookEvents(t, job.ID)
	if len(evs) != 1 || evs[0].Type != "webhook.delivered" {
		t.Fatalf("timeline %+v, want one webhook.delivered", evs)
	}
	var detail map[string]any
	if err := json.Unmarshal(evs[0].Detail, &detail); err != nil {
		t.Fatal(err)
	}
	if detail["event_id"] != d.event.ID || detail["event"] != "job.dead" || detail["status"] != float64(204) || detail["attempt"] != float64(1) {
		t.Fatalf("webhook.delivered detail %v", detail)
	}
}

func TestWebhookRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	r := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	var failed atomic.Int32
	base := 200 * time.Millisecond
	startSender(t, f, r, maintenance.WebhookSenderConfig{BaseDelay: base, MaxDelay: time.Minute, OnDelivery: func(ok bool) {
		if !ok {
			failed.Add(1)
		}
	}}, queue.WebhookJobDead)
	job := f.killJob(t)

	waitFor(t, "four attempts", func() bool { return len(r.deliveries()) >= 4 })
	waitFor(t, "outbox emptied", func() bool { return len(f.outbox(t)) == 0 })
	got := r.deliveries()
	if len(got) != 4 {
		t.Fatalf("%d attempts, want 4", len(got))
	}
	for i, d := range got {
		if d.event.ID != got[0].event.ID || string(d.body) != string(got[0].body) {
			t.Fatalf("attempt %d: body %s, first %s: want the same event and body", i+1, d.body, got[0].body)
		}
		if err := webhooksig.Verify(testWebhookSecret, d.sig, d.body, time.Now(), time.Minute); err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		if i == 0 {
			continue
		}
		// base, then doubling; the sender wakes when the retry is due.
		want := base << (i - 1)
		if gap := d.at.Sub(got[i-1].at); gap < want-20*time.Millisecond || gap > want+time.Second {
			t.Fatalf("attempt %d came %v after the one before, want about %v", i+1, gap, want)
		}
	}
	if failed.Load() != 3 {
		t.Fatalf("OnDelivery(error) %d times, want 3", failed.Load())
	}
	// The three failures share one row, updated at each; the delivery is
	// its own.
	evs := f.webhookEvents(t, job.ID)
	if len(evs) != 2 {
		t.Fatalf("timeline %s: want one webhook.failed (attempt 3) and a webhook.delivered", timelineText(evs))
	}
	for i, e := range evs {
		var detail map[string]any
		if err := json.Unmarshal(e.Detail, &detail); err != nil {
			t.Fatal(err)
		}
		wantType, wantStatus, wantAttempt := "webhook.failed", float64(500), float64(3)
		if i == 1 {
			wantType, wantStatus, wantAttempt = "webhook.delivered", 200, 4
		}
		if e.Type != wantType || detail["status"] != wantStatus || detail["attempt"] != wantAttempt || detail["event_id"] != got[0].event.ID {
			t.Fatalf("timeline entry %d: %s %v", i, e.Type, detail)
		}
	}
}

// timelineText is a timeline's entries as type and detail.
func timelineText(evs []queue.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Type + " " + string(e.Detail) + "; ")
	}
	return b.String()
}

func TestWebhookGivenUp(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	r := newReceiver(t, always(http.StatusBadGateway))
	var gaveUp atomic.Int32
	startSender(t, f, r, maintenance.WebhookSenderConfig{BaseDelay: 100 * time.Millisecond, MaxAge: time.Second,
		OnGiveUp: func() { gaveUp.Add(1) }}, queue.WebhookJobDead)
	job := f.killJob(t)
	waitFor(t, "given up", func() bool { return gaveUp.Load() == 1 })
	if n := len(f.outbox(t)); n != 0 {
		t.Fatalf("outbox holds %d types after giving up", n)
	}
	attempts := len(r.deliveries())
	// 100, 200, 400 ms: the next (800 ms) would pass the second.
	if attempts < 3 || attempts > 5 {
		t.Fatalf("%d attempts within a second", attempts)
	}
	// The failures retried share one row; giving up is the last.
	evs := f.webhookEvents(t, job.ID)
	if len(evs) != 2 || evs[0].Type != "webhook.failed" || evs[1].Type != "webhook.given_up" ||
		!strings.Contains(string(evs[0].Detail), `"attempt": `+strconv.Itoa(attempts-1)+",") ||
		!strings.Contains(string(evs[1].Detail), `"attempt": `+strconv.Itoa(attempts)+",") {
		t.Fatalf("%d attempts, timeline %s", attempts, timelineText(evs))
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(r.deliveries()); n != attempts {
		t.Fatalf("%d attempts after giving up at %d", n, attempts)
	}
}

// A redirect is an answer, not a new address: it is a failed attempt.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	var followed atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { followed.Add(1) }))
	defer target.Close()
	r := newReceiver(t, always(http.StatusFound))
	r.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, target.URL, http.StatusFound)
	})
	var failed atomic.Int32
	startSender(t, f, r, maintenance.WebhookSenderConfig{BaseDelay: time.Hour, OnDelivery: func(ok bool) {
		if !ok {
			failed.Add(1)
		}
	}}, queue.WebhookJobDead)
	job := f.killJob(t)
	waitFor(t, "attempt failed", func() bool { return failed.Load() == 1 })
	if followed.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
	evs := f.webhookEvents(t, job.ID)
	if len(evs) != 1 || evs[0].Type != "webhook.failed" || !strings.Contains(string(evs[0].Detail), `"status": 302`) {
		t.Fatalf("timeline %+v", evs)
	}
}

// Two servers run a sender each: one is active, and every event is
// delivered once.
func TestWebhookTwoSendersDeliverOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, 16)
	r := newReceiver(t, always(http.StatusOK))
	s1 := startSender(t, f, r, maintenance.WebhookSenderConfig{}, queue.WebhookJobDead, queue.WebhookJobSucceeded)
	s2 := startSender(t, f, r, maintenance.WebhookSenderConfig{}, queue.WebhookJobDead, queue.WebhookJobSucceeded)
	waitFor(t, "a sender active", func() bool { return s1.Active() || s2.Active() })
	const n = 40
	for range n / 2 {
		f.killJob(t)
	}
	var wg sync.WaitGroup
	for range n / 2 {
		f.insert(t, testutil.Job{})
	}
	for range 4 {
		wg.Go(func() {
			for {
				jobs, err := f.client.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"default"}, Limit: 3, Lease: time.Minute})
				if err != nil || len(jobs) == 0 {
					return
				}
				for _, j := range jobs {
					if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(j), nil); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "every event delivered", func() bool { return len(r.deliveries()) >= n })
	time.Sleep(300 * time.Millisecond)
	seen := map[string]bool{}
	for _, d := range r.deliveries() {
		if seen[d.event.ID] {
			t.Fatalf("event %s delivered twice", d.event.ID)
		}
		seen[d.event.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d events delivered, want %d", len(seen), n)
	}
	if s1.Active() && s2.Active() {
		t.Fatal("both senders active")
	}
}

// worker.offline: once per going offline, again after the worker came
// back and went away again.
func TestWebhookWorkerOffline(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	r := newReceiver(t, always(http.StatusOK))
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "gone-before", Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE workers SET last_seen = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "pixel7", Devices: []string{"pixel7"}, Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	startSender(t, f, r, maintenance.WebhookSenderConfig{OfflineAfter: 300 * time.Millisecond}, queue.WebhookWorkerOffline)
	waitFor(t, "offline announced", func() bool { return len(r.deliveries()) == 1 })
	time.Sleep(600 * time.Millisecond)
	if err := f.client.WorkerSeen(f.ctx, queue.Presence{ID: "pixel7", Devices: []string{"pixel7"}, Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "offline announced again", func() bool { return len(r.deliveries()) == 2 })
	time.Sleep(600 * time.Millisecond)
	got := r.deliveries()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2", len(got))
	}
	for _, d := range got {
		var w struct {
			ID     string  `json:"id"`
			Device *string `json:"device"`
		}
		if err := json.Unmarshal(d.event.Worker, &w); err != nil {
			t.Fatal(err)
		}
		if d.event.Type != "worker.offline" || w.ID != "pixel7" || w.Device == nil || *w.Device != "pixel7" || d.event.Job != nil {
			t.Fatalf("body %s", d.body)
		}
	}
	if got[0].event.ID == got[1].event.ID {
		t.Fatal("two goings offline share an event id")
	}
}

// A receiver that does not answer in time fails the attempt, and one that
// answers without end is read only so far.
func TestWebhookRequestBounded(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	var calls atomic.Int32
	r := newReceiver(t, always(http.StatusOK))
	r.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.ReadAll(req.Body) // then the server notices the client leave
		if calls.Add(1) == 1 {
			select { // does not answer in time
			case <-req.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for req.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	var results []bool
	var mu sync.Mutex
	startSender(t, f, r, maintenance.WebhookSenderConfig{Timeout: 300 * time.Millisecond, BaseDelay: 50 * time.Millisecond,
		OnDelivery: func(ok bool) { mu.Lock(); results = append(results, ok); mu.Unlock() }}, queue.WebhookJobDead)
	job := f.killJob(t)
	// The sender records the delivery (the outbox row goes) before it
	// reports it to OnDelivery: wait for both.
	waitFor(t, "delivered", func() bool {
		mu.Lock()
		reported := len(results)
		mu.Unlock()
		return len(f.outbox(t)) == 0 && reported >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 2 || results[0] || !results[1] {
		t.Fatalf("attempts %v, want a failure then a success", results)
	}
	evs := f.webhookEvents(t, job.ID)
	if len(evs) != 2 || evs[0].Type != "webhook.failed" || !strings.Contains(string(evs[0].Detail), `"status": null`) ||
		!strings.Contains(string(evs[0].Detail), "Timeout") || evs[1].Type != "webhook.delivered" {
		t.Fatalf("timeline %+v", evs)
	}
}
