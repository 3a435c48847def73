package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// SPEC "Checkpoints", measured: a 10-step sim investigation that saves a
// checkpoint after each step runs on a remote worker, which is killed
// with SIGKILL right after step 7's checkpoint. Once its lease runs out
// a direct worker claims the job, receives that checkpoint and runs
// exactly steps 8, 9 and 10 (its progress events and screenshots say
// so), not 10; the timeline says where it resumed.
func TestCheckpointResumeAfterKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startServer()
	first := e.startRemoteWorker("home-1", e.workerToken("home-1"), "--lease", "3s", "--heartbeat", "500ms")
	id := e.submit(map[string]any{"app": "com.example.checkpoint", "sim": map[string]any{"steps": 10, "step_ms": 700, "checkpoint": true}})

	e.eventually("step 7's checkpoint", 60*time.Second, func() bool {
		return e.count("SELECT coalesce(max(checkpoint_step), 0) FROM jobs WHERE id = $1", id) >= 7
	})
	first.signal(t, syscall.SIGKILL)
	_ = first.wait(t, 10*time.Second)
	if step := e.count("SELECT checkpoint_step FROM jobs WHERE id = $1", id); step != 7 {
		t.Fatalf("killed after the checkpoint of step %d, want 7 (the test was too slow to catch it)", step)
	}

	e.startWorker("desk-1", "--lease", "3s", "--heartbeat", "500ms", "--artifacts", e.artifacts)
	d := e.waitFor(id, 60*time.Second, "succeeded")

	// Which steps each attempt ran: its progress events' steps, and the
	// steps of its screenshots.
	ran := func(attempt int, sql string) []int {
		t.Helper()
		rows, err := e.pool.Query(e.ctx, sql, id, attempt)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var steps []int
		for rows.Next() {
			var s int
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			steps = append(steps, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return steps
	}
	const progressSteps = "SELECT (detail->>'step')::int FROM events WHERE job_id = $1 AND attempt = $2 AND type = 'progress' ORDER BY id"
	const shotSteps = "SELECT step FROM artifacts WHERE job_id = $1 AND attempt = $2 AND kind = 'screenshot' ORDER BY id"
	p1, p2 := ran(1, progressSteps), ran(2, progressSteps)
	s2 := ran(2, shotSteps)
	if !slices.Equal(p2, []int{8, 9, 10}) || !slices.Equal(s2, []int{8, 9, 10}) {
		t.Fatalf("the resumed attempt ran steps %v (screenshots of %v), want exactly 8, 9, 10\n%s", p2, s2, e.timeline(id))
	}
	if len(p1) < 7 || !slices.Equal(p1[:7], []int{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("the killed attempt ran steps %v, want 1 to 7", p1)
	}

	var resumed struct {
		Step        int `json:"step"`
		FromAttempt int `json:"from_attempt"`
	}
	var detail string
	if err := e.pool.QueryRow(e.ctx, "SELECT detail::text FROM events WHERE job_id = $1 AND type = 'resumed' AND attempt = 2", id).Scan(&detail); err != nil {
		t.Fatalf("no resumed event of attempt 2: %v\n%s", err, e.timeline(id))
	}
	if err := json.Unmarshal([]byte(detail), &resumed); err != nil || resumed.Step != 7 || resumed.FromAttempt != 1 {
		t.Fatalf("resumed event %s, want step 7 from attempt 1", detail)
	}
	if n := e.count("SELECT count(*) FROM events WHERE job_id = $1 AND type = 'resumed'", id); n != 1 {
		t.Fatalf("%d resumed events, want 1", n)
	}
	var result struct {
		ResumedAfter int `json:"resumed_after_step"`
		StepsRun     int `json:"steps_run"`
		Screenshots  int `json:"screenshots"`
	}
	if err := json.Unmarshal(d.Result, &result); err != nil || result.ResumedAfter != 7 || result.StepsRun != 3 {
		t.Fatalf("result %s, want resumed_after_step 7 and steps_run 3", d.Result)
	}
	var workers []string
	for _, a := range d.Attempts {
		workers = append(workers, fmt.Sprintf("%d:%s", a.Number, a.WorkerID))
	}
	t.Logf("measured: attempt 1 (home-1, killed with SIGKILL after step 7's checkpoint) ran steps %v; attempt 2 (desk-1) resumed after step %d and ran steps %v (screenshots of steps %v): %d steps, not 10; attempts %v",
		p1, resumed.Step, p2, s2, len(p2), workers)
}
