package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/maintenance"
)

type scheduleJSON struct {
	Name     string `json:"name"`
	Cron     string `json:"cron"`
	Timezone string `json:"timezone"`
	Job      struct {
		Kind        string         `json:"kind"`
		Queue       string         `json:"queue"`
		Priority    int32          `json:"priority"`
		Payload     map[string]any `json:"payload"`
		MaxAttempts int32          `json:"max_attempts"`
	} `json:"job"`
	Paused    bool    `json:"paused"`
	NextRunAt *string `json:"next_run_at"`
	LastRunAt *string `json:"last_run_at"`
	LastJobID *int64  `json:"last_job_id"`
	CreatedAt string  `json:"created_at"`
}

func TestScheduleAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var s scheduleJSON
	res := f.post(t, "/api/v1/schedules", `{"name":"nightly","cron":"30 2 * * *","timezone":"Europe/Berlin",
		"job":{"kind":"app_investigation","queue":"nightly","payload":{"app":"com.example.notes"},"priority":3,"max_attempts":2}}`).
		want(t, http.StatusCreated)
	res.decode(t, &s)
	if res.header.Get("Location") != "/api/v1/schedules/nightly" {
		t.Errorf("Location %q", res.header.Get("Location"))
	}
	if s.Name != "nightly" || s.Cron != "30 2 * * *" || s.Timezone != "Europe/Berlin" || s.Paused ||
		s.Job.Kind != "app_investigation" || s.Job.Queue != "nightly" || s.Job.Priority != 3 || s.Job.MaxAttempts != 2 ||
		s.Job.Payload["app"] != "com.example.notes" || s.NextRunAt == nil || s.LastRunAt != nil || s.LastJobID != nil {
		t.Fatalf("created %+v", s)
	}
	next, err := time.Parse(time.RFC3339Nano, *s.NextRunAt)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if err != nil || next.In(berlin).Hour() != 2 || next.In(berlin).Minute() != 30 || !next.After(time.Now()) {
		t.Fatalf("next_run_at %v (%v), want the next 02:30 in Berlin", *s.NextRunAt, err)
	}

	// Defaults: UTC, the job's defaults filled in.
	f.post(t, "/api/v1/schedules", `{"name":"every","cron":"@every 30s","job":{"kind":"noop"}}`).want(t, http.StatusCreated).decode(t, &s)
	if s.Timezone != "UTC" || s.Job.Queue != "default" || s.Job.MaxAttempts != 5 {
		t.Fatalf("defaults %+v", s)
	}
	// The same name again: 409, whatever the rest.
	body := f.post(t, "/api/v1/schedules", `{"name":"every","cron":"@hourly","job":{"kind":"noop"}}`).want(t, http.StatusConflict).json(t)
	if body["field"] != "name" {
		t.Fatalf("409 body %v", body)
	}

	var list struct{ Schedules []scheduleJSON }
	f.get(t, "/api/v1/schedules").want(t, http.StatusOK).decode(t, &list)
	if len(list.Schedules) != 2 || list.Schedules[0].Name != "every" || list.Schedules[1].Name != "nightly" {
		t.Fatalf("list %+v", list)
	}
	f.get(t, "/api/v1/schedules/nightly").want(t, http.StatusOK).decode(t, &s)
	if s.Name != "nightly" {
		t.Fatalf("get %+v", s)
	}

	patch := func(name, body string) *response {
		return f.do(t, call{method: http.MethodPatch, path: "/api/v1/schedules/" + name, body: body})
	}
	// Pause, then a new cron while paused: still paused, no next run.
	patch("nightly", `{"paused":true}`).want(t, http.StatusOK).decode(t, &s)
	if !s.Paused || s.NextRunAt != nil || s.Cron != "30 2 * * *" {
		t.Fatalf("paused %+v", s)
	}
	patch("nightly", `{"cron":"@hourly"}`).want(t, http.StatusOK).decode(t, &s)
	if !s.Paused || s.NextRunAt != nil || s.Cron != "@hourly" || s.Job.Priority != 3 {
		t.Fatalf("cron patched while paused %+v", s)
	}
	patch("nightly", `{"paused":false,"job":{"kind":"noop","queue":"other"}}`).want(t, http.StatusOK).decode(t, &s)
	if s.Paused || s.NextRunAt == nil || s.Job.Kind != "noop" || s.Job.Queue != "other" || s.Timezone != "Europe/Berlin" {
		t.Fatalf("resumed %+v", s)
	}
	next, _ = time.Parse(time.RFC3339Nano, *s.NextRunAt)
	if next.Minute() != 0 || next.Second() != 0 || time.Until(next) > time.Hour {
		t.Fatalf("next_run_at %s after resuming @hourly", *s.NextRunAt)
	}
	patch("nightly", `{}`).want(t, http.StatusOK)

	f.do(t, call{method: http.MethodDelete, path: "/api/v1/schedules/nightly"}).want(t, http.StatusNoContent)
	f.get(t, "/api/v1/schedules/nightly").want(t, http.StatusNotFound)
	f.do(t, call{method: http.MethodDelete, path: "/api/v1/schedules/nightly"}).want(t, http.StatusNotFound)
	patch("nightly", `{"paused":true}`).want(t, http.StatusNotFound)

	// Admin tokens only.
	f.do(t, call{method: http.MethodGet, path: "/api/v1/schedules", token: "-"}).want(t, http.StatusUnauthorized)
	f.do(t, call{method: http.MethodGet, path: "/api/v1/schedules", token: f.worker}).want(t, http.StatusForbidden)
}

// A tick's job shows its schedule in the job JSON.
func TestScheduleJobShowsSchedule(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.post(t, "/api/v1/schedules", `{"name":"tick","cron":"@every 1s","job":{"kind":"noop"}}`).want(t, http.StatusCreated)
	clock := time.Now().Add(2 * time.Second)
	sch := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: func() time.Time { return clock }})
	if _, err := sch.RunDue(f.ctx); err != nil {
		t.Fatal(err)
	}
	var s scheduleJSON
	f.get(t, "/api/v1/schedules/tick").want(t, http.StatusOK).decode(t, &s)
	if s.LastJobID == nil || s.LastRunAt == nil {
		t.Fatalf("after a tick %+v", s)
	}
	job := f.get(t, "/api/v1/jobs/"+itoa(*s.LastJobID)).want(t, http.StatusOK).json(t)
	wantKey := "schedule:tick:" + clock.UTC().Truncate(time.Second).Format(time.RFC3339)
	if job["schedule"] != "tick" || job["idempotency_key"] != wantKey {
		t.Fatalf("job schedule %v key %v, want tick and %s", job["schedule"], job["idempotency_key"], wantKey)
	}
	// A submitted job has none.
	j := f.submit(t, `{"kind":"noop"}`)
	if got := f.get(t, "/api/v1/jobs/"+itoa(j.ID)).json(t); got["schedule"] != nil {
		t.Fatalf("submitted job's schedule %v", got["schedule"])
	}
}

// Malformed, oversized and hostile schedule requests get a precise 4xx,
// never a 500, and change nothing.
func TestScheduleHostileInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.post(t, "/api/v1/schedules", `{"name":"keep","cron":"@daily","job":{"kind":"noop"}}`).want(t, http.StatusCreated)
	big := `{"name":"big","cron":"@daily","job":{"kind":"noop","payload":{"a":"` + strings.Repeat("x", 2<<20) + `"}}}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		field, errHas            string
	}{
		{"Empty", "POST", "", ``, 400, "", "empty"},
		{"Malformed", "POST", "", `{"name":"a",`, 400, "", "JSON"},
		{"Array", "POST", "", `[]`, 400, "", "JSON object"},
		{"UnknownField", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"noop"},"every":"day"}`, 400, "every", "unknown"},
		{"NoJob", "POST", "", `{"name":"a","cron":"@daily"}`, 400, "job", "required"},
		{"JobNull", "POST", "", `{"name":"a","cron":"@daily","job":null}`, 400, "job", "required"},
		{"JobString", "POST", "", `{"name":"a","cron":"@daily","job":"noop"}`, 400, "job", "JSON object"},
		{"JobUnknownField", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"noop","colour":1}}`, 400, "job.colour", "unknown"},
		{"JobBadKind", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"No Way"}}`, 400, "job.kind", ""},
		{"JobPriorityString", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"noop","priority":"high"}}`, 400, "job.priority", "integer"},
		{"JobRunAt", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"noop","run_at":"2026-12-01T00:00:00Z"}}`, 400, "job.run_at", "tick"},
		{"JobKey", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"noop","idempotency_key":"k"}}`, 400, "job.idempotency_key", ""},
		{"JobPayloadArray", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"noop","payload":[1]}}`, 400, "job.payload", ""},
		{"JobInvestigationNoApp", "POST", "", `{"name":"a","cron":"@daily","job":{"kind":"app_investigation"}}`, 400, "job.payload.app", ""},
		{"NameMissing", "POST", "", `{"cron":"@daily","job":{"kind":"noop"}}`, 400, "name", ""},
		{"NameUpper", "POST", "", `{"name":"Nightly","cron":"@daily","job":{"kind":"noop"}}`, 400, "name", ""},
		{"NameSlash", "POST", "", `{"name":"a/b","cron":"@daily","job":{"kind":"noop"}}`, 400, "name", ""},
		{"NameNUL", "POST", "", `{"name":"a\u0000","cron":"@daily","job":{"kind":"noop"}}`, 400, "name", ""},
		{"NameLong", "POST", "", `{"name":"` + strings.Repeat("a", 65) + `","cron":"@daily","job":{"kind":"noop"}}`, 400, "name", ""},
		{"NameNumber", "POST", "", `{"name":5,"cron":"@daily","job":{"kind":"noop"}}`, 400, "name", "string"},
		{"CronMissing", "POST", "", `{"name":"a","job":{"kind":"noop"}}`, 400, "cron", "required"},
		{"CronWords", "POST", "", `{"name":"a","cron":"every night","job":{"kind":"noop"}}`, 400, "cron", "five fields"},
		{"CronRange", "POST", "", `{"name":"a","cron":"0 25 * * *","job":{"kind":"noop"}}`, 400, "cron", "hour"},
		{"CronNever", "POST", "", `{"name":"a","cron":"0 0 30 2 *","job":{"kind":"noop"}}`, 400, "cron", "never"},
		{"CronSubSecond", "POST", "", `{"name":"a","cron":"@every 100ms","job":{"kind":"noop"}}`, 400, "cron", "whole seconds"},
		{"CronHuge", "POST", "", `{"name":"a","cron":"` + strings.Repeat("*", 10_000) + `","job":{"kind":"noop"}}`, 400, "cron", "at most"},
		{"CronNUL", "POST", "", `{"name":"a","cron":"@daily\u0000","job":{"kind":"noop"}}`, 400, "cron", ""},
		{"TimezoneUnknown", "POST", "", `{"name":"a","cron":"@daily","timezone":"Europe/Atlantis","job":{"kind":"noop"}}`, 400, "timezone", "unknown"},
		{"TimezonePath", "POST", "", `{"name":"a","cron":"@daily","timezone":"../../../etc/passwd","job":{"kind":"noop"}}`, 400, "timezone", "IANA"},
		{"TimezoneLocal", "POST", "", `{"name":"a","cron":"@daily","timezone":"Local","job":{"kind":"noop"}}`, 400, "timezone", ""},
		{"PausedString", "POST", "", `{"name":"a","cron":"@daily","paused":"yes","job":{"kind":"noop"}}`, 400, "paused", "true or false"},
		{"TooLarge", "POST", "", big, 413, "", "larger"},
		{"InvalidUTF8", "POST", "", "{\"name\":\"\xff\",\"cron\":\"@daily\",\"job\":{\"kind\":\"noop\"}}", 400, "", "UTF-8"},

		{"PatchMalformed", "PATCH", "/keep", `{"paused":`, 400, "", "JSON"},
		{"PatchUnknown", "PATCH", "/keep", `{"name":"other"}`, 400, "name", "unknown"},
		{"PatchPausedNumber", "PATCH", "/keep", `{"paused":1}`, 400, "paused", ""},
		{"PatchCron", "PATCH", "/keep", `{"cron":"@sometimes"}`, 400, "cron", "descriptor"},
		{"PatchTimezone", "PATCH", "/keep", `{"timezone":"Moon/Base"}`, 400, "timezone", ""},
		{"PatchJob", "PATCH", "/keep", `{"job":{"kind":""}}`, 400, "job.kind", ""},
		{"PatchJobArray", "PATCH", "/keep", `{"job":[]}`, 400, "job", ""},
		{"PatchTooLarge", "PATCH", "/keep", big, 413, "", ""},
		{"PatchUnknownSchedule", "PATCH", "/nope", `{"paused":true}`, 404, "", "not found"},
		{"GetBadName", "GET", "/Bad%20Name", ``, 404, "", "not found"},
		{"GetNUL", "GET", "/a%00b", ``, 404, "", "not found"},
		{"GetLong", "GET", "/" + strings.Repeat("a", 5000), ``, 404, "", "not found"},
		{"DeleteBadName", "DELETE", "/%ff", ``, 404, "", "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := call{method: tc.method, path: "/api/v1/schedules" + tc.path}
			if tc.body != "" || tc.method != "GET" && tc.method != "DELETE" {
				c.body = tc.body
			}
			body := f.do(t, c).want(t, tc.status).json(t)
			if body["field"] != nil && body["field"] != tc.field || body["field"] == nil && tc.field != "" {
				t.Errorf("field %v, want %q (%v)", body["field"], tc.field, body["error"])
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, tc.errHas) {
				t.Errorf("error %q, want it to say %q", msg, tc.errHas)
			}
		})
	}
	var list struct{ Schedules []scheduleJSON }
	f.get(t, "/api/v1/schedules").want(t, http.StatusOK).decode(t, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Cron != "@daily" || list.Schedules[0].Job.Kind != "noop" || list.Schedules[0].Paused {
		t.Fatalf("hostile requests changed the schedules: %+v", list.Schedules)
	}
}
