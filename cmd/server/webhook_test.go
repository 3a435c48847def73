package main

import (
	"strings"
	"testing"
)

// Webhook settings that cannot work stop the server before it touches a
// database, naming what is wrong; flags and LEASEHOLD_WEBHOOK_* alike.
func TestWebhookConfigRefusedAtStart(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"URLWithoutSecret": {args: []string{"--webhook-url", "https://hooks.example.com/x"}, want: "LEASEHOLD_WEBHOOK_SECRET"},
		"EnvURLWithoutSecret": {env: map[string]string{"LEASEHOLD_WEBHOOK_URL": "https://hooks.example.com/x"},
			want: "LEASEHOLD_WEBHOOK_SECRET"},
		"UnknownEvent": {env: map[string]string{"LEASEHOLD_WEBHOOK_URL": "https://hooks.example.com/x",
			"LEASEHOLD_WEBHOOK_SECRET": "0123456789abcdef0123", "LEASEHOLD_WEBHOOK_EVENTS": "job.dead,job.done"},
			want: `"job.done" is no event type`},
		"BadURL":        {args: []string{"--webhook-url", "hooks.example.com", "--webhook-secret", "0123456789abcdef0123"}, want: "absolute"},
		"SecretAlone":   {args: []string{"--webhook-secret", "0123456789abcdef0123"}, want: "LEASEHOLD_WEBHOOK_URL"},
		"ShortSecret":   {args: []string{"--webhook-url", "http://127.0.0.1:9/x", "--webhook-secret", "abc"}, want: "at least 16"},
		"EventsWithout": {env: map[string]string{"LEASEHOLD_WEBHOOK_EVENTS": "job.succeeded"}, want: "LEASEHOLD_WEBHOOK_URL"},
		"NoConcurrency": {args: []string{"--webhook-concurrency", "0"}, want: "LEASEHOLD_WEBHOOK_CONCURRENCY"},
		"EnvHugeConcurrency": {env: map[string]string{"LEASEHOLD_WEBHOOK_CONCURRENCY": "100000"},
			want: "LEASEHOLD_WEBHOOK_CONCURRENCY (--webhook-concurrency) 100000: want 1 to 256"},
		"TinyTimeout": {args: []string{"--webhook-timeout", "1ms"}, want: "LEASEHOLD_WEBHOOK_TIMEOUT"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			// No database: the check comes first.
			t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
			err := run(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
}
