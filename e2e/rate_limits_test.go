package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/client"
)

// A phone farm's day with real processes: two phones, each running one
// investigation at a time (a concurrency key per phone), and a model
// provider that allows 5 calls an hour over all of them (a rate-limit
// key), served by a direct worker and a remote one, 4 jobs at a time
// each. Exactly 5 of the 8 jobs start, never two on one phone at once, and
// the others say they wait for the budget. Then a capped queue of rated
// jobs runs at most its cap at once.
func TestRateLimitedPhonesRunOneAtATime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	if a := e.do(http.MethodPut, "/api/v1/rate-limits/llm:e2e-phones", "", map[string]any{"budgets": []string{"5/h"}}, 10*time.Second); a.status != http.StatusOK {
		t.Fatalf("setting the budget: %v", a)
	}
	e.startWorker("farm-direct", "--concurrency", "4", "--lease", "5s")
	e.startRemoteWorker("farm-remote", e.workerToken("farm-remote"), "--concurrency", "4", "--lease", "5s")

	submit := func(queue, key string, rates []string, stepMs int) int64 {
		t.Helper()
		raw, err := json.Marshal(map[string]any{"app": "com.example.rated", "sim": map[string]any{"steps": 2, "step_ms": stepMs}})
		if err != nil {
			t.Fatal(err)
		}
		nj := client.NewJob{Kind: "app_investigation", Queue: queue, Payload: raw, RateLimits: rates}
		if key != "" {
			nj.ConcurrencyKey = &key
		}
		j, err := e.client().Submit(e.ctx, nj)
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		return j.ID
	}
	var ids []int64
	for i := range 8 {
		ids = append(ids, submit("default", fmt.Sprintf("pixel-%d", i%2), []string{"llm:e2e-phones"}, 150))
	}
	e.eventually("5 jobs succeeded", 60*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'succeeded'", ids) == 5
	})
	time.Sleep(1500 * time.Millisecond) // both workers are idle and listening: they would have taken more by now
	if n := e.count("SELECT count(*) FROM jobs WHERE id = ANY($1) AND attempt > 0", ids); n != 5 {
		t.Fatalf("%d jobs of a 5/h key started, want 5", n)
	}
	if n := e.count(`SELECT count(*) FROM job_attempts a JOIN jobs ja ON ja.id = a.job_id, job_attempts b JOIN jobs jb ON jb.id = b.job_id
		WHERE a.job_id = ANY($1) AND b.job_id = ANY($1) AND a.job_id < b.job_id AND ja.concurrency_key = jb.concurrency_key
		  AND a.started_at < coalesce(b.ended_at, now()) AND b.started_at < coalesce(a.ended_at, now())`, ids); n != 0 {
		t.Fatalf("%d pairs of attempts ran on one phone at once", n)
	}
	var waiting client.JobDetail
	for _, id := range ids {
		d, err := e.client().Get(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == client.StatePending {
			waiting = d
			break
		}
	}
	if waiting.Waiting == nil || waiting.Waiting.Kind != "rate_limited" || waiting.Waiting.RateLimitKey == nil || *waiting.Waiting.RateLimitKey != "llm:e2e-phones" {
		t.Fatalf("a job left waiting says %+v, want rate_limited on llm:e2e-phones", waiting.Waiting)
	}

	if _, err := e.client().PatchQueue(e.ctx, "rated-cap", client.QueuePatch{MaxRunning: api.Value(int32(2))}); err != nil {
		t.Fatal(err)
	}
	e.startWorker("cap-direct", "--concurrency", "4", "--queues", "rated-cap")
	e.startRemoteWorker("cap-remote", e.workerToken("cap-remote"), "--concurrency", "4", "--queues", "rated-cap")
	var capped []int64
	for range 8 {
		capped = append(capped, submit("rated-cap", "", []string{"llm:e2e-unlimited"}, 200))
	}
	e.eventually("the capped queue's jobs succeeded", 90*time.Second, func() bool {
		return e.count("SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'succeeded'", capped) == 8
	})
	most := e.count(`SELECT coalesce(max((SELECT count(*) FROM job_attempts b
		WHERE b.job_id = ANY($1) AND b.started_at <= a.started_at AND a.started_at < b.ended_at)), 0)
		FROM job_attempts a WHERE a.job_id = ANY($1)`, capped)
	if most < 1 || most > 2 {
		t.Fatalf("at most %d attempts of a queue capped at 2 ran at once", most)
	}
	t.Logf("capped queue: at most %d at once", most)
}
