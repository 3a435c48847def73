package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// submitInvestigation submits an app_investigation through the API.
func (f *fixture) submitInvestigation(t *testing.T, app string) jobJSON {
	t.Helper()
	return f.submit(t, `{"kind":"app_investigation","payload":{"app":"`+app+`","instructions":"Find the settings"}}`)
}

// claimInvestigation claims the one due job of the default queue as worker
// phone-1.
func (f *fixture) claimInvestigation(t *testing.T, id int64) queue.Lease {
	t.Helper()
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-1", Queues: []string{"default"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("claiming job %d: %v, %+v", id, err, jobs)
	}
	return queue.Lease{JobID: id, Token: jobs[0].LeaseToken, WorkerID: "phone-1"}
}

func jobPagePath(id int64) string { return "/jobs/" + strconv.FormatInt(id, 10) }

func TestJobPageShowsARunningJobLive(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	j := f.submitInvestigation(t, "com.example.notes")
	l := f.claimInvestigation(t, j.ID)
	var shots []int64
	for i, name := range []string{"step-01.png", "step-02.png", "logcat.txt"} {
		kind, ct := queue.ArtifactScreenshot, "image/png"
		if i == 2 {
			kind, ct = queue.ArtifactText, "text/plain; charset=utf-8"
		}
		a, err := f.queue.RecordArtifact(f.ctx, l, queue.Artifact{Kind: kind, Name: name, ContentType: ct, Size: 1234, SHA256: strings.Repeat(strconv.Itoa(i), 64)})
		if err != nil {
			t.Fatal(err)
		}
		shots = append(shots, a.ID)
	}
	if err := f.queue.Progress(f.ctx, l, 0.5, "opened settings"); err != nil {
		t.Fatal(err)
	}

	d := parseHTML(t, b.get(t, jobPagePath(j.ID)).want(t, http.StatusOK))
	if got := htmltest.Text(d.One(t, "job-app")); got != "com.example.notes" {
		t.Errorf("heading %q", got)
	}
	if got := htmltest.Attr(d.One(t, "job-state"), "data-state"); got != "running" {
		t.Errorf("state %q", got)
	}
	deadline := htmltest.Attr(d.One(t, "lease-countdown"), "data-countdown")
	if until, err := time.Parse(time.RFC3339Nano, deadline); err != nil || until.Before(time.Now()) {
		t.Errorf("countdown deadline %q: %v", deadline, err)
	}
	if got := htmltest.Text(d.One(t, "lease-owner")); got != "phone-1" {
		t.Errorf("lease owner %q", got)
	}
	live := d.One(t, "job-live")
	// It refreshes when its event stream says the job changed, and polls
	// only in a browser without EventSource (app.js reads data-poll).
	if htmltest.Attr(live, "hx-trigger") != "sse:job, sse:reset" || htmltest.Attr(live, "data-poll") != "every 2s" ||
		htmltest.Attr(live, "hx-get") != jobPagePath(j.ID) || htmltest.Attr(live, "hx-select") != "#job-live" {
		t.Errorf("live part is not refreshed by the stream: %v", live.Attr)
	}
	source := htmltest.Find(d.Root, func(n *html.Node) bool { return htmltest.HasAttr(n, "sse-connect") })
	if len(source) != 1 || source[0].Data != "main" || htmltest.Attr(source[0], "hx-ext") != "sse" ||
		!regexp.MustCompile(`^/events\?last_event_id=[0-9a-f]+-[0-9]+&job=`+strconv.FormatInt(j.ID, 10)+`$`).MatchString(htmltest.Attr(source[0], "sse-connect")) {
		t.Errorf("event stream of the page: %v", source)
	}
	att := d.One(t, "attempt")
	if htmltest.Attr(att, "data-attempt") != "1" || !strings.Contains(htmltest.Text(att), "running") ||
		htmltest.Text(d.One(t, "attempt-token")) != strconv.FormatInt(l.Token, 10) {
		t.Errorf("attempt: %s", htmltest.Text(att))
	}
	links := d.All("screenshot")
	if len(links) != 2 || htmltest.Attr(links[0], "href") != "/artifacts/"+strconv.FormatInt(shots[0], 10) || htmltest.Attr(links[0], "target") != "_blank" {
		t.Fatalf("screenshots: %d", len(links))
	}
	if htmltest.Attr(d.One(t, "text-artifact"), "href") != "/artifacts/"+strconv.FormatInt(shots[2], 10) {
		t.Error("text artifact not linked")
	}
	types := map[string]bool{}
	for _, e := range d.All("event") {
		types[htmltest.Attr(e, "data-type")] = true
	}
	if !types["created"] || !types["claimed"] || !types["progress"] {
		t.Errorf("events %v", types)
	}
	if len(d.All("cancel-button")) != 1 || len(d.All("retry-button")) != 0 {
		t.Error("a running job offers Cancel only")
	}

	// Once it is done, the page stops polling and shows the result.
	if _, err := f.queue.Complete(f.ctx, l, json.RawMessage(`{"verdict":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, jobPageHTMX(t, f, jobPagePath(j.ID)))
	d = parseHTML(t, r.want(t, http.StatusOK))
	live = d.One(t, "job-live")
	if htmltest.Attr(live, "hx-trigger") != "" || htmltest.Attr(live, "hx-get") != "" {
		t.Errorf("a finished job still polls: %v", live.Attr)
	}
	if !strings.Contains(htmltest.Text(d.One(t, "job-result")), `"verdict": "ok"`) || len(d.All("lease-countdown")) != 0 {
		t.Error("result missing, or countdown still shown")
	}
	if len(d.All("cancel-button"))+len(d.All("retry-button")) != 0 {
		t.Error("a succeeded job offers an action")
	}
}

func jobPageHTMX(t *testing.T, f *fixture, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("HX-Request", "true")
	return req
}

func TestJobPageUnknownOrBadID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	for path, status := range map[string]int{
		"/jobs/424242":               http.StatusNotFound,
		"/jobs/abc":                  http.StatusBadRequest,
		"/jobs/0":                    http.StatusBadRequest,
		"/jobs/-3":                   http.StatusBadRequest,
		"/jobs/99999999999999999999": http.StatusBadRequest,
		"/jobs/%3Cscript%3E":         http.StatusBadRequest,
	} {
		r := b.get(t, path).want(t, status)
		d := parseHTML(t, r)
		d.One(t, "problem")
		if bytes.Contains(r.body, []byte("<script>")) {
			t.Errorf("%s: unescaped id in the page", path)
		}
	}
	if r := b.post(t, "/jobs/424242/retry", url.Values{}); r.status != http.StatusNotFound {
		t.Errorf("retry of an unknown job: %d", r.status)
	}
}

func TestJobPageRetryAndCancel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")

	dead := f.deadJob(t, "report")
	d := parseHTML(t, b.get(t, jobPagePath(dead.ID)).want(t, http.StatusOK))
	if len(d.All("retry-button")) != 1 || len(d.All("cancel-button")) != 0 {
		t.Fatal("a dead job offers Retry only")
	}
	r := b.post(t, jobPagePath(dead.ID)+"/retry", url.Values{}).want(t, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != jobPagePath(dead.ID) {
		t.Fatalf("retry redirects to %q", loc)
	}
	detail, err := f.queue.Detail(f.ctx, dead.ID)
	if err != nil || detail.State != queue.StatePending {
		t.Fatalf("after retry: %v, %s", err, detail.State)
	}
	if last := detail.Events[len(detail.Events)-1]; last.Type != "retried" || !strings.Contains(string(last.Detail), "user:alice") {
		t.Errorf("retry event %s %s", last.Type, last.Detail)
	}

	// Cancel the now pending job from its page.
	b.get(t, jobPagePath(dead.ID))
	b.post(t, jobPagePath(dead.ID)+"/cancel", url.Values{}).want(t, http.StatusSeeOther)
	if j, _ := f.queue.Get(f.ctx, dead.ID); j.State != queue.StateCancelled {
		t.Fatalf("after cancel: %s", j.State)
	}

	// A running job is asked to stop.
	running := f.submitInvestigation(t, "com.example.running")
	f.claimInvestigation(t, running.ID)
	b.post(t, jobPagePath(running.ID)+"/cancel", url.Values{}).want(t, http.StatusSeeOther)
	if j, _ := f.queue.Get(f.ctx, running.ID); j.State != queue.StateRunning || !j.CancelRequested {
		t.Fatalf("running job after cancel: %s, cancel requested %v", j.State, j.CancelRequested)
	}
	parseHTML(t, b.get(t, jobPagePath(running.ID))).One(t, "cancel-requested")

	// A finished job: 409, the page again with why nothing happened.
	done := f.submitInvestigation(t, "com.example.done")
	l := f.claimInvestigation(t, done.ID)
	if _, err := f.queue.Complete(f.ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	r = b.post(t, jobPagePath(done.ID)+"/cancel", url.Values{}).want(t, http.StatusConflict)
	d = parseHTML(t, r)
	if notice := htmltest.Text(d.One(t, "job-notice")); !strings.Contains(notice, "succeeded") {
		t.Errorf("notice %q", notice)
	}
	if htmltest.Attr(d.One(t, "job-state"), "data-state") != "succeeded" {
		t.Error("the 409 page does not show the job")
	}
	b.post(t, jobPagePath(done.ID)+"/retry", url.Values{}).want(t, http.StatusConflict)
	if j, _ := f.queue.Get(f.ctx, done.ID); j.State != queue.StateSucceeded {
		t.Fatalf("succeeded job changed to %s", j.State)
	}
}

func TestJobPageActionsRefuseForgedForms(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	dead := f.deadJob(t, "report")
	b.post(t, jobPagePath(dead.ID)+"/retry", url.Values{"_csrf": {"forged"}}).want(t, http.StatusForbidden)
	// No token at all, as another site's form would post.
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.srv.URL+jobPagePath(dead.ID)+"/retry", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.srv.URL)
	b.do(t, req).want(t, http.StatusForbidden)
	if j, _ := f.queue.Get(f.ctx, dead.ID); j.State != queue.StateDead {
		t.Fatalf("a forged retry changed the job to %s", j.State)
	}
}

// A dead letter retried by hand runs its fourth attempt of three: the page
// says which attempt it is, how many count, and who retried it, rather
// than "4 of 3".
func TestJobPageRetriedDeadLetterInWords(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	j := f.submit(t, `{"kind":"report","max_attempts":3,"backoff_base_ms":0}`)
	for range 3 {
		l := f.claimInvestigation(t, j.ID)
		if _, err := f.queue.Fail(f.ctx, l, "boom", true); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.listsState(t, j.ID); st != queue.StateDead {
		t.Fatalf("after 3 failures: %s", st)
	}
	if _, err := f.queue.RetryOne(f.ctx, j.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	f.claimInvestigation(t, j.ID)

	d := parseHTML(t, b.get(t, jobPagePath(j.ID)).want(t, http.StatusOK))
	if got := htmltest.Text(d.One(t, "job-attempt")); got != "attempt 4 · 0 counted against the limit of 3" {
		t.Errorf("attempt: %q", got)
	}
	if got := htmltest.Text(d.One(t, "job-retried")); !strings.HasPrefix(got, "retried by admin ") || !strings.HasSuffix(got, ", which starts a fresh count") {
		t.Errorf("retried: %q", got)
	}

	// A job that was never retried and counts every attempt keeps "n of m".
	k := f.submit(t, `{"kind":"report","max_attempts":3,"backoff_base_ms":0}`)
	if _, err := f.queue.Fail(f.ctx, f.claimInvestigation(t, k.ID), "boom", true); err != nil {
		t.Fatal(err)
	}
	d = parseHTML(t, b.get(t, jobPagePath(k.ID)).want(t, http.StatusOK))
	if got := htmltest.Text(d.One(t, "job-attempt")); got != "1 of 3" {
		t.Errorf("attempt of a job never retried: %q", got)
	}
	if n := len(d.All("job-retried")); n != 0 {
		t.Errorf("a job never retried says it was (%d)", n)
	}
}
