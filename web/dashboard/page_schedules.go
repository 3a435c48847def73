package dashboard

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
	"github.com/leasehold/leasehold/web/httpx"
)

// SchedulesPage is GET /schedules: every schedule and an empty form.
func (h *Handler) SchedulesPage(c echo.Context) error {
	return h.renderSchedules(c, http.StatusOK, templates.SchedulesView{
		Form:    templates.ScheduleFormView{Timezone: "UTC", Priority: "0", MaxAttempts: strconv.Itoa(queue.DefaultMaxAttempts)},
		Created: scheduleCreatedParam(c),
	})
}

func (h *Handler) renderSchedules(c echo.Context, status int, v templates.SchedulesView) error {
	list, err := h.read(c).Schedules(c.Request().Context())
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
	return render(c, status, templates.Schedules(h.page(c, "Schedules", "schedules"), v))
}

// scheduleCreatedParam is the ?created= of the redirect after a create,
// shown only when it could name a schedule.
func scheduleCreatedParam(c echo.Context) string {
	if n := c.QueryParam("created"); queue.ValidScheduleName(n) {
		return n
	}
	return ""
}

// CreateSchedule creates a schedule from the form: 303 to the list,
// or 422 (409 for a taken name) with each error beside its field and
// nothing created.
func (h *Handler) CreateSchedule(c echo.Context) error {
	field := func(name string) string { return strings.TrimSpace(c.FormValue(name)) }
	f := templates.ScheduleFormView{
		Name: field("name"), Cron: field("cron"), Timezone: field("timezone"), Kind: field("kind"),
		Queue: field("queue"), Payload: strings.ReplaceAll(field("payload"), "\r\n", "\n"),
		Priority: field("priority"), MaxAttempts: field("max_attempts"),
	}
	ns, errs := scheduleFromForm(f)
	if len(errs) > 0 {
		f.Errors = errs
		return h.renderSchedules(c, http.StatusUnprocessableEntity, templates.SchedulesView{Form: f})
	}
	sched, err := h.queue.CreateSchedule(c.Request().Context(), ns, time.Now())
	var ve *queue.ValidationError
	switch {
	case errors.Is(err, queue.ErrScheduleExists):
		f.Errors = map[string]string{"name": "is taken by another schedule; pick another name"}
		return h.renderSchedules(c, http.StatusConflict, templates.SchedulesView{Form: f})
	case errors.As(err, &ve):
		f.Errors = map[string]string{scheduleFormField(ve.Field): ve.Message}
		return h.renderSchedules(c, http.StatusUnprocessableEntity, templates.SchedulesView{Form: f})
	case err != nil:
		return fmt.Errorf("creating schedule: %w", err)
	}
	h.logger.Info("schedule created", "schedule", sched.Name, "cron", sched.Cron, "by", httpx.CurrentSession(c).Username)
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

// PauseSchedule is a schedule's Pause button: 303 back to the list;
// htmx follows it and swaps the list in place.
func (h *Handler) PauseSchedule(c echo.Context) error { return h.setSchedulePaused(c, true) }

// ResumeSchedule is a schedule's Resume button, as PauseSchedule.
func (h *Handler) ResumeSchedule(c echo.Context) error { return h.setSchedulePaused(c, false) }

func (h *Handler) setSchedulePaused(c echo.Context, pause bool) error {
	name := c.Param("name")
	notFound := func() error {
		return h.renderSchedules(c, http.StatusNotFound, templates.SchedulesView{
			Notice: "Nothing changed: there is no schedule of that name (deleted meanwhile?).",
			Form:   templates.ScheduleFormView{Timezone: "UTC", Priority: "0", MaxAttempts: strconv.Itoa(queue.DefaultMaxAttempts)},
		})
	}
	if !queue.ValidScheduleName(name) {
		return notFound()
	}
	_, err := h.queue.UpdateSchedule(c.Request().Context(), name, queue.SchedulePatch{Paused: &pause}, time.Now())
	switch {
	case errors.Is(err, queue.ErrScheduleNotFound):
		return notFound()
	case err != nil:
		return fmt.Errorf("pausing schedule: %w", err)
	}
	h.logger.Info("schedule paused", "schedule", name, "paused", pause, "by", httpx.CurrentSession(c).Username)
	return c.Redirect(http.StatusSeeOther, "/schedules")
}
