package templates_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func TestWorkersRows(t *testing.T) {
	t.Parallel()
	until := listsNow.Add(20 * time.Second)
	v := templates.WorkersView{Window: "24 hours", Rows: []templates.WorkersRow{
		{ID: "phone-1", Device: "pixel7", Queues: []string{"default", "slow"}, Online: true, LastSeen: listsNow, Started: listsNow, Running: 3,
			Jobs: []templates.WorkersJob{{ID: 11, App: "com.example.notes", Kind: "app_investigation", Attempt: 2, LeaseUntil: &until}, {ID: 12, Kind: "report", Attempt: 1}}},
		{ID: "old-host", Queues: []string{"default"}, LastSeen: listsNow.Add(-time.Hour), Started: listsNow.Add(-2 * time.Hour)},
	}}
	d := listsRender(t, templates.Workers(listsPage("workers"), v))
	rows := d.All("worker-row")
	if len(rows) != 2 || htmltest.Attr(rows[0], "data-worker-id") != "phone-1" {
		t.Fatalf("%d rows", len(rows))
	}
	if len(htmltest.ByTestID(rows[0], "online")) != 1 || len(htmltest.ByTestID(rows[1], "offline")) != 1 || len(htmltest.ByTestID(rows[1], "online")) != 0 {
		t.Error("online badges")
	}
	held := htmltest.ByTestID(rows[0], "held-job")
	if len(held) != 2 || htmltest.Attr(held[0], "data-job-id") != "11" || !strings.Contains(htmltest.Text(held[0]), "com.example.notes") {
		t.Fatalf("held jobs: %d", len(held))
	}
	if !strings.Contains(d.Raw, `href="/jobs/11"`) || !strings.Contains(d.Raw, `data-countdown="`+until.Format(time.RFC3339Nano)+`"`) {
		t.Error("held job link or lease countdown")
	}
	if !strings.Contains(htmltest.Text(rows[0]), "and 1 more") {
		t.Error("jobs beyond the listed ones are not mentioned")
	}
	if !strings.Contains(htmltest.Text(rows[1]), "idle") {
		t.Error("an idle worker")
	}
	if live := d.One(t, "workers-live"); htmltest.Attr(live, "hx-trigger") != "every 3s" || htmltest.Attr(live, "hx-get") != "/workers" || htmltest.Attr(live, "hx-select") != "#workers-live" {
		t.Error("live region")
	}
}

func TestWorkersEmpty(t *testing.T) {
	t.Parallel()
	d := listsRender(t, templates.Workers(listsPage("workers"), templates.WorkersView{Window: "24 hours", WorkerCommand: "worker --server-url http://h"}))
	if e := d.One(t, "empty"); !strings.Contains(htmltest.Text(e), "No workers seen in the last 24 hours") || htmltest.Text(d.One(t, "worker-command")) != "worker --server-url http://h" {
		t.Errorf("empty state %q", htmltest.Text(e))
	}
}
