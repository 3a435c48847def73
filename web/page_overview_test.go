package web_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestOverviewPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := listsParse(t, b.get(t, "/").want(t, http.StatusOK))
	for _, s := range []string{"pending", "running", "succeeded", "dead", "cancelled"} {
		stat := d.one(t, "stat-"+s)
		if listsAttrOf(stat, "href") != "/jobs?state="+s || listsTextOf(listsUnder(stat, "stat-count")[0]) != "0" {
			t.Errorf("stat %s: %v %q", s, stat.Attr, listsTextOf(stat))
		}
	}
	if len(d.all("empty-jobs")) != 1 || !strings.Contains(d.raw, `href="/jobs/new"`) {
		t.Error("no next step on an empty overview")
	}
	if cmd := listsTextOf(d.one(t, "worker-command")); !strings.Contains(cmd, "worker --server-url "+f.srv.URL) {
		t.Errorf("worker command %q", cmd)
	}

	f.listsInsert(t, "report", "default", "")
	f.listsInsert(t, "report", "default", "")
	dead := f.deadJob(t, "doomed")
	if err := f.queue.WorkerSeen(f.ctx, "phone-1", []string{"pixel7"}, []string{"default"}); err != nil {
		t.Fatal(err)
	}
	d = listsParse(t, b.get(t, "/").want(t, http.StatusOK))
	for s, want := range map[string]string{"pending": "2", "dead": "1", "running": "0"} {
		if got := listsTextOf(listsUnder(d.one(t, "stat-"+s), "stat-count")[0]); got != want {
			t.Errorf("stat %s = %s, want %s", s, got, want)
		}
	}
	letter := d.one(t, "dead-letter")
	if listsAttrOf(letter, "data-job-id") != itoa(dead.ID) || !strings.Contains(listsTextOf(letter), "boom") || !strings.Contains(d.raw, `href="/jobs/`+itoa(dead.ID)+`"`) {
		t.Errorf("dead letter %q", listsTextOf(letter))
	}
	if w := d.one(t, "worker-online"); !strings.Contains(listsTextOf(w), "phone-1") || !strings.Contains(listsTextOf(w), "0 running") {
		t.Errorf("worker %q", listsTextOf(w))
	}
	if len(d.all("empty-jobs")) != 0 {
		t.Error("empty state with jobs")
	}

	// The live region polls for itself.
	live := d.one(t, "overview-live")
	if listsAttrOf(live, "hx-get") != "/" || listsAttrOf(live, "hx-trigger") != "every 3s" {
		t.Errorf("live region %v", live.Attr)
	}
	f.listsInsert(t, "report", "default", "")
	region := b.listsPoll(t, "/", "overview-live")
	if got := listsTextOf(listsUnder(listsUnder(region, "stat-pending")[0], "stat-count")[0]); got != "3" {
		t.Errorf("poll: pending %s, want 3", got)
	}
}
