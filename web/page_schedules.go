package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
)

// schedulePages registers the schedules page, its create form and its
// Pause/Resume buttons.
func (s *server) schedulePages(g *echo.Group, mw ...echo.MiddlewareFunc) {
	g.GET("/schedules", s.schedulesPage, mw...)
	g.POST("/schedules", s.scheduleFormSubmit, mw...)
	g.POST("/schedules/:name/pause", s.schedulePause(true), mw...)
	g.POST("/schedules/:name/resume", s.schedulePause(false), mw...)
}

// schedulesPage is GET /schedules: every schedule and an empty form.
func (s *server) schedulesPage(c echo.Context) error {
	return s.renderSchedules(c, http.StatusOK, templates.SchedulesView{
		Form:    templates.ScheduleFormView{Timezone: "UTC", Priority: "0", MaxAttempts: strconv.Itoa(queue.DefaultMaxAttempts)},
		Created: scheduleCreatedParam(c),
	})
}

func (s *server) renderSchedules(c echo.Context, status int, v templates.SchedulesView) error {
	list, err := s.queue.Schedules(c.Request().Context())
	if err != nil {
		return fmt.Errorf("schedules page: %w", err)
	}
	v.Rows = make([]templates.SchedulesRow, len(list))
	for i, sc := range list {
		v.Rows[i] = templates.SchedulesRow{
			Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone, Kind: sc.Job.Kind, Queue: sc.Job.Queue,
			Paused: sc.Paused, NextRunAt: sc.NextRunAt, LastRunAt: sc.LastRunAt, LastJobID: sc.LastJobID,
		}
	}
	return render(c, status, templates.Schedules(s.page(c, "Schedules", "schedules"), v))
}

// scheduleCreatedParam is the ?created= of the redirect after a create,
// shown only when it could name a schedule.
func scheduleCreatedParam(c echo.Context) string {
	if n := c.QueryParam("created"); queue.ValidScheduleName(n) {
		return n
	}
	return ""
}

// scheduleFormSubmit creates a schedule from the form: 303 to the list,
// or 422 (409 for a taken name) with each error beside its field and
// nothing created.
func (s *server) scheduleFormSubmit(c echo.Context) error {
	field := func(name string) string { return strings.TrimSpace(c.FormValue(name)) }
	f := templates.ScheduleFormView{
		Name: field("name"), Cron: field("cron"), Timezone: field("timezone"), Kind: field("kind"),
		Queue: field("queue"), Payload: strings.ReplaceAll(field("payload"), "\r\n", "\n"),
		Priority: field("priority"), MaxAttempts: field("max_attempts"),
	}
	ns, errs := scheduleFromForm(f)
	if len(errs) > 0 {
		f.Errors = errs
		return s.renderSchedules(c, http.StatusUnprocessableEntity, templates.SchedulesView{Form: f})
	}
	sched, err := s.queue.CreateSchedule(c.Request().Context(), ns, time.Now())
	var ve *queue.ValidationError
	switch {
	case errors.Is(err, queue.ErrScheduleExists):
		f.Errors = map[string]string{"name": "is taken by another schedule; pick another name"}
		return s.renderSchedules(c, http.StatusConflict, templates.SchedulesView{Form: f})
	case errors.As(err, &ve):
		f.Errors = map[string]string{scheduleFormField(ve.Field): ve.Message}
		return s.renderSchedules(c, http.StatusUnprocessableEntity, templates.SchedulesView{Form: f})
	case err != nil:
		return fmt.Errorf("creating schedule: %w", err)
	}
	s.logger.Info("schedule created", "schedule", sched.Name, "cron", sched.Cron, "by", currentSession(c).Username)
	return c.Redirect(http.StatusSeeOther, "/schedules?created="+sched.Name)
}

// scheduleFromForm builds the schedule a form describes, with every wrong
// field at once: queue's checks stop at the first problem, so the name,
// the cron, the timezone and the job are checked apart.
func scheduleFromForm(f templates.ScheduleFormView) (queue.NewSchedule, map[string]string) {
	errs := map[string]string{}
	if !queue.ValidScheduleName(f.Name) {
		errs["name"] = "must be 1 to 64 lower-case letters, digits or _.-"
	}
	if _, err := queue.ParseCron(f.Cron, ""); err != nil {
		errs["cron"] = validationMessage(err)
	}
	if _, err := queue.LoadTimezone(f.Timezone); err != nil {
		errs["timezone"] = validationMessage(err)
	}
	priority, msg := newJobNumber(f.Priority, 0, math.MinInt32, math.MaxInt32)
	if msg != "" {
		errs["priority"] = msg
	}
	maxAttempts, msg := newJobNumber(f.MaxAttempts, queue.DefaultMaxAttempts, 1, queue.MaxAttemptsLimit)
	if msg != "" {
		errs["max_attempts"] = msg
	}
	payload := json.RawMessage(f.Payload)
	if f.Payload == "" {
		payload = json.RawMessage(`{}`)
	} else if !json.Valid(payload) {
		errs["payload"] = "must be a JSON object, e.g. {\"app\":\"com.example.notes\"}"
	}
	nj := queue.NewJob{Kind: f.Kind, Queue: f.Queue, Priority: int32(priority), Payload: payload, MaxAttempts: new(int32(maxAttempts))}
	if errs["payload"] == "" {
		probe := nj
		if _, err := queue.ScheduleJobOf(probe); err != nil {
			var ve *queue.ValidationError
			if errors.As(err, &ve) {
				if name := scheduleFormField(ve.Field); errs[name] == "" {
					errs[name] = ve.Message
				}
			}
		}
	}
	return queue.NewSchedule{Name: f.Name, Cron: f.Cron, Timezone: f.Timezone, Job: nj}, errs
}

// scheduleFormField is the form field of a queue validation field: the
// payload's own fields (job.payload.app, job.payload.device) are the payload's.
func scheduleFormField(name string) string {
	name = strings.TrimPrefix(name, "job.")
	switch name {
	case "name", "cron", "timezone", "kind", "queue", "payload", "priority", "max_attempts":
		return name
	}
	return "payload"
}

func validationMessage(err error) string {
	var ve *queue.ValidationError
	if errors.As(err, &ve) {
		return ve.Message
	}
	return err.Error()
}

// schedulePause is the Pause (or Resume) button: 303 back to the list;
// htmx follows it and swaps the list in place.
func (s *server) schedulePause(pause bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		name := c.Param("name")
		notFound := func() error {
			return s.renderSchedules(c, http.StatusNotFound, templates.SchedulesView{
				Notice: "Nothing changed: there is no schedule of that name (deleted meanwhile?).",
				Form:   templates.ScheduleFormView{Timezone: "UTC", Priority: "0", MaxAttempts: strconv.Itoa(queue.DefaultMaxAttempts)},
			})
		}
		if !queue.ValidScheduleName(name) {
			return notFound()
		}
		_, err := s.queue.UpdateSchedule(c.Request().Context(), name, queue.SchedulePatch{Paused: &pause}, time.Now())
		switch {
		case errors.Is(err, queue.ErrScheduleNotFound):
			return notFound()
		case err != nil:
			return fmt.Errorf("pausing schedule: %w", err)
		}
		s.logger.Info("schedule paused", "schedule", name, "paused", pause, "by", currentSession(c).Username)
		return c.Redirect(http.StatusSeeOther, "/schedules")
	}
}
