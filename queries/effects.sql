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
    WHERE j.id = @job_id AND j.lease_token = @lease_token AND j.state = 'running' AND j.lease_until > now()
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
-- attempt that started it.
WITH done AS (
    UPDATE effects e
    SET state = 'done', result = @result, updated_at = now()
    FROM jobs j
    WHERE e.job_id = @job_id AND e.key = @key AND e.state = 'started' AND e.lease_token = @lease_token
      AND j.id = e.job_id AND j.lease_token = @lease_token AND j.state = 'running' AND j.lease_until > now()
    RETURNING e.*
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT job_id, 'effect_done', attempt, jsonb_build_object('key', key)
    FROM done
)
SELECT * FROM done;

-- name: EffectGet :one
SELECT * FROM effects WHERE job_id = @job_id AND key = @key;

-- name: EffectListByJob :many
SELECT * FROM effects WHERE job_id = @job_id ORDER BY created_at, key;
