package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/webhooksig"
)

const webhookSecret = "e2e-webhook-secret-0123456789abcdef"

// hookReceiver records every delivery and answers 500 until ok is set.
type hookReceiver struct {
	srv *httptest.Server
	ok  atomic.Bool
	mu  sync.Mutex
	got []hookDelivery
}

type hookDelivery struct {
	id, typ, sig string
	body         []byte
	status       int
	jobID        int64
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Job  struct {
				ID int64 `json:"id"`
			} `json:"job"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		status := http.StatusInternalServerError
		if h.ok.Load() {
			status = http.StatusOK
		}
		h.mu.Lock()
		h.got = append(h.got, hookDelivery{id: ev.ID, typ: ev.Type, sig: r.Header.Get(webhooksig.Header),
			body: body, status: status, jobID: ev.Job.ID})
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) deliveries() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got...)
}

func (h *hookReceiver) env(events string) []string {
	return []string{"LEASEHOLD_WEBHOOK_URL=" + h.srv.URL + "/leasehold", "LEASEHOLD_WEBHOOK_SECRET=" + webhookSecret,
		"LEASEHOLD_WEBHOOK_EVENTS=" + events}
}

// An event whose receiver fails survives the server's kill -9: the server
// started again sends it again, with the same id and a valid signature,
// until a 200 ends it.
func TestWebhookRedeliveredAfterServerKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := newHookReceiver(t)
	server := e.startServerWith(h.env("job.dead")...)
	e.startWorker("hook-w", "--artifacts", e.artifacts)
	id := e.submit(map[string]any{"app": "com.example.broken", "sim": map[string]any{"steps": 1, "step_ms": 10, "permanent": true}})

	// The first attempt failed, and the server recorded it.
	e.eventually("a failed delivery recorded", 30*time.Second, func() bool {
		return e.count("SELECT count(*) FROM webhook_outbox WHERE job_id = $1 AND last_status = 500", id) == 1
	})
	server.signal(t, syscall.SIGKILL)
	_ = server.wait(t, 10*time.Second)
	first := h.deliveries()
	h.ok.Store(true)
	e.startServerWith(h.env("job.dead")...)

	e.eventually("delivered after the restart", 40*time.Second, func() bool {
		got := h.deliveries()
		return len(got) > 0 && got[len(got)-1].status == http.StatusOK
	})
	e.eventually("outbox empty", 10*time.Second, func() bool { return e.count("SELECT count(*) FROM webhook_outbox") == 0 })
	time.Sleep(time.Second) // a repeat would come now
	got := h.deliveries()
	if len(got) <= len(first) {
		t.Fatalf("%d deliveries in all, %d before the kill", len(got), len(first))
	}
	for i, d := range got {
		if d.id != got[0].id || d.typ != "job.dead" || d.jobID != id {
			t.Fatalf("delivery %d: event %s %s of job %d, want %s job.dead of job %d", i+1, d.id, d.typ, d.jobID, got[0].id, id)
		}
		if err := webhooksig.Verify(webhookSecret, d.sig, d.body, time.Now(), 5*time.Minute); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
		if want := http.StatusInternalServerError; i < len(got)-1 && d.status != want {
			t.Fatalf("delivery %d answered %d before the last", i+1, d.status)
		}
	}
	if n := e.count("SELECT count(*) FROM events WHERE job_id = $1 AND type = 'webhook.delivered'", id); n != 1 {
		t.Fatalf("%d webhook.delivered events", n)
	}
	// The failures before and after the kill share one timeline row.
	if n := e.count("SELECT count(*) FROM events WHERE job_id = $1 AND type = 'webhook.failed'", id); n != 1 {
		t.Fatalf("%d webhook.failed events, %d failed deliveries: want one", n, len(got)-1)
	}
}

// Two servers on one database: one sends, and every event goes out once.
func TestWebhookTwoServersSendOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := newHookReceiver(t)
	h.ok.Store(true)
	first := e.startServerWith(h.env("job.dead,job.succeeded")...)
	other := e.spawn("server 2", nil, append(h.env("job.dead,job.succeeded"),
		"LEASEHOLD_ADDR=127.0.0.1:0", "LEASEHOLD_ARTIFACTS="+e.artifacts)...)
	e.eventually("the second server up", 30*time.Second, func() bool {
		return strings.Contains(other.out.String(), "server listening")
	})
	e.startWorker("hook-w", "--artifacts", e.artifacts, "--concurrency", "4")
	const n = 10
	for i := range n {
		sim := map[string]any{"steps": 1, "step_ms": 10}
		if i%2 == 0 {
			sim["permanent"] = true
		}
		e.submit(map[string]any{"app": "com.example.notes", "sim": sim})
	}
	e.eventually("every event delivered", 60*time.Second, func() bool { return len(h.deliveries()) >= n })
	time.Sleep(time.Second)
	seen := map[string]bool{}
	for _, d := range h.deliveries() {
		if seen[d.id] {
			t.Fatalf("event %s delivered twice", d.id)
		}
		seen[d.id] = true
	}
	if len(seen) != n {
		t.Fatalf("%d events delivered, want %d", len(seen), n)
	}
	if n := strings.Count(first.out.String()+other.out.String(), "webhook sender active"); n != 1 {
		t.Fatalf("%d senders became active, want 1", n)
	}
	if !other.alive() {
		t.Fatalf("the second server exited:\n%s", other.out.String())
	}
}

// A server stopped by SIGTERM while a delivery waits for its answer hands
// the event back: the next server sends it at once (not after the 30 s an
// event is held), with the same id.
func TestWebhookInFlightAtSIGTERMSentAgainAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	hung := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var ids []string
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &ev)
		if err := webhooksig.Verify(webhookSecret, r.Header.Get(webhooksig.Header), body, time.Now(), time.Minute); err != nil {
			t.Errorf("delivery: %v", err)
		}
		mu.Lock()
		ids = append(ids, ev.ID)
		mu.Unlock()
		if calls.Add(1) == 1 {
			close(hung)
			select { // the server gives up on it when it stops
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
	}))
	defer hooks.Close()
	defer close(release)
	env := []string{"LEASEHOLD_WEBHOOK_URL=" + hooks.URL, "LEASEHOLD_WEBHOOK_SECRET=" + webhookSecret}
	server := e.startServerWith(env...)
	e.startWorker("hook-w", "--artifacts", e.artifacts)
	e.submit(map[string]any{"app": "com.example.broken", "sim": map[string]any{"steps": 1, "step_ms": 10, "permanent": true}})
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery")
	}
	server.signal(t, syscall.SIGTERM)
	if err := server.wait(t, 15*time.Second); err != nil {
		t.Fatalf("server exit: %v\n%s", err, server.out.String())
	}
	restarted := time.Now()
	e.startServerWith(env...)
	e.eventually("delivered again", 25*time.Second, func() bool { return calls.Load() >= 2 })
	if d := time.Since(restarted); d > 20*time.Second {
		t.Fatalf("sent again %v after the restart: the event stayed held", d)
	}
	e.eventually("outbox empty", 10*time.Second, func() bool { return e.count("SELECT count(*) FROM webhook_outbox") == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] == "" {
		t.Fatalf("event ids %q, want one id twice", ids)
	}
}
