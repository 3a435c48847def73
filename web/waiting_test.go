package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// waitingJSON is the waiting object of GET /api/v1/jobs/{id}.
type waitingJSON struct {
	Kind           string   `json:"kind"`
	Queue          string   `json:"queue"`
	PausedBy       *string  `json:"paused_by"`
	PausedAt       *string  `json:"paused_at"`
	Running        *int64   `json:"running"`
	Limit          *int64   `json:"limit"`
	ConcurrencyKey *string  `json:"concurrency_key"`
	HeldBy         *int64   `json:"held_by"`
	Until          *string  `json:"until"`
	Device         *string  `json:"device"`
	DevicesOnline  *int64   `json:"devices_online"`
	Unfit          []string `json:"unfit"`
	Window         *string  `json:"window"`
	WindowOf       *string  `json:"window_of"`
}

// waitFixture is a server whose jobs go to queue "phones", and a signed-in
// browser.
type waitFixture struct {
	*fixture
	b *browser
}

func (f waitFixture) seen(t *testing.T, id string, devices []string, unfit string) {
	t.Helper()
	p := queue.Presence{ID: id, Queues: []string{"phones"}, Devices: devices}
	if unfit != "" {
		p.Device = &queue.DeviceReport{Claiming: false, Reason: unfit}
	}
	if err := f.queue.WorkerSeen(f.ctx, p); err != nil {
		t.Fatal(err)
	}
}

// claim takes n jobs of "phones" for worker w1, as many calls as a
// limited claim needs.
func (f waitFixture) claim(t *testing.T, n int) []queue.Job {
	t.Helper()
	var got []queue.Job
	for range 5 {
		jobs, err := f.queue.Claim(f.ctx, queue.ClaimParams{WorkerID: "w1", Queues: []string{"phones"}, Limit: n - len(got), Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, jobs...); len(got) == n {
			return got
		}
	}
	t.Fatalf("claimed %d, want %d", len(got), n)
	return nil
}

// detail is GET /api/v1/jobs/{id}'s waiting object (checked against
// web/openapi.json by f.do), and whether it is not null.
func (f waitFixture) detail(t *testing.T, id int64) (waitingJSON, bool) {
	t.Helper()
	var d struct {
		State   string       `json:"state"`
		Waiting *waitingJSON `json:"waiting"`
	}
	f.get(t, fmt.Sprintf("/api/v1/jobs/%d", id)).want(t, http.StatusOK).decode(t, &d)
	if d.Waiting == nil {
		return waitingJSON{}, false
	}
	if d.State != "pending" {
		t.Errorf("a %s job has a waiting object: %+v", d.State, *d.Waiting)
	}
	return *d.Waiting, true
}

// page is the job page's reason: its kind and sentence ("" without one).
func (f waitFixture) page(t *testing.T, id int64) (kind, sentence string) {
	t.Helper()
	d := parseHTML(t, f.b.get(t, fmt.Sprintf("/jobs/%d", id)).want(t, http.StatusOK))
	switch n := d.All("job-waiting"); len(n) {
	case 0:
		return "", ""
	case 1:
		return htmltest.Attr(n[0], "data-kind"), htmltest.Text(n[0])
	default:
		t.Fatalf("the job page says why it waits %d times", len(n))
	}
	return "", ""
}

// badge is the jobs list's badge for job id ("" without one).
func (f waitFixture) badge(t *testing.T, id int64) (kind, text string) {
	t.Helper()
	d := parseHTML(t, f.b.get(t, "/jobs").want(t, http.StatusOK))
	rows := htmltest.Find(d.Root, func(n *html.Node) bool {
		return htmltest.Attr(n, "data-testid") == "job-row" && htmltest.Attr(n, "data-job-id") == strconv.FormatInt(id, 10)
	})
	if len(rows) != 1 {
		t.Fatalf("%d rows for job %d on the jobs list", len(rows), id)
	}
	if n := htmltest.ByTestID(rows[0], "job-waiting"); len(n) == 1 {
		return htmltest.Attr(n[0], "data-kind"), htmltest.Text(n[0])
	}
	return "", ""
}

// clock is how the pages write a time of today (UTC), and of another day.
func clock(at time.Time, long bool) string {
	at = at.UTC()
	today := at.YearDay() == time.Now().UTC().YearDay()
	switch {
	case today && long:
		return at.Format("15:04:05 MST")
	case today:
		return at.Format("15:04")
	case long:
		return at.Format("2006-01-02 15:04 MST")
	}
	return at.Format("Jan 2 15:04")
}

// TestWhyWaitingThroughAPIAndPages builds each reason a pending job can
// wait for and reads it where people and scripts do: GET
// /api/v1/jobs/{id} (its typed waiting object), the job page's sentence
// and the jobs list's badge.
func TestWhyWaitingThroughAPIAndPages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// build makes the situation and returns the waiting job.
		build func(t *testing.T, f waitFixture) int64
		kind  queue.WaitKind
		// check looks at the API's fields; sentence and badge are what the
		// pages say (badge "" for none).
		check func(t *testing.T, f waitFixture, id int64, w waitingJSON) (sentence, badge string)
	}{
		{
			name: "QueuePaused", kind: queue.WaitQueuePaused,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "w1", nil, "")
				id := f.submit(t, `{"kind":"noop","queue":"phones"}`).ID
				f.b.get(t, "/queues").want(t, http.StatusOK)
				f.b.post(t, "/queues/phones/pause", url.Values{}).want(t, http.StatusSeeOther)
				return id
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				if w.PausedBy == nil || *w.PausedBy != "user:alice" || w.PausedAt == nil {
					t.Fatalf("paused by %v at %v, want user:alice at a time", w.PausedBy, w.PausedAt)
				}
				at, err := time.Parse(time.RFC3339Nano, *w.PausedAt)
				if err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
					t.Errorf("paused_at %q: %v", *w.PausedAt, err)
				}
				return "Queue phones is paused (by alice, since " + clock(at, true) + "): nothing in it starts until it is resumed on the Queues page.", "paused"
			},
		},
		{
			name: "NoWorkerForQueue", kind: queue.WaitNoWorker,
			build: func(t *testing.T, f waitFixture) int64 {
				if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "elsewhere", Queues: []string{"default"}}); err != nil {
					t.Fatal(err)
				}
				return f.submit(t, `{"kind":"noop","queue":"phones"}`).ID
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				return "No worker takes queue phones: none that does has reported in the last 30 s. Start one with --queues phones.", "no worker"
			},
		},
		{
			name: "NoMatchingDevice", kind: queue.WaitNoDevice,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "moto", []string{"moto-g"}, "")
				return f.submit(t, `{"kind":"app_investigation","queue":"phones","payload":{"app":"com.example.notes","device":"pixel7"}}`).ID
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				if w.Device == nil || *w.Device != "pixel7" {
					t.Errorf("device %v, want pixel7", w.Device)
				}
				return "waiting for pixel7: no such phone online", "no phone"
			},
		},
		{
			name: "DevicesUnfit", kind: queue.WaitDevicesUnfit,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "phone-a", []string{"pixel7"}, "adb offline")
				f.seen(t, "phone-b", []string{"pixel7"}, "battery 4% (under 15%) and not charging")
				return f.submit(t, `{"kind":"app_investigation","queue":"phones","payload":{"app":"com.example.notes","device":"pixel7"}}`).ID
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				if w.DevicesOnline == nil || *w.DevicesOnline != 2 || len(w.Unfit) != 2 || w.Unfit[0] != "phone-a: adb offline" {
					t.Errorf("devices_online %v unfit %q, want 2 with phone-a first", w.DevicesOnline, w.Unfit)
				}
				return "waiting for pixel7: all 2 such phones online are not claiming (phone-a: adb offline; phone-b: battery 4% (under 15%) and not charging)", "phone unfit"
			},
		},
		{
			name: "Backoff", kind: queue.WaitBackoff,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "w1", nil, "")
				id := f.submit(t, `{"kind":"noop","queue":"phones","backoff_base_ms":3600000,"backoff_max_ms":3600000}`).ID
				j := f.claim(t, 1)[0]
				if _, err := f.queue.Fail(f.ctx, queue.Lease{JobID: id, Token: j.LeaseToken, WorkerID: "w1"}, "boom", true); err != nil {
					t.Fatal(err)
				}
				return id
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				if w.Until == nil {
					t.Fatal("no until")
				}
				until, err := time.Parse(time.RFC3339Nano, *w.Until)
				// The backoff's jitter is ×0.8 to ×1.2, capped at the 1 h
				// maximum: due 48 to 60 minutes after the failure.
				if err != nil || time.Until(until) < 47*time.Minute || time.Until(until) > time.Hour {
					t.Fatalf("until %q (%v), want 48 to 60 minutes away", *w.Until, err)
				}
				return "Waiting to retry after a failed attempt: due at " + clock(until, true) + ".", "backoff until " + clock(until, false)
			},
		},
		{
			name: "Scheduled", kind: queue.WaitScheduled,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "w1", nil, "")
				return f.submit(t, `{"kind":"noop","queue":"phones","run_at":"2040-01-02T03:04:05Z"}`).ID
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				if w.Until == nil || !strings.HasPrefix(*w.Until, "2040-01-02T03:04:05") {
					t.Errorf("until %v, want 2040-01-02T03:04:05Z", w.Until)
				}
				return "Scheduled: due at 2040-01-02 03:04 UTC.", "due Jan 2 03:04"
			},
		},
		{
			name: "QueueAtCap", kind: queue.WaitQueueAtCap,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "w1", nil, "")
				f.do(t, call{method: http.MethodPatch, path: "/api/v1/queues/phones", body: `{"max_running":1}`}).want(t, http.StatusOK)
				f.submit(t, `{"kind":"noop","queue":"phones"}`)
				f.claim(t, 1)
				return f.submit(t, `{"kind":"noop","queue":"phones"}`).ID
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				if w.Running == nil || *w.Running != 1 || w.Limit == nil || *w.Limit != 1 {
					t.Errorf("running %v of %v, want 1 of 1", w.Running, w.Limit)
				}
				return "Queue phones is at its cap: 1 of 1 running. This job starts when one of them ends.", "at cap 1/1"
			},
		},
		{
			name: "ConcurrencyKeyHeld", kind: queue.WaitKeyHeld,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "w1", nil, "")
				f.submit(t, `{"kind":"noop","queue":"phones","concurrency_key":"acct-7"}`)
				f.claim(t, 1)
				return f.submit(t, `{"kind":"noop","queue":"phones","concurrency_key":"acct-7"}`).ID
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				holder := id - 1
				if w.ConcurrencyKey == nil || *w.ConcurrencyKey != "acct-7" || w.HeldBy == nil || *w.HeldBy != holder ||
					w.Running == nil || *w.Running != 1 || w.Limit == nil || *w.Limit != 1 {
					t.Errorf("key %v held by %v, %v of %v; want acct-7 by %d, 1 of 1", w.ConcurrencyKey, w.HeldBy, w.Running, w.Limit, holder)
				}
				return fmt.Sprintf("Concurrency key acct-7 is held by job #%d (1 of 1 running). This job starts when one of them ends.", holder),
					fmt.Sprintf("key held by #%d", holder)
			},
		},
		{
			name: "Ready", kind: queue.WaitReady,
			build: func(t *testing.T, f waitFixture) int64 {
				f.seen(t, "w1", nil, "")
				return f.submit(t, `{"kind":"noop","queue":"phones"}`).ID
			},
			check: func(t *testing.T, f waitFixture, id int64, w waitingJSON) (string, string) {
				return "Due now: a worker of queue phones picks it up at its next claim.", ""
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := setup(t)
			f := waitFixture{fixture: base, b: base.signIn(t, "alice")}
			id := tc.build(t, f)
			w, ok := f.detail(t, id)
			if !ok {
				t.Fatal("GET /api/v1/jobs/{id}: waiting is null for a pending job")
			}
			if w.Kind != string(tc.kind) || w.Queue != "phones" {
				t.Fatalf("waiting %+v, want kind %s in queue phones", w, tc.kind)
			}
			sentence, badge := tc.check(t, f, id, w)
			if kind, got := f.page(t, id); kind != string(tc.kind) || got != sentence {
				t.Errorf("job page: %s %q\nwant %s %q", kind, got, tc.kind, sentence)
			}
			wantKind := string(tc.kind)
			if badge == "" {
				wantKind = ""
			}
			if kind, got := f.badge(t, id); kind != wantKind || got != badge {
				t.Errorf("jobs list: %s %q, want %s %q", kind, got, wantKind, badge)
			}
		})
	}
}

// TestWhyWaitingNotPending: a running or finished job has no reason, in
// the API (null), on its page and in the list.
func TestWhyWaitingNotPending(t *testing.T) {
	t.Parallel()
	base := setup(t)
	f := waitFixture{fixture: base, b: base.signIn(t, "alice")}
	f.seen(t, "w1", nil, "")
	running := f.submit(t, `{"kind":"noop","queue":"phones"}`).ID
	f.claim(t, 1)
	dead := f.deadJob(t, "noop").ID
	for _, id := range []int64{running, dead} {
		if w, ok := f.detail(t, id); ok {
			t.Errorf("job %d: waiting %+v, want null", id, w)
		}
		if kind, got := f.page(t, id); kind != "" || got != "" {
			t.Errorf("job %d page: %s %q", id, kind, got)
		}
		if kind, got := f.badge(t, id); kind != "" || got != "" {
			t.Errorf("job %d badge: %s %q", id, kind, got)
		}
	}
	var raw map[string]any
	f.get(t, fmt.Sprintf("/api/v1/jobs/%d", running)).want(t, http.StatusOK).decode(t, &raw)
	if v, ok := raw["waiting"]; !ok || v != nil {
		t.Errorf("waiting = %v (present %v), want null", v, ok)
	}
}

// TestWhyWaitingOutsideWindowThroughAPIAndPages: a window set through
// the API holds pixel7's job back; the API says until when and whose
// window, the job page "pixel7 is available again at HH:MM (in 3 h 10
// min; …)", the list "window opens HH:MM".
func TestWhyWaitingOutsideWindowThroughAPIAndPages(t *testing.T) {
	t.Parallel()
	base := setup(t)
	f := waitFixture{fixture: base, b: base.signIn(t, "alice")}
	f.seen(t, "phone-a", []string{"pixel7"}, "")
	opens := time.Now().UTC().Truncate(time.Minute).Add(3*time.Hour + 10*time.Minute)
	text := strings.ToLower(opens.Weekday().String()[:3]) + " " + opens.Format("15:04") + "-" + opens.Add(time.Hour).Format("15:04")
	f.do(t, call{method: http.MethodPut, path: "/api/v1/availability/device/pixel7", body: `{"window":"` + text + `"}`}).want(t, http.StatusOK)
	id := f.submit(t, `{"kind":"app_investigation","queue":"phones","payload":{"app":"com.example.notes","device":"pixel7"}}`).ID

	w, ok := f.detail(t, id)
	if !ok || w.Kind != string(queue.WaitOutsideWindow) {
		t.Fatalf("waiting %+v, want outside_window", w)
	}
	if w.Until == nil || w.Window == nil || *w.Window != text || w.WindowOf == nil || *w.WindowOf != "pixel7" {
		t.Fatalf("until %v window %v of %v, want %s, %q of pixel7", w.Until, w.Window, w.WindowOf, opens, text)
	}
	if until, err := time.Parse(time.RFC3339Nano, *w.Until); err != nil || !until.Equal(opens) {
		t.Errorf("until %q (%v), want %s", *w.Until, err, opens)
	}
	clockAt := opens.Format("15:04")
	if opens.YearDay() != time.Now().UTC().YearDay() {
		clockAt = opens.Format("Mon 15:04")
	}
	// "in 3 h 10 min" while the minute the window was made in lasts; the
	// page may be read in the next one.
	want := func(in string) string {
		return "pixel7 is available again at " + clockAt + " (in " + in + "; window " + text + ")."
	}
	kind, got := f.page(t, id)
	if kind != string(queue.WaitOutsideWindow) || (got != want("3 h 10 min") && got != want("3 h 9 min")) {
		t.Errorf("job page: %s %q\nwant %s %q", kind, got, queue.WaitOutsideWindow, want("3 h 10 min"))
	}
	if kind, got := f.badge(t, id); kind != string(queue.WaitOutsideWindow) || got != "window opens "+clock(opens, false) {
		t.Errorf("jobs list: %s %q, want window opens %s", kind, got, clock(opens, false))
	}

	// The API lists the window, refuses a bad one naming the position,
	// and removes it: the job is ready again.
	var list struct {
		Windows []struct {
			Scope, Name, Window string
			Open                bool
		} `json:"windows"`
	}
	f.get(t, "/api/v1/availability").want(t, http.StatusOK).decode(t, &list)
	if len(list.Windows) != 1 || list.Windows[0].Name != "pixel7" || list.Windows[0].Open {
		t.Errorf("windows %+v, want pixel7's, closed", list.Windows)
	}
	var bad struct{ Error, Field string }
	f.do(t, call{method: http.MethodPut, path: "/api/v1/availability/device/pixel7", body: `{"window":"mon 09:00-25:00"}`}).
		want(t, http.StatusBadRequest).decode(t, &bad)
	if bad.Field != "window" || !strings.Contains(bad.Error, "at 11") {
		t.Errorf("bad window: %+v, want field window at 11", bad)
	}
	f.do(t, call{method: http.MethodPut, path: "/api/v1/availability/phone/pixel7", body: `{"window":"mon 09:00-10:00"}`}).want(t, http.StatusBadRequest)
	f.do(t, call{method: http.MethodDelete, path: "/api/v1/availability/device/pixel7"}).want(t, http.StatusNoContent)
	f.do(t, call{method: http.MethodDelete, path: "/api/v1/availability/device/pixel7"}).want(t, http.StatusNotFound)
	if w, _ := f.detail(t, id); w.Kind != string(queue.WaitReady) {
		t.Errorf("after removing the window: %+v, want ready", w)
	}
}
