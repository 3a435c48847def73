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
-- a column test, so jobs_claim_rated_idx is read in order and stops at
-- @max (past the jobs of spent keys, which it reads and skips). Jobs of
-- paused and capped queues are left out (rate limits and queue caps do
-- not combine yet). Availability windows as in JobClaim.
--
-- locked: the budgets of the keys those jobs name, locked FOR UPDATE in
-- key order (so claimers never deadlock) until the claim commits,
-- waiting for a claimer that holds them. Under READ COMMITTED a row
-- locked after waiting is read in its newest version, whatever the
-- statement's snapshot, so the room it shows (budget less what the
-- current window spent; a window that has ended reads as unspent)
-- includes every claim committed before: claims of one key take turns
-- and never spend more than its budget. Every row carries the same
-- budget_keys and budget_rooms (one entry per budget).
WITH win AS MATERIALIZED (
    SELECT c.device, c.closes FROM availability_claimable(@worker_id::text, @devices::text[], coalesce(sqlc.narg('now')::timestamptz, now())) AS c(device, closes)
), cands AS MATERIALIZED (
    SELECT id, rate_limits, priority, run_at FROM jobs
    WHERE state = 'pending'
      AND rate_limits IS NOT NULL
      AND run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
      AND queue = ANY(@queues::text[])
      AND (device IS NULL OR device = ANY(@devices::text[]))
      AND NOT (rate_limits && (SELECT rate_limits_spent(coalesce(sqlc.narg('now')::timestamptz, now()))))
      AND EXISTS (SELECT 1 FROM win)
      AND coalesce((SELECT availability_fits(win.closes, jobs.timeout_ms, coalesce(sqlc.narg('now')::timestamptz, now()))
                    FROM win WHERE win.device IS NOT DISTINCT FROM jobs.device LIMIT 1), false)
      AND NOT EXISTS (SELECT 1 FROM queue_settings s WHERE s.name = jobs.queue AND (s.paused OR s.max_running IS NOT NULL))
    ORDER BY priority, run_at, id
    LIMIT @max
    FOR UPDATE OF jobs SKIP LOCKED
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
       ARRAY(SELECT room FROM locked)::integer[] AS budget_rooms
FROM cands c
ORDER BY c.priority, c.run_at, c.id;

-- name: JobClaimRated :many
-- The second statement: claims the jobs of @ids the claimer chose within
-- the budgets it locked (as JobClaim's SET; the state checked again, since
-- nothing else changes a job locked by the first statement but a cancel
-- is refused meanwhile), and spends one unit of every budget of each key
-- for each job claimed: a budget counts claims (attempt starts), and is
-- not given back when an attempt ends early. The gate on a worker token
-- is JobClaim's.
WITH gate AS MATERIALIZED (
    SELECT id FROM api_tokens
    WHERE id = sqlc.narg('token_id')::bigint AND revoked_at IS NULL
    FOR SHARE
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
    WHERE j.id = ANY (@ids::bigint[]) AND j.state = 'pending'
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

-- name: QueuesCapped :many
-- Which of @names have a cap (max_running): rate-limited jobs are not
-- submitted to them, since caps and rate limits do not combine yet and
-- such a job would never be claimed.
SELECT name FROM queue_settings
WHERE name = ANY(@names::text[]) AND max_running IS NOT NULL
ORDER BY name;

-- name: QueueHasPendingRated :one
-- Whether queue @name has pending jobs that name rate-limit keys: such a
-- queue is not capped (see QueuesCapped).
SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'pending' AND queue = @name::text AND rate_limits IS NOT NULL);
