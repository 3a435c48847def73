-- name: AttemptListByJob :many
-- While an attempt runs, its heartbeat and deadline live on the job row;
-- the caller takes them from there for the running attempt.
SELECT a.*, j.state AS job_state, j.attempt AS job_attempt,
       j.heartbeat_at AS job_heartbeat_at, j.lease_until AS job_lease_until
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.job_id = @job_id
ORDER BY a.number;
