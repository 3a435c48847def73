-- The job row describes its latest attempt; an attempt that ends other than
-- by succeeding is written to attempts, with its event, by the statement
-- that ends it (data-modifying CTEs), so a transition is never half
-- recorded. Submission, claim and success write the job row alone: their
-- timeline entries are derived when read (EventListByJob). Deadlines are
-- always computed with the database clock.

-- name: JobInsert :one
-- Inserts one job; returns no row when idempotency_key is already taken.
INSERT INTO jobs (kind, queue, priority, payload, app, device, max_attempts,
                  run_at, timeout_ms, idempotency_key, backoff_base_ms, backoff_max_ms, schedule,
                  concurrency_key, concurrency_limit, max_cost, max_steps, rate_limits)
VALUES (@kind, @queue, @priority, @payload, sqlc.narg('app'), sqlc.narg('device'), @max_attempts,
        COALESCE(sqlc.narg('run_at')::timestamptz, now()), sqlc.narg('timeout_ms'),
        sqlc.narg('idempotency_key'), @backoff_base_ms, @backoff_max_ms, sqlc.narg('schedule'),
        sqlc.narg('concurrency_key'), @concurrency_limit, sqlc.narg('max_cost'), sqlc.narg('max_steps'), sqlc.narg('rate_limits')::text[])
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING *;

-- name: JobInsertMany :many
-- Inserts a batch given as a JSON array of job objects, in array order;
-- jobs whose idempotency_key is taken are skipped (the caller checks them).
WITH input AS (
    SELECT e.elem, e.ord FROM jsonb_array_elements(@jobs::jsonb) WITH ORDINALITY AS e(elem, ord)
)
INSERT INTO jobs (kind, queue, priority, payload, app, device, max_attempts,
                  run_at, timeout_ms, idempotency_key, backoff_base_ms, backoff_max_ms,
                  concurrency_key, concurrency_limit, max_cost, max_steps, rate_limits)
SELECT elem->>'kind', elem->>'queue', (elem->>'priority')::integer, elem->'payload',
       elem->>'app', elem->>'device', (elem->>'max_attempts')::integer,
       COALESCE((elem->>'run_at')::timestamptz, now()), (elem->>'timeout_ms')::integer,
       elem->>'idempotency_key', (elem->>'backoff_base_ms')::integer, (elem->>'backoff_max_ms')::integer,
       elem->>'concurrency_key', (elem->>'concurrency_limit')::integer,
       (elem->>'max_cost')::bigint, (elem->>'max_steps')::integer,
       CASE WHEN jsonb_typeof(elem->'rate_limits') = 'array'
            THEN ARRAY(SELECT jsonb_array_elements_text(elem->'rate_limits')) END
FROM input ORDER BY ord
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING *;

-- name: JobGet :one
SELECT * FROM jobs WHERE id = @id;

-- name: JobGetByIdempotencyKeys :many
SELECT * FROM jobs WHERE idempotency_key = ANY(@keys::text[]);

-- name: JobList :many
-- Keyset pagination, newest first; every filter is optional. The kind,
-- queue and app indexes leave running jobs out (a claim would write them
-- all), so a listing by those reads running jobs apart, through
-- jobs_running_idx: they are as many as the workers' slots at most.
SELECT * FROM (
    (SELECT * FROM jobs
     WHERE (state <> 'running' OR (sqlc.narg('kind')::text IS NULL AND sqlc.narg('queue')::text IS NULL AND sqlc.narg('app')::text IS NULL))
       AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
       AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
       AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
       AND (sqlc.narg('app')::text IS NULL OR app = sqlc.narg('app'))
       AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id'))
     ORDER BY id DESC
     LIMIT @max)
    UNION ALL
    (SELECT * FROM jobs
     WHERE state = 'running'
       AND NOT (sqlc.narg('kind')::text IS NULL AND sqlc.narg('queue')::text IS NULL AND sqlc.narg('app')::text IS NULL)
       AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
       AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
       AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
       AND (sqlc.narg('app')::text IS NULL OR app = sqlc.narg('app'))
       AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id'))
     ORDER BY id DESC
     LIMIT @max)
) listed
ORDER BY id DESC
LIMIT @max;

-- name: JobClaim :many
-- Claims up to @max due jobs. The candidates CTE is MATERIALIZED so that it
-- runs exactly once: written as "UPDATE … WHERE id IN (SELECT … LIMIT n FOR
-- UPDATE SKIP LOCKED)" the planner may re-run the subquery and claim more
-- than n rows. Each claimed job starts a new attempt with a fencing token
-- from lease_token_next(), larger than any token the job had before, its
-- low bits keyed by a seed drawn once for the statement; the attempt lives
-- on the job row until it ends. The reaper sleeps until the
-- next deadline it knows of, at most @wake_below_ms: a batch whose
-- earliest lease ends sooner than that tells it so, with one notification
-- carrying that lease in ms.
--
-- This is the fast path, for jobs no limit applies to: it leaves out keyed
-- jobs (they are not even in jobs_claim_idx) and every job of a paused or
-- capped queue (queue_settings probed per candidate; an array of them
-- computed once per statement instead, as an InitPlan, cost 8 more buffer
-- touches and 40 % more commits per job in the River benchmark, through
-- the plans it led to). JobClaimLimited* claim the others, and
-- JobClaimRated* (queries/rate_limits.sql) the jobs that name rate-limit
-- keys ("rate_limits IS NULL" is jobs_claim_idx's own predicate: the
-- test costs nothing).
--
-- @handover_ms is set by the worker API only (SPEC lease rule 11): the
-- job is handed over, and its lease first runs only that long (LEAST
-- ignores the NULL a direct claim passes), until the worker's first
-- heartbeat confirms it has the job; JobReapExpired ends a hand-over
-- never confirmed not_delivered. A direct claim's cost is unchanged:
-- handover_pending is in no index.
--
-- @now is NULL but in tests, which name the time instead of sleeping
-- (here and in every lease statement below); the plan is the same.
--
-- Availability windows (win, SPEC "Availability windows"): nothing is
-- taken for a label or a worker outside its window, nor a job whose
-- timeout_ms runs past the window's end. The first EXISTS is not
-- correlated, so a worker whose window is closed reads no job at all.
-- Each job's own test is a scalar subquery, not EXISTS: as EXISTS it
-- became a semi-join whose row estimate (1) made even the generic plan
-- read every pending job, sort them and keep @max, 86 ms a claim of 200
-- from 20,000 (the drain fell to 0.20x River's); as a filter the claim
-- index is read in order and stops at @max (7 ms). The limited claims
-- use the same form.
--
-- @token_id is set by the worker API only: the claim takes nothing unless
-- that worker token is active, and it holds a share lock on the token's
-- row until it commits (gate), which TokenRevoke's update waits for. So a
-- revoke either commits first, and the claim, which waits for it and then
-- reads the revoked row again, takes nothing; or it waits for the claim's
-- commit, and the statement after it (JobLeasesEndByOwner) sees the jobs
-- the claim took and ends their leases. No claim of a revoked token can
-- leave a lease standing, whatever the timing.
WITH gate AS MATERIALIZED (
    SELECT id FROM api_tokens
    WHERE id = sqlc.narg('token_id')::bigint AND revoked_at IS NULL
    FOR SHARE
), win AS MATERIALIZED (
    SELECT c.device, c.closes FROM availability_claimable(@worker_id::text, @devices::text[], coalesce(sqlc.narg('now')::timestamptz, now())) AS c(device, closes)
), candidates AS MATERIALIZED (
    SELECT id FROM jobs
    WHERE state = 'pending'
      AND (sqlc.narg('token_id')::bigint IS NULL OR EXISTS (SELECT 1 FROM gate))
      AND concurrency_key IS NULL
      AND rate_limits IS NULL
      AND run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
      AND queue = ANY(@queues::text[])
      AND (device IS NULL OR device = ANY(@devices::text[]))
      AND EXISTS (SELECT 1 FROM win)
      AND coalesce((SELECT availability_fits(win.closes, jobs.timeout_ms, coalesce(sqlc.narg('now')::timestamptz, now()))
                    FROM win WHERE win.device IS NOT DISTINCT FROM jobs.device LIMIT 1), false)
      AND NOT EXISTS (SELECT 1 FROM queue_settings s WHERE s.name = jobs.queue AND (s.paused OR s.max_running IS NOT NULL))
    ORDER BY priority, run_at, id
    LIMIT @max
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        lease_owner = @worker_id::text,
        lease_ms = @lease_ms::integer,
        lease_token = lease_token_next(j.id, (SELECT lease_token_seed())),
        heartbeat_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        attempt_started_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        handover_pending = sqlc.narg('handover_ms')::integer IS NOT NULL,
        lease_until = coalesce(sqlc.narg('now')::timestamptz, now())
                      + LEAST(@lease_ms::integer, j.timeout_ms, sqlc.narg('handover_ms')::integer) * interval '1 millisecond'
    -- By id, through the primary key: joined to the CTE instead, the
    -- planner, which cannot see how few rows it holds, may scan the table.
    WHERE j.id = ANY (ARRAY(SELECT id FROM candidates))
    RETURNING j.*
), wake AS (
    SELECT pg_notify('leasehold_reaper', min(LEAST(@lease_ms::integer, timeout_ms, sqlc.narg('handover_ms')::integer))::text) AS sent
    FROM claimed HAVING min(LEAST(@lease_ms::integer, timeout_ms, sqlc.narg('handover_ms')::integer)) < @wake_below_ms::integer
), resumed AS (
    -- An attempt that receives a checkpoint resumes from it: the
    -- timeline says from which step (SPEC "Checkpoints"). A column test
    -- on the rows just claimed: a job without one costs nothing more.
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT id, 'resumed', attempt,
           jsonb_build_object('step', checkpoint_step, 'from_attempt', checkpoint_attempt, 'saved_at', checkpoint_at)
    FROM claimed WHERE checkpoint IS NOT NULL
)
SELECT claimed.* FROM claimed LEFT JOIN wake ON true ORDER BY priority, run_at, id;

-- name: JobClaimLimitedAny :one
-- Whether a limited claim could find anything for these queues: a capped
-- queue that is not paused, or a due keyed job that names no rate-limit
-- key (any: keyed jobs that name some are the rate-limited claim's, which
-- takes their keys' locks too); and whether a rate-limited claim could
-- (rated). Sent with every fast
-- claim, in its round trip and transaction (JobClaimAndLimits).
--
-- Whether any keyed job is pending at all is asked first, in the order of
-- jobs_claim_keyed_idx, which only that index gives: on a table not yet
-- analyzed (a fresh database after a bulk insert) PostgreSQL takes
-- "concurrency_key IS NOT NULL" to match nearly every row and answered the
-- question below through jobs_queue_pending_idx, reading every pending job
-- (1.5 ms per claim at 20,000 of them). Without keyed jobs, which is the
-- common case, that one page is all it reads.
SELECT (EXISTS (SELECT 1 FROM queue_settings
                WHERE name = ANY(@queues::text[]) AND NOT paused AND max_running IS NOT NULL)
        OR (COALESCE((SELECT true FROM jobs
                      WHERE state = 'pending' AND concurrency_key IS NOT NULL AND rate_limits IS NULL
                      ORDER BY concurrency_key LIMIT 1), false)
            AND EXISTS (SELECT 1 FROM jobs
                        WHERE state = 'pending' AND concurrency_key IS NOT NULL AND rate_limits IS NULL
                          AND queue = ANY(@queues::text[]) AND run_at <= now())))::boolean AS any,
       -- Whether a due job of these queues names rate-limit keys none of
       -- which is spent (JobClaimRatedLock could take it). As for keyed
       -- jobs, whether any is pending at all is asked first, in the order
       -- of jobs_claim_rated_idx, which only it gives (one page while no
       -- job names keys): on a table not yet analyzed the question below
       -- went through jobs_queue_pending_idx, 135 buffers of 5,000 jobs.
       -- Jobs with and without a concurrency key have an index each
       -- (jobs_claim_rated_keyed_idx, by key): each is asked on its own.
       ((COALESCE((SELECT true FROM jobs
                   WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NULL
                   ORDER BY queue, priority, run_at, id LIMIT 1), false)
         AND EXISTS (SELECT 1 FROM jobs
                     WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NULL
                       AND queue = ANY(@queues::text[]) AND run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
                       AND NOT (rate_limits && (SELECT rate_limits_spent(coalesce(sqlc.narg('now')::timestamptz, now()))))))
        OR (COALESCE((SELECT true FROM jobs
                      WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NOT NULL
                      ORDER BY concurrency_key, priority, run_at, id LIMIT 1), false)
            AND EXISTS (SELECT 1 FROM jobs
                        WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NOT NULL
                          AND queue = ANY(@queues::text[]) AND run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
                          AND NOT (rate_limits && (SELECT rate_limits_spent(coalesce(sqlc.narg('now')::timestamptz, now())))))))::boolean AS rated;

-- name: JobClaimLimitedLock :many
-- The first statement of a limited claim, in the claimer's transaction:
-- the limits that apply to jobs it could take and seem to have room (its
-- capped queues, and the keys of due keyed jobs, in the claim order of
-- each key's first job, at most @max of them), each taken for the
-- transaction with an advisory
-- lock that does not wait. A limit another claimer holds comes back with
-- locked false: that claimer counts and claims for it now, and this one
-- leaves it alone.
--
-- Why a lock and a second statement: under READ COMMITTED a statement
-- sees what was committed when it began, so two claimers counting the
-- running jobs of a key in one statement each could both see room for
-- one more, and both take it. Holding the key's lock from before the
-- count until commit makes claims of one key take turns, and the count
-- (JobClaimLimited) runs in a later statement than the lock, so its
-- snapshot includes every claim committed by the previous holder (a
-- transaction is visible as committed before it releases its locks).
--
-- It also names, without locking them, the worker's queues no free claim
-- may take from: paused ones (scope paused) and capped ones without room
-- (scope full). The claimer leaves them out of its JobClaim, so that a
-- claim on a capped queue does not read every job waiting behind the cap
-- only to find that none is free (JobClaim's own test of each job stays:
-- a queue paused or capped meanwhile is still never claimed from).
--
-- Distinct keys are found by skipping through jobs_claim_keyed_idx (one
-- probe per key), so a key with many waiting jobs costs no more than one
-- with a single job. Keyed jobs that name rate-limit keys are not in that
-- index: JobClaimRatedLock takes them, under the same key locks.
WITH RECURSIVE keys(k) AS (
    (SELECT concurrency_key FROM jobs
     WHERE state = 'pending' AND concurrency_key IS NOT NULL AND rate_limits IS NULL
     ORDER BY concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.concurrency_key FROM jobs j
            WHERE j.state = 'pending' AND j.concurrency_key IS NOT NULL AND j.rate_limits IS NULL AND j.concurrency_key > keys.k
            ORDER BY j.concurrency_key LIMIT 1)
    FROM keys WHERE keys.k IS NOT NULL
), win AS MATERIALIZED (
    SELECT c.device, c.closes FROM availability_claimable(@worker_id::text, @devices::text[], now()) AS c(device, closes)
), firsts AS MATERIALIZED (
    SELECT keys.k, f.priority, f.run_at, f.id, f.concurrency_limit
    FROM keys CROSS JOIN LATERAL (
        SELECT j.priority, j.run_at, j.id, j.concurrency_limit FROM jobs j
        WHERE j.state = 'pending' AND j.concurrency_key = keys.k AND j.rate_limits IS NULL AND j.run_at <= now()
          AND j.queue = ANY(@queues::text[])
          AND (j.device IS NULL OR j.device = ANY(@devices::text[]))
          AND coalesce((SELECT availability_fits(win.closes, j.timeout_ms, now())
                        FROM win WHERE win.device IS NOT DISTINCT FROM j.device LIMIT 1), false)
          -- Probed per row (not an array of paused queues, whose
          -- selectivity the planner cannot know), so that the key's
          -- index is read in order and the scan stops at the first row.
          AND NOT EXISTS (SELECT 1 FROM queue_settings s WHERE s.name = j.queue AND s.paused)
        ORDER BY j.concurrency_key, j.priority, j.run_at, j.id
        LIMIT 1
    ) f
), due_keys AS MATERIALIZED (
    -- A key that looks full (read without its lock: JobClaimLimited
    -- counts again under it) is not locked, so that it neither holds back
    -- the keys behind it nor makes other claimers wait for nothing.
    SELECT firsts.k, firsts.priority, firsts.run_at, firsts.id, firsts.concurrency_limit
    -- Each key's running jobs counted in one pass for all keys: a count
    -- per key, which the planner may run through jobs_running_id_idx,
    -- read every running job's entry once per key, and in a transaction
    -- that has just completed jobs, their entries too (measured: 9 to 29
    -- buffer touches a key, against 3 through jobs_running_keyed_idx).
    FROM firsts LEFT JOIN (
        SELECT r.concurrency_key AS k, count(*) AS running FROM jobs r
        WHERE r.state = 'running' AND r.concurrency_key = ANY (ARRAY(SELECT k FROM firsts))
        GROUP BY r.concurrency_key
    ) r ON r.k = firsts.k
    WHERE coalesce(r.running, 0) < firsts.concurrency_limit
    ORDER BY firsts.priority, firsts.run_at, firsts.id
    LIMIT @max
), limits AS MATERIALIZED (
    SELECT NULL::integer AS first_limit,
           CASE WHEN s.paused THEN 'paused'
                WHEN (SELECT coalesce(sum(r.running), 0)::bigint FROM queue_running r WHERE r.queue = s.name) < s.max_running THEN 'queue'
                ELSE 'full' END AS scope,
           s.name
    FROM queue_settings s
    WHERE s.name = ANY(@queues::text[]) AND (s.paused OR s.max_running IS NOT NULL)
    UNION ALL
    SELECT concurrency_limit, 'key', k FROM due_keys
    UNION ALL
    -- Not a limit: whether a due job of these queues names rate-limit
    -- keys none of which is spent, as JobClaimLimitedAny's rated (the
    -- claimer then claims them, queue/ratelimit.go).
    SELECT NULL, 'rated', ''
    WHERE (COALESCE((SELECT true FROM jobs
                     WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NULL
                     ORDER BY queue, priority, run_at, id LIMIT 1), false)
           AND EXISTS (SELECT 1 FROM jobs
                       WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NULL
                         AND queue = ANY(@queues::text[]) AND run_at <= now()
                         AND NOT (rate_limits && (SELECT rate_limits_spent(now())))))
       OR (COALESCE((SELECT true FROM jobs
                     WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NOT NULL
                     ORDER BY concurrency_key, priority, run_at, id LIMIT 1), false)
           AND EXISTS (SELECT 1 FROM jobs
                       WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NOT NULL
                         AND queue = ANY(@queues::text[]) AND run_at <= now()
                         AND NOT (rate_limits && (SELECT rate_limits_spent(now())))))
)
SELECT scope::text AS scope, name::text AS name,
       (CASE WHEN scope IN ('paused', 'full', 'rated') THEN true
             ELSE pg_try_advisory_xact_lock(hashtextextended('leasehold:limit:' || scope || ':' || name, 0)) END)::boolean AS locked,
       -- a key's: the concurrency_limit of its first due job, by which its
       -- room was judged (JobClaimLimited reads the key that far)
       coalesce(first_limit, 0)::integer AS first_limit
FROM limits;

-- name: JobClaimLimited :many
-- The second statement of a limited claim: counts what runs now under the
-- limits this transaction holds (@locked_queues, @locked_keys) and claims
-- up to @max jobs within them, in claim order. A job of a key starts only
-- while fewer than its own concurrency_limit running jobs share the key;
-- a job of a capped queue only while fewer than max_running of the queue
-- run; a job under both needs both locks. Each key and each queue is read
-- only as far as it has room (no scan of everything waiting behind a
-- limit), and a job held back does not hold back the others. When a job
-- is under both limits, one the queue's cap holds back still takes room
-- in its key for this claim: that errs towards claiming less, never more.
-- The claim itself is JobClaim's (same SET, the same hand-over, the same
-- gate on a worker token); the state is checked again in the UPDATE,
-- since a cancel may have come first.
WITH gate AS MATERIALIZED (
    SELECT id FROM api_tokens
    WHERE id = sqlc.narg('token_id')::bigint AND revoked_at IS NULL
    FOR SHARE
), qfree AS MATERIALIZED (
    SELECT s.name,
           s.max_running - (SELECT coalesce(sum(r.running), 0)::bigint FROM queue_running r WHERE r.queue = s.name) AS free
    FROM queue_settings s
    WHERE s.name = ANY(@locked_queues::text[]) AND NOT s.paused AND s.max_running IS NOT NULL
), win AS MATERIALIZED (
    -- availability windows, as in JobClaim
    SELECT c.device, c.closes FROM availability_claimable(@worker_id::text, @devices::text[], now()) AS c(device, closes)
), kfree AS MATERIALIZED (
    -- first_limit: the limit of the key's first due job, by which
    -- JobClaimLimitedLock judged the key's room (@locked_key_limits, in
    -- the order of @locked_keys). It only bounds how far the key is
    -- read: each job is held to its own limit below.
    SELECT k.k, coalesce(r.running, 0) AS running, (@locked_key_limits::integer[])[k.n] AS first_limit
    FROM unnest(@locked_keys::text[]) WITH ORDINALITY AS k(k, n)
    -- counted in one pass for all keys, as in JobClaimLimitedLock
    LEFT JOIN (
        SELECT r.concurrency_key AS k, count(*) AS running FROM jobs r
        WHERE r.state = 'running' AND r.concurrency_key = ANY (@locked_keys::text[])
        GROUP BY r.concurrency_key
    ) r ON r.k = k.k
), picks AS MATERIALIZED (
    SELECT p.id, p.queue, p.priority, p.run_at
    FROM kfree CROSS JOIN LATERAL (
        SELECT w.*, row_number() OVER (ORDER BY w.priority, w.run_at, w.id) AS n
        FROM (SELECT j.id, j.queue, j.priority, j.run_at, j.concurrency_limit FROM jobs j
              WHERE j.state = 'pending' AND j.concurrency_key = kfree.k AND j.rate_limits IS NULL AND j.run_at <= now()
                AND j.queue = ANY(@queues::text[])
                AND (j.device IS NULL OR j.device = ANY(@devices::text[]))
                AND coalesce((SELECT availability_fits(win.closes, j.timeout_ms, now())
                              FROM win WHERE win.device IS NOT DISTINCT FROM j.device LIMIT 1), false)
                -- a paused or capped queue's job needs its queue's lock too
                AND (j.queue = ANY (ARRAY(SELECT name FROM qfree))
                     OR j.queue <> ALL (ARRAY(SELECT name FROM queue_settings WHERE paused OR max_running IS NOT NULL)))
              ORDER BY j.concurrency_key, j.priority, j.run_at, j.id
              -- Read only as far as the key has room (by its first job's
              -- limit), not @max jobs of every key to keep one or two.
              LIMIT LEAST(@max::integer, GREATEST(kfree.first_limit - kfree.running, 0))) w
    ) p
    WHERE kfree.running + p.n <= p.concurrency_limit
    UNION ALL
    SELECT p.id, p.queue, p.priority, p.run_at
    FROM qfree CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.priority, j.run_at FROM jobs j
        WHERE j.state = 'pending' AND j.queue = qfree.name AND j.concurrency_key IS NULL AND j.rate_limits IS NULL
          AND j.run_at <= now()
          AND (j.device IS NULL OR j.device = ANY(@devices::text[]))
          AND EXISTS (SELECT 1 FROM win)
          AND coalesce((SELECT availability_fits(win.closes, j.timeout_ms, now())
                        FROM win WHERE win.device IS NOT DISTINCT FROM j.device LIMIT 1), false)
        ORDER BY j.priority, j.run_at, j.id
        LIMIT LEAST(GREATEST(qfree.free, 0), @max)
    ) p
), chosen AS MATERIALIZED (
    SELECT r.id FROM (
        SELECT picks.*, row_number() OVER (PARTITION BY picks.queue ORDER BY picks.priority, picks.run_at, picks.id) AS qn
        FROM picks
    ) r LEFT JOIN qfree ON qfree.name = r.queue
    WHERE qfree.name IS NULL OR r.qn <= qfree.free
    ORDER BY r.priority, r.run_at, r.id
    LIMIT @max
), stamp AS MATERIALIZED (
    -- When the attempts start: as the jobs are taken, after the counts
    -- above and any wait for the gate, not when the transaction began
    -- (now()). The counts may rely on a completion committed after that,
    -- and an attempt dated before the end of the one whose room it took
    -- would look, on the timeline, as if the limit had been exceeded.
    SELECT clock_timestamp() AS at
), claimed AS (
    UPDATE jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        lease_owner = @worker_id::text,
        lease_ms = @lease_ms::integer,
        lease_token = lease_token_next(),
        heartbeat_at = (SELECT at FROM stamp),
        attempt_started_at = (SELECT at FROM stamp),
        handover_pending = sqlc.narg('handover_ms')::integer IS NOT NULL,
        lease_until = (SELECT at FROM stamp) + LEAST(@lease_ms::integer, j.timeout_ms, sqlc.narg('handover_ms')::integer) * interval '1 millisecond'
    WHERE j.id = ANY (ARRAY(SELECT id FROM chosen)) AND j.state = 'pending'
      AND (sqlc.narg('token_id')::bigint IS NULL OR EXISTS (SELECT 1 FROM gate))
    RETURNING j.*
), wake AS (
    SELECT pg_notify('leasehold_reaper', min(LEAST(@lease_ms::integer, timeout_ms, sqlc.narg('handover_ms')::integer))::text) AS sent
    FROM claimed HAVING min(LEAST(@lease_ms::integer, timeout_ms, sqlc.narg('handover_ms')::integer)) < @wake_below_ms::integer
), resumed AS (
    -- An attempt that receives a checkpoint resumes from it: the
    -- timeline says from which step (SPEC "Checkpoints"). A column test
    -- on the rows just claimed: a job without one costs nothing more.
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT id, 'resumed', attempt,
           jsonb_build_object('step', checkpoint_step, 'from_attempt', checkpoint_attempt, 'saved_at', checkpoint_at)
    FROM claimed WHERE checkpoint IS NOT NULL
)
SELECT claimed.* FROM claimed LEFT JOIN wake ON true ORDER BY priority, run_at, id;

-- name: JobCheckpoint :one
-- Saves the attempt's checkpoint (SPEC "Checkpoints"): @state and the
-- @step it ends, replacing the job's last one. Fenced like every write of
-- an attempt (no row: refused). Touches no indexed column (HOT).
UPDATE jobs
SET checkpoint = @state::jsonb, checkpoint_step = @step::integer, checkpoint_attempt = attempt,
    checkpoint_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id AND lease_is_current(state, lease_token, lease_owner, lease_until - (coalesce(sqlc.narg('now')::timestamptz, now()) - now()), @lease_token, @worker_id)
RETURNING attempt, checkpoint_at::timestamptz AS saved_at;

-- name: JobHeartbeat :one
-- Extends the lease only for the current token of a running job whose
-- deadline has not passed: an expired lease is lost even before the reaper
-- gets to it. Never past the attempt's timeout. The first heartbeat of a
-- hand-over confirms it (handover_pending), and so gives the full lease.
-- Touches no indexed column, so it is a HOT update.
UPDATE jobs
SET heartbeat_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    handover_pending = false,
    lease_until = CASE WHEN timeout_ms IS NULL THEN coalesce(sqlc.narg('now')::timestamptz, now()) + lease_ms * interval '1 millisecond'
                       ELSE LEAST(coalesce(sqlc.narg('now')::timestamptz, now()) + lease_ms * interval '1 millisecond',
                                  attempt_started_at + timeout_ms * interval '1 millisecond') END
-- lease_is_current compares the deadline with now(): a test that names the
-- time moves the deadline back by as much (by nothing in production).
WHERE id = @id AND lease_is_current(state, lease_token, lease_owner, lease_until - (coalesce(sqlc.narg('now')::timestamptz, now()) - now()), @lease_token, @worker_id)
-- remaining_ms lets the worker keep its own deadline without ever
-- comparing its clock with the database's.
RETURNING lease_until, cancel_requested,
          (EXTRACT(EPOCH FROM lease_until - coalesce(sqlc.narg('now')::timestamptz, now())) * 1000)::float8 AS remaining_ms;

-- name: JobCompleteMany :many
-- Completes a batch given as a JSON array of {id, lease_token, worker_id,
-- result} (one job is a batch of one). Each is fenced (lease_is_current);
-- the others are left alone and missing from the result, which names the
-- leases it took rather than whole rows. The attempt's
-- end is the job's finished_at: nothing else is written. Rows are visited
-- in id order, the order bulk cancel and retry lock them in, so the two
-- do not deadlock in practice (were they to, PostgreSQL would end one and
-- the worker write its batch again). A batch that frees room under a
-- limit wakes the queues' idle workers (job_limits_freed); others send
-- nothing. A quiet batch sends nothing: it claims in its own transaction
-- and notifies for the room it left (queue.CompleteManyThenClaim), from
-- the queue and key of each job it completed.
WITH input AS (
    SELECT (e->>'id')::bigint AS id, (e->>'lease_token')::bigint AS lease_token,
           e->>'worker_id' AS worker_id, e->'result' AS result
    FROM jsonb_array_elements(@completions::jsonb) e
    ORDER BY 1
), done AS (
    UPDATE jobs j
    SET state = 'succeeded', result = i.result, finished_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM input i
    -- The ids again as an array, so that the rows are found by primary key
    -- rather than by scanning every running job.
    WHERE j.id = ANY (ARRAY(SELECT id FROM input)) AND j.id = i.id
      -- The deadline moved back as far as @now is ahead (see JobHeartbeat).
      AND lease_is_current(j.state, j.lease_token, j.lease_owner, j.lease_until - (coalesce(sqlc.narg('now')::timestamptz, now()) - now()), i.lease_token, i.worker_id)
    RETURNING j.id, j.lease_token, j.lease_owner, j.queue, j.concurrency_key
), freed AS (
    SELECT job_limits_freed(array_agg(queue), bool_or(concurrency_key IS NOT NULL)) AS sent FROM done
    WHERE NOT @quiet::boolean
)
SELECT done.id, done.lease_token, done.lease_owner, done.queue, done.concurrency_key FROM done LEFT JOIN freed ON true;

-- name: JobFail :one
-- Ends the attempt as failed and records it. The job goes on as
-- job_state_after_failure says, a retry due after job_backoff; the
-- attempt and the job join the failure group of @error and the attempt's
-- last screenshot (failure_group_of). SET expressions read the row as it
-- was before the update.
WITH failed AS (
    UPDATE jobs
    SET counted_attempts = counted_attempts + 1,
        last_error = @error,
        failure_group = failure_group_of(id, attempt, @error),
        state = job_state_after_failure(cancel_requested, @retryable::boolean, counted_attempts + 1, max_attempts),
        run_at = CASE WHEN job_state_after_failure(cancel_requested, @retryable::boolean, counted_attempts + 1, max_attempts) = 'pending'
                      THEN coalesce(sqlc.narg('now')::timestamptz, now()) + job_backoff(counted_attempts + 1, backoff_base_ms, backoff_max_ms) ELSE run_at END,
        finished_at = CASE WHEN job_state_after_failure(cancel_requested, @retryable::boolean, counted_attempts + 1, max_attempts) <> 'pending'
                           THEN coalesce(sqlc.narg('now')::timestamptz, now()) END
    WHERE jobs.id = @id
      -- The deadline moved back as far as @now is ahead (see JobHeartbeat).
      AND lease_is_current(jobs.state, jobs.lease_token, jobs.lease_owner, jobs.lease_until - (coalesce(sqlc.narg('now')::timestamptz, now()) - now()), @lease_token, @worker_id)
    RETURNING *
), att AS (
    INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome, error, failure_group)
    SELECT id, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, coalesce(sqlc.narg('now')::timestamptz, now()), 'failed', @error, failure_group
    FROM failed
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT id, CASE state WHEN 'pending' THEN 'failed' WHEN 'cancelled' THEN 'cancelled' ELSE 'dead' END, attempt,
           jsonb_build_object('error', @error, 'retryable', @retryable::boolean, 'run_at', run_at)
    FROM failed
), freed AS (
    SELECT job_limits_freed(array_agg(queue), bool_or(concurrency_key IS NOT NULL)) AS sent FROM failed
)
SELECT failed.* FROM failed LEFT JOIN freed ON true;

-- name: JobStop :one
-- Ends the current attempt without counting it: 'released' (the worker shut
-- down; the job is due again at once) or 'cancelled' (the worker stopped it
-- because a cancel was requested). A release of a job whose cancel was
-- requested ends it cancelled.
WITH stopped AS (
    UPDATE jobs
    SET state = CASE WHEN @outcome::attempt_outcome = 'cancelled' OR cancel_requested THEN 'cancelled'
                     ELSE 'pending' END::job_state,
        run_at = now(),
        finished_at = CASE WHEN @outcome::attempt_outcome = 'cancelled' OR cancel_requested THEN now() END
    WHERE jobs.id = @id
      AND lease_is_current(jobs.state, jobs.lease_token, jobs.lease_owner, jobs.lease_until, @lease_token, @worker_id)
      AND @outcome::attempt_outcome IN ('released', 'cancelled')
    RETURNING *
), att AS (
    INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome)
    SELECT id, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, now(), @outcome::attempt_outcome
    FROM stopped
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT id, CASE WHEN state = 'cancelled' THEN 'cancelled' ELSE 'released' END, attempt,
           jsonb_build_object('worker', lease_owner, 'outcome', @outcome::attempt_outcome)
    FROM stopped
), freed AS (
    SELECT job_limits_freed(array_agg(queue), bool_or(concurrency_key IS NOT NULL)) AS sent FROM stopped
)
SELECT stopped.* FROM stopped LEFT JOIN freed ON true;

-- name: JobReapExpired :many
-- Takes back running jobs whose lease deadline has passed. A hand-over the
-- worker never confirmed (handover_pending: no heartbeat, no outcome) ends
-- not_delivered: the worker never had the job, so nothing counts, the job
-- is due again at once (cancelled if a cancel was asked meanwhile), and
-- the failure webhook, which fires only when counted_attempts grows, stays
-- silent. Otherwise a lease that reached the attempt's timeout fails the
-- attempt (timed_out), and any other ends lease_expired; both count, and
-- both put the attempt and the job in the failure group of their error.
WITH expired AS MATERIALIZED (
    SELECT id, handover_pending AS undelivered, NOT handover_pending AND t.over AS timed_out,
           CASE WHEN t.over THEN format('attempt %s timed out after %s ms', attempt, timeout_ms)
                ELSE format('lease expired: worker %s sent no heartbeat after %s', lease_owner, heartbeat_at) END AS error
    FROM jobs
    CROSS JOIN LATERAL (SELECT timeout_ms IS NOT NULL AND lease_until >= attempt_started_at + timeout_ms * interval '1 millisecond' AS over) t
    WHERE state = 'running' AND lease_until <= coalesce(sqlc.narg('now')::timestamptz, now())
    ORDER BY lease_until
    LIMIT @max
    FOR UPDATE OF jobs SKIP LOCKED
), reaped AS (
    UPDATE jobs j
    SET counted_attempts = j.counted_attempts + CASE WHEN e.undelivered THEN 0 ELSE 1 END,
        last_error = CASE WHEN e.undelivered THEN j.last_error ELSE e.error END,
        failure_group = CASE WHEN e.undelivered THEN j.failure_group ELSE failure_group_of(j.id, j.attempt, e.error) END,
        state = CASE WHEN NOT e.undelivered THEN job_state_after_failure(j.cancel_requested, true, j.counted_attempts + 1, j.max_attempts)
                     WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END::job_state,
        run_at = CASE WHEN e.undelivered THEN coalesce(sqlc.narg('now')::timestamptz, now())
                      WHEN job_state_after_failure(j.cancel_requested, true, j.counted_attempts + 1, j.max_attempts) = 'pending'
                      THEN coalesce(sqlc.narg('now')::timestamptz, now()) + job_backoff(j.counted_attempts + 1, j.backoff_base_ms, j.backoff_max_ms) ELSE j.run_at END,
        finished_at = CASE WHEN e.undelivered AND NOT j.cancel_requested THEN NULL
                           WHEN e.undelivered OR job_state_after_failure(j.cancel_requested, true, j.counted_attempts + 1, j.max_attempts) <> 'pending'
                           THEN coalesce(sqlc.narg('now')::timestamptz, now()) END,
        handover_pending = false
    FROM expired e
    WHERE j.id = e.id
    RETURNING j.*, e.timed_out, e.undelivered
), att AS (
    INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome, error, failure_group)
    SELECT id, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, coalesce(sqlc.narg('now')::timestamptz, now()),
           CASE WHEN undelivered THEN 'not_delivered' WHEN timed_out THEN 'failed' ELSE 'lease_expired' END::attempt_outcome,
           CASE WHEN undelivered THEN format('not delivered: worker %s never confirmed the hand-over', lease_owner) ELSE last_error END,
           CASE WHEN NOT undelivered THEN failure_group END
    FROM reaped
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT id, CASE WHEN undelivered THEN 'not_delivered' ELSE 'lease_expired' END, attempt,
           jsonb_build_object('worker', lease_owner, 'lease_token', lease_token, 'lease_until', lease_until,
                              'next_state', state, 'run_at', run_at, 'timed_out', timed_out)
    FROM reaped
), counted AS (
    UPDATE job_counts SET expired_total = expired_total + (SELECT count(*) FROM reaped WHERE NOT undelivered)
    WHERE shard = pg_backend_pid() % 64 AND EXISTS (SELECT 1 FROM reaped WHERE NOT undelivered)
)
SELECT id, queue, state, lease_until, undelivered, coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS reaped_at FROM reaped;

-- name: JobHandoverAbandon :many
-- Ends at once the hand-overs of a claim whose answer had nowhere to go
-- (the worker's request was gone by the time the claim was made): their
-- deadline becomes now, and the reaper, woken, ends each not_delivered,
-- as it would have at the hand-over deadline. Only hand-overs of these
-- tokens still unconfirmed are touched.
WITH ended AS (
    UPDATE jobs SET lease_until = now()
    -- Tokens are unique across jobs (lease_token_seq in the high bits), so
    -- a token of the list can be current only for the job it was given to.
    WHERE id = ANY (@ids::bigint[]) AND lease_token = ANY (@lease_tokens::bigint[])
      AND state = 'running' AND handover_pending AND lease_owner = @worker_id::text AND lease_until > now()
    RETURNING id
), wake AS (
    SELECT pg_notify('leasehold_reaper', '') AS sent FROM ended HAVING count(*) > 0
)
SELECT ended.id FROM ended LEFT JOIN wake ON true ORDER BY ended.id;

-- name: JobNextDeadline :one
-- How long until the earliest lease deadline, and until the next
-- scheduled job (a retry after its backoff, a job submitted for later:
-- run_at after created_at) is due, by the database clock; +Infinity for
-- none. It announces to idle workers, in the same statement, that
-- scheduled jobs fell due since @since (checked_at of the reaper's
-- previous look; NULL: ever): however the reaper's wake-ups and the due
-- times interleave, and whether or not a reaper was active when a job fell
-- due, each due time is announced by the first look after it. A job due
-- at once (run_at = created_at) is announced by its own insert.
WITH fell AS (
    SELECT pg_notify('leasehold_jobs', '') AS sent
    -- The first after @since, by the index: an EXISTS with run_at <= now()
    -- is planned as a scan of every job.
    WHERE (SELECT min(run_at) FROM jobs
           WHERE state = 'pending' AND run_at > created_at
             AND run_at > coalesce(sqlc.narg('since')::timestamptz, '-infinity')) <= now()
)
SELECT COALESCE((SELECT EXTRACT(EPOCH FROM min(lease_until) - clock_timestamp()) * 1000
                 FROM jobs WHERE state = 'running'), 'Infinity')::float8 AS lease_wait_ms,
       COALESCE((SELECT EXTRACT(EPOCH FROM min(run_at) - clock_timestamp()) * 1000
                 FROM jobs WHERE state = 'pending' AND run_at > created_at AND run_at > now()), 'Infinity')::float8 AS due_wait_ms,
       EXISTS (SELECT FROM fell) AS announced,
       now()::timestamptz AS checked_at;

-- name: JobCancel :many
-- Cancels pending jobs at once and asks running ones to stop (their worker
-- hears it with its next heartbeat). A running job whose lease owner will
-- never hear it ends cancelled at once too (abandoned): its owner is a
-- revoked worker token, or it is offline (no presence within @online_ms,
-- and no heartbeat of this job either, which a worker that does not
-- report presence still sends). Its lease ends with it, so every later
-- write of the old owner is refused by the fence (the job no longer
-- runs); the attempt ends cancelled, uncounted, as a worker's own stop on
-- a cancel request would end it (JobStop). Jobs in other states are left
-- alone.
WITH target AS MATERIALIZED (
    SELECT id, r.revoked,
           (state = 'running' AND (
               r.revoked
               OR (heartbeat_at < now() - sqlc.arg('online_ms')::bigint * interval '1 millisecond'
                   AND NOT EXISTS (SELECT 1 FROM workers w
                                   WHERE w.id = jobs.lease_owner
                                     AND w.last_seen >= now() - sqlc.arg('online_ms')::bigint * interval '1 millisecond'))
           )) AS abandoned
    FROM jobs CROSS JOIN LATERAL (
        SELECT EXISTS (SELECT 1 FROM api_tokens t
                       WHERE t.name = jobs.lease_owner AND t.role = 'worker' AND t.revoked_at IS NOT NULL) AS revoked
    ) r
    WHERE state IN ('pending', 'running')
      AND (sqlc.narg('ids')::bigint[] IS NULL OR id = ANY(sqlc.narg('ids')::bigint[]))
      AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
      AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
      AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
      AND (sqlc.narg('failure_group')::bigint IS NULL OR failure_group = sqlc.narg('failure_group'))
    ORDER BY id
    FOR UPDATE OF jobs
), changed AS (
    UPDATE jobs j
    SET state = CASE WHEN j.state = 'pending' OR t.abandoned THEN 'cancelled' ELSE j.state END,
        cancel_requested = (j.state = 'running' AND NOT t.abandoned),
        finished_at = CASE WHEN j.state = 'pending' OR t.abandoned THEN now() END,
        lease_until = CASE WHEN t.abandoned THEN LEAST(j.lease_until, now()) ELSE j.lease_until END
    FROM target t
    WHERE j.id = t.id
    RETURNING j.*
), ended AS (
    SELECT c.*, t.revoked FROM changed c JOIN target t ON t.id = c.id WHERE t.abandoned
), att AS (
    INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome)
    SELECT id, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until, now(), 'cancelled'
    FROM ended
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT c.id, CASE WHEN c.state = 'cancelled' THEN 'cancelled' ELSE 'cancel_requested' END, c.attempt,
           CASE WHEN e.id IS NULL THEN jsonb_build_object('by', @actor::text)
                ELSE jsonb_build_object('by', @actor::text, 'worker', e.lease_owner, 'lease_token', e.lease_token,
                                        'reason', CASE WHEN e.revoked THEN 'worker token revoked' ELSE 'worker offline' END)
           END
    FROM changed c LEFT JOIN ended e ON e.id = c.id
), freed AS (
    SELECT job_limits_freed(array_agg(queue), bool_or(concurrency_key IS NOT NULL)) AS sent FROM ended
)
SELECT changed.* FROM changed LEFT JOIN freed ON true ORDER BY id;

-- name: JobRetry :many
-- Moves dead or cancelled jobs back to pending, due now, with a fresh budget
-- of counted attempts, cost and steps (the usage rows stay, as history:
-- retrying a job whose budget was spent is a person's choice to spend
-- again). History (attempts, events) is kept. The next
-- attempt resumes from the job's checkpoint, unless @start_over clears it
-- (SPEC "Checkpoints"); the retried event says which, for a job that had
-- one.
WITH target AS MATERIALIZED (
    SELECT id, checkpoint_step AS step FROM jobs
    WHERE state IN ('dead', 'cancelled')
      AND (sqlc.narg('ids')::bigint[] IS NULL OR id = ANY(sqlc.narg('ids')::bigint[]))
      AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
      AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
      AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
      AND (sqlc.narg('failure_group')::bigint IS NULL OR failure_group = sqlc.narg('failure_group'))
    ORDER BY id
    FOR UPDATE
), changed AS (
    UPDATE jobs j
    SET state = 'pending', run_at = now(), counted_attempts = 0, cancel_requested = false, finished_at = NULL,
        cost_spent_micros = 0, steps_spent = 0,
        checkpoint = CASE WHEN @start_over::boolean THEN NULL ELSE j.checkpoint END,
        checkpoint_step = CASE WHEN @start_over::boolean THEN NULL ELSE j.checkpoint_step END,
        checkpoint_attempt = CASE WHEN @start_over::boolean THEN NULL ELSE j.checkpoint_attempt END,
        checkpoint_at = CASE WHEN @start_over::boolean THEN NULL ELSE j.checkpoint_at END
    FROM target t
    WHERE j.id = t.id
    RETURNING j.*
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT c.id, 'retried', c.attempt,
           jsonb_build_object('by', @actor::text)
           || CASE WHEN t.step IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('checkpoint', CASE WHEN @start_over::boolean THEN 'start_over' ELSE 'resume' END,
                                           'step', t.step) END
    FROM changed c JOIN target t ON t.id = c.id
)
SELECT * FROM changed ORDER BY id;

-- name: JobCounts :one
-- Exact counts per state, summed over the trigger-maintained shards.
SELECT sum(pending)::bigint AS pending, sum(running)::bigint AS running,
       sum(succeeded)::bigint AS succeeded, sum(dead)::bigint AS dead,
       sum(cancelled)::bigint AS cancelled, sum(claims_total)::bigint AS claims_total,
       sum(completions_total)::bigint AS completions_total,
       sum(expired_total)::bigint AS expired_total, sum(refused_total)::bigint AS refused_total
FROM job_counts;

-- name: JobNotify :exec
-- Wakes idle workers: one notification per statement or batch, never one
-- per job (NOTIFY takes a database-wide lock at commit).
SELECT pg_notify('leasehold_jobs', @queues::text);

-- name: ReaperWake :exec
-- Wakes the reaper to look at the deadlines again: a new lease or a newly
-- scheduled retry may come before the time it sleeps to.
SELECT pg_notify('leasehold_reaper', '');

-- name: JobWaitFacts :many
-- What holds back each pending job of @ids, as queue.WhyWaiting reads it:
-- one row per pending job (jobs in other states are left out), with its
-- queue's pause and cap, its key's running jobs, its spent rate-limit
-- key (rate_key, rate_until), and the workers seen
-- within @online_ms that take its queue (and carry its device, if it names
-- one), and how many of those could claim it now by their availability
-- windows (claimers: "id labels" of the workers that claim). Each queue,
-- key and (queue, device, timeout) is looked at once however many of the
-- jobs share it, so a page of fifty jobs costs one statement.
-- @now is NULL but in tests.
WITH j AS MATERIALIZED (
    SELECT id, queue::text AS queue, run_at, attempt, device, concurrency_key, concurrency_limit, timeout_ms, rate_limits
    FROM jobs
    WHERE id = ANY(@ids::bigint[]) AND state = 'pending'
), seen AS MATERIALIZED (
    SELECT w.id, w.device, w.queues, w.claiming, w.not_claiming FROM workers w
    WHERE w.last_seen >= coalesce(sqlc.narg('now')::timestamptz, now()) - (@online_ms::bigint) * interval '1 millisecond'
), q AS MATERIALIZED (
    SELECT n.queue, COALESCE(s.paused, false) AS paused, s.paused_by, s.paused_at, s.max_running,
           CASE WHEN s.max_running IS NOT NULL
                THEN (SELECT coalesce(sum(r.running), 0)::bigint FROM queue_running r WHERE r.queue = n.queue) END AS queue_running,
           (SELECT count(*) FROM seen WHERE n.queue = ANY(seen.queues)) AS queue_workers
    FROM (SELECT DISTINCT queue FROM j) n
    LEFT JOIN queue_settings s ON s.name = n.queue
), k AS MATERIALIZED (
    SELECT n.concurrency_key, count(r.id) AS key_running, min(r.id) AS key_holder
    FROM (SELECT DISTINCT concurrency_key FROM j WHERE concurrency_key IS NOT NULL) n
    LEFT JOIN jobs r ON r.state = 'running' AND r.concurrency_key = n.concurrency_key
    GROUP BY n.concurrency_key
), d AS MATERIALIZED (
    SELECT n.queue, n.device, n.timeout_ms, count(seen.id) AS devices_online,
           count(seen.id) FILTER (WHERE seen.claiming) AS devices_claiming,
           -- as the claim statements decide it (availability windows)
           count(seen.id) FILTER (WHERE seen.claiming AND EXISTS (
               SELECT 1 FROM availability_claimable(seen.id, coalesce(string_to_array(seen.device, ','), '{}'),
                                                    coalesce(sqlc.narg('now')::timestamptz, now())) c
               WHERE c.device IS NOT DISTINCT FROM n.device
                 AND availability_fits(c.closes, n.timeout_ms, coalesce(sqlc.narg('now')::timestamptz, now())))) AS devices_in_window,
           coalesce(array_agg(seen.id || ' ' || coalesce(seen.device, '') ORDER BY seen.id)
                    FILTER (WHERE seen.claiming), '{}')::text[] AS claimers,
           coalesce(array_agg(seen.id || ': ' || coalesce(seen.not_claiming, 'not claiming') ORDER BY seen.id)
                    FILTER (WHERE NOT seen.claiming), '{}')::text[] AS unfit
    FROM (SELECT DISTINCT queue, device, timeout_ms FROM j) n
    LEFT JOIN seen ON n.queue = ANY(seen.queues)
                  AND (n.device IS NULL OR n.device = ANY(string_to_array(seen.device, ',')))
    GROUP BY n.queue, n.device, n.timeout_ms
)
SELECT j.id, j.queue, j.run_at, j.attempt, j.device, j.concurrency_key, j.concurrency_limit, j.timeout_ms,
       (j.run_at > coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS not_due,
       q.paused::boolean AS paused, q.paused_by, q.paused_at, q.max_running,
       COALESCE(q.queue_running, 0)::bigint AS queue_running, q.queue_workers::bigint AS queue_workers,
       COALESCE(k.key_running, 0)::bigint AS key_running, COALESCE(k.key_holder, 0)::bigint AS key_holder,
       d.devices_online::bigint AS devices_online, d.devices_claiming::bigint AS devices_claiming, d.unfit,
       d.devices_in_window::bigint AS devices_in_window, d.claimers,
       coalesce(rl.key, '')::text AS rate_key, coalesce(rl.until, 'epoch')::timestamptz AS rate_until
FROM j
JOIN q ON q.queue = j.queue
LEFT JOIN k ON k.concurrency_key = j.concurrency_key
-- Of the job's rate-limit keys, the spent one whose budget returns last
-- (the end of its current window): until then no claim takes the job.
LEFT JOIN LATERAL (
    SELECT b.key, rate_window_start(b.window_s, coalesce(sqlc.narg('now')::timestamptz, now())) + b.window_s * interval '1 second' AS until
    FROM rate_limit_budgets b
    WHERE b.key = ANY(j.rate_limits) AND b.used >= b.budget
      AND b.window_start = rate_window_start(b.window_s, coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY 2 DESC, 1
    LIMIT 1
) rl ON true
JOIN d ON d.queue = j.queue AND d.device IS NOT DISTINCT FROM j.device AND d.timeout_ms IS NOT DISTINCT FROM j.timeout_ms
ORDER BY j.id;

-- name: JobSearchRecent :many
-- Search's first look (queue.Client.Search): the @span jobs before
-- the cursor (@before_id; 0 for the newest), walked newest first by the
-- primary key, each tested against @pattern (a LIKE pattern of lower
-- case). A common term fills a page here after a few rows. OFFSET 0
-- keeps the planner from reaching for jobs_search_idx, which for a
-- common term would collect every match before sorting them.
SELECT w.* FROM (
    SELECT * FROM jobs
    WHERE id < CASE WHEN @before_id::bigint > 0 THEN @before_id ELSE (SELECT coalesce(max(id), 0) + 1 FROM jobs) END
      AND id >= CASE WHEN @before_id::bigint > 0 THEN @before_id ELSE (SELECT coalesce(max(id), 0) + 1 FROM jobs) END - @span::bigint
    ORDER BY id DESC
    OFFSET 0
) w
WHERE job_search_text(w.app, w.payload, w.last_error, w.result) LIKE @pattern::text
  AND (sqlc.narg('state')::job_state IS NULL OR w.state = sqlc.narg('state'))
  AND (sqlc.narg('kind')::text IS NULL OR w.kind = sqlc.narg('kind'))
  AND (sqlc.narg('queue')::text IS NULL OR w.queue = sqlc.narg('queue'))
  AND (sqlc.narg('app')::text IS NULL OR w.app = sqlc.narg('app'))
LIMIT @max;

-- name: JobSearchIndexed :many
-- Search's second look, for a term too rare to fill a page among the
-- recent jobs: every match older than the cursor through
-- jobs_search_idx (jobs that are not running) and jobs_running_idx
-- (running ones, at most the workers' slots), newest first. The caller
-- allows only bitmap scans for it (SET LOCAL), so that the planner
-- cannot walk the whole table by id hoping to meet a match soon.
SELECT * FROM (
    (SELECT * FROM jobs
     WHERE state <> 'running'
       AND job_search_text(app, payload, last_error, result) LIKE @pattern::text
       AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
       AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
       AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
       AND (sqlc.narg('app')::text IS NULL OR app = sqlc.narg('app'))
       AND (@before_id::bigint = 0 OR id < @before_id)
     ORDER BY id DESC
     LIMIT @max)
    UNION ALL
    (SELECT * FROM jobs
     WHERE state = 'running'
       AND job_search_text(app, payload, last_error, result) LIKE @pattern::text
       AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
       AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind'))
       AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
       AND (sqlc.narg('app')::text IS NULL OR app = sqlc.narg('app'))
       AND (@before_id::bigint = 0 OR id < @before_id)
     ORDER BY id DESC
     LIMIT @max)
) found
ORDER BY id DESC
LIMIT @max;
