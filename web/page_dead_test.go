package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// listsDeadWithShots makes a dead job of app whose only attempt took n
// screenshots (metadata only: the page links them, it does not read them).
func (f *fixture) listsDeadWithShots(t *testing.T, app string, n int) (queue.Job, []int64) {
	t.Helper()
	j := f.listsInsert(t, "app_investigation", "shots", app)
	claimed, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-1", Queues: []string{"shots"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 || claimed[0].ID != j.ID {
		t.Fatalf("claiming %d: %v %+v", j.ID, err, claimed)
	}
	l := queue.Lease{JobID: j.ID, Token: claimed[0].LeaseToken, WorkerID: "phone-1"}
	var shots []int64
	for i := range n {
		a, err := f.queue.RecordArtifact(f.ctx, l, queue.Artifact{
			Kind: queue.ArtifactScreenshot, Name: fmt.Sprintf("step-%d.png", i+1), ContentType: "image/png", Size: 100,
			SHA256: fmt.Sprintf("%064x", j.ID*100+int64(i)),
		})
		if err != nil {
			t.Fatal(err)
		}
		shots = append(shots, a.ID)
	}
	if _, err := f.queue.Fail(f.ctx, l, "could not find the settings screen\n  at step 3", false); err != nil {
		t.Fatal(err)
	}
	return j, shots
}

func TestDeadPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/dead").want(t, http.StatusOK))
	if !strings.Contains(htmltest.Text(d.One(t, "empty")), "No dead jobs. Good.") || len(d.All("retry-all-form")) != 0 {
		t.Fatal("empty dead-letter queue")
	}

	notes, shots := f.listsDeadWithShots(t, "com.example.notes", 8)
	plain := f.deadJob(t, "report")
	f.listsInsert(t, "report", "default", "") // pending: not a dead letter
	d = parseHTML(t, b.get(t, "/dead").want(t, http.StatusOK))
	if got := listsRowIDs(t, d, "dead-row"); !slices.Equal(got, []int64{plain.ID, notes.ID}) {
		t.Fatalf("dead rows %v", got)
	}
	row := d.All("dead-row")[1]
	if !strings.Contains(htmltest.Text(row), "com.example.notes") || !strings.Contains(htmltest.Text(row), "1 of 5 attempts used") {
		t.Errorf("row %q", htmltest.Text(row))
	}
	if e := htmltest.ByTestID(row, "last-error"); len(e) != 1 || !strings.Contains(htmltest.Text(e[0]), "at step 3") {
		t.Error("the full last error is not in the row")
	}
	var srcs []string
	for _, img := range htmltest.ByTestID(row, "shot") {
		srcs = append(srcs, htmltest.Attr(img, "src"))
		if htmltest.Attr(img, "loading") != "lazy" || htmltest.Attr(img.Parent, "href") != htmltest.Attr(img, "src") {
			t.Errorf("thumbnail %v", img.Attr)
		}
	}
	var want []string
	for _, id := range shots[len(shots)-6:] {
		want = append(want, "/artifacts/"+itoa(id))
	}
	if !slices.Equal(srcs, want) || !strings.Contains(htmltest.Text(htmltest.ByTestID(row, "shots")[0]), "+2 more") {
		t.Errorf("thumbnails %v, want the last six %v and +2 more", srcs, want)
	}
	if len(htmltest.ByTestID(d.All("dead-row")[0], "shot")) != 0 {
		t.Error("a job without screenshots shows some")
	}
	if htmltest.Text(d.One(t, "dead-total")) != "2" {
		t.Error("total")
	}
}

func TestDeadPagePaginates(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	var want []int64
	for range 23 {
		want = append(want, f.deadJob(t, "report").ID)
	}
	slices.Reverse(want)
	d := parseHTML(t, b.get(t, "/dead").want(t, http.StatusOK))
	first := listsRowIDs(t, d, "dead-row")
	next := htmltest.Attr(d.One(t, "older-link"), "href")
	if len(first) != 20 || next != "/dead?cursor="+itoa(first[19]) {
		t.Fatalf("first page: %d rows, older link %q", len(first), next)
	}
	d = parseHTML(t, b.get(t, next).want(t, http.StatusOK))
	if got := append(first, listsRowIDs(t, d, "dead-row")...); !slices.Equal(got, want) || len(d.All("older-link")) != 0 {
		t.Fatalf("pages %v, want %v", got, want)
	}
	if h := htmltest.Attr(d.One(t, "newest-link"), "href"); h != "/dead" {
		t.Errorf("newest link %q", h)
	}
	for _, q := range []string{"cursor=-1", "cursor=x"} {
		r := b.get(t, "/dead?"+q).want(t, http.StatusBadRequest)
		if d := parseHTML(t, r); len(d.All("notice")) != 1 || len(d.All("dead-row")) != 0 {
			t.Errorf("%s: no notice", q)
		}
	}
}

func TestDeadPageRetry(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	var dead []int64
	for range 5 {
		dead = append(dead, f.deadJob(t, "report").ID)
	}
	b.get(t, "/dead")

	// One, from its row's form.
	loc, page := b.listsFollow(t, b.post(t, "/jobs/retry", url.Values{"ids": {itoa(dead[0])}, "from": {"dead"}}))
	if loc != "/dead?done=retried%3A1" || htmltest.Text(parseHTML(t, page).One(t, "notice")) != "1 job retried." {
		t.Fatalf("retry one: %q", loc)
	}
	// The list refreshes itself at once (the retry changed it): with the
	// notice's parameters, or the refresh would take the notice away.
	if get := htmltest.Attr(parseHTML(t, page).One(t, "dead-live"), "hx-get"); get != "/dead?done=retried%3A1" {
		t.Errorf("the live refresh asks %q, which drops the notice", get)
	}
	if listsRowIDs(t, parseHTML(t, page), "dead-row")[0] != dead[4] || f.listsState(t, dead[0]) != queue.StatePending {
		t.Fatal("retried job still dead")
	}
	// Many, from the checkboxes.
	b.listsFollow(t, b.post(t, "/jobs/retry", url.Values{"ids": {itoa(dead[1]), itoa(dead[2])}, "from": {"dead"}}))
	for _, id := range dead[1:3] {
		if f.listsState(t, id) != queue.StatePending {
			t.Fatalf("job %d not retried", id)
		}
	}
	// All, as htmx sends it after the confirmation: a full navigation.
	req := listsRawPost(t, f, "/jobs/retry", url.Values{"all": {"dead"}, "from": {"dead"}, "_csrf": {b.csrf}}, f.srv.URL)
	req.Header.Set("HX-Request", "true")
	r := b.do(t, req).want(t, http.StatusOK)
	if r.header.Get("HX-Redirect") != "/dead?done=retried%3A2" {
		t.Fatalf("HX-Redirect %q", r.header.Get("HX-Redirect"))
	}
	if n := f.stats(t)["dead"]; n != 0 {
		t.Fatalf("%d dead after retrying all", n)
	}
	d := parseHTML(t, b.get(t, "/dead?done=retried%3A2").want(t, http.StatusOK))
	if htmltest.Text(d.One(t, "notice")) != "2 jobs retried." || len(d.All("empty")) != 1 {
		t.Error("after retrying all")
	}
}
