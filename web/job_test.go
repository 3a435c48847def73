package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// rfc3339Sub is RFC 3339 with a fractional second, as SPEC requires.
var rfc3339Sub = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{1,9}(Z|[+-]\d\d:\d\d)$`)

func assertTime(t *testing.T, name string, v any) {
	t.Helper()
	s, ok := v.(string)
	if !ok || !rfc3339Sub.MatchString(s) {
		t.Errorf("%s = %#v, want an RFC 3339 time with sub-second precision", name, v)
		return
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		t.Errorf("%s = %q: %v", name, s, err)
	}
}

func assertNumber(t *testing.T, name string, v any) {
	t.Helper()
	if _, ok := v.(float64); !ok {
		t.Errorf("%s = %#v (%T), want a JSON number", name, v, v)
	}
}

func TestJobList(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var ids []int64
	for i := range 5 {
		kind, q := "even", "q0"
		if i%2 == 1 {
			kind, q = "odd", "q1"
		}
		ids = append(ids, f.submit(t, fmt.Sprintf(`{"kind":%q,"queue":%q}`, kind, q)).ID)
	}
	app := f.submit(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes"}}`)
	ids = append(ids, app.ID)
	f.post(t, fmt.Sprintf("/api/v1/jobs/%d/cancel", ids[0]), nil).want(t, http.StatusOK)
	slices.Reverse(ids) // newest first

	var got []int64
	path := "/api/v1/jobs?limit=4"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("pagination does not end")
		}
		res := f.get(t, path).want(t, http.StatusOK)
		raw := res.json(t)
		if _, ok := raw["next_cursor"]; !ok {
			t.Fatalf("no next_cursor in %s", res.body)
		}
		var page struct {
			Jobs       []jobJSON
			NextCursor *int64 `json:"next_cursor"`
		}
		res.decode(t, &page)
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if page.NextCursor == nil {
			break
		}
		path = fmt.Sprintf("/api/v1/jobs?limit=4&cursor=%d", *page.NextCursor)
	}
	if !slices.Equal(got, ids) {
		t.Errorf("pages gave %v, want %v", got, ids)
	}

	list := func(query string) []int64 {
		t.Helper()
		var page struct{ Jobs []jobJSON }
		f.get(t, "/api/v1/jobs?"+query).want(t, http.StatusOK).decode(t, &page)
		var out []int64
		for _, j := range page.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	for query, want := range map[string][]int64{
		"kind=odd":                   {ids[2], ids[4]},
		"queue=q0&state=pending":     {ids[1], ids[3]},
		"state=cancelled":            {ids[5]},
		"app=com.example.notes":      {app.ID},
		"kind=nothing":               nil,
		"kind=even&queue=q0&limit=1": {ids[1]},
	} {
		if got := list(query); !slices.Equal(got, want) {
			t.Errorf("?%s gave %v, want %v", query, got, want)
		}
	}
	for query, field := range map[string]string{
		"state=finished": "state", "limit=501": "limit", "limit=0": "limit", "limit=ten": "limit",
		"cursor=-5": "cursor", "cursor=x": "cursor", "kind=%00": "kind", "app=%ff": "app",
	} {
		res := f.get(t, "/api/v1/jobs?"+query).want(t, http.StatusBadRequest)
		if e := res.json(t); e["field"] != field {
			t.Errorf("?%s: body %s, want field %q", query, res.body, field)
		}
	}
}

func TestJobGet(t *testing.T) {
	t.Parallel()
	f := setup(t)
	j := f.submit(t, `{"kind":"noop","payload":{"x":1}}`)
	jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"default"}, Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claiming: %v %v", jobs, err)
	}
	if _, err := f.queue.Heartbeat(f.ctx, queue.Lease{JobID: j.ID, Token: jobs[0].LeaseToken, WorkerID: "w1"}); err != nil {
		t.Fatal(err)
	}

	res := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", j.ID)).want(t, http.StatusOK)
	d := res.json(t)
	if d["state"] != "running" || d["lease_owner"] != "w1" {
		t.Errorf("job = %s", res.body)
	}
	assertNumber(t, "lease_token", d["lease_token"])
	assertTime(t, "lease_until", d["lease_until"])
	for _, name := range []string{"artifacts", "effects"} {
		if l, ok := d[name].([]any); !ok || len(l) != 0 {
			t.Errorf("%s = %#v, want []", name, d[name])
		}
	}
	attempts, _ := d["attempts"].([]any)
	if len(attempts) != 1 {
		t.Fatalf("attempts = %#v", d["attempts"])
	}
	a := attempts[0].(map[string]any)
	for _, name := range []string{"number", "worker_id", "lease_token", "started_at", "heartbeat_at", "lease_until", "ended_at", "outcome", "error"} {
		if _, ok := a[name]; !ok {
			t.Errorf("attempt has no %q", name)
		}
	}
	assertNumber(t, "attempts[0].lease_token", a["lease_token"])
	assertTime(t, "attempts[0].started_at", a["started_at"])
	assertTime(t, "attempts[0].heartbeat_at", a["heartbeat_at"])
	if a["number"] != 1.0 || a["worker_id"] != "w1" || a["lease_token"] != d["lease_token"] {
		t.Errorf("attempt = %#v", a)
	}
	events, _ := d["events"].([]any)
	if len(events) == 0 {
		t.Fatalf("no events: %s", res.body)
	}
	e := events[0].(map[string]any)
	for _, name := range []string{"at", "type", "attempt", "detail"} {
		if _, ok := e[name]; !ok {
			t.Errorf("event has no %q", name)
		}
	}
	assertTime(t, "events[0].at", e["at"])

	f.get(t, "/api/v1/jobs/987654").want(t, http.StatusNotFound)
}

func TestJobRetryCancel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	action := func(id int64, verb string, status int) jobJSON {
		t.Helper()
		var j jobJSON
		res := f.post(t, fmt.Sprintf("/api/v1/jobs/%d/%s", id, verb), nil).want(t, status)
		if status == http.StatusOK {
			res.decode(t, &j)
		} else if e := res.json(t); e["error"] == "" {
			t.Errorf("error body = %s", res.body)
		}
		return j
	}

	p := f.submit(t, `{"kind":"noop"}`)
	if j := action(p.ID, "cancel", 200); j.State != "cancelled" {
		t.Errorf("cancelled job is %s", j.State)
	}
	action(p.ID, "cancel", 409)
	if j := action(p.ID, "retry", 200); j.State != "pending" {
		t.Errorf("retried job is %s", j.State)
	}
	action(p.ID, "retry", 409)
	action(999999, "retry", 404)
	action(999999, "cancel", 404)

	dead := f.deadJob(t, "doomed")
	if j := action(dead.ID, "retry", 200); j.State != "pending" {
		t.Errorf("retried dead job is %s", j.State)
	}
	detail := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", dead.ID)).want(t, http.StatusOK)
	if !strings.Contains(string(detail.body), `"by":"token:admin"`) {
		t.Errorf("retry does not record its actor: %s", detail.body)
	}

	running := f.submit(t, `{"kind":"noop","queue":"slow"}`)
	if _, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"slow"}, Limit: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if j := action(running.ID, "cancel", 200); j.State != "running" || !j.CancelRequested {
		t.Errorf("cancelling a running job gave %+v, want running with cancel_requested", j)
	}
}

func TestJobBulk(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var ids []int64
	for range 3 {
		ids = append(ids, f.submit(t, `{"kind":"bulk","queue":"bulk"}`).ID)
	}
	other := f.submit(t, `{"kind":"other"}`)

	type bulk struct {
		Count int
		IDs   []int64
		Jobs  []jobJSON
	}
	run := func(verb, body string) bulk {
		t.Helper()
		var b bulk
		f.post(t, "/api/v1/jobs/"+verb, body).want(t, http.StatusOK).decode(t, &b)
		if b.Count != len(b.IDs) || len(b.Jobs) != b.Count {
			t.Errorf("%s %s: count %d, ids %v, %d jobs", verb, body, b.Count, b.IDs, len(b.Jobs))
		}
		return b
	}

	b := run("cancel", fmt.Sprintf(`{"ids":[%d,%d,999999]}`, ids[0], ids[1]))
	if !slices.Equal(b.IDs, ids[:2]) || b.Jobs[0].State != "cancelled" {
		t.Errorf("bulk cancel by ids = %+v", b)
	}
	if b := run("cancel", fmt.Sprintf(`{"ids":[%d]}`, ids[0])); b.Count != 0 || b.Jobs == nil {
		t.Errorf("cancelling a cancelled job in bulk = %+v, want count 0 and jobs []", b)
	}
	b = run("retry", `{"state":"cancelled","queue":"bulk"}`)
	if !slices.Equal(b.IDs, ids[:2]) || b.Jobs[1].State != "pending" {
		t.Errorf("bulk retry by filter = %+v", b)
	}
	b = run("cancel", `{"kind":"bulk"}`)
	if !slices.Equal(b.IDs, ids) {
		t.Errorf("bulk cancel by kind = %+v", b)
	}
	if j := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", other.ID)).json(t); j["state"] != "pending" {
		t.Errorf("a job outside the filter changed: %v", j["state"])
	}

	tooMany := `{"ids":[` + strings.Repeat("1,", 10_000) + `1]}`
	for body, field := range map[string]string{
		`{}`:                   "",
		`{"ids":[]}`:           "ids",
		tooMany:                "ids",
		`{"ids":[0]}`:          "ids[0]",
		`{"ids":["1"]}`:        "ids",
		`{"state":"finished"}`: "state",
		`{"app":"x"}`:          "app",
		`{"kind":"a\u0000"}`:   "kind",
	} {
		for _, verb := range []string{"retry", "cancel"} {
			res := f.post(t, "/api/v1/jobs/"+verb, body).want(t, http.StatusBadRequest)
			if e := res.json(t); e["field"] != nilIfEmpty(field) || e["error"] == "" {
				t.Errorf("%s %.40s: body %s, want field %q", verb, body, res.body, field)
			}
		}
	}
}

// nilIfEmpty is how a missing "field" reads after decoding into a map.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func TestStats(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res := f.get(t, "/api/v1/stats").want(t, http.StatusOK)
	var s struct {
		Jobs    map[string]json.Number
		Workers []map[string]any
	}
	res.decode(t, &s)
	for _, st := range queue.States {
		if n, ok := s.Jobs[string(st)]; !ok || n.String() != "0" {
			t.Errorf("jobs.%s = %q (present: %v), want 0", st, n, ok)
		}
	}
	if s.Workers == nil || len(s.Workers) != 0 {
		t.Errorf("workers = %#v, want []", s.Workers)
	}

	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "pixel-worker", Devices: []string{"pixel7"}, Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	f.submit(t, `{"kind":"noop"}`)
	if _, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "pixel-worker", Queues: []string{"default"}, Limit: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.get(t, "/api/v1/stats").want(t, http.StatusOK).decode(t, &s)
	if s.Jobs["running"].String() != "1" || len(s.Workers) != 1 {
		t.Fatalf("stats = %+v", s)
	}
	w := s.Workers[0]
	if w["id"] != "pixel-worker" || w["device"] != "pixel7" || w["running"] != 1.0 {
		t.Errorf("worker = %#v", w)
	}
	assertTime(t, "last_seen", w["last_seen"])
}
