package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/queue"
)

// An upload's step field is stored on the artifact and answered; a
// progress report's step lands in its event's detail; a step that is not
// an integer from 1 to queue.MaxStep is 400 invalid naming the field, and
// nothing is stored.
func TestWorkerAPIStep(t *testing.T) {
	t.Parallel()
	f := setupArtifacts(t)
	l := f.claim(t)
	png := artifacttest.PNG(t, 8, 8)
	stepPart := func(v string) part { return part{field: "step", data: []byte(v)} }

	a := f.upload(t, l.JobID, "", nil, tokenPart(l.Token), stepPart("2"), filePart("s2.png", png)).want(t, http.StatusCreated).json(t)
	if a["step"] != float64(2) {
		t.Errorf("artifact step = %v, want 2", a["step"])
	}
	a = f.upload(t, l.JobID, "", nil, tokenPart(l.Token), filePart("none.png", png)).want(t, http.StatusCreated).json(t)
	if _, ok := a["step"]; ok {
		t.Errorf("artifact without a step answers step %v", a["step"])
	}
	for _, v := range []string{"", "0", "-1", "1.5", "two", "1000001", "99999999999999999999"} {
		e := f.upload(t, l.JobID, "", nil, tokenPart(l.Token), stepPart(v), filePart("bad.png", png)).want(t, http.StatusBadRequest).json(t)
		if e["field"] != "step" || e["code"] != "invalid" {
			t.Errorf("step %q: answer %v, want invalid naming step", v, e)
		}
	}

	path := fmt.Sprintf("/api/v1/worker/jobs/%d/progress", l.JobID)
	f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"progress":0.5,"message":"step two","step":2}`, l.Token)).want(t, http.StatusNoContent)
	for _, v := range []string{"0", "-3", "1.5", `"2"`, "1000001", "1e30"} {
		e := f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"progress":0.5,"message":"x","step":%s}`, l.Token, v)).
			want(t, http.StatusBadRequest).json(t)
		if e["field"] != "step" || e["code"] != "invalid" {
			t.Errorf("progress step %s: answer %v, want invalid naming step", v, e)
		}
	}

	d, err := f.queue.Detail(f.ctx, l.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var progress []map[string]any
	for _, e := range d.Events {
		if e.Type == "progress" {
			var m map[string]any
			if err := json.Unmarshal(e.Detail, &m); err != nil {
				t.Fatal(err)
			}
			progress = append(progress, m)
		}
	}
	if len(progress) != 1 || progress[0]["step"] != float64(2) {
		t.Errorf("progress events = %v, want one with step 2", progress)
	}
	if len(d.Artifacts) != 2 || d.Artifacts[0].Step == nil || *d.Artifacts[0].Step != 2 || d.Artifacts[1].Step != nil {
		t.Fatalf("artifacts = %+v, want s2.png of step 2 and none.png without", d.Artifacts)
	}
	// The stepped shot, taken before its step's progress, is shown with it.
	steps := queue.ReplaySteps(1, d.Attempts[0].StartedAt, d.Events, d.Artifacts)
	if len(steps) != 2 || steps[0].Message != "step two" || steps[1].Message != "" {
		t.Errorf("replay = %+v, want s2.png with %q", steps, "step two")
	}
	// The job page reads the shown step's message alone (its fixture
	// here has no sign-in): the same pairing, by step, else by time.
	for i, want := range []string{"step two", ""} { // none.png came before any progress
		if got, err := f.queue.ProgressBefore(f.ctx, d.Artifacts[i]); err != nil || got != want {
			t.Errorf("job page message of %s = %q (%v), want %q", d.Artifacts[i].Name, got, err, want)
		}
	}
}
