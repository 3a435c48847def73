package worker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// The sim uploads a step's screenshot before it reports the step; both
// name the step, through either kind of worker, so the replay shows shot
// N with "step N", not with the step before.
func TestSimReplayPairsByStep(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Direct", "Remote"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			store, err := artifact.New(t.TempDir(), f.client, artifact.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := worker.Config{ID: "remote-worker", Lease: 5 * time.Second, Pool: f.pool,
				Backend: worker.Direct{Client: f.client, Artifacts: store}}
			if kind == "Remote" {
				cfg.Backend = f.remote(t)
			}
			f.run(t, cfg)
			job := f.submit(t, `{"steps":3,"step_ms":0}`, 1)
			d := f.waitState(t, job.ID, queue.StateSucceeded)
			steps := queue.ReplaySteps(1, d.Attempts[0].StartedAt, d.Events, d.Artifacts)
			if len(steps) != 3 {
				t.Fatalf("%d steps, want 3", len(steps))
			}
			for i, s := range steps {
				n := int32(i + 1)
				want := fmt.Sprintf("step %d: explored screen %d of com.example.notes", n, n)
				if s.Shot.Name != fmt.Sprintf("step-%02d.png", n) || s.Shot.Step == nil || *s.Shot.Step != n || s.Message != want {
					t.Errorf("step %d: shot %s (step %v) with %q, want step-%02d.png with %q", n, s.Shot.Name, s.Shot.Step, s.Message, n, want)
				}
			}
		})
	}
}
