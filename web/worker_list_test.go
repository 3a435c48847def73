package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// workerStatusJSON is a worker as GET /api/v1/workers shows it.
type workerStatusJSON struct {
	ID           string          `json:"id"`
	Device       *string         `json:"device"`
	Online       bool            `json:"online"`
	LastSeen     time.Time       `json:"last_seen"`
	Info         json.RawMessage `json:"info"`
	InfoAt       *time.Time      `json:"info_at"`
	InfoError    *string         `json:"info_error"`
	Running      int64           `json:"running"`
	LastJobID    *int64          `json:"last_job_id"`
	Succeeded24h int64           `json:"succeeded_24h"`
	Failed24h    int64           `json:"failed_24h"`
	Claiming     bool            `json:"claiming"`
	Reason       *string         `json:"reason"`
}

func (f *fixture) workers(t *testing.T) map[string]workerStatusJSON {
	t.Helper()
	var body struct{ Workers []workerStatusJSON }
	f.get(t, "/api/v1/workers").want(t, http.StatusOK).decode(t, &body)
	out := map[string]workerStatusJSON{}
	for _, w := range body.Workers {
		out[w.ID] = w
	}
	return out
}

// A remote worker's presence carries its phone's facts; the API and the
// page show them with the worker's health, outcomes and last job.
func TestWorkersAPIShowsDeviceFactsAndHealth(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.workerPost(t, "/api/v1/worker/presence", `{"queues":["default"],"devices":["pixel7"],
		"info":{"serial":"R5CT","model":"Pixel 7","android":"14","battery":80,"charging":false,"screen":"on","adb":"device","sim":"none"},
		"info_age_ms":1500,"claiming":true}`).want(t, http.StatusNoContent)
	// A direct worker whose phone went offline, and whose last run failed.
	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "phone-2", Devices: []string{"pixel8"}, Queues: []string{"default"},
		Device: &queue.DeviceReport{Info: json.RawMessage(`{"adb":"offline","model":"Pixel 8"}`), InfoAge: time.Minute,
			Error: "device-info: no answer within 10s: killed", Claiming: false, Reason: "adb offline"}}); err != nil {
		t.Fatal(err)
	}
	// One without a device-info command, seen two minutes ago.
	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "old-host", Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE workers SET last_seen = now() - interval '2 minutes' WHERE id = 'old-host'`); err != nil {
		t.Fatal(err)
	}

	// The remote worker completes one job, fails one, and runs a third.
	for range 3 {
		f.submit(t, `{"kind":"app_investigation","backoff_base_ms":0,"payload":{"app":"com.example.notes"}}`)
	}
	lease := func(j jobJSON) string { return fmt.Sprintf(`{"lease_token":%d}`, j.LeaseToken) }
	jobs := f.claimAs(t, f.worker, `{"queues":["default"],"limit":1}`)
	f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/complete", jobs[0].ID), lease(jobs[0])).want(t, http.StatusOK)
	jobs = f.claimAs(t, f.worker, `{"queues":["default"],"limit":1}`)
	f.workerPost(t, fmt.Sprintf("/api/v1/worker/jobs/%d/fail", jobs[0].ID),
		fmt.Sprintf(`{"lease_token":%d,"error":"boom","retryable":true}`, jobs[0].LeaseToken)).want(t, http.StatusOK)
	jobs = f.claimAs(t, f.worker, `{"queues":["default"],"limit":1}`)
	running := jobs[0].ID

	ws := f.workers(t)
	if len(ws) != 3 {
		t.Fatalf("%d workers: %v", len(ws), ws)
	}
	w := ws["worker"]
	var info map[string]any
	if err := json.Unmarshal(w.Info, &info); err != nil {
		t.Fatal(err)
	}
	if !w.Online || !w.Claiming || w.Reason != nil || w.InfoError != nil || info["model"] != "Pixel 7" || info["battery"] != 80.0 ||
		info["charging"] != false || info["sim"] != "none" || w.Device == nil || *w.Device != "pixel7" {
		t.Errorf("healthy worker: %+v, info %s", w, w.Info)
	}
	if w.InfoAt == nil || w.LastSeen.Sub(*w.InfoAt) < time.Second || w.LastSeen.Sub(*w.InfoAt) > time.Minute {
		t.Errorf("info_at %v for facts 1.5 s old at last_seen %v", w.InfoAt, w.LastSeen)
	}
	if w.Running != 1 || w.Succeeded24h != 1 || w.Failed24h != 1 || w.LastJobID == nil || *w.LastJobID != running {
		t.Errorf("outcomes: running %d, succeeded %d, failed %d, last job %v (want %d)", w.Running, w.Succeeded24h, w.Failed24h, w.LastJobID, running)
	}
	p := ws["phone-2"]
	if !p.Online || p.Claiming || p.Reason == nil || *p.Reason != "adb offline" || p.InfoError == nil ||
		!strings.Contains(*p.InfoError, "killed") || p.LastJobID != nil || p.Succeeded24h != 0 {
		t.Errorf("unfit worker: %+v", p)
	}
	o := ws["old-host"]
	if o.Online || o.Claiming || o.Reason == nil || *o.Reason != "offline" || string(o.Info) != "null" || o.InfoAt != nil {
		t.Errorf("offline worker: %+v", o)
	}

	// A worker that restarts without a device-info command clears its
	// facts.
	f.workerPost(t, "/api/v1/worker/presence", `{"queues":["default"]}`).want(t, http.StatusNoContent)
	if w := f.workers(t)["worker"]; string(w.Info) != "null" || !w.Claiming {
		t.Errorf("after a presence without facts: %+v", w)
	}

	// Admin only.
	f.do(t, call{method: http.MethodGet, path: "/api/v1/workers", token: f.worker}).want(t, http.StatusForbidden)
	f.do(t, call{method: http.MethodGet, path: "/api/v1/workers", token: "-"}).want(t, http.StatusUnauthorized)

	// The page shows the same facts.
	f.workerPost(t, "/api/v1/worker/presence", `{"queues":["default"],"devices":["pixel7"],
		"info":{"model":"Pixel 7","android":"14","battery":80,"charging":false,"adb":"device"},"info_age_ms":0}`).want(t, http.StatusNoContent)
	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/workers").want(t, http.StatusOK))
	rows := map[string]string{}
	for _, r := range d.All("worker-row") {
		rows[htmltest.Attr(r, "data-worker-id")] = htmltest.Text(r)
	}
	for id, want := range map[string][]string{
		"worker":   {"Pixel 7", "Android 14", "80%", "not charging", "adb device", "claiming", "1 succeeded", "1 failed", fmt.Sprintf("#%d", running)},
		"phone-2":  {"Pixel 8", "adb offline", "not claiming", "device-info: device-info: no answer within 10s: killed", "0 succeeded"},
		"old-host": {"no device info", "not claiming", "offline"},
	} {
		for _, s := range want {
			if !strings.Contains(rows[id], s) {
				t.Errorf("%s's row lacks %q: %q", id, s, rows[id])
			}
		}
	}
}

// Presence refuses facts that are not device info, and bounds the rest.
func TestPresenceRefusesBadDeviceInfo(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ name, body, field string }{
		{"InfoNotObject", `{"info":[1,2]}`, "info"},
		{"InfoString", `{"info":"battery 80"}`, "info"},
		{"BatteryString", `{"info":{"battery":"80"}}`, "info"},
		{"BatteryHigh", `{"info":{"battery":180}}`, "info"},
		{"ChargingNumber", `{"info":{"charging":1}}`, "info"},
		{"NestedExtra", `{"info":{"x":{"y":1}}}`, "info"},
		{"HugeInfo", `{"info":{"x":"` + strings.Repeat("a", 9000) + `"}}`, "info"},
		{"NegativeAge", `{"info":{},"info_age_ms":-1}`, "info_age_ms"},
		{"HugeAge", `{"info":{},"info_age_ms":9223372036854775807}`, "info_age_ms"},
		{"LongReason", `{"claiming":false,"reason":"` + strings.Repeat("r", 1025) + `"}`, "reason"},
		{"LongError", `{"info_error":"` + strings.Repeat("e", 1025) + `"}`, "info_error"},
		{"ClaimingString", `{"claiming":"no"}`, "claiming"},
		{"UnknownField", `{"healthy":true}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { // in turn: the last check needs them done
			res := f.workerPost(t, "/api/v1/worker/presence", tc.body).want(t, http.StatusBadRequest).json(t)
			if tc.field != "" && res["field"] != tc.field {
				t.Errorf("field %v, want %q: %v", res["field"], tc.field, res)
			}
		})
	}
	if ws := f.workers(t); len(ws) != 0 {
		t.Errorf("a refused presence recorded a worker: %v", ws)
	}
}

// A pending job for a device no fit phone serves says so on its page
// (waiting_test.go has every other reason).
func TestJobPageSaysWhyNoPhoneTakesIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	waiting := func(id int64) string {
		t.Helper()
		d := parseHTML(t, b.get(t, fmt.Sprintf("/jobs/%d", id)).want(t, http.StatusOK))
		if n := d.All("job-waiting"); len(n) == 1 {
			return htmltest.Text(n[0])
		}
		return ""
	}
	const noWorker = "No worker takes queue default: none that does has reported in the last 30 s. Start one with --queues default."
	job := f.submit(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes","device":"pixel7"}}`)
	if got := waiting(job.ID); got != noWorker {
		t.Errorf("no worker at all: %q", got)
	}
	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "moto", Devices: []string{"moto-g"}, Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if got := waiting(job.ID); got != "waiting for pixel7: no such phone online" {
		t.Errorf("no phone: %q", got)
	}
	unfit := func(id, reason string) {
		t.Helper()
		if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: id, Devices: []string{"pixel7", "usb1"}, Queues: []string{"default"},
			Device: &queue.DeviceReport{Info: json.RawMessage(`{}`), Claiming: false, Reason: reason}}); err != nil {
			t.Fatal(err)
		}
	}
	unfit("phone-a", "adb offline")
	if got := waiting(job.ID); got != "waiting for pixel7: the only such phone online is not claiming (phone-a: adb offline)" {
		t.Errorf("one unfit phone: %q", got)
	}
	unfit("phone-b", "battery 4% (under 15%) and not charging")
	if got := waiting(job.ID); got != "waiting for pixel7: all 2 such phones online are not claiming (phone-a: adb offline; phone-b: battery 4% (under 15%) and not charging)" {
		t.Errorf("two unfit phones: %q", got)
	}
	if err := f.queue.WorkerSeen(f.ctx, queue.Presence{ID: "phone-b", Devices: []string{"pixel7"}, Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	const ready = "Due now: a worker of queue default picks it up at its next claim."
	if got := waiting(job.ID); got != ready {
		t.Errorf("with a fit phone online: %q", got)
	}
	// Gone offline: no longer counted.
	if _, err := f.pool.Exec(f.ctx, `UPDATE workers SET last_seen = now() - interval '31 seconds' WHERE id IN ('phone-a', 'phone-b')`); err != nil {
		t.Fatal(err)
	}
	if got := waiting(job.ID); got != "waiting for pixel7: no such phone online" {
		t.Errorf("phones offline: %q", got)
	}
	// A job for no device never waits for a phone: the worker without
	// one takes it.
	if got := waiting(f.submit(t, `{"kind":"app_investigation","payload":{"app":"com.example.notes"}}`).ID); got != ready {
		t.Errorf("a job for any device: %q", got)
	}
}

// A remote worker's first presence says it is starting; its started_at
// becomes now, and a presence without the flag (an older worker, or the
// next one of the same process) keeps it. "starting" must be a boolean.
func TestPresenceStartingDatesTheStart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	started := func() (at, now time.Time) {
		t.Helper()
		if err := f.pool.QueryRow(f.ctx, `SELECT started_at, now() FROM workers WHERE id = 'worker'`).Scan(&at, &now); err != nil {
			t.Fatal(err)
		}
		return at, now
	}
	f.workerPost(t, "/api/v1/worker/presence", `{"queues":["default"],"starting":true}`).want(t, http.StatusNoContent)
	if _, err := f.pool.Exec(f.ctx, `UPDATE workers SET started_at = now() - interval '16 minutes' WHERE id = 'worker'`); err != nil {
		t.Fatal(err)
	}
	old, _ := started()
	f.workerPost(t, "/api/v1/worker/presence", `{"queues":["default"]}`).want(t, http.StatusNoContent)
	if at, _ := started(); !at.Equal(old) {
		t.Errorf("a presence without starting moved started_at from %v to %v", old, at)
	}
	_, before := started()
	f.workerPost(t, "/api/v1/worker/presence", `{"queues":["default"],"starting":true}`).want(t, http.StatusNoContent)
	if at, _ := started(); at.Before(before) {
		t.Errorf("a starting presence kept started_at %v (before %v)", at, before)
	}
	for _, bad := range []string{`{"starting":"yes"}`, `{"starting":1}`, `{"starting":null,"queues":"x"}`} {
		if e := f.workerPost(t, "/api/v1/worker/presence", bad).want(t, http.StatusBadRequest).json(t); e["code"] == nil {
			t.Errorf("%s: %v", bad, e)
		}
	}
}
