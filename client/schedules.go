package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// NewSchedule is a schedule to create. Timezone "" is UTC.
type NewSchedule struct {
	Name string `json:"name"`
	// Cron is a 5-field expression, a descriptor (@hourly, @daily,
	// @weekly, @monthly, @yearly) or @every DURATION (whole seconds).
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	// Job is the job of every tick; RunAt and IdempotencyKey must be
	// empty (each tick sets them).
	Job    NewJob `json:"job"`
	Paused bool   `json:"paused,omitempty"`
}

// SchedulePatch changes a schedule; nil fields stay as they are.
type SchedulePatch struct {
	Paused   *bool   `json:"paused,omitempty"`
	Cron     *string `json:"cron,omitempty"`
	Timezone *string `json:"timezone,omitempty"`
	Job      *NewJob `json:"job,omitempty"`
}

// ScheduleJob is the job a schedule makes, defaults filled in.
type ScheduleJob struct {
	Kind          string          `json:"kind"`
	Queue         string          `json:"queue"`
	Priority      int32           `json:"priority"`
	Payload       json.RawMessage `json:"payload"`
	MaxAttempts   int32           `json:"max_attempts"`
	TimeoutMs     *int32          `json:"timeout_ms"`
	BackoffBaseMs int32           `json:"backoff_base_ms"`
	BackoffMaxMs  int32           `json:"backoff_max_ms"`
}

// Schedule is a schedule as the API shows it.
type Schedule struct {
	Name      string      `json:"name"`
	Cron      string      `json:"cron"`
	Timezone  string      `json:"timezone"`
	Job       ScheduleJob `json:"job"`
	Paused    bool        `json:"paused"`
	NextRunAt *time.Time  `json:"next_run_at"`
	LastRunAt *time.Time  `json:"last_run_at"`
	LastJobID *int64      `json:"last_job_id"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
}

// CreateSchedule creates a schedule; a taken name is an *Error with
// Status 409.
func (c *Client) CreateSchedule(ctx context.Context, s NewSchedule) (Schedule, error) {
	var out Schedule
	_, err := c.do(ctx, http.MethodPost, "/api/v1/schedules", nil, s, &out)
	return out, err
}

// Schedules lists every schedule by name.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	var body struct {
		Schedules []Schedule `json:"schedules"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/schedules", nil, nil, &body)
	return body.Schedules, err
}

// Schedule returns one schedule.
func (c *Client) Schedule(ctx context.Context, name string) (Schedule, error) {
	var out Schedule
	_, err := c.do(ctx, http.MethodGet, "/api/v1/schedules/"+url.PathEscape(name), nil, nil, &out)
	return out, err
}

// UpdateSchedule pauses, resumes or changes a schedule.
func (c *Client) UpdateSchedule(ctx context.Context, name string, p SchedulePatch) (Schedule, error) {
	var out Schedule
	_, err := c.do(ctx, http.MethodPatch, "/api/v1/schedules/"+url.PathEscape(name), nil, p, &out)
	return out, err
}

// DeleteSchedule deletes a schedule; the jobs it made stay.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/v1/schedules/"+url.PathEscape(name), nil, nil, nil)
	return err
}
