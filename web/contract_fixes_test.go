package web_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// The description's bounds of a claim: limit at least 1, lease_ms at
// least 100, and a queue list that names a queue. Left out, limit and
// lease_ms take their defaults; sent as 0 they are refused.
func TestWorkerClaimRefusesZeroesAndNoQueues(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ body, field string }{
		{`{"limit":0}`, "limit"},
		{`{"lease_ms":0}`, "lease_ms"},
		{`{"queues":[]}`, "queues"},
	} {
		r := f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: tc.body, token: f.worker})
		if r.status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", tc.body, r.status, r.body)
		}
		if got := r.json(t)["field"]; got != tc.field {
			t.Fatalf("%s: field %v, want %s", tc.body, got, tc.field)
		}
	}
	f.claimAs(t, f.worker, `{"limit":null,"lease_ms":null,"queues":null}`)
	f.claimAs(t, f.worker, `{}`)
}

// Progress is a fraction: outside [0, 1] it is refused, not stored.
func TestWorkerProgressRefusesOutOfRange(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"noop"}`)
	tok := f.claimAs(t, f.worker, `{}`)[0].LeaseToken
	path := fmt.Sprintf("/api/v1/worker/jobs/%d/progress", job.ID)
	for _, p := range []string{"-0.1", "1.5", "1e300"} {
		r := f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"progress":%s}`, tok, p)).want(t, http.StatusBadRequest)
		if got := r.json(t)["field"]; got != "progress" {
			t.Errorf("progress %s: field %v, want progress", p, got)
		}
	}
	for _, p := range []string{"0", "0.5", "1"} {
		f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"progress":%s}`, tok, p)).want(t, http.StatusNoContent)
	}
	d, err := f.queue.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range d.Events {
		if e.Type == "progress" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d progress events, want the 3 valid ones", n)
	}
}

// Every JSON endpoint answers 415 to a body that does not say it is JSON.
func TestJSONEndpointsRefuseABodyWithoutContentType(t *testing.T) {
	t.Parallel()
	f := setup(t)
	noType := map[string]string{"Content-Type": ""}
	for _, c := range []call{
		{method: http.MethodPost, path: "/api/v1/jobs", body: `{"kind":"noop"}`},
		{method: http.MethodPost, path: "/api/v1/jobs/batch", body: `{"jobs":[{"kind":"noop"}]}`},
		{method: http.MethodPost, path: "/api/v1/jobs/cancel", body: `{"ids":[1]}`},
		{method: http.MethodPost, path: "/api/v1/schedules", body: `{"name":"s","cron":"@hourly","job":{"kind":"noop"}}`},
		{method: http.MethodPatch, path: "/api/v1/queues/default", body: `{"paused":true}`},
		{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{}`, token: f.worker},
		{method: http.MethodPost, path: "/api/v1/worker/presence", body: `{}`, token: f.worker},
		{method: http.MethodPost, path: "/api/v1/worker/jobs/1/heartbeat", body: `{"lease_token":1}`, token: f.worker},
	} {
		c.header = noType
		f.do(t, c).want(t, http.StatusUnsupportedMediaType)
	}
	if n := f.totalJobs(t); n != 0 {
		t.Errorf("%d jobs inserted", n)
	}
}

// An error's field is its full path in the request, the same convention
// for a single job, a batch and a schedule (SPEC, API contract).
func TestErrorFieldIsTheFullPath(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ path, body, field string }{
		{"/api/v1/jobs", `{"kind":"app_investigation","payload":{}}`, "payload.app"},
		{"/api/v1/jobs/batch", `{"jobs":[{"kind":"noop"},{"kind":"app_investigation","payload":{}}]}`, "jobs[1].payload.app"},
		{"/api/v1/schedules", `{"name":"s","cron":"@hourly","job":{"kind":"app_investigation","payload":{}}}`, "job.payload.app"},
		{"/api/v1/jobs", `{"kind":"noop","payload":{"device":"a b"}}`, "payload.device"},
	} {
		r := f.post(t, tc.path, tc.body).want(t, http.StatusBadRequest)
		if got := r.json(t)["field"]; got != tc.field {
			t.Errorf("%s %s: field %v, want %s", tc.path, tc.body, got, tc.field)
		}
	}
}

// A payload just over 1 MiB is 413, as README and SPEC say, wherever a
// job is submitted; so is a result over its limit.
func TestPayloadJustOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	f := setup(t)
	payload := `{"s":"` + strings.Repeat("x", queue.MaxPayloadBytes) + `"}`
	for _, tc := range []struct{ path, body, field string }{
		{"/api/v1/jobs", `{"kind":"noop","payload":` + payload + `}`, "payload"},
		{"/api/v1/jobs/batch", `{"jobs":[{"kind":"noop"},{"kind":"noop","payload":` + payload + `}]}`, "jobs[1].payload"},
		{"/api/v1/schedules", `{"name":"s","cron":"@hourly","job":{"kind":"noop","payload":` + payload + `}}`, "job.payload"},
	} {
		r := f.post(t, tc.path, tc.body).want(t, http.StatusRequestEntityTooLarge)
		if got := r.json(t)["field"]; got != tc.field {
			t.Errorf("%s: field %v, want %s", tc.path, got, tc.field)
		}
	}
	job := f.submit(t, `{"kind":"noop"}`)
	tok := f.claimAs(t, f.worker, `{}`)[0].LeaseToken
	r := f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/complete", job.ID),
		fmt.Sprintf(`{"lease_token":%d,"result":%s}`, tok, payload)).want(t, http.StatusRequestEntityTooLarge)
	if got := r.json(t)["field"]; got != "result" {
		t.Errorf("complete: field %v, want result", got)
	}
}

// A schedule's job shows the concurrency key and limit it was given.
func TestScheduleAPIKeepsTheConcurrencyKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	s := f.post(t, "/api/v1/schedules", `{"name":"s","cron":"@hourly","job":{"kind":"noop","concurrency_key":"phone:R5CT","concurrency_limit":2}}`).
		want(t, http.StatusCreated).json(t)
	job, _ := s["job"].(map[string]any)
	if job["concurrency_key"] != "phone:R5CT" || job["concurrency_limit"] != float64(2) {
		t.Fatalf("schedule job %v", job)
	}
	f.post(t, "/api/v1/schedules", `{"name":"t","cron":"@hourly","job":{"kind":"noop","concurrency_limit":0}}`).
		want(t, http.StatusBadRequest)
}

// The forms' default max_attempts is queue's, not a copy of it.
func TestFormsDefaultToQueueMaxAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/jobs/new").want(t, http.StatusOK))
	if got := htmltest.Attr(d.One(t, "max_attempts"), "value"); got != strconv.Itoa(queue.DefaultMaxAttempts) {
		t.Errorf("new job form max_attempts %q, want %d", got, queue.DefaultMaxAttempts)
	}
}

// Completing again with the same lease: the same result is the answer
// that was lost (200), a different one is refused (409), and the first
// result stands.
func TestCompleteTwiceWithAnotherResultIs409(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"noop"}`)
	tok := f.claimAs(t, f.worker, `{}`)[0].LeaseToken
	path := fmt.Sprintf("/api/v1/worker/jobs/%d/complete", job.ID)
	f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"result":{"a":1,"b":[true]}}`, tok)).want(t, http.StatusOK)
	f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"result":{"b":[true], "a":1}}`, tok)).want(t, http.StatusOK)
	r := f.workerPost(t, path, fmt.Sprintf(`{"lease_token":%d,"result":{"a":2}}`, tok)).want(t, http.StatusConflict)
	if got := r.json(t)["field"]; got != "result" {
		t.Errorf("field %v, want result", got)
	}
	got, err := f.queue.Get(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Result) != `{"a": 1, "b": [true]}` {
		t.Errorf("result %s, want the first", got.Result)
	}
}

// The stats list the workers online by the window /workers uses: a worker
// unseen for longer than queue.OnlineWindow is in neither.
func TestStatsAndWorkersShareTheOnlineWindow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, id := range []string{"fresh", "stale"} {
		if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: id, Queues: []string{"default"}}); err != nil {
			t.Fatal(err)
		}
	}
	past := queue.OnlineWindow + 30*time.Second
	if _, err := f.pool.Exec(f.ctx, `UPDATE workers SET last_seen = now() - $1::bigint * interval '1 millisecond' WHERE id = 'stale'`, past.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	var stats struct{ Workers []struct{ ID string } }
	f.get(t, "/api/v1/stats").want(t, http.StatusOK).decode(t, &stats)
	var list struct {
		Workers []struct {
			ID     string
			Online bool
		}
	}
	f.get(t, "/api/v1/workers").want(t, http.StatusOK).decode(t, &list)
	online := map[string]bool{}
	for _, w := range list.Workers {
		online[w.ID] = w.Online
	}
	if len(stats.Workers) != 1 || stats.Workers[0].ID != "fresh" || !online["fresh"] || online["stale"] {
		t.Errorf("stats list %v, /workers online %v: want only fresh in both", stats.Workers, online)
	}
}
