package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestJobCreate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res := f.post(t, "/api/v1/jobs", `{"kind":"app_investigation","priority":3,
		"payload":{"app":"com.example.notes","instructions":"open settings"}}`).want(t, http.StatusCreated)
	j := res.json(t)
	for _, name := range []string{"id", "kind", "queue", "priority", "payload", "state", "attempt", "max_attempts",
		"run_at", "lease_owner", "lease_until", "lease_token", "lease_ms", "timeout_ms", "cancel_requested",
		"idempotency_key", "backoff_base_ms", "backoff_max_ms", "last_error", "result", "created_at", "finished_at"} {
		if _, ok := j[name]; !ok {
			t.Errorf("job has no %q: %s", name, res.body)
		}
	}
	assertNumber(t, "id", j["id"])
	assertNumber(t, "lease_token", j["lease_token"])
	assertTime(t, "created_at", j["created_at"])
	assertTime(t, "run_at", j["run_at"])
	if j["kind"] != "app_investigation" || j["queue"] != "default" || j["state"] != "pending" ||
		j["priority"] != 3.0 || j["max_attempts"] != 5.0 || j["attempt"] != 0.0 || j["lease_until"] != nil {
		t.Errorf("job = %s", res.body)
	}
	if p, _ := j["payload"].(map[string]any); p["app"] != "com.example.notes" {
		t.Errorf("payload = %#v", j["payload"])
	}
	if loc := res.header.Get("Location"); loc != fmt.Sprintf("/api/v1/jobs/%d", int64(j["id"].(float64))) {
		t.Errorf("Location = %q", loc)
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q", ct)
	}

	// A body must say it is JSON (README: anything else is 415), a
	// parameter such as charset is fine.
	f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs", body: `{"kind":"noop"}`,
		header: map[string]string{"Content-Type": ""}}).want(t, http.StatusUnsupportedMediaType)
	f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs", body: `{"kind":"noop"}`,
		header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}).want(t, http.StatusCreated)
	later := f.post(t, "/api/v1/jobs", `{"kind":"noop","run_at":"2030-01-02T03:04:05.5+01:00"}`).want(t, http.StatusCreated).json(t)
	if later["run_at"] != "2030-01-02T02:04:05.500000Z" {
		t.Errorf("run_at = %v, want the given time in UTC with microseconds", later["run_at"])
	}
	if got := f.stats(t)["pending"]; got != 3 { // the body without Content-Type made none
		t.Errorf("pending = %d, want 3", got)
	}
}

func TestJobCreateIdempotent(t *testing.T) {
	t.Parallel()
	f := setup(t)

	first := f.submit(t, `{"kind":"noop","idempotency_key":"k1","payload":{"n":1}}`)
	var again jobJSON
	f.post(t, "/api/v1/jobs", `{"kind":"noop","idempotency_key":"k1","payload":{"n":1}}`).want(t, http.StatusOK).decode(t, &again)
	if again.ID != first.ID {
		t.Errorf("resubmission made job %d, want %d", again.ID, first.ID)
	}
	res := f.post(t, "/api/v1/jobs", `{"kind":"noop","idempotency_key":"k1","payload":{"n":2}}`).want(t, http.StatusConflict)
	if e := res.json(t); e["field"] != "idempotency_key" || e["error"] == "" {
		t.Errorf("conflict body = %s", res.body)
	}

	header := func(key, body string) *response {
		return f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs", body: body,
			header: map[string]string{"Idempotency-Key": key}})
	}
	var h1, h2 jobJSON
	header("h1", `{"kind":"noop"}`).want(t, http.StatusCreated).decode(t, &h1)
	header("h1", `{"kind":"noop"}`).want(t, http.StatusOK).decode(t, &h2)
	if h1.ID != h2.ID || h1.IdempotencyKey == nil || *h1.IdempotencyKey != "h1" {
		t.Errorf("header key: jobs %+v and %+v", h1, h2)
	}
	header("h1", `{"kind":"noop","payload":{"other":true}}`).want(t, http.StatusConflict)
	header("h1", `{"kind":"noop","idempotency_key":"h1"}`).want(t, http.StatusOK)
	res = header("h2", `{"kind":"noop","idempotency_key":"h1"}`).want(t, http.StatusBadRequest)
	if e := res.json(t); e["field"] != "idempotency_key" {
		t.Errorf("header and body disagree: %s", res.body)
	}
	if got := f.stats(t)["pending"]; got != 2 {
		t.Errorf("pending = %d, want 2", got)
	}
}

func TestJobBatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var out struct{ Jobs []jobJSON }
	f.post(t, "/api/v1/jobs/batch", `{"jobs":[{"kind":"a"},{"kind":"b","queue":"q2"},{"kind":"c","priority":-1}]}`).
		want(t, http.StatusCreated).decode(t, &out)
	if len(out.Jobs) != 3 || out.Jobs[0].Kind != "a" || out.Jobs[1].Queue != "q2" || out.Jobs[2].Priority != -1 {
		t.Fatalf("batch answer = %+v", out.Jobs)
	}

	before := f.stats(t)
	for _, tc := range []struct {
		name, body, field string
		status            int
	}{
		{"InvalidKind", `{"jobs":[{"kind":"a"},{"kind":"Not Valid"},{"kind":"c"}]}`, "jobs[1].kind", 400},
		{"WrongType", `{"jobs":[{"kind":"a"},{"kind":"b"},{"kind":"c","priority":"high"}]}`, "jobs[2].priority", 400},
		{"UnknownField", `{"jobs":[{"kind":"a","max_attempt":3}]}`, "jobs[0].max_attempt", 400},
		{"NotAnObject", `{"jobs":[{"kind":"a"},[]]}`, "jobs[1]", 400},
		{"NullPayload", `{"jobs":[{"kind":"a","payload":null}]}`, "jobs[0].payload", 400},
		{"Empty", `{"jobs":[]}`, "jobs", 400},
		{"Missing", `{}`, "jobs", 400},
		{"Conflict", `{"jobs":[{"kind":"a","idempotency_key":"x"},{"kind":"b","idempotency_key":"x"}]}`, "jobs[1].idempotency_key", 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.post(t, "/api/v1/jobs/batch", tc.body).want(t, tc.status)
			if e := res.json(t); e["field"] != tc.field || e["error"] == "" {
				t.Errorf("body = %s, want field %q", res.body, tc.field)
			}
			if after := f.stats(t); !mapsEqual(after, before) {
				t.Errorf("stats went from %v to %v: something was inserted", before, after)
			}
		})
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
