-- name: WorkerSeen :exec
-- Presence, every few seconds: also what the worker's device-info command
-- last said (@info, gathered @info_age_ms before the worker sent it, so
-- info_at is by the database clock), the error of its last run, and
-- whether the worker claims. A worker without a device-info command sends
-- none, and clears what an earlier run of it left. @starting is the first
-- presence of a worker process: a worker of that id started (again) now.
INSERT INTO workers (id, device, queues, info, info_at, info_error, claiming, not_claiming)
VALUES (@id, sqlc.narg('device'), @queues::text[], sqlc.narg('info'),
        now() - sqlc.narg('info_age_ms')::bigint * interval '1 millisecond',
        sqlc.narg('info_error'), @claiming, sqlc.narg('not_claiming'))
ON CONFLICT (id) DO UPDATE
SET last_seen = now(),
    started_at = CASE WHEN @starting::boolean THEN now() ELSE workers.started_at END,
    device = EXCLUDED.device, queues = EXCLUDED.queues,
    info = EXCLUDED.info, info_at = EXCLUDED.info_at, info_error = EXCLUDED.info_error,
    claiming = EXCLUDED.claiming, not_claiming = EXCLUDED.not_claiming;

-- name: WorkerSeenMany :many
-- The presence of many remote workers in one statement (a server's batch,
-- queue.PresenceBatch): as WorkerSeen for each row of @reports, with its
-- last_seen age_ms before now (when the server received it), and only
-- for workers whose token is active; it returns the ids it recorded.
-- queues are comma-joined (queue names hold no comma).
INSERT INTO workers (id, device, queues, last_seen, info, info_at, info_error, claiming, not_claiming)
SELECT r.id, r.device, string_to_array(r.queues, ','),
       now() - r.age_ms * interval '1 millisecond',
       r.info, now() - (r.age_ms + r.info_age_ms) * interval '1 millisecond',
       r.info_error, r.claiming, r.not_claiming
FROM jsonb_to_recordset(@reports::jsonb)
     AS r(id text, device text, queues text, age_ms bigint, info jsonb, info_age_ms bigint,
          info_error text, claiming boolean, not_claiming text)
JOIN api_tokens t ON t.name = r.id AND t.role = 'worker' AND t.revoked_at IS NULL
ON CONFLICT (id) DO UPDATE
SET last_seen = greatest(workers.last_seen, EXCLUDED.last_seen), device = EXCLUDED.device, queues = EXCLUDED.queues,
    info = EXCLUDED.info, info_at = EXCLUDED.info_at, info_error = EXCLUDED.info_error,
    claiming = EXCLUDED.claiming, not_claiming = EXCLUDED.not_claiming
RETURNING workers.id;

-- name: WorkerDeviceAvailability :one
-- For a job waiting on device @device in @queue: how many workers seen
-- within @online_ms (database clock) carry that label and take that
-- queue, how many of them claim, and why the others do not.
SELECT count(*)::bigint AS online,
       count(*) FILTER (WHERE w.claiming)::bigint AS claiming,
       coalesce(array_agg(w.id || ': ' || coalesce(w.not_claiming, 'not claiming') ORDER BY w.id)
                FILTER (WHERE NOT w.claiming), '{}')::text[] AS reasons
FROM workers w
WHERE w.last_seen >= now() - (@online_ms::bigint) * interval '1 millisecond'
  AND @device::text = ANY(string_to_array(w.device, ','))
  AND @queue::text = ANY(w.queues);

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

-- name: WritableCheck :one
-- Readiness: whether this session could write. A standby is in recovery;
-- default_transaction_read_only (ALTER SYSTEM, ALTER DATABASE, a session's
-- SET) makes every transaction read-only.
SELECT pg_is_in_recovery()::boolean AS in_recovery,
       (current_setting('transaction_read_only') = 'on')::boolean AS read_only;

-- name: LiveWatch :exec
-- This server has open event streams: the live triggers notify (migration
-- 13) until the row's time runs out or it is removed.
INSERT INTO live_watchers (server, until) VALUES (@server, now() + (@ttl_ms::bigint) * interval '1 millisecond')
ON CONFLICT (server) DO UPDATE SET until = EXCLUDED.until;

-- name: LiveUnwatch :exec
DELETE FROM live_watchers WHERE server = @server;

-- name: WorkersSeenBySession :execrows
-- Direct workers' presence, all in one statement (the active reaper's,
-- every queue.SessionPresenceEvery): a direct worker whose reaper lock
-- session is open names itself in that session's application_name
-- ('leasehold worker ' and the first 40 hex digits of the SHA-256 of its
-- id, queue.PresenceSessionName), and that session ends with the process,
-- or within 5 s of a freeze (idle_in_transaction_session_timeout). Rows
-- seen in the last 5 s are left alone: a write of their own is as new.
UPDATE workers w SET last_seen = now()
FROM (SELECT DISTINCT substr(application_name, 18) AS h
      FROM pg_catalog.pg_stat_activity
      WHERE datname = current_database() AND application_name LIKE 'leasehold worker %') s
WHERE s.h = left(encode(sha256(convert_to(w.id, 'UTF8')), 'hex'), 40)
  AND w.last_seen < now() - interval '5 seconds';
