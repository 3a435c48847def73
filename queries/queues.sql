-- Queue settings (pause, cap) and the per-queue view of GET /api/v1/queues.
-- A queue has no row until someone changes it; no row means unpaused and
-- uncapped.

-- name: QueueSettingsUpsert :one
-- Creates or changes a queue's settings. A NULL @paused leaves paused as
-- it was; @set_max_running false leaves max_running as it was (true with
-- a NULL @max_running clears the cap). A pause records who and when; a
-- resume keeps the last pause's record.
INSERT INTO queue_settings AS s (name, paused, paused_by, paused_at, max_running)
VALUES (@name, COALESCE(sqlc.narg('paused')::boolean, false),
        CASE WHEN sqlc.narg('paused')::boolean THEN @actor::text END,
        CASE WHEN sqlc.narg('paused')::boolean THEN now() END,
        CASE WHEN @set_max_running::boolean THEN sqlc.narg('max_running')::integer END)
ON CONFLICT (name) DO UPDATE
SET paused = COALESCE(sqlc.narg('paused')::boolean, s.paused),
    paused_by = CASE WHEN sqlc.narg('paused')::boolean AND NOT s.paused THEN @actor::text ELSE s.paused_by END,
    paused_at = CASE WHEN sqlc.narg('paused')::boolean AND NOT s.paused THEN now() ELSE s.paused_at END,
    max_running = CASE WHEN @set_max_running::boolean THEN sqlc.narg('max_running')::integer ELSE s.max_running END,
    updated_at = now()
RETURNING *;

-- name: QueueList :many
-- Every queue that has jobs or settings, with its pending and running
-- counts, by name. The queues that have jobs not running are found by
-- skipping through jobs_queue_id_idx (one probe per queue, not a scan of
-- the jobs; the index holds no running job, so the probes say so too),
-- and the queues of running jobs, with their counts, from queue_running
-- (kept by the count triggers, migration 27). Pending is counted in the
-- queue's range of jobs_queue_pending_idx, exactly up to 100,000 and no
-- further (100,001 means more): an exact count of a million waiting jobs
-- would take a second on every read. The per-state totals of the whole
-- table stay exact (job_counts).
WITH RECURSIVE job_queues(name) AS (
    (SELECT queue FROM jobs WHERE state <> 'running' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT queue FROM jobs WHERE state <> 'running' AND queue > q.name ORDER BY queue LIMIT 1)
    FROM job_queues q WHERE q.name IS NOT NULL
), running AS (
    SELECT queue AS name, sum(running)::bigint AS n FROM queue_running GROUP BY queue HAVING sum(running) > 0
), names AS (
    SELECT name FROM job_queues WHERE name IS NOT NULL
    UNION
    SELECT name FROM running
    UNION
    SELECT name FROM queue_settings
)
SELECT n.name::text AS name,
       COALESCE(s.paused, false)::boolean AS paused, s.paused_by, s.paused_at, s.max_running,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.state = 'pending' AND j.queue = n.name
                         ORDER BY j.queue, j.priority, j.run_at, j.id LIMIT 100001) p)::bigint AS pending,
       COALESCE(r.n, 0)::bigint AS running
FROM names n LEFT JOIN queue_settings s ON s.name = n.name LEFT JOIN running r ON r.name = n.name
ORDER BY n.name
LIMIT @max;

-- name: QueueGet :one
-- One queue as QueueList shows it (a queue with neither jobs nor settings
-- comes back unpaused and uncapped, with nothing pending or running).
SELECT @name::text AS name,
       COALESCE(s.paused, false)::boolean AS paused, s.paused_by, s.paused_at, s.max_running,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.state = 'pending' AND j.queue = @name::text
                         ORDER BY j.queue, j.priority, j.run_at, j.id LIMIT 100001) p)::bigint AS pending,
       (SELECT coalesce(sum(r.running), 0)::bigint FROM queue_running r WHERE r.queue = @name::text)::bigint AS running
FROM (SELECT 1) one LEFT JOIN queue_settings s ON s.name = @name::text;
