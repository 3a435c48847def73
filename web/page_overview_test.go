package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func TestOverviewPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/").want(t, http.StatusOK))
	for _, s := range []string{"pending", "running", "succeeded", "dead", "cancelled"} {
		stat := d.One(t, "stat-"+s)
		if htmltest.Attr(stat, "href") != "/jobs?state="+s || htmltest.Text(htmltest.ByTestID(stat, "stat-count")[0]) != "0" {
			t.Errorf("stat %s: %v %q", s, stat.Attr, htmltest.Text(stat))
		}
	}
	if len(d.All("empty-jobs")) != 1 || !strings.Contains(d.Raw, `href="/jobs/new"`) {
		t.Error("no next step on an empty overview")
	}
	if cmd := htmltest.Text(d.One(t, "worker-command")); !strings.Contains(cmd, "worker --server-url "+f.srv.URL) {
		t.Errorf("worker command %q", cmd)
	}

	f.listsInsert(t, "report", "default", "")
	f.listsInsert(t, "report", "default", "")
	dead := f.deadJob(t, "doomed")
	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "phone-1", Devices: []string{"pixel7"}, Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	d = parseHTML(t, b.get(t, "/").want(t, http.StatusOK))
	for s, want := range map[string]string{"pending": "2", "dead": "1", "running": "0"} {
		if got := htmltest.Text(htmltest.ByTestID(d.One(t, "stat-"+s), "stat-count")[0]); got != want {
			t.Errorf("stat %s = %s, want %s", s, got, want)
		}
	}
	letter := d.One(t, "dead-letter")
	if htmltest.Attr(letter, "data-job-id") != itoa(dead.ID) || !strings.Contains(htmltest.Text(letter), "boom") || !strings.Contains(d.Raw, `href="/jobs/`+itoa(dead.ID)+`"`) {
		t.Errorf("dead letter %q", htmltest.Text(letter))
	}
	if w := d.One(t, "worker-online"); !strings.Contains(htmltest.Text(w), "phone-1") || !strings.Contains(htmltest.Text(w), "0 running") {
		t.Errorf("worker %q", htmltest.Text(w))
	}
	if len(d.All("empty-jobs")) != 0 {
		t.Error("empty state with jobs")
	}

	// The live region refreshes when the event stream says jobs or
	// workers changed (polling only without EventSource).
	live := d.One(t, "overview-live")
	if htmltest.Attr(live, "hx-get") != "/" || htmltest.Attr(live, "hx-trigger") != "sse:jobs, sse:workers, sse:reset" ||
		htmltest.Attr(live, "data-poll") != "every 3s" {
		t.Errorf("live region %v", live.Attr)
	}
	f.listsInsert(t, "report", "default", "")
	region := b.listsPoll(t, "/", "overview-live")
	if got := htmltest.Text(htmltest.ByTestID(htmltest.ByTestID(region, "stat-pending")[0], "stat-count")[0]); got != "3" {
		t.Errorf("poll: pending %s, want 3", got)
	}
}
