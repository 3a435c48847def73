package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// listsRowIDs are the data-job-id of the elements with data-testid id.
func listsRowIDs(t *testing.T, d htmltest.Doc, id string) []int64 {
	t.Helper()
	var out []int64
	for _, n := range d.All(id) {
		v, err := strconv.ParseInt(htmltest.Attr(n, "data-job-id"), 10, 64)
		if err != nil {
			t.Fatalf("data-job-id %q", htmltest.Attr(n, "data-job-id"))
		}
		out = append(out, v)
	}
	return out
}

// listsInsert submits one job through the queue.
func (f *fixture) listsInsert(t *testing.T, kind, queueName, app string) queue.Job {
	t.Helper()
	payload := `{}`
	if app != "" {
		payload = fmt.Sprintf(`{"app":%q}`, app)
	}
	j, _, err := f.queue.Insert(f.ctx, queue.NewJob{Kind: kind, Queue: queueName, Payload: json.RawMessage(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (f *fixture) listsState(t *testing.T, id int64) queue.State {
	t.Helper()
	j, err := f.queue.Get(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

// listsPoll polls path as htmx does for the element with id target, and
// returns what htmx keeps of the answer (hx-select="#target"). The answer
// must be a whole page: its server-now is what app.js measures relative
// times and countdowns by.
func (b *browser) listsPoll(t *testing.T, path, target string) *html.Node {
	t.Helper()
	req, _ := http.NewRequestWithContext(b.f.ctx, http.MethodGet, b.f.srv.URL+path, nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Target", target)
	r := b.do(t, req).want(t, http.StatusOK)
	if !bytes.Contains(r.body, []byte(`<meta name="server-now" content="`)) {
		t.Fatalf("poll of %s: no server-now in the answer", path)
	}
	if n := htmltest.ByID(parseHTML(t, r).Root, target); n != nil {
		return n
	}
	t.Fatalf("poll of %s: no #%s in the answer", path, target)
	return nil
}

// listsFollow fetches where a 303 points.
func (b *browser) listsFollow(t *testing.T, r *response) (string, *response) {
	t.Helper()
	r.want(t, http.StatusSeeOther)
	loc := r.header.Get("Location")
	return loc, b.get(t, loc).want(t, http.StatusOK)
}

func TestJobsPageFilters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	var reports, notes []int64
	for range 3 {
		reports = append(reports, f.listsInsert(t, "report", "default", "").ID)
	}
	for range 2 {
		notes = append(notes, f.listsInsert(t, "app_investigation", "default", "com.example.notes").ID)
	}
	phone := f.listsInsert(t, "app_investigation", "phones", "com.example.maps").ID
	dead := f.deadJob(t, "doomed").ID
	slices.Reverse(reports)
	slices.Reverse(notes)

	d := parseHTML(t, b.get(t, "/jobs").want(t, http.StatusOK))
	if got := listsRowIDs(t, d, "job-row"); len(got) != 7 || got[0] != dead || !slices.IsSortedFunc(got, func(a, b int64) int { return int(b - a) }) {
		t.Fatalf("all jobs: %v, want 7 newest first", got)
	}
	for query, want := range map[string][]int64{
		"kind=report":                          reports,
		"app=com.example.notes":                notes,
		"queue=phones":                         {phone},
		"state=dead":                           {dead},
		"state=pending&kind=app_investigation": {phone, notes[0], notes[1]},
		"state=running":                        nil,
	} {
		d := parseHTML(t, b.get(t, "/jobs?"+query).want(t, http.StatusOK))
		if got := listsRowIDs(t, d, "job-row"); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", query, got, want)
		}
	}
	// A row shows what the list promises.
	d = parseHTML(t, b.get(t, "/jobs?queue=phones").want(t, http.StatusOK))
	row := d.One(t, "job-row")
	for _, want := range []string{"com.example.maps", "app_investigation", "pending", "0/5"} {
		if !strings.Contains(htmltest.Text(row), want) {
			t.Errorf("row %q lacks %q", htmltest.Text(row), want)
		}
	}
	d = parseHTML(t, b.get(t, "/jobs?state=dead").want(t, http.StatusOK))
	if row := d.One(t, "job-row"); !strings.Contains(htmltest.Text(row), "boom") || !strings.Contains(htmltest.Text(row), "w1") {
		t.Errorf("dead row %q lacks its error or worker", htmltest.Text(row))
	}
	// Empty states say what to do.
	d = parseHTML(t, b.get(t, "/jobs?state=running").want(t, http.StatusOK))
	if !strings.Contains(htmltest.Text(d.One(t, "empty")), "Nothing is running") {
		t.Error("empty state for running")
	}
}

func TestJobsPageEmpty(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/jobs").want(t, http.StatusOK))
	if !strings.Contains(htmltest.Text(d.One(t, "empty")), "No jobs yet — submit an investigation") {
		t.Error("no-jobs state")
	}
	d = parseHTML(t, b.get(t, "/jobs?state=dead").want(t, http.StatusOK))
	if !strings.Contains(htmltest.Text(d.One(t, "empty")), "No dead jobs. Good.") {
		t.Error("no-dead state")
	}
}

func TestJobsPagePaginates(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	batch := make([]queue.NewJob, 130)
	for i := range batch {
		batch[i] = queue.NewJob{Kind: []string{"a", "b"}[i%2], Payload: json.RawMessage(`{}`)}
	}
	jobs, err := f.queue.InsertMany(f.ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, j := range slices.Backward(jobs) {
		if j.Kind == "a" {
			want = append(want, j.ID)
		}
	}

	var seen []int64
	path := "/jobs?kind=a"
	for page := 1; ; page++ {
		d := parseHTML(t, b.get(t, path).want(t, http.StatusOK))
		seen = append(seen, listsRowIDs(t, d, "job-row")...)
		live := d.One(t, "jobs-live")
		if polls := htmltest.Attr(live, "hx-get") != ""; polls != (page == 1) {
			t.Errorf("page %d polls: %v (only the newest page refreshes)", page, polls)
		}
		if page > 1 && htmltest.Attr(d.One(t, "newest-link"), "href") != "/jobs?kind=a" {
			t.Errorf("page %d: no way back to the newest", page)
		}
		older := d.All("older-link")
		if len(older) == 0 {
			break
		}
		path = htmltest.Attr(older[0], "href")
		u, _ := url.Parse(path)
		if u.Query().Get("kind") != "a" || u.Query().Get("cursor") != strconv.FormatInt(seen[len(seen)-1], 10) {
			t.Fatalf("older link %q lost the filter or cursor", path)
		}
		if page > 5 {
			t.Fatal("pages do not end")
		}
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("pages gave %d jobs, want %d in order", len(seen), len(want))
	}
}

func TestJobsPageLiveRefresh(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	f.listsInsert(t, "report", "default", "")
	d := parseHTML(t, b.get(t, "/jobs?kind=report").want(t, http.StatusOK))
	live := d.One(t, "jobs-live")
	if htmltest.Attr(live, "hx-get") != "/jobs?kind=report" || htmltest.Attr(live, "hx-select") != "#jobs-live" {
		t.Fatalf("live region %v", live.Attr)
	}
	// A job arrives; the next poll shows it.
	j := f.listsInsert(t, "report", "default", "")
	region := b.listsPoll(t, htmltest.Attr(live, "hx-get"), "jobs-live")
	if rows := htmltest.ByTestID(region, "job-row"); len(rows) != 2 || htmltest.Attr(rows[0], "data-job-id") != itoa(j.ID) {
		t.Fatalf("polled region has %d rows", len(rows))
	}
}

func TestJobsPageBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	f.listsInsert(t, "report", "default", "")
	for _, tc := range []struct{ query, want string }{
		{"state=bogus", `no state "bogus"`},
		{"state=RUNNING", `no state "RUNNING"`},
		{"cursor=-1", "cursor must be a job id"},
		{"cursor=abc", "cursor must be a job id"},
		{"cursor=99999999999999999999", "cursor must be a job id"},
		{"queue=a%00b", "printable"},
		{"kind=%c3%28", "printable"},
		{"app=" + strings.Repeat("x", 300), "printable"},
	} {
		r := b.get(t, "/jobs?"+tc.query)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", tc.query, r.status)
			continue
		}
		d := parseHTML(t, r)
		if !strings.Contains(htmltest.Text(d.Root), tc.want) {
			t.Errorf("%s: page does not say %q", tc.query, tc.want)
		}
		if len(d.All("job-row")) != 0 {
			t.Errorf("%s: a refused query still lists jobs", tc.query)
		}
	}
}

func TestJobsBulkCancelAndRetry(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/jobs")
	p1, p2, p3 := f.listsInsert(t, "report", "default", ""), f.listsInsert(t, "report", "default", ""), f.listsInsert(t, "report", "default", "")
	dead := f.deadJob(t, "doomed")

	r := b.post(t, "/jobs/cancel", url.Values{"ids": {itoa(p1.ID), itoa(p2.ID)}, "from": {"jobs"}, "state": {"pending"}, "kind": {"report"}})
	loc, page := b.listsFollow(t, r)
	u, _ := url.Parse(loc)
	if u.Path != "/jobs" || u.Query().Get("state") != "pending" || u.Query().Get("kind") != "report" || u.Query().Get("done") != "cancelled:2" {
		t.Fatalf("redirect to %q", loc)
	}
	if n := parseHTML(t, page).One(t, "notice"); htmltest.Text(n) != "2 jobs cancelled." {
		t.Errorf("notice %q", htmltest.Text(n))
	}
	for id, want := range map[int64]queue.State{p1.ID: queue.StateCancelled, p2.ID: queue.StateCancelled, p3.ID: queue.StatePending} {
		if got := f.listsState(t, id); got != want {
			t.Errorf("job %d is %s, want %s", id, got, want)
		}
	}

	// Retry a dead and a pending job: one retried, one skipped.
	r = b.post(t, "/jobs/retry", url.Values{"ids": {itoa(dead.ID), itoa(p3.ID)}, "from": {"jobs"}, "cursor": {"1000"}})
	loc, page = b.listsFollow(t, r)
	if u, _ := url.Parse(loc); u.Query().Get("done") != "retried:1" || u.Query().Get("skipped") != "1" || u.Query().Get("cursor") != "1000" {
		t.Fatalf("redirect to %q", loc)
	}
	if n := parseHTML(t, page).One(t, "notice"); !strings.HasPrefix(htmltest.Text(n), "1 job retried. 1 job skipped") {
		t.Errorf("notice %q", htmltest.Text(n))
	}
	if got := f.listsState(t, dead.ID); got != queue.StatePending {
		t.Fatalf("dead job is %s after retry", got)
	}
	d, _ := f.queue.Detail(f.ctx, dead.ID)
	if e := d.Events[len(d.Events)-1]; e.Type != "retried" || !strings.Contains(string(e.Detail), `"user:alice"`) {
		t.Errorf("last event %s %s, want retried by user:alice", e.Type, e.Detail)
	}

	// A running job is asked to stop.
	running := f.listsInsert(t, "report", "phones", "")
	if _, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-1", Queues: []string{"phones"}, Limit: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, page = b.listsFollow(t, b.post(t, "/jobs/cancel", url.Values{"ids": {itoa(running.ID)}}))
	if n := parseHTML(t, page).One(t, "notice"); htmltest.Text(n) != "1 job cancelled. 1 job still running will stop at the next heartbeat." {
		t.Errorf("notice %q", htmltest.Text(n))
	}
	if j, _ := f.queue.Get(f.ctx, running.ID); !j.CancelRequested {
		t.Error("running job not asked to stop")
	}

	// Nothing selected: back, with a hint.
	loc, page = b.listsFollow(t, b.post(t, "/jobs/cancel", url.Values{"from": {"jobs"}}))
	if loc != "/jobs?done=none" || !strings.Contains(htmltest.Text(parseHTML(t, page).One(t, "notice")), "Select jobs first") {
		t.Errorf("empty selection: %q", loc)
	}
}

func TestJobsBulkRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/jobs")
	p := f.listsInsert(t, "report", "default", "")
	many := make([]string, 501)
	for i := range many {
		many[i] = itoa(p.ID)
	}
	for name, form := range map[string]url.Values{
		"NotANumber": {"ids": {"abc"}},
		"Zero":       {"ids": {"0"}},
		"Negative":   {"ids": {"-3"}},
		"Overflow":   {"ids": {"99999999999999999999"}},
		"TooMany":    {"ids": many},
		"AllBogus":   {"all": {"everything"}},
		"AllAndIDs":  {"all": {"dead"}, "ids": {itoa(p.ID)}},
	} {
		r := b.post(t, "/jobs/cancel", form)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, r.status)
			continue
		}
		if d := parseHTML(t, r); !strings.Contains(htmltest.Attr(d.One(t, "notice"), "class"), "error") || len(d.All("back-link")) != 1 {
			t.Errorf("%s: no notice or way back", name)
		}
	}
	// all=dead is for retry only.
	b.post(t, "/jobs/cancel", url.Values{"all": {"dead"}}).want(t, http.StatusBadRequest)
	if got := f.listsState(t, p.ID); got != queue.StatePending {
		t.Fatalf("job is %s after refused forms", got)
	}
	// A return address is ours, whatever the form says.
	r := b.post(t, "/jobs/retry", url.Values{"ids": {itoa(p.ID)}, "from": {"https://evil.example"}, "state": {"bogus"}, "kind": {"a\x00"}})
	if loc := r.want(t, http.StatusSeeOther).header.Get("Location"); !strings.HasPrefix(loc, "/jobs?") || strings.Contains(loc, "bogus") || strings.Contains(loc, "kind") {
		t.Errorf("redirect to %q", loc)
	}
}

func TestJobsBulkNeedsTheFormToken(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/jobs")
	p := f.listsInsert(t, "report", "default", "")
	dead := f.deadJob(t, "doomed")
	for name, req := range map[string]*http.Request{
		"NoToken":   listsRawPost(t, f, "/jobs/cancel", url.Values{"ids": {itoa(p.ID)}}, f.srv.URL),
		"WrongTok":  listsRawPost(t, f, "/jobs/retry", url.Values{"ids": {itoa(dead.ID)}, "_csrf": {"nope"}}, f.srv.URL),
		"CrossSite": listsRawPost(t, f, "/jobs/retry", url.Values{"all": {"dead"}, "_csrf": {b.csrf}}, "https://evil.example"),
	} {
		if r := b.do(t, req); r.status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, r.status)
		}
	}
	if f.listsState(t, p.ID) != queue.StatePending || f.listsState(t, dead.ID) != queue.StateDead {
		t.Fatal("a forged form changed a job")
	}
}

func listsRawPost(t *testing.T, f *fixture, path string, form url.Values, origin string) *http.Request {
	t.Helper()
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	if origin == f.srv.URL {
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	} else {
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	return req
}

// The WORKER column names the worker running a job, and nobody for a
// pending one, although lease_owner still names its last holder; a
// finished job keeps the worker it last ran on.
func TestJobsPageWorkerOnlyWhileRunning(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	released := f.listsInsert(t, "report", "wcol", "")
	failed := f.listsInsert(t, "report", "wcol", "")
	running := f.listsInsert(t, "report", "wcol", "")
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "phone-old", Queues: []string{"wcol"}, Limit: 3, Lease: time.Minute})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %v, %d jobs", err, len(jobs))
	}
	lease := map[int64]queue.Lease{}
	for _, j := range jobs {
		lease[j.ID] = queue.Lease{JobID: j.ID, Token: j.LeaseToken, WorkerID: "phone-old"}
	}
	if _, err := f.queue.Release(f.ctx, lease[released.ID]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.queue.Fail(f.ctx, lease[failed.ID], "try again", true); err != nil {
		t.Fatal(err)
	}
	dead := f.deadJob(t, "doomed").ID
	for _, id := range []int64{released.ID, failed.ID, dead} {
		if j, err := f.queue.Get(f.ctx, id); err != nil || j.LeaseOwner == nil || j.State == queue.StateRunning {
			t.Fatalf("job %d: %v %+v: the test needs a job that is not running and still has a lease owner", id, err, j)
		}
	}

	d := parseHTML(t, b.get(t, "/jobs").want(t, http.StatusOK))
	workers := map[string]string{}
	for _, row := range d.All("job-row") {
		workers[htmltest.Attr(row, "data-job-id")] = htmltest.Text(htmltest.ByTestID(row, "job-worker")[0])
	}
	want := map[int64]string{released.ID: "—", failed.ID: "—", dead: "w1", running.ID: "phone-old"}
	for id, w := range want {
		if got := workers[strconv.FormatInt(id, 10)]; got != w {
			t.Errorf("job %d: worker %q, want %q", id, got, w)
		}
	}
}
