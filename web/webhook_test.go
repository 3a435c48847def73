package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// A delivery's attempts show on the job's timeline, in the API (its
// events[] still match the OpenAPI schema: the request helper validates)
// and on the page; the sender's metrics are served.
func TestWebhookDeliveriesOnTimelineAndMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var calls atomic.Int32
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer hooks.Close()
	events := []string{queue.WebhookJobDead}
	if err := f.queue.ConfigureWebhooks(f.ctx, events); err != nil {
		t.Fatal(err)
	}
	sender := maintenance.NewWebhookSender(f.pool, maintenance.WebhookSenderConfig{
		Webhook:   queue.WebhookConfig{URL: hooks.URL, Secret: "web-test-webhook-secret", Events: events},
		BaseDelay: 50 * time.Millisecond, OnDelivery: f.metrics.ObserveWebhook, OnGiveUp: f.metrics.ObserveWebhookGivenUp,
	})
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = sender.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	j := f.deadJob(t, "report")
	testutil.Await(t, 15*time.Second, func() (int64, bool) {
		n, err := f.queue.WebhookPending(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n, n == 0 && calls.Load() == 2
	}, func(n int64) string { return fmt.Sprintf("%d pending, %d calls", n, calls.Load()) })

	var detail struct {
		Events []struct {
			Type    string         `json:"type"`
			Attempt *int32         `json:"attempt"`
			Detail  map[string]any `json:"detail"`
		} `json:"events"`
	}
	f.get(t, "/api/v1/jobs/"+strconv.FormatInt(j.ID, 10)).want(t, http.StatusOK).decode(t, &detail)
	var got []string
	for _, e := range detail.Events {
		if strings.HasPrefix(e.Type, "webhook.") {
			got = append(got, e.Type+" "+strconv.Itoa(int(e.Detail["status"].(float64)))+" attempt "+strconv.Itoa(int(e.Detail["attempt"].(float64))))
			if e.Attempt != nil {
				t.Errorf("%s is an event of job attempt %d, want none", e.Type, *e.Attempt)
			}
		}
	}
	if want := "webhook.failed 503 attempt 1,webhook.delivered 200 attempt 2"; strings.Join(got, ",") != want {
		t.Fatalf("timeline %q, want %q", got, want)
	}

	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, jobPagePath(j.ID)).want(t, http.StatusOK))
	// The deliveries are on the page, apart from the job's own events.
	var types []string
	for _, e := range d.All("webhook-event") {
		types = append(types, htmltest.Attr(e, "data-type"))
	}
	if strings.Join(types, ",") != "webhook.delivered,webhook.failed" { // newest first
		t.Fatalf("page shows the deliveries %q", types)
	}
	for _, e := range d.All("event") {
		if typ := htmltest.Attr(e, "data-type"); strings.HasPrefix(typ, "webhook.") {
			t.Errorf("%s among the job's own events", typ)
		}
	}

	m := string(f.do(t, call{method: http.MethodGet, path: "/metrics", token: "-"}).want(t, http.StatusOK).body)
	for _, want := range []string{
		`leasehold_webhook_deliveries_total{result="ok"} 1`,
		`leasehold_webhook_deliveries_total{result="error"} 1`,
		"leasehold_webhook_given_up_total 0",
		"leasehold_webhook_pending 0",
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics have no %q", want)
		}
	}
}

// A webhook's job is the job exactly as GET /api/v1/jobs/{id} shows it:
// the same keys and every value alike to the byte, times included (a
// run_at on a whole second once came out "…:00Z" in the webhook and
// "…:00.000000Z" in the API).
func TestWebhookJobIsTheAPIJob(t *testing.T) {
	t.Parallel()
	f := setup(t)
	bodies := make(chan []byte, 4)
	hooks := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
	}))
	defer hooks.Close()
	events := []string{queue.WebhookJobDead}
	if err := f.queue.ConfigureWebhooks(f.ctx, events); err != nil {
		t.Fatal(err)
	}
	sender := maintenance.NewWebhookSender(f.pool, maintenance.WebhookSenderConfig{
		Webhook: queue.WebhookConfig{URL: hooks.URL, Secret: "web-test-webhook-secret", Events: events},
	})
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { _ = sender.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	runAt := time.Now().UTC().Truncate(time.Second).Add(-time.Minute).Format(time.RFC3339)
	j := f.submit(t, `{"kind":"report","queue":"dlq","max_attempts":1,"run_at":"`+runAt+`","payload":{"n":1}}`)
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"dlq"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("claiming job %d: %v, %+v", j.ID, err, jobs)
	}
	if _, err := f.queue.Fail(f.ctx, queue.Lease{JobID: j.ID, Token: jobs[0].LeaseToken, WorkerID: "w1"}, "boom", false); err != nil {
		t.Fatal(err)
	}
	var body []byte
	select {
	case body = <-bodies:
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook delivered")
	}
	var ev struct {
		Job map[string]json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("webhook body %s: %v", body, err)
	}
	var shown map[string]json.RawMessage
	f.get(t, "/api/v1/jobs/"+strconv.FormatInt(j.ID, 10)).want(t, http.StatusOK).decode(t, &shown)
	// What the detail adds to the job: its history (usage included), and why it waits
	// (null here: the job is dead).
	if w, ok := shown["waiting"]; !ok || string(w) != "null" {
		t.Errorf("waiting of a dead job: %s (present %v), want null", w, ok)
	}
	for _, detail := range []string{"attempts", "artifacts", "events", "effects", "usage", "waiting"} {
		delete(shown, detail)
	}
	if len(ev.Job) != len(shown) {
		t.Errorf("webhook job has %d keys, the API's %d:\n%s\n%v", len(ev.Job), len(shown), body, shown)
	}
	for k, v := range shown {
		if got, ok := ev.Job[k]; !ok || string(got) != string(v) {
			t.Errorf("%s: webhook %s, API %s", k, got, v)
		}
	}
}
