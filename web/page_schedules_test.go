package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/templates/htmltest"
)

func scheduleForm(name, cron string) url.Values {
	return url.Values{
		"name": {name}, "cron": {cron}, "timezone": {"Europe/Berlin"}, "kind": {"app_investigation"},
		"queue": {"nightly"}, "payload": {`{"app":"com.example.notes"}`}, "priority": {"0"}, "max_attempts": {"3"},
	}
}

func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	d := parseHTML(t, b.get(t, "/schedules").want(t, http.StatusOK))
	d.One(t, "empty")
	d.One(t, "schedule-form")

	r := b.post(t, "/schedules", scheduleForm("nightly", "30 2 * * *")).want(t, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/schedules?created=nightly" {
		t.Fatalf("Location %q", loc)
	}
	s, err := f.queue.Schedule(f.ctx, "nightly")
	if err != nil || s.Timezone != "Europe/Berlin" || s.Job.Kind != "app_investigation" || *s.Job.MaxAttempts != 3 || s.Job.Queue != "nightly" {
		t.Fatalf("created %+v, %v", s, err)
	}
	d = parseHTML(t, b.get(t, "/schedules?created=nightly").want(t, http.StatusOK))
	d.One(t, "created")
	row := d.One(t, "schedule-row")
	if htmltest.Attr(row, "data-name") != "nightly" || htmltest.Text(htmltest.ByTestID(row, "cron")[0]) != "30 2 * * *" ||
		htmltest.Text(htmltest.ByTestID(row, "timezone")[0]) != "Europe/Berlin" || len(htmltest.ByTestID(row, "active")) != 1 ||
		!strings.Contains(htmltest.Text(htmltest.ByTestID(row, "last-job")[0]), "none yet") {
		t.Fatalf("row %q", htmltest.Text(row))
	}

	// A tick: the row links its job, and the job page names the schedule.
	clock := time.Now().Add(25 * time.Hour)
	if _, err := maintenance.NewScheduler(f.pool, maintenance.SchedulerConfig{Now: func() time.Time { return clock }}).RunDue(f.ctx); err != nil {
		t.Fatal(err)
	}
	d = parseHTML(t, b.get(t, "/schedules").want(t, http.StatusOK))
	link := d.One(t, "last-job-link")
	href := htmltest.Attr(link, "href")
	if !strings.HasPrefix(href, "/jobs/") {
		t.Fatalf("last job link %q", href)
	}
	jd := parseHTML(t, b.get(t, href).want(t, http.StatusOK))
	if got := htmltest.Text(jd.One(t, "job-schedule")); got != "nightly" {
		t.Fatalf("job page schedule %q", got)
	}

	// Pause, then resume.
	b.post(t, "/schedules/nightly/pause", url.Values{}).want(t, http.StatusSeeOther)
	d = parseHTML(t, b.get(t, "/schedules").want(t, http.StatusOK))
	row = d.One(t, "schedule-row")
	if len(htmltest.ByTestID(row, "paused")) != 1 || len(htmltest.ByTestID(row, "resume-button")) != 1 {
		t.Fatalf("paused row %q", htmltest.Text(row))
	}
	if s, _ := f.queue.Schedule(f.ctx, "nightly"); !s.Paused || s.NextRunAt != nil {
		t.Fatalf("after Pause: %+v", s)
	}
	b.post(t, "/schedules/nightly/resume", url.Values{}).want(t, http.StatusSeeOther)
	if s, _ := f.queue.Schedule(f.ctx, "nightly"); s.Paused || s.NextRunAt == nil {
		t.Fatalf("after Resume: %+v", s)
	}
	b.post(t, "/schedules/gone/pause", url.Values{}).want(t, http.StatusNotFound)
	b.post(t, "/schedules/Bad%20Name/pause", url.Values{}).want(t, http.StatusNotFound)

	// The polled region keeps the list.
	if region := b.listsPoll(t, "/schedules", "schedules-live"); len(htmltest.ByTestID(region, "schedule-row")) != 1 {
		t.Fatal("polled region lost the schedules")
	}
}

// Every wrong field of the create form is marked at once, with its
// message beside it; nothing is created.
func TestSchedulesFormErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/schedules")
	form := url.Values{
		"name": {"Not A Name"}, "cron": {"every night"}, "timezone": {"Mars/Olympus"}, "kind": {"app_investigation"},
		"payload": {`{"app":`}, "priority": {"high"}, "max_attempts": {"0"},
	}
	d := parseHTML(t, b.post(t, "/schedules", form).want(t, http.StatusUnprocessableEntity))
	for _, name := range []string{"name", "cron", "timezone", "payload", "priority", "max_attempts"} {
		d.One(t, "field-error-"+name)
		if in := d.One(t, "schedule-"+name); htmltest.Attr(in, "aria-invalid") != "true" {
			t.Errorf("%s is not marked invalid", name)
		}
	}
	if in := d.One(t, "schedule-name"); htmltest.Attr(in, "value") != "Not A Name" {
		t.Error("the form lost what was typed")
	}
	// The job's own rules: an investigation needs an app.
	form = scheduleForm("ok", "@daily")
	form.Set("payload", `{}`)
	d = parseHTML(t, b.post(t, "/schedules", form).want(t, http.StatusUnprocessableEntity))
	if msg := htmltest.Text(d.One(t, "field-error-payload")); !strings.Contains(msg, "required") {
		t.Errorf("payload error %q", msg)
	}
	form.Set("kind", "Bad Kind")
	d = parseHTML(t, b.post(t, "/schedules", form).want(t, http.StatusUnprocessableEntity))
	d.One(t, "field-error-kind")
	// Hostile values: markup is text, NUL is refused, long is refused.
	for _, v := range []string{"<script>alert(1)</script>", "a\x00b", strings.Repeat("a", 10_000)} {
		form = scheduleForm(v, v)
		form.Set("timezone", v)
		r := b.post(t, "/schedules", form)
		if r.status != http.StatusUnprocessableEntity || strings.Contains(string(r.body), "<script>alert") {
			t.Fatalf("hostile value: status %d", r.status)
		}
	}
	if list, _ := f.queue.Schedules(f.ctx); len(list) != 0 {
		t.Fatalf("refused forms created %d schedules", len(list))
	}
	// A taken name: 409, beside the name.
	b.post(t, "/schedules", scheduleForm("taken", "@daily")).want(t, http.StatusSeeOther)
	b.get(t, "/schedules")
	d = parseHTML(t, b.post(t, "/schedules", scheduleForm("taken", "@hourly")).want(t, http.StatusConflict))
	if msg := htmltest.Text(d.One(t, "field-error-name")); !strings.Contains(msg, "taken") {
		t.Errorf("name error %q", msg)
	}
}

// A form posted from another site changes nothing.
func TestSchedulesCrossSite(t *testing.T) {
	t.Parallel()
	f := setup(t)
	b := f.signIn(t, "alice")
	b.get(t, "/schedules")
	b.post(t, "/schedules", scheduleForm("mine", "@daily")).want(t, http.StatusSeeOther)
	for _, path := range []string{"/schedules", "/schedules/mine/pause"} {
		form := scheduleForm("evil", "@every 1s")
		form.Set("_csrf", "forged")
		if r := b.post(t, path, form); r.status != http.StatusForbidden {
			t.Errorf("%s with a forged token: status %d", path, r.status)
		}
		req := listsRawPost(t, f, path, scheduleForm("evil", "@every 1s"), "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if r := b.do(t, req); r.status != http.StatusForbidden {
			t.Errorf("%s from another site: status %d", path, r.status)
		}
	}
	list, _ := f.queue.Schedules(f.ctx)
	if len(list) != 1 || list[0].Paused {
		t.Fatalf("a cross-site post changed the schedules: %+v", list)
	}
}
