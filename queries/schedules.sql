-- Schedules: periodic jobs. next_run_at is computed in Go (queue/cron.go)
-- from the cron expression and timezone; the database keeps it so that
-- any server can take the scheduler role and know what is due.

-- name: ScheduleInsert :one
-- Returns no row when the name is taken.
INSERT INTO schedules (name, cron, timezone, job, paused, next_run_at)
VALUES (@name, @cron, @timezone, @job, @paused, sqlc.narg('next_run_at'))
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: ScheduleGet :one
SELECT * FROM schedules WHERE name = @name;

-- name: ScheduleGetForUpdate :one
SELECT * FROM schedules WHERE name = @name FOR UPDATE;

-- name: ScheduleList :many
SELECT * FROM schedules ORDER BY name;

-- name: ScheduleUpdate :one
UPDATE schedules
SET cron = @cron, timezone = @timezone, job = @job, paused = @paused,
    next_run_at = sqlc.narg('next_run_at'), updated_at = now()
WHERE name = @name
RETURNING *;

-- name: ScheduleDelete :execrows
DELETE FROM schedules WHERE name = @name;

-- name: ScheduleFired :execrows
-- Records that the tick was enqueued as job_id and moves to the next one,
-- unless the schedule changed since the scheduler read it (a PATCH
-- computed a new next_run_at): then the scheduler reads it again.
UPDATE schedules
SET last_run_at = @tick, last_job_id = @job_id, next_run_at = @next_run_at
WHERE name = @name AND next_run_at = @expected AND NOT paused;

-- name: ScheduleNotify :exec
-- Wakes the active scheduler: a schedule was created, changed or deleted.
SELECT pg_notify('leasehold_schedules', @name::text);

-- name: ListenSchedules :exec
LISTEN leasehold_schedules;
