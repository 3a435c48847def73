package templates_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func TestDeadRowsShowErrorShotsAndRetry(t *testing.T) {
	t.Parallel()
	died := listsNow
	v := templates.DeadView{
		Total: 1234,
		Rows: []templates.DeadRow{{
			ID: 7, App: "com.example.broken", Kind: "app_investigation", Queue: "default",
			Counted: 3, MaxAttempts: 3, Attempts: 4, DiedAt: &died, Created: listsNow,
			Error: "step 2 failed\nstack line 1\nstack line 2", ErrorLine: "step 2 failed",
			ShotsAttempt: 4, Shots: []templates.DeadShot{{ID: 70, Name: "a.png"}, {ID: 71, Name: "b.png"}}, MoreShots: 3,
		}, {ID: 6, Kind: "report", Queue: "q", Counted: 1, MaxAttempts: 5, Attempts: 1, Created: listsNow}},
		Cursor:  99,
		NextURL: "/dead?cursor=6",
	}
	d := listsRender(t, templates.Dead(listsPage("dead"), v))
	rows := d.All("dead-row")
	if len(rows) != 2 || htmltest.Attr(rows[0], "data-job-id") != "7" {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	details := htmltest.ByTestID(r, "last-error")[0]
	if details.Data != "details" || !strings.Contains(htmltest.Text(details), "stack line 2") {
		t.Errorf("last error: <%s> %s", details.Data, htmltest.Text(details))
	}
	if got := htmltest.Text(htmltest.ByTestID(r, "dead-attempts")[0]); got != "3 of 3 attempts used" {
		t.Errorf("attempts %q", got)
	}
	shots := htmltest.ByTestID(r, "shot")
	if len(shots) != 2 {
		t.Fatalf("%d screenshots", len(shots))
	}
	for i, img := range shots {
		src := "/artifacts/" + []string{"70", "71"}[i]
		if htmltest.Attr(img, "src") != src || htmltest.Attr(img, "loading") != "lazy" || htmltest.Attr(img, "alt") == "" || htmltest.Attr(img.Parent, "href") != src {
			t.Errorf("screenshot %d: %v in %v", i, img.Attr, img.Parent.Attr)
		}
	}
	if !strings.Contains(htmltest.Text(htmltest.ByTestID(r, "shots")[0]), "+3 more") {
		t.Error("the screenshots not shown are not mentioned")
	}
	if len(htmltest.ByTestID(rows[1], "shots")) != 0 {
		t.Error("a job without screenshots shows a strip")
	}
	// Retry one: its own small form, outside the bulk form.
	forms := htmltest.ByTestID(r, "retry-form")
	if len(forms) != 1 || htmltest.Attr(forms[0], "action") != "/jobs/retry" {
		t.Fatal("no retry form in the row")
	}
	btn := htmltest.ByTestID(forms[0], "retry-button")[0]
	if htmltest.Attr(btn, "name") != "ids" || htmltest.Attr(btn, "value") != "7" {
		t.Errorf("retry button %v", btn.Attr)
	}
	if h := listsHidden(forms[0]); h["from"][0] != "dead" || h["cursor"][0] != "99" {
		t.Errorf("retry form's return fields %v", h)
	}
	for n := forms[0].Parent; n != nil; n = n.Parent {
		if n.Data == "form" {
			t.Fatal("forms nested")
		}
	}
	// Retry many: checkboxes of the bulk form.
	bulk := d.One(t, "bulk-form")
	if htmltest.Attr(bulk, "id") != "dead-bulk" || htmltest.Attr(d.One(t, "bulk-retry"), "type") != "submit" {
		t.Error("bulk form")
	}
	var boxes []string
	for _, n := range htmltest.Find(d.Root, func(n *html.Node) bool {
		return n.Data == "input" && htmltest.Attr(n, "name") == "ids" && htmltest.Attr(n, "form") == "dead-bulk"
	}) {
		boxes = append(boxes, htmltest.Attr(n, "value"))
	}
	if strings.Join(boxes, ",") != "7,6" {
		t.Errorf("checkboxes %v", boxes)
	}
	// Retry all, behind a confirmation.
	all := d.One(t, "retry-all-form")
	if h := listsHidden(all); h["all"][0] != "dead" || !strings.Contains(htmltest.Attr(all, "hx-confirm"), "1,234") || htmltest.Attr(all, "action") != "/jobs/retry" {
		t.Errorf("retry-all form %v %v", all.Attr, h)
	}
	if htmltest.Text(d.One(t, "dead-total")) != "1,234" {
		t.Error("dead total")
	}
	if htmltest.Attr(d.One(t, "older-link"), "href") != "/dead?cursor=6" {
		t.Error("pager")
	}
}

func TestDeadEmpty(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.Dead(listsPage("dead"), templates.DeadView{}))
	if !strings.Contains(htmltest.Text(d.One(t, "empty")), "No dead jobs. Good.") {
		t.Error("empty state")
	}
	if len(d.All("retry-all-form")) != 0 || len(d.All("bulk-form")) != 0 {
		t.Error("retry buttons with nothing to retry")
	}
}
