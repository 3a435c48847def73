package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// A dead job with a checkpoint offers "Retry (resume from step N)" and
// "Retry from the start"; each does what it says, and the attempt that
// resumed shows a "resumed after step N" badge. A choice that is neither
// is 400 and changes nothing.
func TestJobPageRetryWithCheckpoint(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	j := f.submit(t, `{"kind":"app_investigation","queue":"cp","max_attempts":1,"payload":{"app":"com.example.cp"}}`)
	die := func() {
		t.Helper()
		jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-1", Queues: []string{"cp"}, Limit: 1, Lease: time.Minute})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claiming: %v %+v", err, jobs)
		}
		l := queue.Lease{JobID: j.ID, Token: jobs[0].LeaseToken, WorkerID: "phone-1"}
		if jobs[0].Checkpoint == nil {
			if err := f.queue.SaveCheckpoint(f.ctx, l, 6, json.RawMessage(`{"screen":6}`)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.queue.Fail(f.ctx, l, "phone lost", false); err != nil {
			t.Fatal(err)
		}
	}
	die()
	d := parseHTML(t, b.get(t, jobPagePath(j.ID)).want(t, http.StatusOK))
	if got := htmltest.Text(d.One(t, "retry-button")); got != "Retry (resume from step 7)" {
		t.Errorf("resume button says %q", got)
	}
	if got := htmltest.Text(d.One(t, "retry-start-over-button")); got != "Retry from the start" {
		t.Errorf("start-over button says %q", got)
	}
	if htmltest.Attr(d.One(t, "job-checkpoint"), "data-step") != "6" {
		t.Error("the page does not show the checkpoint's step")
	}

	b.post(t, jobPagePath(j.ID)+"/retry", url.Values{"checkpoint": {"sideways"}}).want(t, http.StatusBadRequest)
	if got, _ := f.queue.Get(f.ctx, j.ID); got.State != queue.StateDead {
		t.Fatalf("a refused choice changed the job: %s", got.State)
	}

	b.post(t, jobPagePath(j.ID)+"/retry", url.Values{"checkpoint": {"resume"}}).want(t, http.StatusSeeOther)
	die() // attempt 2 resumes after step 6, and dies too
	d = parseHTML(t, b.get(t, jobPagePath(j.ID)).want(t, http.StatusOK))
	var badges []string
	for _, n := range d.All("attempt-resumed") {
		badges = append(badges, htmltest.Text(n))
	}
	if strings.Join(badges, "|") != "resumed after step 6" {
		t.Errorf("resumed badges %q, want one for attempt 2", badges)
	}

	b.post(t, jobPagePath(j.ID)+"/retry", url.Values{"checkpoint": {"start_over"}}).want(t, http.StatusSeeOther)
	if got, _ := f.queue.Get(f.ctx, j.ID); got.State != queue.StatePending || got.Checkpoint != nil {
		t.Fatalf("after Retry from the start: %s, checkpoint %+v", got.State, got.Checkpoint)
	}
	// Without a checkpoint there is the one plain Retry again.
	dead := f.deadJob(t, "plain")
	d = parseHTML(t, b.get(t, jobPagePath(dead.ID)).want(t, http.StatusOK))
	if htmltest.Text(d.One(t, "retry-button")) != "Retry" || len(d.All("retry-start-over-button")) != 0 {
		t.Error("a job without a checkpoint offers more than Retry")
	}
}
