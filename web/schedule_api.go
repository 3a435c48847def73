package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// scheduleView is a schedule as the API shows it.
type scheduleView struct {
	Name      string            `json:"name"`
	Cron      string            `json:"cron"`
	Timezone  string            `json:"timezone"`
	Job       queue.ScheduleJob `json:"job"`
	Paused    bool              `json:"paused"`
	NextRunAt *apiTime          `json:"next_run_at"`
	LastRunAt *apiTime          `json:"last_run_at"`
	LastJobID *int64            `json:"last_job_id"`
	CreatedAt apiTime           `json:"created_at"`
	UpdatedAt apiTime           `json:"updated_at"`
}

func newScheduleView(s queue.Schedule) scheduleView {
	return scheduleView{
		Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Job: s.Job, Paused: s.Paused,
		NextRunAt: apiTimePtr(s.NextRunAt), LastRunAt: apiTimePtr(s.LastRunAt), LastJobID: s.LastJobID,
		CreatedAt: apiTime(s.CreatedAt), UpdatedAt: apiTime(s.UpdatedAt),
	}
}

// schedulesBody is the list of schedules.
type schedulesBody struct {
	Schedules []scheduleView `json:"schedules"`
}

// scheduleRequest is the body of POST /api/v1/schedules. The job stays raw
// until it is decoded as a submitted job is, so that its errors read
// "job.priority".
type scheduleRequest struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron"`
	Timezone string          `json:"timezone"`
	Job      json.RawMessage `json:"job"`
	Paused   bool            `json:"paused"`
}

// schedulePatchRequest is the body of PATCH /api/v1/schedules/{name}:
// absent (or null) fields stay as they are.
type schedulePatchRequest struct {
	Paused   *bool           `json:"paused"`
	Cron     *string         `json:"cron"`
	Timezone *string         `json:"timezone"`
	Job      json.RawMessage `json:"job"`
}

// decodeScheduleJob decodes a schedule's job with the code that decodes a
// submitted one.
func decodeScheduleJob(raw json.RawMessage) (queue.NewJob, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return queue.NewJob{}, badRequest("job", "is required: the job each tick enqueues, as POST /api/v1/jobs takes it")
	}
	return decodeNewJob(raw, "job.")
}

// scheduleCreate stores a new schedule: 201, or 409 when the name is taken.
func (s *server) scheduleCreate(c echo.Context) error {
	body, err := readBody(c, jobBodyLimit)
	if err != nil {
		return err
	}
	var req scheduleRequest
	if err := decodeObject(body, &req, ""); err != nil {
		return err
	}
	nj, err := decodeScheduleJob(req.Job)
	if err != nil {
		return err
	}
	sched, err := s.queue.CreateSchedule(c.Request().Context(), queue.NewSchedule{
		Name: req.Name, Cron: req.Cron, Timezone: req.Timezone, Job: nj, Paused: req.Paused,
	}, time.Now())
	if err != nil {
		return scheduleError(err)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/schedules/"+sched.Name)
	return c.JSON(http.StatusCreated, newScheduleView(sched))
}

// scheduleList answers every schedule, by name.
func (s *server) scheduleList(c echo.Context) error {
	list, err := s.queue.Schedules(c.Request().Context())
	if err != nil {
		return err
	}
	views := make([]scheduleView, len(list))
	for i, sc := range list {
		views[i] = newScheduleView(sc)
	}
	return c.JSON(http.StatusOK, schedulesBody{Schedules: views})
}

// scheduleGet answers one schedule.
func (s *server) scheduleGet(c echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	sched, err := s.queue.Schedule(c.Request().Context(), name)
	if err != nil {
		return scheduleError(err)
	}
	return c.JSON(http.StatusOK, newScheduleView(sched))
}

// scheduleUpdate pauses, resumes or changes a schedule.
func (s *server) scheduleUpdate(c echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	body, err := readBody(c, jobBodyLimit)
	if err != nil {
		return err
	}
	var req schedulePatchRequest
	if err := decodeObject(body, &req, ""); err != nil {
		return err
	}
	p := queue.SchedulePatch{Paused: req.Paused, Cron: req.Cron, Timezone: req.Timezone}
	if len(req.Job) > 0 && string(req.Job) != "null" {
		nj, err := decodeScheduleJob(req.Job)
		if err != nil {
			return err
		}
		p.Job = &nj
	}
	sched, err := s.queue.UpdateSchedule(c.Request().Context(), name, p, time.Now())
	if err != nil {
		return scheduleError(err)
	}
	return c.JSON(http.StatusOK, newScheduleView(sched))
}

// scheduleDelete removes a schedule; the jobs it made stay.
func (s *server) scheduleDelete(c echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	if err := s.queue.DeleteSchedule(c.Request().Context(), name); err != nil {
		return scheduleError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

var errScheduleNotFound = &apiError{Status: http.StatusNotFound, Message: "schedule not found"}

// scheduleName reads the :name path parameter. A name no schedule could
// have is not found, without asking the database.
func scheduleName(c echo.Context) (string, error) {
	name := c.Param("name")
	if !queue.ValidScheduleName(name) {
		return "", errScheduleNotFound
	}
	return name, nil
}

func scheduleError(err error) error {
	switch {
	case errors.Is(err, queue.ErrScheduleNotFound):
		return errScheduleNotFound
	case errors.Is(err, queue.ErrScheduleExists):
		return &apiError{Status: http.StatusConflict, Message: err.Error(), Field: "name"}
	}
	return err
}
