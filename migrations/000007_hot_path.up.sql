-- The hot path at a fraction of the database work: a job that is claimed
-- and succeeds writes its row twice and nothing else. What can be derived
-- at read time is no longer written:
--   * the job row describes its latest attempt (number, worker, token,
--     start, last heartbeat, deadline, and its end when it succeeded);
--     the attempts table keeps only attempts that ended otherwise
--     (failed, lease_expired, released, cancelled), written when they end;
--   * the timeline's created, claimed and succeeded entries come from
--     jobs.created_at, the attempts' start times and jobs.finished_at;
--     the events table keeps what cannot be derived (failures, refusals,
--     progress, effects, cancel and retry requests);
--   * the per-state counts are kept by a statement-level trigger, one
--     counter write per statement instead of one per changed row.

-- Attempts that the job row now describes are not kept twice: the
-- running attempt and the one that succeeded.
DELETE FROM attempts a USING jobs j
WHERE a.job_id = j.id AND a.number = j.attempt AND j.state IN ('running', 'succeeded');
-- The derived timeline entries.
DELETE FROM events WHERE type IN ('created', 'claimed', 'succeeded');

-- Claims and completions are not HOT (state is indexed), so each one adds
-- an entry to every index whose predicate the new row matches. Most jobs
-- carry no idempotency key: a partial index leaves them out.
ALTER TABLE jobs DROP CONSTRAINT jobs_idempotency_key_key;
CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Counting by statement. Each statement that changes states adds its net
-- change to one shard row; heartbeats (which never change a state) find
-- nothing to add and write nothing. The two transition tables are
-- aggregated apart, never joined (a join of two tables the planner knows
-- nothing about is a nested loop: quadratic in the batch). That is exact:
-- a state's change is its count after minus its count before; every claim
-- adds one to a job's attempt and nothing else changes attempt, so claims
-- are the growth of the attempts' sum; and no statement moves a job out of
-- succeeded, so completions are the growth of that count.
DROP TRIGGER jobs_count_update ON jobs;
DROP FUNCTION jobs_count_update();
CREATE FUNCTION jobs_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_apply(n.pending - o.pending, n.running - o.running, n.succeeded - o.succeeded,
                             n.dead - o.dead, n.cancelled - o.cancelled,
                             n.attempts - o.attempts, n.succeeded - o.succeeded)
    FROM (SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
                 count(*) FILTER (WHERE state = 'running') AS running,
                 count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                 count(*) FILTER (WHERE state = 'dead') AS dead,
                 count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                 COALESCE(sum(attempt), 0) AS attempts
          FROM new_rows) n,
         (SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
                 count(*) FILTER (WHERE state = 'running') AS running,
                 count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                 count(*) FILTER (WHERE state = 'dead') AS dead,
                 count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                 COALESCE(sum(attempt), 0) AS attempts
          FROM old_rows) o
    WHERE (n.pending, n.running, n.succeeded, n.dead, n.cancelled, n.attempts)
          IS DISTINCT FROM (o.pending, o.running, o.succeeded, o.dead, o.cancelled, o.attempts);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_update();

-- The retry rule, said once: after a counted failure (the n-th since the
-- last manual retry) a job is cancelled if a cancel was requested, dead if
-- the failure was permanent or the budget is spent, and otherwise pending
-- again after min(max, base·2^(n-1)·j), j uniform in [0.8, 1.2].
CREATE FUNCTION job_state_after_failure(cancel_requested boolean, retryable boolean,
                                        counted integer, max_attempts integer)
RETURNS job_state LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN cancel_requested THEN 'cancelled'
                WHEN NOT retryable OR counted >= max_attempts THEN 'dead'
                ELSE 'pending' END::job_state
$$;
CREATE FUNCTION job_backoff(counted integer, base_ms integer, max_ms integer)
RETURNS interval LANGUAGE sql VOLATILE AS $$
    SELECT LEAST(max_ms::float8, base_ms * power(2, counted - 1) * (0.8 + random() * 0.4)) * interval '1 millisecond'
$$;

-- The whole history, as readers see it; the derivation is said here once.
-- Every attempt of a job: those that ended other than by succeeding are
-- rows of attempts; the latest, while it runs or once it succeeded, is
-- described by the job row.
CREATE VIEW job_attempts AS
SELECT a.job_id, a.number, a.worker_id, a.lease_token, a.started_at, a.heartbeat_at, a.lease_until,
       a.ended_at, a.outcome, a.error
FROM attempts a
UNION ALL
SELECT j.id, j.attempt, j.lease_owner, j.lease_token, j.attempt_started_at, j.heartbeat_at, j.lease_until,
       CASE WHEN j.state = 'succeeded' THEN j.finished_at END,
       CASE WHEN j.state = 'succeeded' THEN 'succeeded'::attempt_outcome END,
       NULL::text
FROM jobs j
WHERE j.state IN ('running', 'succeeded') AND j.attempt > 0;

-- A job's timeline: the events written, and the entries derived from the
-- job and its attempts (created, each claim, the success). Ordered by
-- (at, rank, id).
CREATE VIEW job_timeline AS
SELECT j.id AS job_id, j.created_at AS at, 'created'::text AS type, NULL::integer AS attempt,
       jsonb_build_object('kind', j.kind, 'queue', j.queue) AS detail, 0 AS rank, 0::bigint AS id
FROM jobs j
UNION ALL
SELECT a.job_id, a.started_at, 'claimed', a.number,
       jsonb_build_object('worker', a.worker_id, 'lease_token', a.lease_token), 1, 0
FROM job_attempts a
UNION ALL
SELECT e.job_id, e.at, e.type, e.attempt, e.detail, 2, e.id
FROM events e
UNION ALL
SELECT j.id, j.finished_at, 'succeeded', j.attempt,
       jsonb_build_object('worker', j.lease_owner, 'lease_token', j.lease_token), 3, 0
FROM jobs j
WHERE j.state = 'succeeded';
