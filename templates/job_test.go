package templates_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
)

// jobHTML is a rendered page, parsed, for selecting on data-testid.
type jobHTML struct {
	root *html.Node
	raw  string
}

func renderJobHTML(t *testing.T, c templ.Component) jobHTML {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	root, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	return jobHTML{root: root, raw: buf.String()}
}

// all returns the elements for which keep is true, in document order.
func (d jobHTML) all(keep func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for n := range d.root.Descendants() {
		if n.Type == html.ElementNode && keep(n) {
			out = append(out, n)
		}
	}
	return out
}

func (d jobHTML) testID(id string) []*html.Node {
	return d.all(func(n *html.Node) bool { return jobAttr(n, "data-testid") == id })
}

func (d jobHTML) one(t *testing.T, id string) *html.Node {
	t.Helper()
	nodes := d.testID(id)
	if len(nodes) != 1 {
		t.Fatalf("%d elements with data-testid=%q, want 1", len(nodes), id)
	}
	return nodes[0]
}

func jobAttr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

func jobHasAttr(n *html.Node, name string) bool {
	for _, a := range n.Attr {
		if a.Key == name {
			return true
		}
	}
	return false
}

func jobText(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// jobNoInlineCode fails on what the CSP would block: style attributes,
// inline scripts and event handler attributes.
func jobNoInlineCode(t *testing.T, d jobHTML) {
	t.Helper()
	for _, n := range d.all(func(*html.Node) bool { return true }) {
		for _, a := range n.Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
				t.Errorf("<%s %s=%q>: inline code or style", n.Data, a.Key, a.Val)
			}
		}
		if n.Data == "style" {
			t.Errorf("inline <style> element")
		}
		if n.Data == "script" && (jobAttr(n, "src") == "" || n.FirstChild != nil) {
			t.Errorf("inline <script> element")
		}
	}
}

var jobTestPage = templates.Page{Title: "t", User: "alice", CSRF: "csrf-token-1", CSS: "/static/app.css", JS: "/static/app.js", HTMX: "/static/htmx.js", Now: time.Now()}

func jobSample(state string) templates.JobPageView {
	t0 := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	until := t0.Add(30 * time.Second)
	ended := t0.Add(3 * time.Second)
	v := templates.JobPageView{
		ID: 42, Kind: "app_investigation", Queue: "default", App: "com.example.notes",
		Instructions: "Open settings <script>alert(1)</script>", State: state, Attempt: 2, MaxAttempts: 5, CountedAttempts: 1,
		CreatedAt: t0, RunAt: t0, Payload: "{\n  \"app\": \"com.example.notes\"\n}",
		Attempts: []templates.JobAttempt{
			{Number: 2, WorkerID: "w2", LeaseToken: 7, StartedAt: t0, Outcome: "failed", EndedAt: &ended, Error: "boom",
				Screenshots: []templates.JobArtifact{{ID: 11, Name: "step-01.png", Step: 1}, {ID: 12, Name: "step-02.png", Step: 2}},
				Files:       []templates.JobArtifact{{ID: 13, Name: "logcat.txt", Size: "1.2 KB"}}},
			{Number: 1, WorkerID: "w1", LeaseToken: 3, StartedAt: t0, Outcome: "lease_expired", EndedAt: &ended},
		},
		Events:      []templates.JobEvent{{At: t0, Type: "failed", Attempt: 2, Detail: `{"error":"boom"}`}, {At: t0, Type: "created"}},
		EventsTotal: 2,
		Effects:     []templates.JobEffect{{Key: "sim-effect", Attempt: 1, State: "done", Result: `{"status":200}`, CreatedAt: t0}},
	}
	if state == "running" {
		v.LeaseOwner, v.LeaseUntil = "w2", &until
		v.Attempts[0].Outcome, v.Attempts[0].EndedAt, v.Attempts[0].Error = "running", nil, ""
	}
	return v
}

func TestJobPageActionsFollowTheState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		state          string
		retry, cancel  bool
		live, countdwn bool
	}{
		{"pending", false, true, true, false},
		{"running", false, true, true, true},
		{"succeeded", false, false, false, false},
		{"dead", true, false, false, false},
		{"cancelled", true, false, false, false},
	} {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			d := renderJobHTML(t, templates.JobPage(jobTestPage, jobSample(tc.state)))
			if got := len(d.testID("retry-button")) == 1; got != tc.retry {
				t.Errorf("retry button shown: %v, want %v", got, tc.retry)
			}
			if got := len(d.testID("cancel-button")) == 1; got != tc.cancel {
				t.Errorf("cancel button shown: %v, want %v", got, tc.cancel)
			}
			// Every action is a POST form with the CSRF token.
			for _, f := range d.all(func(n *html.Node) bool {
				return n.Data == "form" && strings.HasPrefix(jobAttr(n, "action"), "/jobs/42/")
			}) {
				if jobAttr(f, "method") != "post" {
					t.Errorf("form %s is not a POST", jobAttr(f, "action"))
				}
				if !strings.Contains(jobRenderNode(f), `name="_csrf" value="csrf-token-1"`) {
					t.Errorf("form %s lacks the CSRF field", jobAttr(f, "action"))
				}
			}
			live := d.one(t, "job-live")
			if got := jobAttr(live, "hx-trigger") != ""; got != tc.live {
				t.Errorf("polling: %v, want %v", got, tc.live)
			}
			if tc.live && (jobAttr(live, "hx-get") != "/jobs/42" || jobAttr(live, "hx-select") != "#job-live" || jobAttr(live, "hx-swap") != "outerHTML") {
				t.Errorf("polling attributes: %v", live.Attr)
			}
			if got := len(d.testID("lease-countdown")) == 1; got != tc.countdwn {
				t.Errorf("countdown shown: %v, want %v", got, tc.countdwn)
			}
			if jobAttr(d.one(t, "job-state"), "data-state") != tc.state {
				t.Errorf("state badge: %s", jobText(d.one(t, "job-state")))
			}
			jobNoInlineCode(t, d)
		})
	}
}

func TestJobPageRunningShowsTheLease(t *testing.T) {
	t.Parallel()
	v := jobSample("running")
	d := renderJobHTML(t, templates.JobPage(jobTestPage, v))
	cd := d.one(t, "lease-countdown")
	if got := jobAttr(cd, "data-countdown"); got != v.LeaseUntil.Format(time.RFC3339Nano) {
		t.Errorf("data-countdown=%q", got)
	}
	if got := jobText(d.one(t, "lease-owner")); got != "w2" {
		t.Errorf("lease owner %q", got)
	}
	att := d.testID("attempt")
	if len(att) != 2 || jobAttr(att[0], "data-attempt") != "2" || jobAttr(att[1], "data-attempt") != "1" {
		t.Fatalf("attempts not newest first")
	}
	if !strings.Contains(jobText(att[0]), "running") {
		t.Errorf("running attempt: %s", jobText(att[0]))
	}
}

func TestJobPageScreenshotsLinkToFullSize(t *testing.T) {
	t.Parallel()
	d := renderJobHTML(t, templates.JobPage(jobTestPage, jobSample("dead")))
	shots := d.testID("screenshot")
	if len(shots) != 2 {
		t.Fatalf("%d screenshots, want 2", len(shots))
	}
	for i, a := range shots {
		want := []string{"/artifacts/11", "/artifacts/12"}[i]
		if a.Data != "a" || jobAttr(a, "href") != want || jobAttr(a, "target") != "_blank" || !strings.Contains(jobAttr(a, "rel"), "noopener") {
			t.Errorf("screenshot link %d: <%s %v>", i, a.Data, a.Attr)
		}
		img := a.FirstChild
		for img != nil && img.Type != html.ElementNode {
			img = img.NextSibling
		}
		if img == nil || img.Data != "img" || jobAttr(img, "src") != want || jobAttr(img, "loading") != "lazy" || !strings.HasPrefix(jobAttr(img, "alt"), "step ") {
			t.Errorf("thumbnail %d: %v", i, img)
		}
	}
	file := d.one(t, "text-artifact")
	if jobAttr(file, "href") != "/artifacts/13" || !jobHasAttr(file, "download") {
		t.Errorf("text artifact link: %v", file.Attr)
	}
	if len(d.testID("event")) != 2 || len(d.testID("effect")) != 1 {
		t.Errorf("%d events, %d effects", len(d.testID("event")), len(d.testID("effect")))
	}
}

func TestJobPageEscapesWhatWorkersAndPeopleWrote(t *testing.T) {
	t.Parallel()
	v := jobSample("dead")
	v.LastError = `<img src=x onerror=alert(1)>`
	v.Attempts[0].Screenshots[0].Name = `"><script>alert(1)</script>`
	d := renderJobHTML(t, templates.JobPage(jobTestPage, v))
	if strings.Contains(d.raw, "<script>alert") || strings.Contains(d.raw, "<img src=x") {
		t.Fatal("unescaped input in the page")
	}
	if got := jobText(d.one(t, "job-instructions")); got != "Open settings <script>alert(1)</script>" {
		t.Errorf("instructions shown as %q", got)
	}
	jobNoInlineCode(t, d)
}

func TestJobPageNoticeAndProblem(t *testing.T) {
	t.Parallel()
	v := jobSample("succeeded")
	v.Notice = "Nothing changed"
	d := renderJobHTML(t, templates.JobPage(jobTestPage, v))
	if jobText(d.one(t, "job-notice")) != "Nothing changed" {
		t.Error("notice missing")
	}
	p := renderJobHTML(t, templates.JobProblem(jobTestPage, templates.JobProblemView{Title: "Job not found", Message: "There is no job 9."}))
	if !strings.Contains(jobText(p.one(t, "problem")), "There is no job 9.") {
		t.Error("problem page lacks its message")
	}
	jobNoInlineCode(t, p)
}

func jobRenderNode(n *html.Node) string {
	var b strings.Builder
	_ = html.Render(&b, n)
	return b.String()
}
