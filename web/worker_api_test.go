package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// claimAs claims through the worker API and returns the jobs.
func (f *fixture) claimAs(t *testing.T, token, body string) []jobJSON {
	t.Helper()
	var out struct{ Jobs []jobJSON }
	f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: body, token: token}).
		want(t, http.StatusOK).decode(t, &out)
	return out.Jobs
}

func (f *fixture) workerPost(t *testing.T, path, body string) *response {
	t.Helper()
	return f.do(t, call{method: http.MethodPost, path: path, body: body, token: f.worker})
}

func TestWorkerAPILifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes"}}`)
	jobs := f.claimAs(t, f.worker, `{"queues":["default"],"limit":5,"lease_ms":5000}`)
	if len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].LeaseToken == 0 || jobs[0].State != "running" {
		t.Fatalf("claimed %+v", jobs)
	}
	base := fmt.Sprintf("/api/v1/worker/jobs/%d/", job.ID)
	tok := jobs[0].LeaseToken
	hb := f.workerPost(t, base+"heartbeat", fmt.Sprintf(`{"lease_token":%d}`, tok)).want(t, http.StatusOK).json(t)
	if ms, ok := hb["remaining_ms"].(float64); !ok || ms < 4000 || ms > 5000 || hb["cancel_requested"] != false {
		t.Fatalf("heartbeat answer %v", hb)
	}
	f.workerPost(t, base+"progress", fmt.Sprintf(`{"lease_token":%d,"progress":0.5,"message":"halfway"}`, tok)).want(t, http.StatusNoContent)
	start := f.workerPost(t, base+"effects", fmt.Sprintf(`{"lease_token":%d,"action":"start","key":"post-report"}`, tok)).want(t, http.StatusOK).json(t)
	if start["done"] != false || start["idempotency_key"] != fmt.Sprintf("%d:post-report", job.ID) {
		t.Fatalf("effect start %v", start)
	}
	f.workerPost(t, base+"effects", fmt.Sprintf(`{"lease_token":%d,"action":"finish","key":"post-report","result":{"url":"x"}}`, tok)).want(t, http.StatusOK)
	var done jobJSON
	f.workerPost(t, base+"complete", fmt.Sprintf(`{"lease_token":%d,"result":{"ok":true}}`, tok)).want(t, http.StatusOK).decode(t, &done)
	if done.State != "succeeded" {
		t.Fatalf("after complete: %+v", done)
	}
	detail := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", job.ID)).want(t, http.StatusOK).json(t)
	effects, _ := detail["effects"].([]any)
	if len(effects) != 1 || effects[0].(map[string]any)["state"] != "done" {
		t.Fatalf("effects %v", detail["effects"])
	}
	var attempts []any
	attempts, _ = detail["attempts"].([]any)
	if len(attempts) != 1 || attempts[0].(map[string]any)["worker_id"] != "worker" {
		t.Fatalf("attempts %v (the worker is its token's name)", attempts)
	}
}

func TestWorkerAPIStaleWritesGet409AndLeaveEvents(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"test","backoff_base_ms":0}`)
	old := f.claimAs(t, f.worker, `{"lease_ms":150}`)[0]
	time.Sleep(200 * time.Millisecond)
	// Expired but not reaped yet: lost all the same.
	base := fmt.Sprintf("/api/v1/worker/jobs/%d/", job.ID)
	r := f.workerPost(t, base+"heartbeat", fmt.Sprintf(`{"lease_token":%d}`, old.LeaseToken)).want(t, http.StatusConflict).json(t)
	if r["error"] != "lease lost" {
		t.Fatalf("answer %v", r)
	}
	reap(t, f, job.ID)
	current := f.claimAs(t, f.worker, `{"lease_ms":60000}`)[0]
	for _, action := range []string{"heartbeat", "complete", "fail", "progress", "release", "cancelled"} {
		r := f.workerPost(t, base+action, fmt.Sprintf(`{"lease_token":%d}`, old.LeaseToken)).want(t, http.StatusConflict).json(t)
		if r["error"] != "lease lost" {
			t.Fatalf("%s: %v", action, r)
		}
	}
	f.workerPost(t, base+"effects", fmt.Sprintf(`{"lease_token":%d,"action":"start","key":"k"}`, old.LeaseToken)).want(t, http.StatusConflict)
	d, err := f.queue.Detail(f.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != queue.StateRunning || d.LeaseToken != current.LeaseToken {
		t.Fatalf("stale writes changed the job: %s token %d", d.State, d.LeaseToken)
	}
	refused := 0
	for _, e := range d.Events {
		if e.Type == "stale_write_refused" && strings.Contains(string(e.Detail), fmt.Sprintf(`"lease_token": %d`, old.LeaseToken)) {
			refused++
		}
	}
	if refused != 8 {
		t.Fatalf("%d refusal events naming the stale token, want 8", refused)
	}
	f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/heartbeat", job.ID+100), `{"lease_token":1}`).want(t, http.StatusNotFound)
}

func TestWorkerAPITokens(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.get(t, "/api/v1/worker/whoami").want(t, http.StatusForbidden) // the admin token
	who := f.do(t, call{method: http.MethodGet, path: "/api/v1/worker/whoami", token: f.worker}).want(t, http.StatusOK).json(t)
	if who["worker_id"] != "worker" {
		t.Fatalf("whoami %v", who)
	}
	f.do(t, call{method: http.MethodGet, path: "/api/v1/stats", token: f.worker}).want(t, http.StatusForbidden)
	f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs", body: `{"kind":"x"}`, token: f.worker}).want(t, http.StatusForbidden)
	f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{}`, token: "-"}).want(t, http.StatusUnauthorized)
	f.claimAs(t, f.worker, `{}`)
	if _, _, err := f.tokens.Revoke(f.ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{}`, token: f.worker}).want(t, http.StatusUnauthorized)
}

func TestWorkerClaimRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ body, field string }{
		{`{"limit":0.5}`, "limit"},
		{`{"limit":101}`, "limit"},
		{`{"limit":-1}`, "limit"},
		{`{"lease_ms":5}`, "lease_ms"},
		{`{"lease_ms":3600001}`, "lease_ms"},
		{`{"wait_ms":60000}`, "wait_ms"},
		{`{"queues":["Bad Queue"]}`, "queues"},
		{`{"queues":"default"}`, "queues"},
		{`{"devices":["<x>"]}`, "devices"},
		{`{"limit":1,"bogus":true}`, "bogus"},
		{`[1]`, ""},
		{`{"limit":`, ""},
	} {
		r := f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: tc.body, token: f.worker})
		if r.status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", tc.body, r.status, r.body)
		}
		if got := r.json(t)["field"]; tc.field != "" && got != tc.field {
			t.Fatalf("%s: field %v, want %s", tc.body, got, tc.field)
		}
	}
	f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{"worker_id":"someone-else"}`, token: f.worker}).
		want(t, http.StatusForbidden)
	f.workerPost(t, "/api/v1/worker/jobs/abc/heartbeat", `{"lease_token":1}`).want(t, http.StatusBadRequest)
	f.workerPost(t, "/api/v1/worker/jobs/1/heartbeat", `{}`).want(t, http.StatusBadRequest)
	f.workerPost(t, "/api/v1/worker/jobs/1/heartbeat", `{"lease_token":"1"}`).want(t, http.StatusBadRequest)
	f.workerPost(t, "/api/v1/worker/jobs/1/effects", `{"lease_token":1,"action":"explode","key":"k"}`).want(t, http.StatusBadRequest)
	f.workerPost(t, "/api/v1/worker/jobs/1/fail", fmt.Sprintf(`{"lease_token":1,"error":%q}`, strings.Repeat("x", 70<<10))).want(t, http.StatusBadRequest)
}

func TestWorkerClaimWaitsForNewJobs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	got := make(chan []jobJSON, 1)
	go func() { got <- f.claimAs(t, f.worker, `{"wait_ms":10000}`) }()
	time.Sleep(300 * time.Millisecond)
	submitted := time.Now()
	job := f.submit(t, `{"kind":"test"}`)
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0].ID != job.ID {
			t.Fatalf("long poll returned %+v", jobs)
		}
		if waited := time.Since(submitted); waited > 5*time.Second {
			t.Fatalf("job reached the waiting claim after %v", waited)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long-polling claim did not return")
	}
	start := time.Now()
	if jobs := f.claimAs(t, f.worker, `{"wait_ms":300}`); len(jobs) != 0 {
		t.Fatalf("claimed %v from an empty queue", jobs)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("empty claim returned after %v, want it to wait about 300ms", waited)
	}
}

// A long poll says how long it held the request before the claim that
// leased its jobs, and how long each lease had then by the database
// clock: a remote worker counts its lease from there, not from the start
// of its wait.
func TestWorkerClaimReportsItsWaitAndTheLease(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type answer struct {
		Jobs []struct {
			ID               int64 `json:"id"`
			LeaseRemainingMs int64 `json:"lease_remaining_ms"`
		} `json:"jobs"`
		WaitedMs *int64 `json:"waited_ms"`
	}
	got := make(chan answer, 1)
	sent := time.Now()
	go func() {
		var out answer
		f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{"wait_ms":10000,"lease_ms":4000}`, token: f.worker}).
			want(t, http.StatusOK).decode(t, &out)
		got <- out
	}()
	time.Sleep(700 * time.Millisecond)
	job := f.submit(t, `{"kind":"test"}`)
	out := <-got
	took := time.Since(sent)
	if len(out.Jobs) != 1 || out.Jobs[0].ID != job.ID || out.WaitedMs == nil {
		t.Fatalf("claim answered %+v", out)
	}
	if w := time.Duration(*out.WaitedMs) * time.Millisecond; w < 600*time.Millisecond || w > took {
		t.Fatalf("waited_ms %v; the job came %v into the poll, the answer after %v", w, 700*time.Millisecond, took)
	}
	if ms := out.Jobs[0].LeaseRemainingMs; ms < 3990 || ms > 4000 {
		t.Fatalf("lease_remaining_ms %d, want the 4000 just leased", ms)
	}

	f.submit(t, `{"kind":"test"}`)
	var now answer
	f.do(t, call{method: http.MethodPost, path: "/api/v1/worker/claim", body: `{"wait_ms":10000}`, token: f.worker}).
		want(t, http.StatusOK).decode(t, &now)
	if len(now.Jobs) != 1 || now.WaitedMs == nil || *now.WaitedMs > 100 {
		t.Fatalf("a claim that found a job at once answered %+v", now)
	}
}

// A result that is not a JSON object is refused before anything is
// written, as the queue refuses it for a direct worker.
func TestWorkerCompleteRefusesAResultThatIsNotAnObject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"test"}`)
	tok := f.claimAs(t, f.worker, `{}`)[0].LeaseToken
	base := fmt.Sprintf("/api/v1/worker/jobs/%d/", job.ID)
	for _, result := range []string{`42`, `[1]`, `"x"`, `{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`} {
		r := f.workerPost(t, base+"complete", fmt.Sprintf(`{"lease_token":%d,"result":%s}`, tok, result)).want(t, http.StatusBadRequest).json(t)
		if r["field"] != "result" {
			t.Fatalf("complete with %.20s: %v", result, r)
		}
		r = f.workerPost(t, base+"effects", fmt.Sprintf(`{"lease_token":%d,"action":"finish","key":"k","result":%s}`, tok, result)).want(t, http.StatusBadRequest).json(t)
		if r["field"] != "result" {
			t.Fatalf("effect finish with %.20s: %v", result, r)
		}
	}
	if j, _ := f.queue.Get(f.ctx, job.ID); j.State != queue.StateRunning {
		t.Fatalf("a refused result changed the job: %s", j.State)
	}
}

// reap runs a reaper until the job is no longer running.
func reap(t *testing.T, f *fixture, id int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = maintenance.NewReaper(f.pool, maintenance.ReaperConfig{}).Run(ctx) }()
	testutil.Eventually(t, 10*time.Second, "the job reclaimed", func() bool {
		j, err := f.queue.Get(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.State != queue.StateRunning
	})
}
