-- name: ReplayAttemptGet :one
-- One attempt of a job, for its bundle (the view job_attempts holds the
-- running or succeeded attempt as well as the ended ones).
SELECT number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome, error
FROM job_attempts
WHERE job_id = @job_id AND number = @number;

-- name: ReplayEventPageByAttempt :many
-- A page of one attempt's timeline entries in timeline order, after the
-- entry (at, rank, id) that ended the previous page: a bundle reads an
-- attempt page by page, never all of it at once. @progress_only keeps the
-- progress events alone.
SELECT at, type, attempt, detail, rank::integer AS rank, id::bigint AS id FROM job_timeline
WHERE job_id = @job_id AND attempt = @attempt::integer
  AND (at, rank, id) > (@after_at::timestamptz, @after_rank::integer, @after_id::bigint)
  AND (NOT @progress_only::boolean OR type = 'progress')
ORDER BY at, rank, id
LIMIT @max;

-- name: ReplayArtifactListByAttempt :many
-- One attempt's artifacts in upload order (artifacts_job_idx).
SELECT * FROM artifacts WHERE job_id = @job_id AND attempt = @attempt ORDER BY id;
