-- Rate limits (SPEC "Rate limits"): budgets per key and window, and the
-- claim of jobs that name keys. A key without rows has no budget: it is
-- unlimited. Fixed windows, counted in rate_limit_budgets (one row per key
-- and window length: the budget and the count of the current window), see
-- migrations/000025_rate_limits.up.sql and queue/ratelimit.go.

-- name: RateLimitList :many
-- Every budget, by key and window, with what the current window (by the
-- database clock, or @now in tests) has spent and when it ends.
SELECT key, window_s, budget,
       (CASE WHEN window_start = rate_window_start(window_s, coalesce(sqlc.narg('now')::timestamptz, now()))
             THEN used ELSE 0 END)::integer AS used,
       (rate_window_start(window_s, coalesce(sqlc.narg('now')::timestamptz, now())) + window_s * interval '1 second')::timestamptz AS window_end,
       updated_at, updated_by
FROM rate_limit_budgets
ORDER BY key, window_s;

-- name: RateLimitSet :exec
-- Replaces the budgets of @key by one per window of @window_s (budgets in
-- @budgets, the same order). A window kept keeps what its current window
-- has spent; a changed budget applies at once.
WITH gone AS (
    DELETE FROM rate_limit_budgets WHERE key = @key AND window_s <> ALL(@window_s::integer[])
)
INSERT INTO rate_limit_budgets AS b (key, window_s, budget, updated_by)
SELECT @key, w0.s, w1.budget, @actor::text
FROM unnest(@window_s::integer[]) WITH ORDINALITY AS w0(s, n)
JOIN unnest(@budgets::integer[]) WITH ORDINALITY AS w1(budget, n) USING (n)
ON CONFLICT (key, window_s) DO UPDATE
SET budget = excluded.budget, updated_at = now(), updated_by = excluded.updated_by;

-- name: RateLimitDelete :execrows
-- Removes every budget of @key: its jobs are no longer limited.
DELETE FROM rate_limit_budgets WHERE key = @key;

-- name: JobClaimRatedLock :many
-- The first statement of a rate-limited claim (queue/ratelimit.go), in
-- the claimer's transaction. cands: up to @max due jobs that name
-- rate-limit keys, in claim order, locked (SKIP LOCKED, as JobClaim),
-- leaving out those that name a key spent in its current window, so that
-- a job held back by a spent key does not hold back the jobs behind it.
-- The spent keys are computed once (an InitPlan); each job's own test is
-- a column test, so jobs_claim_rated_idx is read in order, one queue at a
-- time, and stops at @max (past the jobs of spent keys, which it reads
-- and skips). Jobs of
-- paused queues are left out; those of a capped queue are read only as
-- far as the room the queue seems to have (none when it looks full), in
-- the queue's claim order. Availability windows as in JobClaim.
--
-- Jobs that also have a concurrency key come from their own index, by
-- key, as the limited claims read theirs (JobClaimLimitedLock): the keys
-- in the claim order of each key's first due job, at most @max of them,
-- each read only as far as its room (its first job's limit less what it
-- runs, as this statement's snapshot shows it), so that the jobs waiting
-- behind a full key neither fill the candidates nor are read.
--
-- The candidates' keys and capped queues that look like they have room
-- are each tried with the advisory lock the limited claims take for them
-- (which does not wait): key_locked and queue_locked say which this
-- claim holds. The room seen here is a hint (key_running, queue_room):
-- this statement's snapshot is older than the locks, so JobClaimRated
-- counts again under them.
--
-- locked: the budgets of the keys those jobs name, locked FOR UPDATE in
-- key order (so claimers never deadlock: the advisory locks never wait)
-- until the claim commits,
-- waiting for a claimer that holds them. Under READ COMMITTED a row
-- locked after waiting is read in its newest version, whatever the
-- statement's snapshot, so the room it shows (budget less what the
-- current window spent; a window that has ended reads as unspent)
-- includes every claim committed before: claims of one key take turns
-- and never spend more than its budget. Every row carries the same
-- budget_keys and budget_rooms (one entry per budget).
WITH RECURSIVE win AS MATERIALIZED (
    SELECT c.device, c.closes FROM availability_claimable(@worker_id::text, @devices::text[], coalesce(sqlc.narg('now')::timestamptz, now())) AS c(device, closes)
), qroom AS MATERIALIZED (
    SELECT s.name, s.max_running - (SELECT coalesce(sum(r.running), 0)::bigint FROM queue_running r WHERE r.queue = s.name) AS room
    FROM queue_settings s
    WHERE s.name = ANY(@queues::text[]) AND NOT s.paused AND s.max_running IS NOT NULL
), free AS MATERIALIZED (
    -- Jobs without a concurrency key: each of the claimer's queues on its
    -- own, in its claim order (jobs_claim_rated_idx is by queue), a
    -- capped one only as far as its room.
    SELECT c.* FROM (
        SELECT q.name, (CASE WHEN s.max_running IS NULL THEN @max::integer
                             ELSE LEAST(@max::integer, GREATEST(coalesce(qroom.room, 0), 0)) END)::integer AS room
        FROM (SELECT DISTINCT unnest(@queues::text[]) AS name) q
        LEFT JOIN queue_settings s ON s.name = q.name
        LEFT JOIN qroom ON qroom.name = q.name
        WHERE NOT coalesce(s.paused, false)
    ) q CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.rate_limits, j.priority, j.run_at, NULL::text AS concurrency_key, 0 AS concurrency_limit FROM jobs j
        WHERE j.state = 'pending' AND j.queue = q.name
          AND j.rate_limits IS NOT NULL AND j.concurrency_key IS NULL
          AND j.run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
          AND (j.device IS NULL OR j.device = ANY(@devices::text[]))
          AND NOT (j.rate_limits && (SELECT rate_limits_spent(coalesce(sqlc.narg('now')::timestamptz, now()))))
          AND EXISTS (SELECT 1 FROM win)
          AND coalesce((SELECT availability_fits(win.closes, j.timeout_ms, coalesce(sqlc.narg('now')::timestamptz, now()))
                        FROM win WHERE win.device IS NOT DISTINCT FROM j.device LIMIT 1), false)
          -- (the queue's pause and cap are q's, read in this statement's
          -- snapshot: a per-job test would see the same)
        ORDER BY j.priority, j.run_at, j.id
        LIMIT q.room
        FOR UPDATE OF j SKIP LOCKED
    ) c
    WHERE q.room > 0
), keys(k) AS (
    (SELECT concurrency_key FROM jobs
     WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NOT NULL
     ORDER BY concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.concurrency_key FROM jobs j
            WHERE j.state = 'pending' AND j.rate_limits IS NOT NULL AND j.concurrency_key IS NOT NULL AND j.concurrency_key > keys.k
            ORDER BY j.concurrency_key LIMIT 1)
    FROM keys WHERE keys.k IS NOT NULL
), firsts AS MATERIALIZED (
    SELECT keys.k, f.priority, f.run_at, f.id, f.concurrency_limit
    FROM keys CROSS JOIN LATERAL (
        SELECT j.priority, j.run_at, j.id, j.concurrency_limit
        FROM jobs j
        WHERE j.state = 'pending' AND j.rate_limits IS NOT NULL AND j.concurrency_key = keys.k
          AND j.run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
          AND j.queue = ANY(@queues::text[])
        ORDER BY j.concurrency_key, j.priority, j.run_at, j.id
        LIMIT 1
    ) f
), kroom AS MATERIALIZED (
    -- The keys' running jobs counted in one pass, as JobClaimLimitedLock
    -- does (a count per key may read every running job's entry per key).
    SELECT firsts.k, coalesce(r.running, 0) AS running, firsts.concurrency_limit
    FROM firsts LEFT JOIN (
        SELECT r.concurrency_key AS k, count(*) AS running FROM jobs r
        WHERE r.state = 'running' AND r.concurrency_key = ANY (ARRAY(SELECT k FROM firsts))
        GROUP BY r.concurrency_key
    ) r ON r.k = firsts.k
    WHERE coalesce(r.running, 0) < firsts.concurrency_limit
    ORDER BY firsts.priority, firsts.run_at, firsts.id
    LIMIT @max
), keyed AS MATERIALIZED (
    SELECT c.* FROM kroom CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.rate_limits, j.priority, j.run_at, j.concurrency_key, j.concurrency_limit FROM jobs j
        WHERE j.state = 'pending' AND j.rate_limits IS NOT NULL AND j.concurrency_key = kroom.k
          AND j.run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
          AND j.queue = ANY(@queues::text[])
          AND (j.device IS NULL OR j.device = ANY(@devices::text[]))
          AND NOT (j.rate_limits && (SELECT rate_limits_spent(coalesce(sqlc.narg('now')::timestamptz, now()))))
          AND EXISTS (SELECT 1 FROM win)
          AND coalesce((SELECT availability_fits(win.closes, j.timeout_ms, coalesce(sqlc.narg('now')::timestamptz, now()))
                        FROM win WHERE win.device IS NOT DISTINCT FROM j.device LIMIT 1), false)
          -- The queue's pause and cap, per job. A scalar subquery, not
          -- NOT EXISTS: as an anti-join it made the plan read and sort
          -- every job of the key before its LIMIT.
          AND NOT coalesce((SELECT s.paused OR (s.max_running IS NOT NULL AND s.name <> ALL (ARRAY(SELECT name FROM qroom WHERE room > 0)))
                            FROM queue_settings s WHERE s.name = j.queue), false)
        ORDER BY j.concurrency_key, j.priority, j.run_at, j.id
        LIMIT LEAST(@max::integer, kroom.concurrency_limit - kroom.running)
        FOR UPDATE OF j SKIP LOCKED
    ) c
), cands AS MATERIALIZED (
    SELECT * FROM free
    UNION ALL
    SELECT * FROM keyed
    ORDER BY priority, run_at, id
    LIMIT @max
), klock AS MATERIALIZED (
    SELECT kroom.k, kroom.running,
           pg_try_advisory_xact_lock(hashtextextended('leasehold:limit:key:' || kroom.k, 0)) AS locked
    FROM kroom WHERE kroom.k IN (SELECT concurrency_key FROM cands)
), qlock AS MATERIALIZED (
    SELECT qroom.name, qroom.room,
           pg_try_advisory_xact_lock(hashtextextended('leasehold:limit:queue:' || qroom.name, 0)) AS locked
    FROM qroom WHERE qroom.room > 0 AND qroom.name IN (SELECT queue FROM cands)
), locked AS MATERIALIZED (
    SELECT b.key, b.budget - (CASE WHEN b.window_start = rate_window_start(b.window_s, coalesce(sqlc.narg('now')::timestamptz, now()))
                                   THEN b.used ELSE 0 END) AS room
    FROM rate_limit_budgets b
    WHERE b.key = ANY (ARRAY(SELECT DISTINCT unnest(cands.rate_limits) FROM cands))
    ORDER BY b.key, b.window_s
    FOR UPDATE
)
SELECT c.id, c.rate_limits::text[] AS rate_limits,
       ARRAY(SELECT key FROM locked)::text[] AS budget_keys,
       ARRAY(SELECT room FROM locked)::integer[] AS budget_rooms,
       c.queue::text AS queue, coalesce(c.concurrency_key, '')::text AS concurrency_key, c.concurrency_limit::integer AS concurrency_limit,
       coalesce(klock.locked, false)::boolean AS key_locked, coalesce(klock.running, 0)::bigint AS key_running,
       (qlock.name IS NOT NULL OR c.queue IN (SELECT name FROM qroom))::boolean AS queue_capped,
       coalesce(qlock.locked, false)::boolean AS queue_locked, coalesce(qlock.room, 0)::bigint AS queue_room
FROM cands c
LEFT JOIN klock ON klock.k = c.concurrency_key
LEFT JOIN qlock ON qlock.name = c.queue
ORDER BY c.priority, c.run_at, c.id;

-- name: JobClaimRated :many
-- The second statement: claims the jobs of @ids the claimer chose within
-- the budgets it locked (as JobClaim's SET; the state checked again, since
-- nothing else changes a job locked by the first statement but a cancel
-- is refused meanwhile), and spends one unit of every budget of each key
-- for each job claimed: a budget counts claims (attempt starts), and is
-- not given back when an attempt ends early. The gate on a worker token
-- is JobClaim's.
--
-- @ids are claimed as they are; @limited_ids, those with a concurrency
-- key or in a capped queue, only within those limits: a job with a
-- concurrency key is claimed only under its key's lock
-- (@locked_keys) and while fewer than its concurrency_limit jobs of the
-- key run with it and the chosen ones before it; a job of a capped queue
-- only under the queue's lock (@locked_queues) and within max_running;
-- none of a paused queue. The counts are read here, in a statement that
-- began after the locks were taken, so they include every claim the
-- previous holders committed (as JobClaimLimited counts). A job one
-- limit holds back still counts in the other's numbering: that errs
-- towards claiming less, never more.
WITH gate AS MATERIALIZED (
    SELECT id FROM api_tokens
    WHERE id = sqlc.narg('token_id')::bigint AND revoked_at IS NULL
    FOR SHARE
), picked AS MATERIALIZED (
    SELECT j.id, j.queue, j.concurrency_key, j.concurrency_limit,
           row_number() OVER (PARTITION BY j.concurrency_key ORDER BY j.priority, j.run_at, j.id) AS kn,
           row_number() OVER (PARTITION BY j.queue ORDER BY j.priority, j.run_at, j.id) AS qn
    FROM jobs j
    WHERE j.id = ANY (@limited_ids::bigint[]) AND j.state = 'pending'
), chosen AS MATERIALIZED (
    SELECT unnest(@ids::bigint[]) AS id
    UNION ALL
    SELECT p.id FROM picked p
    LEFT JOIN queue_settings s ON s.name = p.queue
    -- the locked keys' running jobs, counted in one pass
    LEFT JOIN (
        SELECT r.concurrency_key AS k, count(*) AS running FROM jobs r
        WHERE r.state = 'running' AND r.concurrency_key = ANY (@locked_keys::text[])
        GROUP BY r.concurrency_key
    ) kr ON kr.k = p.concurrency_key
    WHERE NOT coalesce(s.paused, false)
      AND (p.concurrency_key IS NULL
           OR (p.concurrency_key = ANY (@locked_keys::text[])
               AND coalesce(kr.running, 0) + p.kn <= p.concurrency_limit))
      AND (s.max_running IS NULL
           OR (p.queue = ANY (@locked_queues::text[])
               AND (SELECT coalesce(sum(r.running), 0) FROM queue_running r WHERE r.queue = p.queue) + p.qn <= s.max_running))
), stamp AS MATERIALIZED (
    -- When the attempts start: as this statement takes the jobs, not when
    -- the transaction began, before the first statement waited for the
    -- budgets (as JobClaimLimited dates its attempts).
    SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS at
), claimed AS (
    UPDATE jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        lease_owner = @worker_id::text,
        lease_ms = @lease_ms::integer,
        lease_token = lease_token_next(j.id, (SELECT lease_token_seed())),
        heartbeat_at = (SELECT at FROM stamp),
        attempt_started_at = (SELECT at FROM stamp),
        handover_pending = sqlc.narg('handover_ms')::integer IS NOT NULL,
        lease_until = (SELECT at FROM stamp)
                      + LEAST(@lease_ms::integer, j.timeout_ms, sqlc.narg('handover_ms')::integer) * interval '1 millisecond'
    WHERE j.id = ANY (ARRAY(SELECT id FROM chosen)) AND j.state = 'pending'
      AND (sqlc.narg('token_id')::bigint IS NULL OR EXISTS (SELECT 1 FROM gate))
    RETURNING j.*
), spend AS (
    SELECT k.key, count(*)::integer AS n FROM claimed, unnest(claimed.rate_limits) AS k(key) GROUP BY k.key
), spent AS (
    UPDATE rate_limit_budgets b
    SET used = (CASE WHEN b.window_start = rate_window_start(b.window_s, coalesce(sqlc.narg('now')::timestamptz, now()))
                     THEN b.used ELSE 0 END) + spend.n,
        window_start = rate_window_start(b.window_s, coalesce(sqlc.narg('now')::timestamptz, now()))
    FROM spend WHERE b.key = spend.key
), wake AS (
    SELECT pg_notify('leasehold_reaper', min(LEAST(@lease_ms::integer, timeout_ms, sqlc.narg('handover_ms')::integer))::text) AS sent
    FROM claimed HAVING min(LEAST(@lease_ms::integer, timeout_ms, sqlc.narg('handover_ms')::integer)) < @wake_below_ms::integer
), resumed AS (
    -- As in JobClaim: an attempt that receives a checkpoint says so on
    -- the timeline.
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT id, 'resumed', attempt,
           jsonb_build_object('step', checkpoint_step, 'from_attempt', checkpoint_attempt, 'saved_at', checkpoint_at)
    FROM claimed WHERE checkpoint IS NOT NULL
)
SELECT claimed.* FROM claimed LEFT JOIN wake ON true ORDER BY priority, run_at, id;
