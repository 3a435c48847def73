-- name: EffectStart :one
-- The current lease holder claims the effect under key for its attempt.
-- No row when the lease is not current, or when the effect is already
-- done (the caller reads it then). A 'started' row left by an attempt that
-- died is taken over: the external call may have happened, which is why
-- it carries an idempotency key.
WITH started AS (
    INSERT INTO effects (job_id, key, attempt, lease_token, state)
    SELECT j.id, @key, j.attempt, j.lease_token, 'started'
    FROM jobs j
    WHERE j.id = @job_id AND lease_is_current(j.state, j.lease_token, j.lease_owner, j.lease_until, @lease_token, @worker_id)
    ON CONFLICT (job_id, key) DO UPDATE
        SET attempt = EXCLUDED.attempt, lease_token = EXCLUDED.lease_token, updated_at = now()
        WHERE effects.state = 'started'
    RETURNING *
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT job_id, 'effect_started', attempt, jsonb_build_object('key', key, 'lease_token', lease_token)
    FROM started
)
SELECT * FROM started;

-- name: EffectFinish :one
-- Records the effect as done, only by the current lease holder of the
-- attempt that started it. When nothing was finished, the answer says
-- why: the lease is not current, or the effect was not started by this
-- attempt (prior_state and prior_token read the ledger as it was before
-- this statement, '' and 0 for no row; 'done' with this token is a repeat
-- of a finish that already happened).
WITH lease AS (
    SELECT j.id FROM jobs j
    WHERE j.id = @job_id AND lease_is_current(j.state, j.lease_token, j.lease_owner, j.lease_until, @lease_token, @worker_id)
), done AS (
    UPDATE effects e
    SET state = 'done', result = @result, updated_at = now()
    FROM lease
    WHERE e.job_id = lease.id AND e.key = @key AND e.state = 'started' AND e.lease_token = @lease_token
    RETURNING e.*
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT job_id, 'effect_done', attempt, jsonb_build_object('key', key)
    FROM done
)
SELECT EXISTS (SELECT 1 FROM lease) AS lease_current,
       EXISTS (SELECT 1 FROM done) AS finished,
       COALESCE((SELECT e.state FROM effects e WHERE e.job_id = @job_id AND e.key = @key), '')::text AS prior_state,
       COALESCE((SELECT e.lease_token FROM effects e WHERE e.job_id = @job_id AND e.key = @key), 0)::bigint AS prior_token;

-- name: EffectGet :one
SELECT * FROM effects WHERE job_id = @job_id AND key = @key;

-- name: EffectListByJob :many
SELECT * FROM effects WHERE job_id = @job_id ORDER BY created_at, key;
