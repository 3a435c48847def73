package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/queue"
)

// jobPageDoc is an HTML answer, parsed, for selecting on data-testid.
type jobPageDoc struct{ root *html.Node }

func parseJobPage(t *testing.T, r *response) jobPageDoc {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want an HTML page; body: %.300s", ct, r.body)
	}
	root, err := html.Parse(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	return jobPageDoc{root}
}

func (d jobPageDoc) testID(id string) []*html.Node {
	var out []*html.Node
	for n := range d.root.Descendants() {
		if n.Type == html.ElementNode && jobPageAttr(n, "data-testid") == id {
			out = append(out, n)
		}
	}
	return out
}

func (d jobPageDoc) one(t *testing.T, id string) *html.Node {
	t.Helper()
	nodes := d.testID(id)
	if len(nodes) != 1 {
		t.Fatalf("%d elements with data-testid=%q, want 1", len(nodes), id)
	}
	return nodes[0]
}

func jobPageAttr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

func jobPageText(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

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

	d := parseJobPage(t, b.get(t, jobPagePath(j.ID)).want(t, http.StatusOK))
	if got := jobPageText(d.one(t, "job-app")); got != "com.example.notes" {
		t.Errorf("heading %q", got)
	}
	if got := jobPageAttr(d.one(t, "job-state"), "data-state"); got != "running" {
		t.Errorf("state %q", got)
	}
	deadline := jobPageAttr(d.one(t, "lease-countdown"), "data-countdown")
	if until, err := time.Parse(time.RFC3339Nano, deadline); err != nil || until.Before(time.Now()) {
		t.Errorf("countdown deadline %q: %v", deadline, err)
	}
	if got := jobPageText(d.one(t, "lease-owner")); got != "phone-1" {
		t.Errorf("lease owner %q", got)
	}
	live := d.one(t, "job-live")
	if jobPageAttr(live, "hx-trigger") != "every 2s" || jobPageAttr(live, "hx-get") != jobPagePath(j.ID) || jobPageAttr(live, "hx-select") != "#job-live" {
		t.Errorf("live part does not poll: %v", live.Attr)
	}
	att := d.one(t, "attempt")
	if jobPageAttr(att, "data-attempt") != "1" || !strings.Contains(jobPageText(att), "running") ||
		jobPageText(d.one(t, "attempt-token")) != strconv.FormatInt(l.Token, 10) {
		t.Errorf("attempt: %s", jobPageText(att))
	}
	links := d.testID("screenshot")
	if len(links) != 2 || jobPageAttr(links[0], "href") != "/artifacts/"+strconv.FormatInt(shots[0], 10) || jobPageAttr(links[0], "target") != "_blank" {
		t.Fatalf("screenshots: %d", len(links))
	}
	if jobPageAttr(d.one(t, "text-artifact"), "href") != "/artifacts/"+strconv.FormatInt(shots[2], 10) {
		t.Error("text artifact not linked")
	}
	types := map[string]bool{}
	for _, e := range d.testID("event") {
		types[jobPageAttr(e, "data-type")] = true
	}
	if !types["created"] || !types["claimed"] || !types["progress"] {
		t.Errorf("events %v", types)
	}
	if len(d.testID("cancel-button")) != 1 || len(d.testID("retry-button")) != 0 {
		t.Error("a running job offers Cancel only")
	}

	// Once it is done, the page stops polling and shows the result.
	if _, err := f.queue.Complete(f.ctx, l, json.RawMessage(`{"verdict":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, jobPageHTMX(t, f, jobPagePath(j.ID)))
	d = parseJobPage(t, r.want(t, http.StatusOK))
	live = d.one(t, "job-live")
	if jobPageAttr(live, "hx-trigger") != "" || jobPageAttr(live, "hx-get") != "" {
		t.Errorf("a finished job still polls: %v", live.Attr)
	}
	if !strings.Contains(jobPageText(d.one(t, "job-result")), `"verdict": "ok"`) || len(d.testID("lease-countdown")) != 0 {
		t.Error("result missing, or countdown still shown")
	}
	if len(d.testID("cancel-button"))+len(d.testID("retry-button")) != 0 {
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
		d := parseJobPage(t, r)
		d.one(t, "problem")
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
	d := parseJobPage(t, b.get(t, jobPagePath(dead.ID)).want(t, http.StatusOK))
	if len(d.testID("retry-button")) != 1 || len(d.testID("cancel-button")) != 0 {
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
	parseJobPage(t, b.get(t, jobPagePath(running.ID))).one(t, "cancel-requested")

	// A finished job: 409, the page again with why nothing happened.
	done := f.submitInvestigation(t, "com.example.done")
	l := f.claimInvestigation(t, done.ID)
	if _, err := f.queue.Complete(f.ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	r = b.post(t, jobPagePath(done.ID)+"/cancel", url.Values{}).want(t, http.StatusConflict)
	d = parseJobPage(t, r)
	if notice := jobPageText(d.one(t, "job-notice")); !strings.Contains(notice, "succeeded") {
		t.Errorf("notice %q", notice)
	}
	if jobPageAttr(d.one(t, "job-state"), "data-state") != "succeeded" {
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
