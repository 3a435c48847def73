package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/queue"
)

// submitDemo submits a few simulated investigations that show the whole
// lifecycle: plain successes, a retry after a failure, a dead letter that
// ran out of attempts (job 4 on a fresh database: a manual retry saves it,
// since the sim fails only its first three attempts), and one that failed
// for good (permanent). Idempotency keys make a restart submit nothing
// new; an existing key keeps its payload, so the four older demos stay as
// they were.
func submitDemo(ctx context.Context, client *queue.Client) error {
	demos := []struct {
		key, app, sim string
		maxAttempts   int32
	}{
		{"demo-notes", "com.example.notes", `{"steps":4,"step_ms":1500}`, 0},
		{"demo-weather", "com.example.weather", `{"steps":6,"step_ms":1000}`, 0},
		{"demo-flaky", "com.example.banking", `{"steps":3,"step_ms":1000,"fail_attempts":1}`, 0},
		{"demo-exhausted", "com.example.maps", `{"steps":2,"step_ms":1000,"fail_attempts":3}`, 3},
		{"demo-broken", "com.example.broken", `{"steps":2,"step_ms":1000,"fail_attempts":5,"permanent":true}`, 0},
	}
	jobs := make([]queue.NewJob, len(demos))
	for i, d := range demos {
		key, base := d.key, int32(2000)
		jobs[i] = queue.NewJob{
			Kind: "app_investigation", IdempotencyKey: &key, BackoffBaseMs: &base,
			Payload: json.RawMessage(fmt.Sprintf(`{"app":%q,"instructions":"Open the app, walk through onboarding and the settings screens, and report anything broken.","sim":%s}`, d.app, d.sim)),
		}
		if d.maxAttempts > 0 {
			jobs[i].MaxAttempts = &d.maxAttempts
		}
	}
	if _, err := client.InsertMany(ctx, jobs); err != nil {
		return fmt.Errorf("submitting demo jobs: %w", err)
	}
	return nil
}
