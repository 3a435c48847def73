package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/leasehold/leasehold/api"
)

// NewSchedule is a schedule to create. Timezone "" is UTC.
type NewSchedule = api.NewSchedule

// SchedulePatch changes a schedule; nil fields stay as they are.
type SchedulePatch = api.SchedulePatch

// ScheduleJob is the job a schedule makes, defaults filled in.
type ScheduleJob = api.ScheduleJob

// Schedule is a schedule as the API shows it.
type Schedule = api.Schedule

// CreateSchedule creates a schedule; a taken name is an *Error with
// Status 409.
func (c *Client) CreateSchedule(ctx context.Context, s NewSchedule) (Schedule, error) {
	var out Schedule
	_, err := c.do(ctx, http.MethodPost, "/api/v1/schedules", nil, s, &out)
	return out, err
}

// Schedules lists every schedule by name.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	var body api.Schedules
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
