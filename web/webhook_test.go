package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
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
	sender := queue.NewWebhookSender(f.pool, queue.WebhookSenderConfig{
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
	var types []string
	for _, e := range d.All("event") {
		if typ := htmltest.Attr(e, "data-type"); strings.HasPrefix(typ, "webhook.") {
			types = append(types, typ)
		}
	}
	if strings.Join(types, ",") != "webhook.delivered,webhook.failed" { // newest first
		t.Fatalf("page shows %q", types)
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
