package templates_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/templates"
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
	rows := d.all("dead-row")
	if len(rows) != 2 || listsAttr(rows[0], "data-job-id") != "7" {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	details := listsAll(r, "last-error")[0]
	if details.Data != "details" || !strings.Contains(listsText(details), "stack line 2") {
		t.Errorf("last error: <%s> %s", details.Data, listsText(details))
	}
	if got := listsText(listsAll(r, "dead-attempts")[0]); got != "3 of 3 attempts used" {
		t.Errorf("attempts %q", got)
	}
	shots := listsAll(r, "shot")
	if len(shots) != 2 {
		t.Fatalf("%d screenshots", len(shots))
	}
	for i, img := range shots {
		src := "/artifacts/" + []string{"70", "71"}[i]
		if listsAttr(img, "src") != src || listsAttr(img, "loading") != "lazy" || listsAttr(img, "alt") == "" || listsAttr(img.Parent, "href") != src {
			t.Errorf("screenshot %d: %v in %v", i, img.Attr, img.Parent.Attr)
		}
	}
	if !strings.Contains(listsText(listsAll(r, "shots")[0]), "+3 more") {
		t.Error("the screenshots not shown are not mentioned")
	}
	if len(listsAll(rows[1], "shots")) != 0 {
		t.Error("a job without screenshots shows a strip")
	}
	// Retry one: its own small form, outside the bulk form.
	forms := listsAll(r, "retry-form")
	if len(forms) != 1 || listsAttr(forms[0], "action") != "/jobs/retry" {
		t.Fatal("no retry form in the row")
	}
	btn := listsAll(forms[0], "retry-button")[0]
	if listsAttr(btn, "name") != "ids" || listsAttr(btn, "value") != "7" {
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
	bulk := d.one(t, "bulk-form")
	if listsAttr(bulk, "id") != "dead-bulk" || listsAttr(d.one(t, "bulk-retry"), "type") != "submit" {
		t.Error("bulk form")
	}
	var boxes []string
	listsWalk(d.root, func(n *html.Node) {
		if n.Data == "input" && listsAttr(n, "name") == "ids" && listsAttr(n, "form") == "dead-bulk" {
			boxes = append(boxes, listsAttr(n, "value"))
		}
	})
	if strings.Join(boxes, ",") != "7,6" {
		t.Errorf("checkboxes %v", boxes)
	}
	// Retry all, behind a confirmation.
	all := d.one(t, "retry-all-form")
	if h := listsHidden(all); h["all"][0] != "dead" || !strings.Contains(listsAttr(all, "hx-confirm"), "1,234") || listsAttr(all, "action") != "/jobs/retry" {
		t.Errorf("retry-all form %v %v", all.Attr, h)
	}
	if listsText(d.one(t, "dead-total")) != "1,234" {
		t.Error("dead total")
	}
	if listsAttr(d.one(t, "older-link"), "href") != "/dead?cursor=6" {
		t.Error("pager")
	}
}

func TestDeadEmpty(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.Dead(listsPage("dead"), templates.DeadView{}))
	if !strings.Contains(listsText(d.one(t, "empty")), "No dead jobs. Good.") {
		t.Error("empty state")
	}
	if len(d.all("retry-all-form")) != 0 || len(d.all("bulk-form")) != 0 {
		t.Error("retry buttons with nothing to retry")
	}
}
