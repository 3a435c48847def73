-- name: FailureGroupListDead :many
-- The groups of the dead-letter queue, the one seen last first. The
-- groups that hold dead letters are found by skipping through
-- jobs_dead_group_idx, one descent per group; each one's first and last
-- failure are the ends of its range of attempts_failure_group_idx. Its
-- dead letters and failed attempts are counted up to @cap each (a page
-- view never walks more), and its apps are those of its latest 200 dead
-- letters: up to five, and how many there were. A group made by
-- migration 31 from older dead letters may have no attempt rows; its
-- creation stands in for them. Groups are written only by
-- failure_group_of, when an attempt ends.
WITH RECURSIVE holding AS (
    (SELECT failure_group AS id FROM jobs WHERE state = 'dead' AND failure_group IS NOT NULL ORDER BY failure_group LIMIT 1)
    UNION ALL
    SELECT (SELECT j.failure_group FROM jobs j WHERE j.state = 'dead' AND j.failure_group > h.id ORDER BY j.failure_group LIMIT 1)
    FROM holding h WHERE h.id IS NOT NULL
), seen AS (
    SELECT h.id, (SELECT max(ended_at) FROM attempts WHERE failure_group = h.id) AS last_ended
    FROM holding h
    WHERE h.id IS NOT NULL
    ORDER BY last_ended DESC NULLS LAST, h.id DESC
    LIMIT @max
)
SELECT g.id, g.signature, g.screen_hash, g.error, g.job_id, g.attempt, g.screenshot_id, g.created_at,
       d.dead, a.attempts, ap.apps, ap.app_count,
       least(g.created_at, (SELECT min(ended_at) FROM attempts WHERE failure_group = g.id))::timestamptz AS first_seen,
       greatest(s.last_ended, g.created_at)::timestamptz AS last_seen
FROM seen s
JOIN failure_groups g ON g.id = s.id
CROSS JOIN LATERAL (
    SELECT count(*) AS dead FROM (SELECT 1 FROM jobs WHERE state = 'dead' AND failure_group = g.id LIMIT @cap::bigint) x
) d
CROSS JOIN LATERAL (
    SELECT count(*) AS attempts FROM (SELECT 1 FROM attempts WHERE failure_group = g.id LIMIT @cap::bigint) x
) a
CROSS JOIN LATERAL (
    SELECT coalesce((array_agg(app ORDER BY app))[1:5], '{}')::text[] AS apps, count(*) AS app_count
    FROM (SELECT DISTINCT app FROM (
        SELECT app FROM jobs WHERE state = 'dead' AND failure_group = g.id AND app IS NOT NULL ORDER BY id DESC LIMIT 200
    ) r) x
) ap
ORDER BY s.last_ended DESC NULLS LAST, g.id DESC;

-- name: FailureGroupListRecent :many
-- The groups with a failed attempt that ended at or after @since, dead
-- letters or not, the one seen last first: the attempts of the window
-- (counted up to @cap), its first and last, the group's dead letters
-- now (up to @cap), and the apps of its latest failed attempts (at most
-- 200 looked at). Each figure is a bounded range of
-- attempts_failure_group_idx or jobs_dead_group_idx.
SELECT g.id, g.signature, g.screen_hash, g.error, g.job_id, g.attempt, g.screenshot_id, g.created_at,
       d.dead, a.attempts, ap.apps, ap.app_count, w.first_seen, w.last_seen
FROM failure_groups g
CROSS JOIN LATERAL (
    SELECT min(ended_at)::timestamptz AS first_seen, max(ended_at)::timestamptz AS last_seen
    FROM attempts WHERE failure_group = g.id AND ended_at >= @since::timestamptz
) w
CROSS JOIN LATERAL (
    SELECT count(*) AS attempts FROM (
        SELECT 1 FROM attempts WHERE failure_group = g.id AND ended_at >= @since::timestamptz LIMIT @cap::bigint
    ) x
) a
CROSS JOIN LATERAL (
    SELECT count(*) AS dead FROM (SELECT 1 FROM jobs WHERE state = 'dead' AND failure_group = g.id LIMIT @cap::bigint) x
) d
CROSS JOIN LATERAL (
    SELECT coalesce((array_agg(DISTINCT j.app))[1:5], '{}')::text[] AS apps, count(DISTINCT j.app) AS app_count
    FROM (SELECT job_id FROM attempts WHERE failure_group = g.id AND ended_at >= @since::timestamptz ORDER BY ended_at DESC LIMIT 200) l
    JOIN jobs j ON j.id = l.job_id
    WHERE j.app IS NOT NULL
) ap
WHERE w.last_seen IS NOT NULL
ORDER BY w.last_seen DESC, g.id DESC
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
