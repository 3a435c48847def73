-- name: AttemptListByJob :many
-- Every attempt of a job (the view job_attempts derives the latest one
-- from the job row while it runs or once it succeeded).
SELECT number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome, error
FROM job_attempts
WHERE job_id = @job_id
ORDER BY number;
