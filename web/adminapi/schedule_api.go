package adminapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// scheduleRequest is the body of POST /api/v1/schedules. The job stays raw
// until it is decoded as a submitted job is, so that its errors read
// "job.priority".
type scheduleRequest struct {
	api.NewSchedule
	Job json.RawMessage `json:"job"`
}

// schedulePatchRequest is the body of PATCH /api/v1/schedules/{name},
// its job raw as in scheduleRequest.
type schedulePatchRequest struct {
	api.SchedulePatch
	Job json.RawMessage `json:"job"`
}

// decodeScheduleJob decodes a schedule's job with the code that decodes a
// submitted one.
func decodeScheduleJob(raw json.RawMessage) (queue.NewJob, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return queue.NewJob{}, httpx.BadRequest("job", "is required: the job each tick enqueues, as POST /api/v1/jobs takes it")
	}
	return decodeNewJob(raw, "job.")
}

// CreateSchedule stores a new schedule: 201, or 409 when the name is taken.
func (h *Handler) CreateSchedule(c echo.Context) error {
	body, err := httpx.ReadBody(c, httpx.JobBodyLimit)
	if err != nil {
		return err
	}
	var req scheduleRequest
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		return err
	}
	nj, err := decodeScheduleJob(req.Job)
	if err != nil {
		return err
	}
	sched, err := h.queue.CreateSchedule(c.Request().Context(), queue.NewSchedule{
		Name: req.Name, Cron: req.Cron, Timezone: req.Timezone, Job: nj, Paused: req.Paused,
	}, time.Now())
	if err != nil {
		return scheduleError(err)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/schedules/"+sched.Name)
	return c.JSON(http.StatusCreated, sched.API())
}

// ListSchedules answers every schedule, by name.
func (h *Handler) ListSchedules(c echo.Context) error {
	list, err := h.read(c).Schedules(c.Request().Context())
	if err != nil {
		return err
	}
	body := api.Schedules{Schedules: make([]api.Schedule, len(list))}
	for i, sc := range list {
		body.Schedules[i] = sc.API()
	}
	return c.JSON(http.StatusOK, body)
}

// GetSchedule answers one schedule.
func (h *Handler) GetSchedule(c echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	sched, err := h.queue.Schedule(c.Request().Context(), name)
	if err != nil {
		return scheduleError(err)
	}
	return c.JSON(http.StatusOK, sched.API())
}

// UpdateSchedule pauses, resumes or changes a schedule.
func (h *Handler) UpdateSchedule(c echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	body, err := httpx.ReadBody(c, httpx.JobBodyLimit)
	if err != nil {
		return err
	}
	var req schedulePatchRequest
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
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
	sched, err := h.queue.UpdateSchedule(c.Request().Context(), name, p, time.Now())
	if err != nil {
		return scheduleError(err)
	}
	return c.JSON(http.StatusOK, sched.API())
}

// DeleteSchedule removes a schedule; the jobs it made stay.
func (h *Handler) DeleteSchedule(c echo.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	if err := h.queue.DeleteSchedule(c.Request().Context(), name); err != nil {
		return scheduleError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

var errScheduleNotFound = &httpx.Error{Status: http.StatusNotFound, Message: "schedule not found"}

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
		return &httpx.Error{Status: http.StatusConflict, Message: err.Error(), Field: "name"}
	}
	return err
}
