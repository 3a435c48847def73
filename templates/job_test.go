package templates_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/role"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// renderHTML renders c for an operator and parses what it wrote.
func renderHTML(t *testing.T, c templ.Component) htmltest.Doc {
	t.Helper()
	return renderHTMLAs(t, role.Operator, c)
}

// renderHTMLAs renders c for a person of role r.
func renderHTMLAs(t *testing.T, r role.Role, c templ.Component) htmltest.Doc {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(role.NewContext(context.Background(), r), &buf); err != nil {
		t.Fatalf("rendering: %v", err)
	}
	return htmltest.Parse(t, buf.String())
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
			d := renderHTML(t, templates.JobPage(jobTestPage, jobSample(tc.state)))
			if got := len(d.All("retry-button")) == 1; got != tc.retry {
				t.Errorf("retry button shown: %v, want %v", got, tc.retry)
			}
			if got := len(d.All("cancel-button")) == 1; got != tc.cancel {
				t.Errorf("cancel button shown: %v, want %v", got, tc.cancel)
			}
			// Every action is a POST form with the CSRF token.
			for _, f := range htmltest.Find(d.Root, func(n *html.Node) bool {
				return n.Data == "form" && strings.HasPrefix(htmltest.Attr(n, "action"), "/jobs/42/")
			}) {
				if htmltest.Attr(f, "method") != "post" {
					t.Errorf("form %s is not a POST", htmltest.Attr(f, "action"))
				}
				if !strings.Contains(jobRenderNode(f), `name="_csrf" value="csrf-token-1"`) {
					t.Errorf("form %s lacks the CSRF field", htmltest.Attr(f, "action"))
				}
			}
			live := d.One(t, "job-live")
			if got := htmltest.Attr(live, "hx-trigger") != ""; got != tc.live {
				t.Errorf("polling: %v, want %v", got, tc.live)
			}
			if tc.live && (htmltest.Attr(live, "hx-get") != "/jobs/42" || htmltest.Attr(live, "hx-select") != "#job-live" || htmltest.Attr(live, "hx-swap") != "outerHTML") {
				t.Errorf("polling attributes: %v", live.Attr)
			}
			if got := len(d.All("lease-countdown")) == 1; got != tc.countdwn {
				t.Errorf("countdown shown: %v, want %v", got, tc.countdwn)
			}
			if htmltest.Attr(d.One(t, "job-state"), "data-state") != tc.state {
				t.Errorf("state badge: %s", htmltest.Text(d.One(t, "job-state")))
			}
			htmltest.NoInlineCode(t, d.Root)
		})
	}
}

func TestJobPageRunningShowsTheLease(t *testing.T) {
	t.Parallel()
	v := jobSample("running")
	d := renderHTML(t, templates.JobPage(jobTestPage, v))
	cd := d.One(t, "lease-countdown")
	if got := htmltest.Attr(cd, "data-countdown"); got != v.LeaseUntil.Format(time.RFC3339Nano) {
		t.Errorf("data-countdown=%q", got)
	}
	if got := htmltest.Text(d.One(t, "lease-owner")); got != "w2" {
		t.Errorf("lease owner %q", got)
	}
	att := d.All("attempt")
	if len(att) != 2 || htmltest.Attr(att[0], "data-attempt") != "2" || htmltest.Attr(att[1], "data-attempt") != "1" {
		t.Fatalf("attempts not newest first")
	}
	if !strings.Contains(htmltest.Text(att[0]), "running") {
		t.Errorf("running attempt: %s", htmltest.Text(att[0]))
	}
}

func TestJobPageScreenshotsLinkToFullSize(t *testing.T) {
	t.Parallel()
	d := renderHTML(t, templates.JobPage(jobTestPage, jobSample("dead")))
	shots := d.All("screenshot")
	if len(shots) != 2 {
		t.Fatalf("%d screenshots, want 2", len(shots))
	}
	for i, a := range shots {
		want := []string{"/artifacts/11", "/artifacts/12"}[i]
		if a.Data != "a" || htmltest.Attr(a, "href") != want || htmltest.Attr(a, "target") != "_blank" || !strings.Contains(htmltest.Attr(a, "rel"), "noopener") {
			t.Errorf("screenshot link %d: <%s %v>", i, a.Data, a.Attr)
		}
		img := a.FirstChild
		for img != nil && img.Type != html.ElementNode {
			img = img.NextSibling
		}
		if img == nil || img.Data != "img" || htmltest.Attr(img, "src") != want || htmltest.Attr(img, "loading") != "lazy" || !strings.HasPrefix(htmltest.Attr(img, "alt"), "step ") {
			t.Errorf("thumbnail %d: %v", i, img)
		}
	}
	file := d.One(t, "text-artifact")
	if htmltest.Attr(file, "href") != "/artifacts/13" || !htmltest.HasAttr(file, "download") {
		t.Errorf("text artifact link: %v", file.Attr)
	}
	if len(d.All("event")) != 2 || len(d.All("effect")) != 1 {
		t.Errorf("%d events, %d effects", len(d.All("event")), len(d.All("effect")))
	}
}

func TestJobPageEscapesWhatWorkersAndPeopleWrote(t *testing.T) {
	t.Parallel()
	v := jobSample("dead")
	v.LastError = `<img src=x onerror=alert(1)>`
	v.Attempts[0].Screenshots[0].Name = `"><script>alert(1)</script>`
	d := renderHTML(t, templates.JobPage(jobTestPage, v))
	if strings.Contains(d.Raw, "<script>alert") || strings.Contains(d.Raw, "<img src=x") {
		t.Fatal("unescaped input in the page")
	}
	if got := htmltest.Text(d.One(t, "job-instructions")); got != "Open settings <script>alert(1)</script>" {
		t.Errorf("instructions shown as %q", got)
	}
	htmltest.NoInlineCode(t, d.Root)
}

func TestJobPageNoticeAndProblem(t *testing.T) {
	t.Parallel()
	v := jobSample("succeeded")
	v.Notice = "Nothing changed"
	d := renderHTML(t, templates.JobPage(jobTestPage, v))
	if htmltest.Text(d.One(t, "job-notice")) != "Nothing changed" {
		t.Error("notice missing")
	}
	p := renderHTML(t, templates.JobProblem(jobTestPage, templates.JobProblemView{Title: "Job not found", Message: "There is no job 9."}))
	if !strings.Contains(htmltest.Text(p.One(t, "problem")), "There is no job 9.") {
		t.Error("problem page lacks its message")
	}
	htmltest.NoInlineCode(t, p.Root)
}

func jobRenderNode(n *html.Node) string {
	var b strings.Builder
	_ = html.Render(&b, n)
	return b.String()
}

// Webhook deliveries are kept on the job page, in a table of their own
// under their own heading, not among the job's own events.
func TestJobPageShowsWebhookDeliveriesApart(t *testing.T) {
	t.Parallel()
	v := jobSample("succeeded")
	own := len(v.Events)
	at := v.Events[0].At
	v.Events = append([]templates.JobEvent{
		{At: at.Add(2 * time.Second), Type: "webhook.delivered", Detail: `{"status":200,"attempt":2}`},
		{At: at.Add(time.Second), Type: "webhook.failed", Detail: `{"status":503,"attempt":1}`},
	}, v.Events...)
	d := renderHTML(t, templates.JobPage(jobTestPage, v))
	if n := len(d.All("event")); n != own {
		t.Errorf("%d rows among the job's events, want its own %d", n, own)
	}
	for _, e := range d.All("event") {
		if strings.HasPrefix(htmltest.Attr(e, "data-type"), "webhook.") {
			t.Errorf("%s among the job's own events", htmltest.Attr(e, "data-type"))
		}
	}
	table := d.One(t, "webhook-deliveries")
	var got []string
	for _, e := range htmltest.ByTestID(table, "webhook-event") {
		got = append(got, htmltest.Attr(e, "data-type"))
	}
	if strings.Join(got, ",") != "webhook.delivered,webhook.failed" {
		t.Errorf("deliveries %q", got)
	}
	if h := htmltest.ByID(d.Root, htmltest.Attr(table, "aria-labelledby")); h == nil || !strings.HasPrefix(htmltest.Text(h), "Webhook deliveries") {
		t.Errorf("the deliveries' table is not labelled by its heading")
	}
	if d := renderHTML(t, templates.JobPage(jobTestPage, jobSample("succeeded"))); len(d.All("webhook-deliveries")) != 0 {
		t.Error("a job without deliveries shows their table")
	}
}

// A viewer reads the same pages without a button or form that changes
// something (the server would refuse them: web/routes.go); an operator
// sees them.
func TestViewerSeesNoActions(t *testing.T) {
	t.Parallel()
	pages := map[string]templ.Component{
		"job (dead)":    templates.JobPage(jobTestPage, jobSample("dead")),
		"job (running)": templates.JobPage(jobTestPage, jobSample("running")),
		"jobs":          templates.Jobs(jobTestPage, templates.JobsView{Rows: []templates.JobsRow{{ID: 42, State: "dead"}}}),
		"dead":          templates.Dead(jobTestPage, templates.DeadView{Total: 1, Rows: []templates.DeadRow{{ID: 42}}}),
		"queues": templates.Queues(jobTestPage, templates.QueuesView{
			Rows:       []templates.QueuesRow{{Name: "default", MaxRunning: "3"}},
			RateLimits: []templates.RateLimitRow{{Key: "llm:openai", Budgets: "60/min"}},
		}),
	}
	for name, page := range pages {
		actions := func(d htmltest.Doc) int {
			return len(htmltest.Find(d.Root, func(n *html.Node) bool {
				action := htmltest.Attr(n, "action")
				return (n.Data == "form" && htmltest.Attr(n, "method") == "post" && action != "/logout") ||
					(n.Data == "a" && htmltest.Attr(n, "href") == "/jobs/new") ||
					(n.Data == "input" && htmltest.Attr(n, "name") == "ids")
			}))
		}
		if n := actions(renderHTMLAs(t, role.Viewer, page)); n != 0 {
			t.Errorf("%s: a viewer is shown %d forms, links or checkboxes that act", name, n)
		}
		if n := actions(renderHTMLAs(t, role.Operator, page)); n == 0 {
			t.Errorf("%s: an operator is shown no action", name)
		}
	}
	// What the forms showed a viewer reads as text.
	d := renderHTMLAs(t, role.Viewer, pages["queues"])
	if got := htmltest.Text(d.One(t, "max-running-text")); got != "3" {
		t.Errorf("a viewer reads the cap as %q, want 3", got)
	}
	if got := htmltest.Text(d.One(t, "rate-limit-budgets-text")); got != "60/min" {
		t.Errorf("a viewer reads the budgets as %q, want 60/min", got)
	}
}
