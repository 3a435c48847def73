package main

import (
	"encoding/json"
	"testing"

	"github.com/leasehold/leasehold/db/dbtest"
	"github.com/leasehold/leasehold/queue"
)

// The README's retry curl names job 4 of a fresh `make run`: it must be a
// dead letter that a retry saves (the sim fails exactly its max_attempts,
// retryably, so the attempt after a retry succeeds), and the demo keeps one
// permanent failure to show what a retry cannot save.
func TestDemoHasADeadLetterARetrySaves(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	client := queue.NewClient(pool, nil)
	for range 2 { // a restart submits nothing new
		if err := submitDemo(t.Context(), client); err != nil {
			t.Fatal(err)
		}
	}
	jobs, _, err := client.List(t.Context(), queue.Filter{}, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 5 {
		t.Fatalf("%d demo jobs, want 5", len(jobs))
	}
	type sim struct {
		FailAttempts int32 `json:"fail_attempts"`
		Permanent    bool  `json:"permanent"`
	}
	sims := map[int64]sim{}
	permanent := 0
	for _, j := range jobs {
		var p struct {
			Sim sim `json:"sim"`
		}
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			t.Fatal(err)
		}
		sims[j.ID] = p.Sim
		if p.Sim.Permanent {
			permanent++
		}
	}
	var four queue.Job
	for _, j := range jobs {
		if j.ID == 4 {
			four = j
		}
	}
	if s := sims[4]; s.Permanent || s.FailAttempts != four.MaxAttempts {
		t.Fatalf("job 4: sim %+v with max_attempts %d: want a retryable failure on exactly its max_attempts", s, four.MaxAttempts)
	}
	if permanent != 1 {
		t.Fatalf("%d permanent demo failures, want 1", permanent)
	}
}
