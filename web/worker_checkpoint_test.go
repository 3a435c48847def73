package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// claimedCheckpoint is the part of a claimed job this test reads.
type claimedCheckpoint struct {
	ID         int64 `json:"id"`
	LeaseToken int64 `json:"lease_token"`
	Checkpoint *struct {
		Step    int32           `json:"step"`
		State   json.RawMessage `json:"state"`
		Attempt int32           `json:"attempt"`
	} `json:"checkpoint"`
}

// The checkpoint action saves what the next attempt's claim answers;
// malformed, oversized and hostile bodies are 4xx naming what is wrong
// (never a 500), and a stale token is 409 lease_lost like every write.
func TestWorkerAPICheckpoint(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"app_investigation","max_attempts":3,"backoff_base_ms":0,"payload":{"app":"com.example.notes"}}`)
	claim := func() claimedCheckpoint {
		t.Helper()
		var out struct{ Jobs []claimedCheckpoint }
		f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{"queues":["default"],"limit":1,"lease_ms":60000}`, token: f.worker}).
			want(t, http.StatusOK).decode(t, &out)
		if len(out.Jobs) != 1 || out.Jobs[0].ID != job.ID {
			t.Fatalf("claimed %+v, want job %d", out.Jobs, job.ID)
		}
		return out.Jobs[0]
	}
	first := claim()
	if first.Checkpoint != nil {
		t.Fatalf("first claim answers checkpoint %+v", first.Checkpoint)
	}
	path := fmt.Sprintf("/api/v1/worker/jobs/%d/checkpoint", job.ID)
	tok := first.LeaseToken
	f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"step":7,"state":{"cursor":"page-7","seen":[1,2,3]}}`, tok)).want(t, http.StatusNoContent)

	big := `{"p":"` + strings.Repeat("x", 70<<10) + `"}`
	cases := []struct {
		name, body string
		status     int
		field      string
	}{
		{"not JSON", `{"lease_token":`, 400, ""},
		{"an array", `[1]`, 400, ""},
		{"no token", `{"step":1,"state":{}}`, 400, "lease_token"},
		{"no step", fmt.Sprintf(`{"lease_token":%d,"state":{}}`, tok), 400, "step"},
		{"negative step", fmt.Sprintf(`{"lease_token":%d,"step":-1,"state":{}}`, tok), 400, "step"},
		{"fractional step", fmt.Sprintf(`{"lease_token":%d,"step":1.5,"state":{}}`, tok), 400, "step"},
		{"string step", fmt.Sprintf(`{"lease_token":%d,"step":"2","state":{}}`, tok), 400, "step"},
		{"huge step", fmt.Sprintf(`{"lease_token":%d,"step":1e30,"state":{}}`, tok), 400, "step"},
		{"step past MaxStep", fmt.Sprintf(`{"lease_token":%d,"step":1000001,"state":{}}`, tok), 400, "step"},
		{"no state", fmt.Sprintf(`{"lease_token":%d,"step":1}`, tok), 400, "state"},
		{"null state", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":null}`, tok), 400, "state"},
		{"array state", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":[1]}`, tok), 400, "state"},
		{"NUL in state", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":{"a":"\u0000"}}`, tok), 400, "state"},
		{"deep state", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":%s1%s}`, tok, strings.Repeat(`{"a":`, 200), strings.Repeat("}", 200)), 400, "state"},
		{"unknown field", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":{},"extra":1}`, tok), 400, ""},
		{"state over 64 KiB", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":%s}`, tok, big), 413, "state"},
		{"body over 1 MiB", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":{"p":"%s"}}`, tok, strings.Repeat("y", 2<<20)), 413, ""},
		{"stale token", fmt.Sprintf(`{"lease_token":%d,"step":1,"state":{}}`, tok+1), 409, ""},
	}
	for _, c := range cases {
		r := f.workerPost(t, path, c.body)
		if r.status >= 500 || r.status != c.status {
			t.Errorf("%s: status %d, want %d: %.300s", c.name, r.status, c.status, r.body)
			continue
		}
		e := r.json(t)
		if c.field != "" && e["field"] != c.field {
			t.Errorf("%s: answer %v, want field %q", c.name, e, c.field)
		}
		if c.status == 409 && e["code"] != "lease_lost" {
			t.Errorf("%s: answer %v, want code lease_lost", c.name, e)
		}
	}
	for _, p := range []string{"/api/v1/worker/jobs/abc/checkpoint", "/api/v1/worker/jobs/-1/checkpoint", "/api/v1/worker/jobs/99999999999999999999/checkpoint"} {
		if r := f.workerPost(t, p, fmt.Sprintf(`{"lease_token":%d,"step":1,"state":{}}`, tok)); r.status >= 500 || r.status < 400 {
			t.Errorf("%s: status %d: %s", p, r.status, r.body)
		}
	}
	if r := f.do(t, call{method: http.MethodPost, path: path, body: `{}`, token: f.worker, header: map[string]string{"Content-Type": "text/plain"}}); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain body: status %d, want 415", r.status)
	}
	if r := f.do(t, call{method: http.MethodPost, path: path, body: `{}`}); r.status != http.StatusForbidden && r.status != http.StatusUnauthorized {
		t.Errorf("admin token on the worker API: status %d, want 401 or 403", r.status)
	}

	// The attempt fails; the next claim receives the last good checkpoint.
	f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/fail", job.ID), fmt.Sprintf(`{"lease_token":%d,"error":"phone rebooted"}`, tok)).want(t, http.StatusOK)
	second := claim()
	cp := second.Checkpoint
	if cp == nil || cp.Step != 7 || cp.Attempt != 1 {
		t.Fatalf("second claim's checkpoint %+v, want step 7 of attempt 1", cp)
	}
	var state struct {
		Cursor string
		Seen   []int
	}
	if err := json.Unmarshal(cp.State, &state); err != nil || state.Cursor != "page-7" || len(state.Seen) != 3 {
		t.Fatalf("second claim's state %s", cp.State)
	}
	// The first attempt's token is stale now.
	e := f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"step":9,"state":{}}`, tok)).want(t, http.StatusConflict).json(t)
	if e["code"] != "lease_lost" {
		t.Fatalf("stale attempt's checkpoint: %v, want lease_lost", e)
	}
}

// The admin retry takes checkpoint=resume|start_over; anything else is
// 400 and retries nothing.
func TestAdminRetryCheckpointChoice(t *testing.T) {
	t.Parallel()
	f := setup(t)
	j := f.deadJob(t, "cp")
	for _, bad := range []string{"yes", "START_OVER", "%00", strings.Repeat("r", 5000)} {
		e := f.post(t, fmt.Sprintf("/api/v1/jobs/%d/retry?checkpoint=%s", j.ID, bad), nil).want(t, http.StatusBadRequest).json(t)
		if e["field"] != "checkpoint" {
			t.Errorf("checkpoint=%.20s: %v, want field checkpoint", bad, e)
		}
	}
	if got, _ := f.queue.Get(f.ctx, j.ID); got.State != "dead" {
		t.Fatalf("a refused retry changed the job: %s", got.State)
	}
	f.post(t, "/api/v1/jobs/retry", `{"ids":[`+fmt.Sprint(j.ID)+`],"checkpoint":"later"}`).want(t, http.StatusBadRequest)
	var out struct{ Checkpoint any }
	f.post(t, fmt.Sprintf("/api/v1/jobs/%d/retry?checkpoint=start_over", j.ID), nil).want(t, http.StatusOK).decode(t, &out)
	if out.Checkpoint != nil {
		t.Fatalf("started over, the job has checkpoint %v", out.Checkpoint)
	}
}
