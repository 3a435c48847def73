-- name: EventListByJob :many
-- A job's timeline: the events written and the entries the view
-- job_timeline derives (created, each claim, the success), in time order.
SELECT at, type, attempt, detail FROM job_timeline
WHERE job_id = @job_id
ORDER BY at, rank, id;

-- name: EventStaleWrite :one
-- Records a refused write on the job's timeline, naming the stale token and
-- the attempt it belonged to. Returns false when the job does not exist.
WITH j AS (
    SELECT jobs.id, jobs.state, jobs.lease_token, jobs.lease_owner, jobs.attempt FROM jobs WHERE jobs.id = @job_id
), ins AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT j.id, 'stale_write_refused',
           COALESCE((SELECT a.number FROM attempts a WHERE a.job_id = j.id AND a.lease_token = @lease_token::bigint),
                    CASE WHEN j.lease_token = @lease_token::bigint THEN j.attempt END),
           jsonb_build_object('op', @op::text, 'lease_token', @lease_token::bigint, 'worker', @worker_id::text,
                              'current_token', j.lease_token, 'state', j.state,
                              'reason', CASE WHEN j.lease_token <> @lease_token::bigint THEN 'stale token'
                                             WHEN j.state <> 'running' THEN 'job is ' || j.state
                                             WHEN j.lease_owner IS DISTINCT FROM @worker_id::text THEN 'not the lease owner'
                                             ELSE 'lease expired' END)
    FROM j
), counted AS (
    UPDATE job_counts SET refused_total = refused_total + 1
    WHERE shard = pg_backend_pid() % 64 AND EXISTS (SELECT 1 FROM j)
)
SELECT EXISTS (SELECT 1 FROM j) AS found;

-- name: EventProgress :one
-- A progress event from the executor; only the current lease holder may
-- write one, like every other write of an attempt (no row: refused). The
-- attempt keeps its newest @keep: event_progress (migration 18) deletes
-- older ones and counts them in its progress_dropped event.
SELECT p.id::bigint AS id
FROM (SELECT event_progress(@job_id::bigint, @lease_token::bigint, @worker_id::text, @detail::jsonb, @keep::integer) AS id) p
WHERE p.id IS NOT NULL;

-- name: EventListByJobRecent :many
-- The newest @max entries of a job's timeline, newest first, for its page:
-- each string member of a detail cut to @chars characters in the database,
-- so that a page of events costs a page, however large their messages.
SELECT t.at, t.type, t.attempt,
       COALESCE((SELECT jsonb_object_agg(m.key, CASE WHEN jsonb_typeof(m.value) = 'string'
                                                      THEN to_jsonb(left(m.value #>> '{}', @chars::integer))
                                                      ELSE m.value END)
                 FROM jsonb_each(CASE WHEN jsonb_typeof(t.detail) = 'object' THEN t.detail ELSE '{}'::jsonb END) m),
                '{}'::jsonb)::jsonb AS detail
FROM job_timeline t
WHERE t.job_id = @job_id
ORDER BY t.at DESC, t.rank DESC, t.id DESC
LIMIT @max;

-- name: EventCountByJob :one
-- How many entries a job's timeline has.
SELECT count(*) FROM job_timeline WHERE job_id = @job_id;

-- name: EventProgressBefore :one
-- The message of a replay step (see queue.ReplayStep): for a screenshot
-- of a @step, the attempt's latest progress event of that step; else
-- (or when that step has none) the attempt's latest progress event at
-- or before @at, when the screenshot was taken; '' for none.
SELECT COALESCE((SELECT e.detail->>'message' FROM events e
                 WHERE sqlc.narg('step')::integer IS NOT NULL
                   AND e.job_id = @job_id AND e.attempt = @attempt::integer AND e.type = 'progress'
                   AND e.detail->>'step' = (sqlc.narg('step')::integer)::text
                 ORDER BY e.at DESC, e.id DESC LIMIT 1),
                (SELECT e.detail->>'message' FROM events e
                 WHERE e.job_id = @job_id AND e.attempt = @attempt::integer AND e.type = 'progress' AND e.at <= @at
                 ORDER BY e.at DESC, e.id DESC LIMIT 1), '')::text AS message;
