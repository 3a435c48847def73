-- name: WorkerSeen :exec
INSERT INTO workers (id, device, queues) VALUES (@id, sqlc.narg('device'), @queues::text[])
ON CONFLICT (id) DO UPDATE SET last_seen = now(), device = EXCLUDED.device, queues = EXCLUDED.queues;

-- name: WorkerListRecent :many
-- Workers seen within the last @within_ms (database clock), with the jobs
-- each holds now.
SELECT w.id, w.device, w.queues, w.started_at, w.last_seen,
       (SELECT count(*) FROM jobs j WHERE j.state = 'running' AND j.lease_owner = w.id)::bigint AS running
FROM workers w
WHERE w.last_seen >= now() - (@within_ms::bigint) * interval '1 millisecond'
ORDER BY w.last_seen DESC, w.id
LIMIT 500;

-- name: ListenJobs :exec
LISTEN leasehold_jobs;

-- name: ListenChanges :exec
-- What changed, for the dashboard's live updates (migration 000013).
LISTEN leasehold_events;

-- name: ListenReaper :exec
LISTEN leasehold_reaper;

-- name: Ping :one
-- Readiness: the target database answers a query, not just the server.
SELECT 1::integer AS ok;
