package templates_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
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
	rows := d.all("job-row")
	if len(rows) != 2 || listsAttr(rows[0], "data-job-id") != "42" || listsAttr(rows[1], "data-job-id") != "41" {
		t.Fatalf("rows: %d", len(rows))
	}
	first := rows[0]
	if badge := listsAll(first, "state")[0]; !strings.Contains(listsAttr(badge, "class"), "state-dead") || listsText(badge) != "dead" {
		t.Errorf("state badge: class %q text %q", listsAttr(badge, "class"), listsText(badge))
	}
	if link := listsAll(first, "job-link")[0]; listsAttr(link, "href") != "/jobs/42" || listsText(link) != "#42" {
		t.Errorf("job link: %q %q", listsAttr(link, "href"), listsText(link))
	}
	if got := listsText(listsAll(first, "job-attempt")[0]); got != "3/3" {
		t.Errorf("attempt: %q", got)
	}
	for _, want := range []string{"com.example.notes", "app_investigation", "phone-1", "tapped a button"} {
		if !strings.Contains(listsText(first), want) {
			t.Errorf("row lacks %q: %s", want, listsText(first))
		}
	}
	// Every row's checkbox belongs to the bulk form, which is not nested
	// around anything but its buttons.
	var boxes int
	listsWalk(d.root, func(n *html.Node) {
		if n.Data == "input" && listsAttr(n, "name") == "ids" {
			boxes++
			if listsAttr(n, "type") != "checkbox" || listsAttr(n, "form") != "jobs-bulk" || !listsHasAttr(n, "hx-preserve") || listsAttr(n, "id") == "" {
				t.Errorf("checkbox %v", n.Attr)
			}
		}
	})
	if boxes != 2 {
		t.Errorf("%d checkboxes", boxes)
	}
	form := d.one(t, "bulk-form")
	if listsAttr(form, "id") != "jobs-bulk" || listsAttr(form, "method") != "post" {
		t.Errorf("bulk form %v", form.Attr)
	}
	if h := listsHidden(form); h["from"][0] != "jobs" || h["kind"][0] != "app_investigation" || h["state"] != nil {
		t.Errorf("bulk form's return fields: %v", h)
	}
	if listsAttr(d.one(t, "bulk-retry"), "formaction") != "/jobs/retry" || listsAttr(d.one(t, "bulk-cancel"), "formaction") != "/jobs/cancel" {
		t.Error("bulk buttons post to the wrong actions")
	}
	// The newest page refreshes its table; the pager only goes older.
	live := d.one(t, "jobs-live")
	if listsAttr(live, "hx-get") != "/jobs?kind=app_investigation" || listsAttr(live, "hx-trigger") != "every 3s" ||
		listsAttr(live, "hx-swap") != "outerHTML" || listsAttr(live, "hx-select") != "#jobs-live" || listsAttr(live, "id") != "jobs-live" {
		t.Errorf("live region: %v", live.Attr)
	}
	if listsAttr(d.one(t, "older-link"), "href") != "/jobs?cursor=41&kind=app_investigation" || len(d.all("newest-link")) != 0 {
		t.Error("pager")
	}
}

func TestJobsOlderPageDoesNotRefresh(t *testing.T) {
	t.Parallel()
	v := listsJobsView()
	v.Cursor, v.LiveURL, v.FirstURL = 100, "", "/jobs?kind=app_investigation"
	d := listsRender(t, templates.Jobs(listsPage("jobs"), v))
	if live := d.one(t, "jobs-live"); listsHasAttr(live, "hx-get") || listsHasAttr(live, "hx-trigger") {
		t.Errorf("an older page polls: %v", live.Attr)
	}
	if listsAttr(d.one(t, "newest-link"), "href") != "/jobs?kind=app_investigation" {
		t.Error("no way back to the newest page")
	}
	if h := listsHidden(d.one(t, "bulk-form")); h["cursor"][0] != "100" {
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
			empty := d.one(t, "empty")
			if !strings.Contains(listsText(empty), tc.want) {
				t.Errorf("empty state %q, want %q", listsText(empty), tc.want)
			}
			var links []string
			listsWalk(empty, func(n *html.Node) {
				if n.Data == "a" {
					links = append(links, listsAttr(n, "href"))
				}
			})
			if len(links) == 0 || links[len(links)-1] != tc.link {
				t.Errorf("empty state links %v, want %q", links, tc.link)
			}
			if len(d.all("bulk-form")) != 0 || len(d.all("jobs-table")) != 0 {
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
	sel := d.byID("filter-state")
	if sel == nil || listsAttr(sel, "aria-invalid") != "true" {
		t.Fatal("the refused field is not marked aria-invalid")
	}
	if msg := d.one(t, "field-error"); !strings.Contains(listsText(msg), "bogus") || listsAttr(msg, "id") != listsAttr(sel, "aria-describedby") {
		t.Errorf("field error %q beside the field", listsText(msg))
	}
	if app := d.byID("filter-app"); listsAttr(app, "value") != "com.example.notes" || listsHasAttr(app, "aria-invalid") {
		t.Errorf("app filter: %v", app.Attr)
	}
	if n := d.one(t, "notice"); !strings.Contains(listsAttr(n, "class"), "error") || listsText(n) != "broken link" {
		t.Errorf("notice %v", n.Attr)
	}
	if len(d.all("jobs-live")) != 0 {
		t.Error("a refused query still shows a list")
	}
}

func TestJobsFilterKeepsSelection(t *testing.T) {
	t.Parallel()
	v := templates.JobsView{States: []string{"pending", "dead"}, Filter: templates.ListFilter{State: "dead", Queue: "q1"}}
	d := listsRender(t, templates.Jobs(listsPage("jobs"), v))
	form := d.one(t, "filters")
	if listsAttr(form, "method") != "get" || listsAttr(form, "action") != "/jobs" {
		t.Errorf("filter form %v", form.Attr)
	}
	var selected []string
	listsWalk(form, func(n *html.Node) {
		if n.Data == "option" && listsHasAttr(n, "selected") {
			selected = append(selected, listsAttr(n, "value"))
		}
	})
	if len(selected) != 1 || selected[0] != "dead" {
		t.Errorf("selected states %v", selected)
	}
	if listsAttr(d.byID("filter-queue"), "value") != "q1" {
		t.Error("queue filter lost")
	}
}

func TestListProblem(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.ListProblem(listsPage(""), `"abc" is not a job id.`, "/dead?cursor=3"))
	if !strings.Contains(listsText(d.one(t, "notice")), "abc") || listsAttr(d.one(t, "back-link"), "href") != "/dead?cursor=3" {
		t.Error("problem page")
	}
}
