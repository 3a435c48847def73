package web_test

import (
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/queue"
)

// failureGroupJSON is a failure group as the API returns it.
type failureGroupJSON struct {
	ID         int64    `json:"id"`
	Signature  string   `json:"signature"`
	ScreenHash *string  `json:"screen_hash"`
	Error      string   `json:"error"`
	JobID      int64    `json:"job_id"`
	Screenshot *string  `json:"screenshot"`
	Dead       int64    `json:"dead"`
	Attempts   int64    `json:"attempts"`
	Apps       []string `json:"apps"`
	AppCount   int64    `json:"app_count"`
}

// failShot claims a new job of app, uploads screen as its last
// screenshot through the worker API, and fails it for good with msg.
func (f *artifactFixture) failShot(t *testing.T, app string, screen []byte, msg string) int64 {
	t.Helper()
	j := f.submit(t, fmt.Sprintf(`{"kind":"app_investigation","queue":"fg","payload":{"app":%q}}`, app))
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "worker", Queues: []string{"fg"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("claiming job %d: %v", j.ID, err)
	}
	if screen != nil {
		f.upload(t, j.ID, "", nil, tokenPart(jobs[0].LeaseToken), filePart("screen.png", screen)).want(t, http.StatusCreated)
	}
	f.do(t, call{method: http.MethodPost, path: fmt.Sprintf("/api/v1/worker/jobs/%d/fail", j.ID), token: f.worker,
		body: fmt.Sprintf(`{"lease_token":%d,"error":%q,"retryable":false}`, jobs[0].LeaseToken, msg)}).want(t, http.StatusOK)
	return j.ID
}

// Dead letters whose screenshots differ only by the clock in the status
// bar, and whose errors differ only in masked parts, are one group; the
// same error on another screen is another. The groups, a group's dead
// letters and its retry are the API's; the retry is audited with the
// group in its selection.
func TestFailureGroupsAPI(t *testing.T) {
	t.Parallel()
	f := setupArtifacts(t)
	a := f.failShot(t, "com.example.a", artifacttest.Screen(t, artifacttest.ScreenLogin, "10:41"),
		"element 'Sign in' not found after 3000 ms on emulator-5554")
	b := f.failShot(t, "com.example.b", artifacttest.Screen(t, artifacttest.ScreenLogin, "23:07"),
		"element 'Sign in' not found after 4500 ms on emulator-5556")
	c := f.failShot(t, "com.example.a", artifacttest.Screen(t, artifacttest.ScreenCrash, "10:41"),
		"element 'Sign in' not found after 3000 ms on emulator-5554")

	var list struct {
		Groups []failureGroupJSON `json:"groups"`
	}
	f.get(t, "/api/v1/failure-groups").want(t, http.StatusOK).decode(t, &list)
	if len(list.Groups) != 2 {
		t.Fatalf("%d groups, want 2 (login screen, crash screen): %+v", len(list.Groups), list.Groups)
	}
	crash, login := list.Groups[0], list.Groups[1] // the latest dead letter first
	if login.Dead != 2 || login.Attempts != 2 || login.AppCount != 2 || login.JobID != a || crash.Dead != 1 || crash.JobID != c {
		t.Errorf("groups: login %+v, crash %+v", login, crash)
	}
	if login.Signature != "element 'Sign in' not found after # ms on emulator-#" || login.Signature != crash.Signature {
		t.Errorf("signatures %q, %q", login.Signature, crash.Signature)
	}
	hex := regexp.MustCompile(`^[0-9a-f]{16}$`)
	if login.ScreenHash == nil || crash.ScreenHash == nil || !hex.MatchString(*login.ScreenHash) || *login.ScreenHash == *crash.ScreenHash {
		t.Errorf("screen hashes %v, %v", login.ScreenHash, crash.ScreenHash)
	}
	if login.Screenshot == nil {
		t.Fatal("the login group has no screenshot")
	}
	f.get(t, *login.Screenshot).want(t, http.StatusOK)
	var job jobJSON
	f.get(t, fmt.Sprintf("/api/v1/jobs/%d", b)).want(t, http.StatusOK).decode(t, &job)
	if job.FailureGroup == nil || *job.FailureGroup != login.ID {
		t.Errorf("job %d's failure_group = %v, want %d", b, job.FailureGroup, login.ID)
	}

	var page struct {
		Jobs []jobJSON `json:"jobs"`
	}
	f.get(t, fmt.Sprintf("/api/v1/jobs?failure_group=%d", login.ID)).want(t, http.StatusOK).decode(t, &page)
	if len(page.Jobs) != 2 || page.Jobs[0].ID != b || page.Jobs[1].ID != a {
		t.Errorf("the login group's dead letters: %+v", page.Jobs)
	}
	f.get(t, "/api/v1/failure-groups?since="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)).want(t, http.StatusOK).decode(t, &list)
	if len(list.Groups) != 2 {
		t.Errorf("groups of the last hour: %d, want 2", len(list.Groups))
	}
	f.get(t, "/api/v1/failure-groups?since="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)).want(t, http.StatusOK).decode(t, &list)
	if len(list.Groups) != 0 {
		t.Errorf("groups of the next hour: %d, want 0", len(list.Groups))
	}

	// Hostile and malformed input: a clear 400, never a 500.
	for _, path := range []string{
		"/api/v1/failure-groups?limit=0", "/api/v1/failure-groups?limit=501", "/api/v1/failure-groups?limit=x",
		"/api/v1/failure-groups?since=yesterday", "/api/v1/failure-groups?since=99999-01-01T00:00:00Z",
		"/api/v1/jobs?failure_group=0", "/api/v1/jobs?failure_group=x", "/api/v1/jobs?failure_group=99999999999999999999",
		fmt.Sprintf("/api/v1/jobs?failure_group=%d&state=pending", login.ID),
		fmt.Sprintf("/api/v1/jobs?failure_group=%d&q=sign", login.ID),
	} {
		f.get(t, path).want(t, http.StatusBadRequest)
	}
	for _, body := range []string{`{"failure_group":-1}`, `{"failure_group":"1"}`, `{"failure_group":1e30}`, `{"failure_group":1.5}`} {
		f.post(t, "/api/v1/jobs/retry", body).want(t, http.StatusBadRequest)
	}
	f.get(t, "/api/v1/failure-groups").want(t, http.StatusOK).decode(t, &list)
	if len(list.Groups) != 2 || list.Groups[1].Dead != 2 {
		t.Fatalf("a refused request changed the groups: %+v", list.Groups)
	}

	// The group retried as one audited action: its two dead letters, not
	// the crash screen's.
	before := f.lastAuditID(t)
	var res struct {
		Count int     `json:"count"`
		IDs   []int64 `json:"ids"`
	}
	f.post(t, "/api/v1/jobs/retry", fmt.Sprintf(`{"failure_group":%d,"state":"dead"}`, login.ID)).want(t, http.StatusOK).decode(t, &res)
	if res.Count != 2 {
		t.Errorf("retried %d jobs (%v), want 2", res.Count, res.IDs)
	}
	rows := f.auditSince(t, before)
	if len(rows) != 1 || rows[0].Action != "jobs.retry" || rows[0].Actor != "token:admin" {
		t.Fatalf("audit rows: %+v", rows)
	}
	sel, _ := rows[0].Detail["selection"].(map[string]any)
	if sel["failure_group"] != float64(login.ID) || sel["state"] != "dead" || rows[0].Detail["count"] != float64(2) {
		t.Errorf("audit detail: %v", rows[0].Detail)
	}
	f.get(t, "/api/v1/failure-groups").want(t, http.StatusOK).decode(t, &list)
	if len(list.Groups) != 1 || list.Groups[0].ID != crash.ID {
		t.Errorf("after the retry: %+v, want the crash group alone", list.Groups)
	}
}
