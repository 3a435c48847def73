package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// A sim job with a cost budget, run by a remote worker process against a
// server process: the step whose usage report reaches max_cost ends the
// attempt failed, permanently (dead on its first attempt though attempts
// remain), with reason "budget spent"; the worker stops there, and the
// screenshots of the steps it ran are kept.
func TestRemoteSimBudgetSpent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	e.startRemoteWorker("budget-1", e.workerToken("budget-1"), "--lease", "5s")
	raw, err := json.Marshal(map[string]any{"app": "com.example.notes", "sim": map[string]any{
		"steps": 10, "step_ms": 50,
		"usage": map[string]any{"model": "gpt-x", "cost_micros_per_step": 1000, "input_tokens_per_step": 100},
	}})
	if err != nil {
		t.Fatal(err)
	}
	maxCost := int64(3000)
	job, err := e.client().Submit(e.ctx, client.NewJob{Kind: "app_investigation", Payload: raw, MaxCost: &maxCost})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	d := e.waitFor(job.ID, 30*time.Second, client.StateSucceeded, client.StateDead)
	if d.State != client.StateDead || d.Attempt != 1 || d.LastError == nil || *d.LastError != "budget spent" {
		t.Fatalf("the job ended %s on attempt %d with %v; want dead on its first, \"budget spent\"", d.State, d.Attempt, d.LastError)
	}
	if d.CostSpentMicros != 3000 || len(d.Usage) != 1 || d.Usage[0].Reports != 3 || d.Usage[0].InputTokens != 300 {
		t.Fatalf("spent %d, usage %+v; want 3000 in three reports", d.CostSpentMicros, d.Usage)
	}
	shots := 0
	for _, a := range d.Artifacts {
		if a.ContentType == "image/png" {
			shots++
		}
	}
	if shots != 3 {
		t.Fatalf("%d screenshots kept, want the 3 of the steps that ran", shots)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].Outcome == nil || *d.Attempts[0].Outcome != "failed" {
		t.Fatalf("attempts %+v", d.Attempts)
	}
	// The worker wrote nothing after the budget was spent: no step past
	// the third reached the timeline.
	for _, ev := range d.Events {
		var detail struct{ Step int }
		if ev.Type == "progress" && json.Unmarshal(ev.Detail, &detail) == nil && detail.Step > 3 {
			t.Fatalf("progress of step %d after the budget was spent", detail.Step)
		}
	}
}
