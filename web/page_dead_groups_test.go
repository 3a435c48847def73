package web_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/role"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// failAs claims a new job of app in queue q and fails it with msg:
// dead at once unless retryable (then it waits to retry).
func (f *fixture) failAs(t *testing.T, q, app, msg string, retryable bool) queue.Job {
	t.Helper()
	j := f.listsInsert(t, "app_investigation", q, app)
	claimed, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-1", Queues: []string{q}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 || claimed[0].ID != j.ID {
		t.Fatalf("claiming %d: %v", j.ID, err)
	}
	failed, err := f.queue.Fail(f.ctx, queue.Lease{JobID: j.ID, Token: claimed[0].LeaseToken, WorkerID: "phone-1"}, msg, retryable)
	if err != nil {
		t.Fatal(err)
	}
	return failed
}

// The dead-letter page shows the letters' causes first, each with its
// count and apps; a cause's link lists its letters alone; its Retry and
// Cancel forms act on it as one audited bulk action; a group that is not
// there, or a malformed one, is a clear answer, never a 500.
func TestDeadPageGroupsByCause(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	a1 := f.failAs(t, "g", "com.example.a", "timed out waiting for 'Sign in' after 30000 ms", false)
	a2 := f.failAs(t, "g", "com.example.b", "timed out waiting for 'Sign in' after 45000 ms", false)
	other := f.failAs(t, "g", "com.example.a", "the app crashed", false)
	waiting := f.failAs(t, "g", "com.example.c", "timed out waiting for 'Sign in' after 1000 ms", true)
	if waiting.State != queue.StatePending {
		t.Fatalf("the retryable failure is %s", waiting.State)
	}

	d := parseHTML(t, b.get(t, "/dead").want(t, http.StatusOK))
	groups := d.All("dead-group")
	if len(groups) != 2 {
		t.Fatalf("%d causes shown, want 2", len(groups))
	}
	// The cause seen last first: the waiting job failed last.
	first, second := htmltest.Text(groups[0]), htmltest.Text(groups[1])
	if !strings.Contains(first, "timed out waiting for 'Sign in' after # ms") || !strings.Contains(first, "2 dead letters") ||
		!strings.Contains(first, "3 failed attempts") || !strings.Contains(first, "com.example.a") || !strings.Contains(first, "com.example.b") {
		t.Errorf("first cause: %q", first)
	}
	if !strings.Contains(second, "the app crashed") || !strings.Contains(second, "1 dead letter") {
		t.Errorf("second cause: %q", second)
	}
	link := htmltest.Attr(htmltest.ByTestID(groups[0], "group-link")[0], "href")
	gid := htmltest.Attr(groups[0], "data-group-id")
	if link != "/dead?group="+gid {
		t.Fatalf("cause link %q (group %s)", link, gid)
	}

	d = parseHTML(t, b.get(t, link).want(t, http.StatusOK))
	if got := listsRowIDs(t, d, "dead-row"); !slices.Equal(got, []int64{a2.ID, a1.ID}) {
		t.Errorf("the cause's letters: %v, want %d and %d", got, a2.ID, a1.ID)
	}
	if len(d.All("dead-groups")) != 0 || len(d.All("retry-all-form")) != 0 || len(d.All("group-head")) != 1 {
		t.Error("a cause's page shows the other causes or Retry all")
	}

	for _, bad := range []string{"/dead?group=0", "/dead?group=x", "/dead?group=99999999", "/dead?group=99999999999999999999", "/dead?group=%00"} {
		r := b.get(t, bad).want(t, http.StatusNotFound)
		if !strings.Contains(string(r.body), "There is no such failure group") {
			t.Errorf("%s: %.200s", bad, r.body)
		}
	}
	for _, bad := range []string{"0", "-3", "x", "1.5", strings.Repeat("9", 40)} {
		b.get(t, "/dead")
		b.post(t, "/jobs/retry", url.Values{"from": {"dead"}, "failure_group": {bad}}).want(t, http.StatusBadRequest)
	}
	b.get(t, "/dead")
	b.post(t, "/jobs/retry", url.Values{"from": {"dead"}, "failure_group": {gid}, "ids": {itoa(other.ID)}}).want(t, http.StatusBadRequest)
	if got := f.jobState(t, other.ID); got != queue.StateDead {
		t.Fatalf("a refused form changed job %d: %s", other.ID, got)
	}

	// Cancel the cause's retries: the waiting job, not the dead letters.
	before := f.lastAuditID(t)
	b.get(t, "/dead")
	loc, _ := b.listsFollow(t, b.post(t, "/jobs/cancel", url.Values{"from": {"dead"}, "failure_group": {gid}}))
	if !strings.Contains(loc, "done=cancelled%3A1") || f.jobState(t, waiting.ID) != queue.StateCancelled {
		t.Errorf("cancel: back to %s, waiting job %s", loc, f.jobState(t, waiting.ID))
	}
	// Retry the cause: its two dead letters.
	loc, _ = b.listsFollow(t, b.post(t, "/jobs/retry", url.Values{"from": {"dead"}, "failure_group": {gid}}))
	if !strings.Contains(loc, "done=retried%3A2") {
		t.Errorf("retry: back to %s", loc)
	}
	for id, want := range map[int64]queue.State{a1.ID: queue.StatePending, a2.ID: queue.StatePending, other.ID: queue.StateDead} {
		if got := f.jobState(t, id); got != want {
			t.Errorf("job %d is %s, want %s", id, got, want)
		}
	}
	// The cause's page, its letters retried: says so, not "no dead jobs".
	d = parseHTML(t, b.get(t, link).want(t, http.StatusOK))
	if e := htmltest.Text(d.One(t, "empty")); !strings.Contains(e, "No dead letters of this cause now.") {
		t.Errorf("the emptied cause's page: %q", e)
	}
	rows := f.auditSince(t, before)
	if len(rows) != 2 || rows[0].Action != "jobs.cancel" || rows[1].Action != "jobs.retry" || rows[1].Actor != "user:alice" {
		t.Fatalf("audit rows %+v", rows)
	}
	if sel, _ := rows[1].Detail["selection"].(map[string]any); itoa(int64(sel["failure_group"].(float64))) != gid {
		t.Errorf("audited selection %v", rows[1].Detail)
	}

	// A viewer sees the causes and no forms.
	if _, err := f.auth.AddUser(f.ctx, "vera", role.Viewer, testPassword); err != nil {
		t.Fatal(err)
	}
	v := f.signInAs(t, "vera")
	d = parseHTML(t, v.get(t, "/dead").want(t, http.StatusOK))
	if len(d.All("dead-group")) != 1 || len(d.All("group-retry-form")) != 0 || len(d.All("group-cancel-form")) != 0 {
		t.Error("a viewer's dead-letter page: wrong causes or forms")
	}
}

// jobState reads a job's state from the database.
func (f *fixture) jobState(t *testing.T, id int64) queue.State {
	t.Helper()
	var s string
	if err := f.pool.QueryRow(f.ctx, `SELECT state FROM jobs WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return queue.State(s)
}
