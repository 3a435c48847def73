-- name: ReplayAttemptGet :one
-- One attempt of a job, for its bundle (the view job_attempts holds the
-- running or succeeded attempt as well as the ended ones).
SELECT number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome, error
FROM job_attempts
WHERE job_id = @job_id AND number = @number;

-- name: ReplayEventListByAttempt :many
-- The timeline entries of one attempt, in timeline order.
SELECT at, type, attempt, detail FROM job_timeline
WHERE job_id = @job_id AND attempt = @attempt::integer
ORDER BY at, rank, id;

-- name: ReplayArtifactListByAttempt :many
-- One attempt's artifacts in upload order (artifacts_job_idx).
SELECT * FROM artifacts WHERE job_id = @job_id AND attempt = @attempt ORDER BY id;
