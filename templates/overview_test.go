package templates_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func listsOverviewStats(n int64) []templates.OverviewStat {
	var out []templates.OverviewStat
	for i, s := range []string{"pending", "running", "succeeded", "dead", "cancelled"} {
		out = append(out, templates.OverviewStat{State: s, Count: n * int64(i)})
	}
	return out
}

func TestOverviewStatsLinkToTheirList(t *testing.T) {
	t.Parallel()
	at := listsNow.Add(-time.Minute)
	v := templates.OverviewView{
		Stats: listsOverviewStats(617), Total: 6170,
		Dead:    []templates.OverviewDead{{ID: 9, App: "com.example.broken", Kind: "app_investigation", Error: "crashed on start", At: &at}},
		Workers: []templates.OverviewWorker{{ID: "phone-1", Device: "pixel7", Running: 2, LastSeen: at}},
	}
	d := listsRender(t, templates.Overview(listsPage("overview"), v))
	dead := d.One(t, "stat-dead")
	if htmltest.Attr(dead, "href") != "/jobs?state=dead" || htmltest.Text(htmltest.ByTestID(dead, "stat-count")[0]) != "1,851" {
		t.Errorf("dead stat: href %q, text %q", htmltest.Attr(dead, "href"), htmltest.Text(dead))
	}
	for _, s := range []string{"pending", "running", "succeeded", "cancelled"} {
		d.One(t, "stat-"+s)
	}
	live := d.One(t, "overview-live")
	if htmltest.Attr(live, "hx-get") != "/" || htmltest.Attr(live, "hx-trigger") != "every 3s" || htmltest.Attr(live, "id") != "overview-live" || htmltest.Attr(live, "hx-select") != "#overview-live" {
		t.Errorf("live region %v", live.Attr)
	}
	letter := d.One(t, "dead-letter")
	if !strings.Contains(htmltest.Text(letter), "com.example.broken") || !strings.Contains(htmltest.Text(letter), "crashed on start") {
		t.Errorf("dead letter: %s", htmltest.Text(letter))
	}
	w := d.One(t, "worker-online")
	if !strings.Contains(htmltest.Text(w), "phone-1") || htmltest.Text(htmltest.ByTestID(w, "worker-running")[0]) != "2 running" {
		t.Errorf("worker: %s", htmltest.Text(w))
	}
	if len(d.All("empty")) != 0 || len(d.All("empty-jobs")) != 0 {
		t.Error("empty states on a busy overview")
	}
}

func TestOverviewEmptySaysWhatToDo(t *testing.T) {
	t.Parallel()
	v := templates.OverviewView{Stats: listsOverviewStats(0), WorkerCommand: "worker --server-url http://x --token TOKEN"}
	d := listsRender(t, templates.Overview(listsPage("overview"), v))
	if e := d.One(t, "empty-jobs"); !strings.Contains(htmltest.Text(e), "No jobs yet") || !strings.Contains(d.Raw, `href="/jobs/new"`) {
		t.Errorf("no-jobs state: %s", htmltest.Text(e))
	}
	empties := d.All("empty")
	if len(empties) != 2 || !strings.Contains(htmltest.Text(empties[0]), "No dead letters") {
		t.Fatalf("%d empty states", len(empties))
	}
	if cmd := d.One(t, "worker-command"); htmltest.Text(cmd) != "worker --server-url http://x --token TOKEN" {
		t.Errorf("worker command %q", htmltest.Text(cmd))
	}
}

func TestOverviewLiveIsTheWholeLiveRegion(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.OverviewLive(templates.OverviewView{Stats: listsOverviewStats(1), Total: 10}))
	if strings.Contains(d.Raw, "<html") || strings.Contains(d.Raw, "topbar") {
		t.Error("the partial carries the layout")
	}
	if !strings.HasPrefix(d.Raw, `<div id="overview-live"`) {
		t.Errorf("partial starts %.60s", d.Raw)
	}
}
