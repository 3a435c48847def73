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

func TestWorkersRowPhoneAndHealth(t *testing.T) {
	t.Parallel()
	battery, charging := 4, false
	v := templates.WorkersView{Window: "24 hours", Rows: []templates.WorkersRow{
		{ID: "phone-low", Online: true, LastSeen: listsNow, Started: listsNow, Running: 1, Succeeded: 7, Failed: 2,
			Phone:  &templates.WorkersPhone{Model: "Pixel 7", Android: "14", Adb: "device", Battery: &battery, Charging: &charging, Serial: "R5CT"},
			InfoAt: &listsNow, Claiming: false, Reason: "battery 4% (under 15%) and not charging", InfoError: "no answer within 10s: killed",
			Jobs: []templates.WorkersJob{{ID: 11, Kind: "app_investigation", Attempt: 1, Shot: &templates.WorkersShot{ID: 99, Name: "step-3.png", Step: 3}}}},
		{ID: "plain", Online: true, LastSeen: listsNow, Started: listsNow, Claiming: true, LastJobID: 5},
	}}
	d := listsRender(t, templates.Workers(listsPage("workers"), v))
	rows := d.All("worker-row")
	low, plain := rows[0], rows[1]
	for id, want := range map[string]string{"model": "Pixel 7", "android": "Android 14", "battery": "4%", "charging": "not charging",
		"adb": "adb device", "serial": "R5CT", "reason": "battery 4% (under 15%) and not charging",
		"info-error": "device-info: no answer within 10s: killed", "succeeded-24h": "7 succeeded", "failed-24h": "2 failed"} {
		if n := htmltest.ByTestID(low, id); len(n) != 1 || htmltest.Text(n[0]) != want {
			t.Errorf("%s: %d nodes, want %q", id, len(n), want)
		}
	}
	if len(htmltest.ByTestID(low, "not-claiming")) != 1 || len(htmltest.ByTestID(low, "claiming")) != 0 {
		t.Error("health badge of a worker holding back")
	}
	if shot := htmltest.ByTestID(low, "current-shot"); len(shot) != 1 || !strings.Contains(d.Raw, `href="/artifacts/99"`) || !strings.Contains(d.Raw, `src="/artifacts/99"`) {
		t.Error("the current job's latest screenshot")
	}
	if !strings.Contains(htmltest.Text(plain), "no device info") || len(htmltest.ByTestID(plain, "claiming")) != 1 ||
		len(htmltest.ByTestID(plain, "reason")) != 0 || !strings.Contains(d.Raw, `href="/jobs/5"`) {
		t.Errorf("a worker without device info: %q", htmltest.Text(plain))
	}
}
