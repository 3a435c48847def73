package api

import "encoding/json"

// NewSchedule is the body of POST /api/v1/schedules. Timezone "" is UTC.
type NewSchedule struct {
	Name string `json:"name"`
	// Cron is a 5-field expression, a descriptor (@hourly, @daily,
	// @weekly, @monthly, @yearly) or @every DURATION (whole seconds).
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	// Job is the job of every tick, as POST /api/v1/jobs takes it; RunAt
	// and IdempotencyKey must be empty (each tick sets them).
	Job    NewJob `json:"job"`
	Paused bool   `json:"paused,omitempty"`
}

// SchedulePatch is the body of PATCH /api/v1/schedules/{name}: absent (or
// null) fields stay as they are.
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
	MaxAttempts   *int32          `json:"max_attempts"`
	TimeoutMs     *int32          `json:"timeout_ms"`
	BackoffBaseMs *int32          `json:"backoff_base_ms"`
	BackoffMaxMs  *int32          `json:"backoff_max_ms"`
	// ConcurrencyKey and ConcurrencyLimit go on each tick's job.
	ConcurrencyKey   *string `json:"concurrency_key"`
	ConcurrencyLimit int32   `json:"concurrency_limit"`
	// RateLimits go on each tick's job; absent when none.
	RateLimits []string `json:"rate_limits,omitempty"`
}

// Schedule is a schedule as the API shows it.
type Schedule struct {
	Name     string      `json:"name"`
	Cron     string      `json:"cron"`
	Timezone string      `json:"timezone"`
	Job      ScheduleJob `json:"job"`
	Paused   bool        `json:"paused"`
	// NextRunAt is the next tick to fire (nil while paused); LastRunAt
	// the last tick enqueued, as LastJobID.
	NextRunAt *Time  `json:"next_run_at"`
	LastRunAt *Time  `json:"last_run_at"`
	LastJobID *int64 `json:"last_job_id"`
	CreatedAt Time   `json:"created_at"`
	UpdatedAt Time   `json:"updated_at"`
}

// Schedules is GET /api/v1/schedules: every schedule, by name.
type Schedules struct {
	Schedules []Schedule `json:"schedules"`
}
