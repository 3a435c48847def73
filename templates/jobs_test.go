package templates_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func listsJobsView() templates.JobsView {
	return templates.JobsView{
		Filter: templates.ListFilter{Kind: "app_investigation"},
		States: []string{"pending", "running", "succeeded", "dead", "cancelled"},
		Rows: []templates.JobsRow{
			{ID: 42, App: "com.example.notes", Kind: "app_investigation", State: "dead", Attempt: 3, MaxAttempts: 3,
				Worker: "phone-1", Created: listsNow, LastError: "tapped a button that was not there"},
			{ID: 41, Kind: "report", State: "pending", Attempt: 0, MaxAttempts: 5, Created: listsNow},
		},
		NextURL: "/jobs?cursor=41&kind=app_investigation",
		LiveURL: "/jobs?kind=app_investigation",
	}
}

func TestJobsRows(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.Jobs(listsPage("jobs"), listsJobsView()))
	rows := d.All("job-row")
	if len(rows) != 2 || htmltest.Attr(rows[0], "data-job-id") != "42" || htmltest.Attr(rows[1], "data-job-id") != "41" {
		t.Fatalf("rows: %d", len(rows))
	}
	first := rows[0]
	if badge := htmltest.ByTestID(first, "state")[0]; !strings.Contains(htmltest.Attr(badge, "class"), "state-dead") || htmltest.Text(badge) != "dead" {
		t.Errorf("state badge: class %q text %q", htmltest.Attr(badge, "class"), htmltest.Text(badge))
	}
	if link := htmltest.ByTestID(first, "job-link")[0]; htmltest.Attr(link, "href") != "/jobs/42" || htmltest.Text(link) != "#42" {
		t.Errorf("job link: %q %q", htmltest.Attr(link, "href"), htmltest.Text(link))
	}
	if got := htmltest.Text(htmltest.ByTestID(first, "job-attempt")[0]); got != "3/3" {
		t.Errorf("attempt: %q", got)
	}
	for _, want := range []string{"com.example.notes", "app_investigation", "phone-1", "tapped a button"} {
		if !strings.Contains(htmltest.Text(first), want) {
			t.Errorf("row lacks %q: %s", want, htmltest.Text(first))
		}
	}
	// Every row's checkbox belongs to the bulk form, which is not nested
	// around anything but its buttons.
	boxes := htmltest.Find(d.Root, func(n *html.Node) bool { return n.Data == "input" && htmltest.Attr(n, "name") == "ids" })
	for _, n := range boxes {
		if htmltest.Attr(n, "type") != "checkbox" || htmltest.Attr(n, "form") != "jobs-bulk" || !htmltest.HasAttr(n, "hx-preserve") || htmltest.Attr(n, "id") == "" {
			t.Errorf("checkbox %v", n.Attr)
		}
	}
	if len(boxes) != 2 {
		t.Errorf("%d checkboxes", len(boxes))
	}
	form := d.One(t, "bulk-form")
	if htmltest.Attr(form, "id") != "jobs-bulk" || htmltest.Attr(form, "method") != "post" {
		t.Errorf("bulk form %v", form.Attr)
	}
	if h := listsHidden(form); h["from"][0] != "jobs" || h["kind"][0] != "app_investigation" || h["state"] != nil {
		t.Errorf("bulk form's return fields: %v", h)
	}
	if htmltest.Attr(d.One(t, "bulk-retry"), "formaction") != "/jobs/retry" || htmltest.Attr(d.One(t, "bulk-cancel"), "formaction") != "/jobs/cancel" {
		t.Error("bulk buttons post to the wrong actions")
	}
	// The newest page refreshes its table; the pager only goes older.
	live := d.One(t, "jobs-live")
	if htmltest.Attr(live, "hx-get") != "/jobs?kind=app_investigation" || htmltest.Attr(live, "hx-trigger") != "every 3s" ||
		htmltest.Attr(live, "hx-swap") != "outerHTML" || htmltest.Attr(live, "hx-select") != "#jobs-live" || htmltest.Attr(live, "id") != "jobs-live" {
		t.Errorf("live region: %v", live.Attr)
	}
	if htmltest.Attr(d.One(t, "older-link"), "href") != "/jobs?cursor=41&kind=app_investigation" || len(d.All("newest-link")) != 0 {
		t.Error("pager")
	}
}

func TestJobsOlderPageDoesNotRefresh(t *testing.T) {
	t.Parallel()
	v := listsJobsView()
	v.Cursor, v.LiveURL, v.FirstURL = 100, "", "/jobs?kind=app_investigation"
	d := listsRender(t, templates.Jobs(listsPage("jobs"), v))
	if live := d.One(t, "jobs-live"); htmltest.HasAttr(live, "hx-get") || htmltest.HasAttr(live, "hx-trigger") {
		t.Errorf("an older page polls: %v", live.Attr)
	}
	if htmltest.Attr(d.One(t, "newest-link"), "href") != "/jobs?kind=app_investigation" {
		t.Error("no way back to the newest page")
	}
	if h := listsHidden(d.One(t, "bulk-form")); h["cursor"][0] != "100" {
		t.Errorf("bulk form forgets the cursor: %v", h)
	}
}

func TestJobsEmptyStates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		filter templates.ListFilter
		cursor int64
		want   string
		link   string
	}{
		{name: "NoJobs", want: "No jobs yet — submit an investigation", link: "/jobs/new"},
		{name: "NoDead", filter: templates.ListFilter{State: "dead"}, want: "No dead jobs. Good.", link: "/jobs"},
		{name: "NoMatch", filter: templates.ListFilter{State: "dead", App: "x"}, want: "No jobs match these filters.", link: "/jobs"},
		{name: "PastTheEnd", cursor: 5, want: "No older jobs.", link: "/jobs?x=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := templates.JobsView{Filter: tc.filter, Cursor: tc.cursor, FirstURL: "/jobs?x=1"}
			d := listsRender(t, templates.Jobs(listsPage("jobs"), v))
			empty := d.One(t, "empty")
			if !strings.Contains(htmltest.Text(empty), tc.want) {
				t.Errorf("empty state %q, want %q", htmltest.Text(empty), tc.want)
			}
			var links []string
			for _, a := range htmltest.Find(empty, func(n *html.Node) bool { return n.Data == "a" }) {
				links = append(links, htmltest.Attr(a, "href"))
			}
			if len(links) == 0 || links[len(links)-1] != tc.link {
				t.Errorf("empty state links %v, want %q", links, tc.link)
			}
			if len(d.All("bulk-form")) != 0 || len(d.All("jobs-table")) != 0 {
				t.Error("an empty list shows bulk actions or a table")
			}
		})
	}
}

func TestJobsRefusedFilter(t *testing.T) {
	t.Parallel()
	v := templates.JobsView{
		States:      []string{"pending", "dead"},
		Filter:      templates.ListFilter{App: "com.example.notes"},
		FieldErrors: map[string]string{"state": `There is no state "bogus"`},
		Notices:     []templates.ListNotice{{Kind: "error", Text: "broken link"}},
		Invalid:     true,
	}
	d := listsRender(t, templates.Jobs(listsPage("jobs"), v))
	sel := htmltest.ByID(d.Root, "filter-state")
	if sel == nil || htmltest.Attr(sel, "aria-invalid") != "true" {
		t.Fatal("the refused field is not marked aria-invalid")
	}
	if msg := d.One(t, "field-error"); !strings.Contains(htmltest.Text(msg), "bogus") || htmltest.Attr(msg, "id") != htmltest.Attr(sel, "aria-describedby") {
		t.Errorf("field error %q beside the field", htmltest.Text(msg))
	}
	if app := htmltest.ByID(d.Root, "filter-app"); htmltest.Attr(app, "value") != "com.example.notes" || htmltest.HasAttr(app, "aria-invalid") {
		t.Errorf("app filter: %v", app.Attr)
	}
	if n := d.One(t, "notice"); !strings.Contains(htmltest.Attr(n, "class"), "error") || htmltest.Text(n) != "broken link" {
		t.Errorf("notice %v", n.Attr)
	}
	if len(d.All("jobs-live")) != 0 {
		t.Error("a refused query still shows a list")
	}
}

func TestJobsFilterKeepsSelection(t *testing.T) {
	t.Parallel()
	v := templates.JobsView{States: []string{"pending", "dead"}, Filter: templates.ListFilter{State: "dead", Queue: "q1"}}
	d := listsRender(t, templates.Jobs(listsPage("jobs"), v))
	form := d.One(t, "filters")
	if htmltest.Attr(form, "method") != "get" || htmltest.Attr(form, "action") != "/jobs" {
		t.Errorf("filter form %v", form.Attr)
	}
	var selected []string
	for _, o := range htmltest.Find(form, func(n *html.Node) bool { return n.Data == "option" && htmltest.HasAttr(n, "selected") }) {
		selected = append(selected, htmltest.Attr(o, "value"))
	}
	if len(selected) != 1 || selected[0] != "dead" {
		t.Errorf("selected states %v", selected)
	}
	if htmltest.Attr(htmltest.ByID(d.Root, "filter-queue"), "value") != "q1" {
		t.Error("queue filter lost")
	}
}

func TestListProblem(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.ListProblem(listsPage(""), `"abc" is not a job id.`, "/dead?cursor=3"))
	if !strings.Contains(htmltest.Text(d.One(t, "notice")), "abc") || htmltest.Attr(d.One(t, "back-link"), "href") != "/dead?cursor=3" {
		t.Error("problem page")
	}
}
