package templates_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/templates"
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
	dead := d.one(t, "stat-dead")
	if listsAttr(dead, "href") != "/jobs?state=dead" || listsText(listsAll(dead, "stat-count")[0]) != "1,851" {
		t.Errorf("dead stat: href %q, text %q", listsAttr(dead, "href"), listsText(dead))
	}
	for _, s := range []string{"pending", "running", "succeeded", "cancelled"} {
		d.one(t, "stat-"+s)
	}
	live := d.one(t, "overview-live")
	if listsAttr(live, "hx-get") != "/" || listsAttr(live, "hx-trigger") != "every 3s" || listsAttr(live, "id") != "overview-live" || listsAttr(live, "hx-select") != "#overview-live" {
		t.Errorf("live region %v", live.Attr)
	}
	letter := d.one(t, "dead-letter")
	if !strings.Contains(listsText(letter), "com.example.broken") || !strings.Contains(listsText(letter), "crashed on start") {
		t.Errorf("dead letter: %s", listsText(letter))
	}
	w := d.one(t, "worker-online")
	if !strings.Contains(listsText(w), "phone-1") || listsText(listsAll(w, "worker-running")[0]) != "2 running" {
		t.Errorf("worker: %s", listsText(w))
	}
	if len(d.all("empty")) != 0 || len(d.all("empty-jobs")) != 0 {
		t.Error("empty states on a busy overview")
	}
}

func TestOverviewEmptySaysWhatToDo(t *testing.T) {
	t.Parallel()
	v := templates.OverviewView{Stats: listsOverviewStats(0), WorkerCommand: "worker --server-url http://x --token TOKEN"}
	d := listsRender(t, templates.Overview(listsPage("overview"), v))
	if e := d.one(t, "empty-jobs"); !strings.Contains(listsText(e), "No jobs yet") || !strings.Contains(d.raw, `href="/jobs/new"`) {
		t.Errorf("no-jobs state: %s", listsText(e))
	}
	empties := d.all("empty")
	if len(empties) != 2 || !strings.Contains(listsText(empties[0]), "No dead letters") {
		t.Fatalf("%d empty states", len(empties))
	}
	if cmd := d.one(t, "worker-command"); listsText(cmd) != "worker --server-url http://x --token TOKEN" {
		t.Errorf("worker command %q", listsText(cmd))
	}
}

func TestOverviewLiveIsTheWholeLiveRegion(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.OverviewLive(templates.OverviewView{Stats: listsOverviewStats(1), Total: 10}))
	if strings.Contains(d.raw, "<html") || strings.Contains(d.raw, "topbar") {
		t.Error("the partial carries the layout")
	}
	if !strings.HasPrefix(d.raw, `<div id="overview-live"`) {
		t.Errorf("partial starts %.60s", d.raw)
	}
}
