package web_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// failOnce claims job id from queue dlq and fails it.
func (f *fixture) failOnce(t *testing.T, id int64, retryable bool) {
	t.Helper()
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"dlq"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("claiming job %d: %v, %+v", id, err, jobs)
	}
	if _, err := f.queue.Fail(f.ctx, queue.Lease{JobID: id, Token: jobs[0].LeaseToken, WorkerID: "w1"}, "boom", retryable); err != nil {
		t.Fatal(err)
	}
}

// A dead letter whose last failure was not retryable says so, on the
// dead-letter list and on its page: a retry would likely fail the same way.
// One that merely ran out of attempts does not.
func TestPermanentFailuresAreMarked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	permanent := f.deadJob(t, "report") // retryable: false
	exhausted := f.submit(t, `{"kind":"report","queue":"dlq","max_attempts":1}`)
	f.failOnce(t, exhausted.ID, true)

	marked := func(t *testing.T) map[int64]bool {
		t.Helper()
		d := parseHTML(t, b.get(t, "/dead").want(t, http.StatusOK))
		out := map[int64]bool{}
		for _, row := range d.All("dead-row") {
			id, err := strconv.ParseInt(htmltest.Attr(row, "data-job-id"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[id] = len(htmltest.ByTestID(row, "permanent")) == 1
		}
		return out
	}
	onPage := func(t *testing.T, id int64) bool {
		t.Helper()
		return len(parseHTML(t, b.get(t, jobPagePath(id)).want(t, http.StatusOK)).All("permanent")) == 1
	}
	if got := marked(t); len(got) != 2 || !got[permanent.ID] || got[exhausted.ID] {
		t.Fatalf("permanent badges on /dead %v: want only job %d", got, permanent.ID)
	}
	if !onPage(t, permanent.ID) || onPage(t, exhausted.ID) {
		t.Fatalf("job pages: permanent %v, exhausted %v", onPage(t, permanent.ID), onPage(t, exhausted.ID))
	}

	// Retried by hand, it is no longer dead; dead again on a retryable
	// failure, it is an ordinary dead letter: the latest failure decides.
	if _, err := f.queue.RetryOne(f.ctx, permanent.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if onPage(t, permanent.ID) {
		t.Fatal("a retried (pending) job is marked permanent")
	}
	f.failOnce(t, permanent.ID, true)
	if got := marked(t); got[permanent.ID] || onPage(t, permanent.ID) {
		t.Fatalf("after a retryable failure: badges on /dead %v, on its page %v", got, onPage(t, permanent.ID))
	}
}
