package web_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func TestWorkersPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/workers").want(t, http.StatusOK))
	if cmd := htmltest.Text(d.One(t, "worker-command")); !strings.Contains(cmd, "--server-url "+f.srv.URL) {
		t.Fatalf("empty state's command %q", cmd)
	}

	for _, w := range []string{"phone-1", "idle-1"} {
		if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: w, Devices: []string{"pixel7"}, Queues: []string{"default"}}); err != nil {
			t.Fatal(err)
		}
	}
	var want []int64
	for range 2 {
		want = append(want, f.listsInsert(t, "app_investigation", "default", "com.example.notes").ID)
	}
	if _, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-1", Queues: []string{"default"}, Limit: 2, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	d = parseHTML(t, b.get(t, "/workers").want(t, http.StatusOK))
	rows := d.All("worker-row")
	if len(rows) != 2 {
		t.Fatalf("%d worker rows", len(rows))
	}
	var busy, idle = rows[0], rows[1]
	if htmltest.Attr(busy, "data-worker-id") != "phone-1" {
		busy, idle = idle, busy
	}
	var held []int64
	for _, n := range htmltest.ByTestID(busy, "held-job") {
		held = append(held, listsParseID(t, htmltest.Attr(n, "data-job-id")))
	}
	if !slices.Equal(held, want) || len(htmltest.ByTestID(busy, "online")) != 1 || !strings.Contains(htmltest.Text(busy), "pixel7") {
		t.Errorf("busy worker: %q, holds %v", htmltest.Text(busy), held)
	}
	if len(htmltest.ByTestID(idle, "held-job")) != 0 || !strings.Contains(htmltest.Text(idle), "idle") {
		t.Errorf("idle worker: %q", htmltest.Text(idle))
	}
	if region := b.listsPoll(t, "/workers", "workers-live"); len(htmltest.ByTestID(region, "worker-row")) != 2 {
		t.Fatal("polled region lost the workers")
	}
}

func listsParseID(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("id %q: %v", s, err)
	}
	return n
}
