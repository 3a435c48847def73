package queue_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

const testWebhookSecret = "test-webhook-secret-0123456789"

func TestParseWebhookConfig(t *testing.T) {
	t.Parallel()
	good := "https://hooks.example.com/leasehold"
	cfg, err := queue.ParseWebhookConfig(good, testWebhookSecret, "")
	if err != nil || strings.Join(cfg.Events, ",") != "job.dead" {
		t.Fatalf("default events: %v %v", cfg.Events, err)
	}
	cfg, err = queue.ParseWebhookConfig(good, testWebhookSecret, " job.succeeded, job.dead,job.failed,worker.offline,job.dead")
	if err != nil || strings.Join(cfg.Events, ",") != "job.dead,job.failed,job.succeeded,worker.offline" {
		t.Fatalf("every event: %v %v", cfg.Events, err)
	}
	if cfg, err := queue.ParseWebhookConfig("", "", ""); err != nil || cfg.Enabled() {
		t.Fatalf("nothing set: %+v %v", cfg, err)
	}
	for name, tc := range map[string]struct{ url, secret, events, want string }{
		"URLWithoutSecret": {good, "", "", "LEASEHOLD_WEBHOOK_SECRET"},
		"ShortSecret":      {good, "short", "", "at least 16"},
		"SecretWithoutURL": {"", testWebhookSecret, "", "LEASEHOLD_WEBHOOK_URL"},
		"EventsWithoutURL": {"", "", "job.dead", "LEASEHOLD_WEBHOOK_URL"},
		"UnknownEvent":     {good, testWebhookSecret, "job.dead,job.exploded", `"job.exploded"`},
		"EmptyItem":        {good, testWebhookSecret, "job.dead,,", `""`},
		"RelativeURL":      {"/hooks", testWebhookSecret, "", "absolute"},
		"OtherScheme":      {"ftp://example.com/x", testWebhookSecret, "", "absolute"},
		"NoHost":           {"https:///x", testWebhookSecret, "", "absolute"},
		"Credentials":      {"https://u:p@example.com/x", testWebhookSecret, "", "credentials"},
		"NotAURL":          {"http://[::1", testWebhookSecret, "", "absolute"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := queue.ParseWebhookConfig(tc.url, tc.secret, tc.events)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func (f *fixture) killJob(t *testing.T) queue.Job {
	t.Helper()
	return testutil.KillJob(t, f.ctx, f.client)
}

func (f *fixture) outbox(t *testing.T) map[string]int {
	t.Helper()
	return testutil.WebhookOutbox(t, f.ctx, f.pool)
}

// Only the transitions of enabled types are recorded; the others write
// nothing at all.
func TestWebhookEventsNotEnabledWriteNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, 8)
	run := func(t *testing.T) {
		// Succeeds; fails and retries; is released; expires and retries;
		// dies; is retried by hand and cancelled.
		f.insert(t, jobOpts{})
		j := f.claimOne(t, "w", time.Minute)
		if _, err := f.client.Complete(f.ctx, testutil.LeaseOf(j), nil); err != nil {
			t.Fatal(err)
		}
		f.insert(t, jobOpts{maxAttempts: 5})
		j = f.claimOne(t, "w", time.Minute)
		if _, err := f.client.Fail(f.ctx, testutil.LeaseOf(j), "flaky", true); err != nil {
			t.Fatal(err)
		}
		j = claimWhenDue(t, f, "w")
		if _, err := f.client.Release(f.ctx, testutil.LeaseOf(j)); err != nil {
			t.Fatal(err)
		}
		j = f.claimOne(t, "w", 100*time.Millisecond)
		reapUntil(t, f, j.ID)
		dead := f.killJob(t)
		if _, err := f.client.RetryOne(f.ctx, dead.ID, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.client.CancelOne(f.ctx, dead.ID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		events []string
		want   map[string]int
	}{
		{"None", nil, map[string]int{}},
		{"Default", []string{queue.WebhookJobDead}, map[string]int{"job.dead": 1}},
		{"Succeeded", []string{queue.WebhookJobSucceeded}, map[string]int{"job.succeeded": 1}},
		{"Failed", []string{queue.WebhookJobFailed}, map[string]int{"job.failed": 2}},
		{"Every", queue.WebhookEventTypes, map[string]int{"job.succeeded": 1, "job.failed": 2, "job.dead": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.pool.Exec(f.ctx, `DELETE FROM webhook_outbox`); err != nil {
				t.Fatal(err)
			}
			if err := f.client.ConfigureWebhooks(f.ctx, tc.events); err != nil {
				t.Fatal(err)
			}
			run(t)
			if got := f.outbox(t); !maps.Equal(got, tc.want) {
				t.Fatalf("outbox %v, want %v", got, tc.want)
			}
		})
	}
}
