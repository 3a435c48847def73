package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

func TestQueuesPagePauseResumeAndLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.submit(t, `{"kind":"noop","queue":"phones"}`)
	b := f.signIn(t, "alice")
	d := htmltest.Parse(t, string(b.get(t, "/queues").want(t, http.StatusOK).body))
	row := d.One(t, "queue-phones")
	if got := htmltest.Text(htmltest.ByTestID(row, "queue-pending")[0]); got != "1" {
		t.Fatalf("pending %q", got)
	}
	if len(htmltest.ByTestID(row, "pause-button")) != 1 {
		t.Fatal("no Pause button")
	}
	if !strings.Contains(string(b.get(t, "/").body), `href="/queues"`) {
		t.Fatal("the nav does not link /queues")
	}

	r := b.post(t, "/queues/phones/pause", url.Values{}).want(t, http.StatusSeeOther)
	if r.header.Get("Location") != "/queues" {
		t.Fatalf("redirect to %q", r.header.Get("Location"))
	}
	d = htmltest.Parse(t, string(b.get(t, "/queues").want(t, http.StatusOK).body))
	row = d.One(t, "queue-phones")
	if by := htmltest.Text(htmltest.ByTestID(row, "paused-by")[0]); !strings.Contains(by, "user:alice") {
		t.Fatalf("paused by %q", by)
	}
	if len(htmltest.ByTestID(row, "resume-button")) != 1 {
		t.Fatal("no Resume button on a paused queue")
	}

	b.post(t, "/queues/phones/limit", url.Values{"max_running": {" 2 "}}).want(t, http.StatusSeeOther)
	q := f.queues(t)["phones"]
	if !q.Paused || q.MaxRunning == nil || *q.MaxRunning != 2 {
		t.Fatalf("after limit: %+v", q)
	}
	// A refused limit keeps what was typed, beside its error; nothing changes.
	body := string(b.post(t, "/queues/phones/limit", url.Values{"max_running": {"-1"}}).want(t, http.StatusUnprocessableEntity).body)
	d = htmltest.Parse(t, body)
	in := htmltest.ByTestID(d.One(t, "queue-phones"), "max-running")[0]
	if htmltest.Attr(in, "aria-invalid") != "true" || htmltest.Attr(in, "value") != "-1" || len(d.All("limit-error")) != 1 {
		t.Fatalf("refused limit not shown beside its field: %.2000s", body)
	}
	for _, bad := range []string{"abc", "1.5", "99999999999", "1000001"} {
		b.post(t, "/queues/phones/limit", url.Values{"max_running": {bad}}).want(t, http.StatusUnprocessableEntity)
	}
	if q := f.queues(t)["phones"]; *q.MaxRunning != 2 {
		t.Fatalf("a refused limit changed it: %+v", q)
	}
	// Empty is no limit.
	b.post(t, "/queues/phones/limit", url.Values{"max_running": {""}}).want(t, http.StatusSeeOther)
	b.post(t, "/queues/phones/resume", url.Values{}).want(t, http.StatusSeeOther)
	if q := f.queues(t)["phones"]; q.Paused || q.MaxRunning != nil || q.PausedBy == nil || *q.PausedBy != "user:alice" {
		t.Fatalf("after resume: %+v", q)
	}
	// A queue name no queue can have is a 400, not a 500.
	b.post(t, "/queues/NOPE/pause", url.Values{}).want(t, http.StatusBadRequest)
}

func TestQueuesPageRefusesForgedForms(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.submit(t, `{"kind":"noop","queue":"phones"}`)
	b := f.signIn(t, "alice")
	b.get(t, "/queues").want(t, http.StatusOK)
	// A wrong token, then another site's origin with the right one.
	if r := b.post(t, "/queues/phones/pause", url.Values{"_csrf": {"forged"}}); r.status < 400 || r.status >= 500 {
		t.Fatalf("forged token: status %d", r.status)
	}
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.srv.URL+"/queues/phones/pause",
		strings.NewReader(url.Values{"_csrf": {b.csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if r := b.do(t, req); r.status < 400 || r.status >= 500 {
		t.Fatalf("cross-site post: status %d", r.status)
	}
	if q := f.queues(t)["phones"]; q.Paused {
		t.Fatal("a forged form paused the queue")
	}
}

func TestNewJobFormConcurrencyFields(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	form := b.newJobForm(t)
	form.Set("concurrency_key", "phone:R58M")
	form.Set("concurrency_limit", "2")
	id := submittedJob(t, b.post(t, "/jobs/new", form))
	job, err := f.queue.Get(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if job.ConcurrencyKey == nil || *job.ConcurrencyKey != "phone:R58M" || job.ConcurrencyLimit != 2 {
		t.Fatalf("job %+v", job)
	}
	for field, bad := range map[string]string{"concurrency_limit": "0", "concurrency_key": strings.Repeat("k", 201)} {
		form := b.newJobForm(t)
		form.Set(field, bad)
		d := htmltest.Parse(t, string(b.post(t, "/jobs/new", form).want(t, http.StatusUnprocessableEntity).body))
		if htmltest.Attr(d.One(t, field), "aria-invalid") != "true" || len(d.All("field-error-"+field)) != 1 {
			t.Errorf("%s=%q: no error beside the field", field, bad)
		}
		if !htmltest.HasAttr(d.One(t, "advanced"), "open") {
			t.Errorf("%s: the advanced fields are folded away with an error in them", field)
		}
	}
}
