-- name: JobLeasesEndByOwner :many
-- Ends the running leases of a worker whose token was revoked: their
-- deadline becomes now, so the reaper takes the jobs back at once (each
-- attempt ends lease_expired and counts, as for a worker that vanished;
-- a hand-over it had not confirmed yet ends not_delivered and does not),
-- and every fenced write of the old holder is refused from now on.
WITH ended AS (
    UPDATE jobs SET lease_until = now()
    WHERE state = 'running' AND lease_owner = @owner::text AND lease_until > now()
    RETURNING id, attempt, lease_token
), ev AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT id, 'lease_revoked', attempt,
           jsonb_build_object('worker', @owner::text, 'lease_token', lease_token, 'reason', 'worker token revoked')
    FROM ended
)
SELECT id FROM ended ORDER BY id;

-- name: TokenActive :one
-- Whether worker token @id may still claim: asked after a claim that
-- took nothing, so that a long poll of a revoked token ends (401) instead
-- of waiting on. The claim statements' gate is what keeps a revoked token
-- from claiming; this only tells the poll why it got nothing.
SELECT EXISTS (SELECT 1 FROM api_tokens WHERE id = @id AND revoked_at IS NULL)::boolean AS active;
