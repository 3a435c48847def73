-- Reads for the dashboard pages. Each page reads what it shows for all of
-- its rows in one statement, never one query per row.

-- name: JobListRecentlyDead :many
-- The latest dead letters by when they died: a job retried by hand and
-- dead again is recent even though its id is old.
SELECT * FROM jobs
WHERE state = 'dead'
ORDER BY finished_at DESC NULLS LAST, id DESC
LIMIT @max;

-- name: ArtifactListLatestScreenshots :many
-- For each of @job_ids, the screenshots of its latest attempt that has any
-- (an attempt that lost its lease early may have none), at most @per_job
-- of them, the last ones taken; total says how many that attempt has.
WITH latest AS (
    SELECT job_id, max(attempt) AS attempt
    FROM artifacts
    WHERE job_id = ANY(@job_ids::bigint[]) AND kind = 'screenshot'
    GROUP BY job_id
), ranked AS (
    SELECT a.id, a.job_id, a.attempt, a.name, a.content_type, a.width, a.height, a.created_at,
           row_number() OVER (PARTITION BY a.job_id ORDER BY a.id DESC) AS rank,
           count(*) OVER (PARTITION BY a.job_id) AS total
    FROM artifacts a
    JOIN latest l ON l.job_id = a.job_id AND l.attempt = a.attempt
    WHERE a.kind = 'screenshot'
)
SELECT id, job_id, attempt, name, content_type, width, height, created_at, total::bigint AS total
FROM ranked
WHERE rank <= @per_job::bigint
ORDER BY job_id, id;

-- name: WorkerListStatus :many
-- Workers seen within @within_ms, and whether within @online_ms, both by
-- the database clock, with how many jobs each holds now, its outcomes of
-- the last @outcomes_ms (jobs it completed; its attempts that failed or
-- whose lease expired) and the job whose attempt it ended last (the one it
-- runs now comes from JobListHeldBy). Every figure is an index range of
-- that one worker (jobs_running_idx, jobs_succeeded_owner_idx,
-- attempts_worker_ended_idx), read from the index alone or for one row.
-- Completed jobs are counted here only outside the whole hours from
-- full_from to full_to (the hours of the window that ended over five
-- minutes ago): a busy worker completes thousands a day, and the caller
-- counts those hours once each (WorkerSucceededByHour) and keeps them.
WITH bounds AS (
    SELECT now() - (@outcomes_ms::bigint) * interval '1 millisecond' AS since,
           date_bin('1 hour', now() - (@outcomes_ms::bigint) * interval '1 millisecond', timestamptz '2000-01-01 00:00:00+00')
               + interval '1 hour' AS full_from,
           date_bin('1 hour', now() - interval '5 minutes', timestamptz '2000-01-01 00:00:00+00') AS full_to
), hours AS (
    SELECT since, full_from, greatest(full_from, full_to) AS full_to FROM bounds
)
SELECT w.id, w.device, w.queues, w.started_at, w.last_seen,
       (w.last_seen >= now() - (@online_ms::bigint) * interval '1 millisecond')::boolean AS online,
       w.info, w.info_at, w.info_error, w.claiming, w.not_claiming,
       (SELECT count(*) FROM jobs j WHERE j.state = 'running' AND j.lease_owner = w.id)::bigint AS running,
       h.full_from::timestamptz AS full_from, h.full_to::timestamptz AS full_to,
       ((SELECT count(*) FROM jobs j
         WHERE j.state = 'succeeded' AND j.lease_owner = w.id
           AND j.finished_at >= h.since AND j.finished_at < h.full_from)
        + (SELECT count(*) FROM jobs j
           WHERE j.state = 'succeeded' AND j.lease_owner = w.id
             AND j.finished_at >= greatest(h.since, h.full_to)))::bigint AS succeeded_outside_hours,
       (SELECT count(*) FROM attempts a
        WHERE a.worker_id = w.id AND a.outcome IN ('failed', 'lease_expired')
          AND a.ended_at >= h.since)::bigint AS failed_recent,
       coalesce(
           (SELECT last.id FROM (
               (SELECT j.id, j.finished_at AS at FROM jobs j
                WHERE j.state = 'succeeded' AND j.lease_owner = w.id
                ORDER BY j.finished_at DESC LIMIT 1)
               UNION ALL
               (SELECT a.job_id, a.ended_at FROM attempts a
                WHERE a.worker_id = w.id AND a.ended_at IS NOT NULL
                ORDER BY a.ended_at DESC LIMIT 1)
            ) last ORDER BY last.at DESC LIMIT 1),
           0)::bigint AS last_ended_job_id
FROM workers w CROSS JOIN hours h
WHERE w.last_seen >= now() - (@within_ms::bigint) * interval '1 millisecond'
ORDER BY w.last_seen DESC, w.id
LIMIT 500;

-- name: WorkerSucceededByHour :many
-- The jobs each of @owners completed in each whole hour from @hours_from
-- to @hours_to (hours with none are absent), from jobs_succeeded_owner_idx
-- alone.
SELECT lease_owner::text AS worker_id,
       date_bin('1 hour', finished_at, timestamptz '2000-01-01 00:00:00+00')::timestamptz AS hour,
       count(*)::bigint AS succeeded
FROM jobs
WHERE state = 'succeeded' AND lease_owner = ANY(@owners::text[])
  AND finished_at >= @hours_from::timestamptz AND finished_at < @hours_to::timestamptz
GROUP BY 1, 2;

-- name: JobListHeldBy :many
-- The newest @per_worker running jobs of each named worker, without their
-- payloads, by worker and id: a short range of jobs_running_idx
-- (lease_owner, id) each, however many jobs run.
SELECT j.id, j.kind, j.app, j.lease_owner::text AS lease_owner, j.attempt, j.lease_until
FROM unnest(@owners::text[]) AS o(owner)
CROSS JOIN LATERAL (
    SELECT id, kind, app, lease_owner, attempt, lease_until FROM jobs
    WHERE state = 'running' AND lease_owner = o.owner
    ORDER BY id DESC
    LIMIT @per_worker
) j
ORDER BY j.lease_owner, j.id;

-- name: JobListPermanentlyDead :many
-- Which of @job_ids last went dead on a failure the worker said was not
-- retryable. The job row does not keep that; the detail of its latest
-- 'dead' event does (events_job_idx serves each job).
SELECT job_id FROM (
    SELECT DISTINCT ON (job_id) job_id, detail
    FROM events
    WHERE job_id = ANY(@job_ids::bigint[]) AND type = 'dead'
    ORDER BY job_id, id DESC
) last_death
WHERE last_death.detail->>'retryable' = 'false';

-- name: UseGenericPlans :exec
-- For the rest of the transaction, statements run on a generic plan: for
-- those without optional filters, planning anew on every call (the
-- server's pools force custom plans) costs more than running them.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);
