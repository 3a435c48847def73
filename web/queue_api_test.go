package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// queueJSON is a queue as the API shows it.
type queueJSON struct {
	Name        string  `json:"name"`
	Paused      bool    `json:"paused"`
	PausedBy    *string `json:"paused_by"`
	PausedAt    *string `json:"paused_at"`
	MaxRunning  *int32  `json:"max_running"`
	Pending     int64   `json:"pending"`
	PendingOver bool    `json:"pending_over"`
	Running     int64   `json:"running"`
}

func (f *fixture) patchQueue(t *testing.T, name, body string) queueJSON {
	t.Helper()
	var q queueJSON
	f.do(t, call{method: http.MethodPatch, path: "/api/v1/queues/" + name, body: body}).want(t, http.StatusOK).decode(t, &q)
	return q
}

func (f *fixture) queues(t *testing.T) map[string]queueJSON {
	t.Helper()
	var body struct {
		Queues []queueJSON `json:"queues"`
	}
	f.get(t, "/api/v1/queues").want(t, http.StatusOK).decode(t, &body)
	m := map[string]queueJSON{}
	for _, q := range body.Queues {
		m[q.Name] = q
	}
	return m
}

func TestQueuesAPIPatchSemantics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.submit(t, `{"kind":"noop","queue":"busy"}`)
	f.submit(t, `{"kind":"noop","queue":"busy"}`)
	if _, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w", Queues: []string{"busy"}, Limit: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	qs := f.queues(t)
	if len(qs) != 1 || qs["busy"].Pending != 1 || qs["busy"].Running != 1 || qs["busy"].Paused || qs["busy"].MaxRunning != nil {
		t.Fatalf("queues with jobs only: %+v", qs)
	}

	// A queue with no jobs gets settings, and is listed from then on.
	q := f.patchQueue(t, "later", `{"max_running":3}`)
	if q.Name != "later" || q.Paused || q.MaxRunning == nil || *q.MaxRunning != 3 || q.Pending != 0 {
		t.Fatalf("created: %+v", q)
	}
	if _, ok := f.queues(t)["later"]; !ok {
		t.Fatal("a queue with settings and no jobs is not listed")
	}
	// Absent fields stay; pausing records the token's name and the time.
	q = f.patchQueue(t, "later", `{"paused":true}`)
	if !q.Paused || q.MaxRunning == nil || *q.MaxRunning != 3 || q.PausedBy == nil || *q.PausedBy != "token:admin" || q.PausedAt == nil {
		t.Fatalf("paused: %+v", q)
	}
	q = f.patchQueue(t, "later", `{}`)
	if !q.Paused || *q.MaxRunning != 3 {
		t.Fatalf("an empty patch changed something: %+v", q)
	}
	// null clears the cap and leaves the pause.
	q = f.patchQueue(t, "later", `{"max_running":null}`)
	if !q.Paused || q.MaxRunning != nil {
		t.Fatalf("cleared: %+v", q)
	}
	// Resume keeps who paused last.
	q = f.patchQueue(t, "later", `{"paused":false,"max_running":0}`)
	if q.Paused || q.PausedBy == nil || q.MaxRunning == nil || *q.MaxRunning != 0 {
		t.Fatalf("resumed: %+v", q)
	}
	if got := f.queues(t)["busy"]; got.Pending != 1 || got.Running != 1 {
		t.Fatalf("busy changed: %+v", got)
	}
}

func TestQueuesAPIHostileInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct {
		name, path, body string
		header           map[string]string
		status           int
		field            string
	}{
		{name: "NameUpper", path: "Default", body: `{"paused":true}`, field: "name"},
		{name: "NameTooLong", path: strings.Repeat("a", 65), body: `{"paused":true}`, field: "name"},
		{name: "NameSpace", path: "a%20b", body: `{"paused":true}`, field: "name"},
		{name: "NameDots", path: "..%2F..", body: `{"paused":true}`, field: "name"},
		{name: "NameNUL", path: "a%00", body: `{"paused":true}`, field: "name"},
		{name: "Malformed", path: "q", body: `{"paused":true,}`},
		{name: "Empty", path: "q", body: ``},
		{name: "Array", path: "q", body: `[]`},
		{name: "Null", path: "q", body: `null`},
		{name: "UnknownField", path: "q", body: `{"pause":true}`, field: "pause"},
		{name: "PausedString", path: "q", body: `{"paused":"yes"}`, field: "paused"},
		{name: "PausedNull", path: "q", body: `{"paused":null}`, field: "paused"},
		{name: "PausedNumber", path: "q", body: `{"paused":1}`, field: "paused"},
		{name: "CapNegative", path: "q", body: `{"max_running":-1}`, field: "max_running"},
		{name: "CapFraction", path: "q", body: `{"max_running":1.5}`, field: "max_running"},
		{name: "CapString", path: "q", body: `{"max_running":"2"}`, field: "max_running"},
		{name: "CapHuge", path: "q", body: `{"max_running":99999999999}`, field: "max_running"},
		{name: "CapTooBig", path: "q", body: `{"max_running":1000001}`, field: "max_running"},
		{name: "CapObject", path: "q", body: `{"max_running":{}}`, field: "max_running"},
		{name: "Trailing", path: "q", body: `{"paused":true} {}`},
		{name: "Oversized", path: "q", body: `{"paused":true,"x":"` + strings.Repeat("a", 8<<10) + `"}`, status: http.StatusRequestEntityTooLarge},
		{name: "NotJSON", path: "q", body: `paused=true`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, call{method: http.MethodPatch, path: "/api/v1/queues/" + tc.path, body: tc.body, header: tc.header})
			want := tc.status
			if want == 0 {
				want = http.StatusBadRequest
			}
			r.want(t, want)
			var e struct {
				Error string `json:"error"`
				Field string `json:"field"`
			}
			if json.Unmarshal(r.body, &e) != nil || e.Error == "" {
				t.Fatalf("no JSON error: %s", r.body)
			}
			if tc.field != "" && e.Field != tc.field {
				t.Fatalf("field %q (%s), want %q", e.Field, e.Error, tc.field)
			}
		})
	}
	if qs := f.queues(t); len(qs) != 0 {
		t.Fatalf("refused patches left settings: %+v", qs)
	}
	// Only admin tokens.
	f.do(t, call{method: http.MethodPatch, path: "/api/v1/queues/q", body: `{"paused":true}`, token: f.worker}).want(t, http.StatusForbidden)
	f.do(t, call{method: http.MethodGet, path: "/api/v1/queues", token: "-"}).want(t, http.StatusUnauthorized)
}

func TestJobAPIConcurrencyFields(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var j struct {
		ConcurrencyKey   *string `json:"concurrency_key"`
		ConcurrencyLimit int32   `json:"concurrency_limit"`
	}
	f.post(t, "/api/v1/jobs", `{"kind":"noop","concurrency_key":"phone:R58M","concurrency_limit":2}`).want(t, http.StatusCreated).decode(t, &j)
	if j.ConcurrencyKey == nil || *j.ConcurrencyKey != "phone:R58M" || j.ConcurrencyLimit != 2 {
		t.Fatalf("job: %+v", j)
	}
	f.post(t, "/api/v1/jobs", `{"kind":"noop"}`).want(t, http.StatusCreated).decode(t, &j)
	if j.ConcurrencyKey != nil || j.ConcurrencyLimit != 1 {
		t.Fatalf("defaults: %+v", j)
	}
	var batch struct {
		Jobs []struct {
			ConcurrencyKey *string `json:"concurrency_key"`
		} `json:"jobs"`
	}
	f.post(t, "/api/v1/jobs/batch", `{"jobs":[{"kind":"noop","concurrency_key":"a"},{"kind":"noop"}]}`).want(t, http.StatusCreated).decode(t, &batch)
	if len(batch.Jobs) != 2 || batch.Jobs[0].ConcurrencyKey == nil || *batch.Jobs[0].ConcurrencyKey != "a" || batch.Jobs[1].ConcurrencyKey != nil {
		t.Fatalf("batch: %+v", batch)
	}
	before := f.totalJobs(t)
	for _, tc := range []struct{ body, field string }{
		{`{"kind":"noop","concurrency_key":"` + strings.Repeat("é", 201) + `"}`, "concurrency_key"},
		{`{"kind":"noop","concurrency_key":"a\u0000b"}`, "concurrency_key"},
		{`{"kind":"noop","concurrency_key":"line\nbreak"}`, "concurrency_key"},
		{`{"kind":"noop","concurrency_key":5}`, "concurrency_key"},
		{`{"kind":"noop","concurrency_key":"k","concurrency_limit":0}`, "concurrency_limit"},
		{`{"kind":"noop","concurrency_limit":-3}`, "concurrency_limit"},
		{`{"kind":"noop","concurrency_limit":"2"}`, "concurrency_limit"},
		{`{"kind":"noop","concurrency_limit":2.5}`, "concurrency_limit"},
	} {
		r := f.post(t, "/api/v1/jobs", tc.body).want(t, http.StatusBadRequest)
		if got := r.json(t)["field"]; got != tc.field {
			t.Errorf("%s: field %v, want %s", tc.body, got, tc.field)
		}
	}
	r := f.post(t, "/api/v1/jobs/batch", `{"jobs":[{"kind":"noop"},{"kind":"noop","concurrency_limit":0}]}`).want(t, http.StatusBadRequest)
	if got := r.json(t)["field"]; got != "jobs[1].concurrency_limit" {
		t.Errorf("batch field %v", got)
	}
	// 200 characters exactly is fine.
	f.post(t, "/api/v1/jobs", fmt.Sprintf(`{"kind":"noop","concurrency_key":%q}`, strings.Repeat("é", 200))).want(t, http.StatusCreated)
	if after := f.totalJobs(t); after != before+1 {
		t.Fatalf("refused jobs were created: %d → %d", before, after)
	}
}
