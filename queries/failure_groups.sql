-- name: FailureGroupListDead :many
-- The groups of the dead-letter queue, the one whose latest dead letter
-- died last first. For each: its dead letters' count, first and last
-- death and up to five apps (and how many apps in all), read from
-- jobs_dead_group_idx alone; its failed attempts ever, from
-- attempts_failure_group_idx. First and last seen span both (a group
-- made by migration 31 from older dead letters is younger than they are).
-- Groups are written only by failure_group_of, when an attempt ends.
WITH dead AS (
    SELECT failure_group AS id, count(*) AS dead, min(finished_at)::timestamptz AS first_dead,
           max(finished_at)::timestamptz AS last_dead, count(DISTINCT app) AS app_count,
           coalesce((array_agg(DISTINCT app) FILTER (WHERE app IS NOT NULL))[1:5], '{}')::text[] AS apps
    FROM jobs
    WHERE state = 'dead' AND failure_group IS NOT NULL
    GROUP BY failure_group
    ORDER BY last_dead DESC NULLS LAST, failure_group DESC
    LIMIT @max
)
SELECT g.id, g.signature, g.screen_hash, g.error, g.job_id, g.attempt, g.screenshot_id, g.created_at,
       d.dead, d.apps, d.app_count, a.attempts,
       least(g.created_at, d.first_dead)::timestamptz AS first_seen,
       greatest(a.last_ended, d.last_dead, g.created_at)::timestamptz AS last_seen
FROM dead d
JOIN failure_groups g ON g.id = d.id
CROSS JOIN LATERAL (
    SELECT count(*) AS attempts, max(ended_at) AS last_ended FROM attempts WHERE failure_group = g.id
) a
ORDER BY d.last_dead DESC NULLS LAST, g.id DESC;

-- name: FailureGroupListRecent :many
-- The groups with a failed attempt that ended at or after @since, dead
-- letters or not, the one seen last first: the attempts of the window,
-- its first and last, the group's dead letters now, and the apps of its
-- latest failed attempts (at most 100 looked at). Each group's figures
-- are index ranges of attempts_failure_group_idx and jobs_dead_group_idx.
SELECT g.id, g.signature, g.screen_hash, g.error, g.job_id, g.attempt, g.screenshot_id, g.created_at,
       a.attempts, a.first_seen, a.last_seen, d.dead, ap.apps, ap.app_count
FROM failure_groups g
CROSS JOIN LATERAL (
    SELECT count(*) AS attempts, min(ended_at)::timestamptz AS first_seen, max(ended_at)::timestamptz AS last_seen
    FROM attempts WHERE failure_group = g.id AND ended_at >= @since::timestamptz
) a
CROSS JOIN LATERAL (
    SELECT count(*) AS dead FROM jobs WHERE state = 'dead' AND failure_group = g.id
) d
CROSS JOIN LATERAL (
    SELECT coalesce((array_agg(DISTINCT j.app) FILTER (WHERE j.app IS NOT NULL))[1:5], '{}')::text[] AS apps,
           count(DISTINCT j.app) AS app_count
    FROM (SELECT job_id FROM attempts WHERE failure_group = g.id ORDER BY ended_at DESC LIMIT 100) l
    JOIN jobs j ON j.id = l.job_id
) ap
WHERE a.attempts > 0
ORDER BY a.last_seen DESC, g.id DESC
LIMIT @max;

-- name: FailureGroupGet :one
SELECT * FROM failure_groups WHERE id = @id;

-- name: JobListDeadInGroup :many
-- The dead letters of failure group @failure_group, newest first, below
-- @before_id (0: from the newest), through jobs_dead_group_idx.
SELECT * FROM jobs
WHERE state = 'dead' AND failure_group = @failure_group::bigint
  AND (@before_id::bigint = 0 OR id < @before_id)
  AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
  AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
  AND (sqlc.narg('app')::text IS NULL OR app = sqlc.narg('app'))
ORDER BY id DESC
LIMIT @max;

-- name: ErrorSignature :one
-- What failure_group_of groups an error by, for tests and the docs.
SELECT coalesce(error_signature(@error::text), '')::text AS signature;
