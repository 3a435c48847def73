-- name: TokenCreate :one
INSERT INTO api_tokens (name, role, token_hash) VALUES (@name, @role, @token_hash) RETURNING *;

-- name: TokenByHash :one
SELECT * FROM api_tokens WHERE token_hash = @token_hash AND revoked_at IS NULL;

-- name: TokenList :many
SELECT * FROM api_tokens ORDER BY created_at, id;

-- name: TokenRevoke :one
-- Waits for the claims in flight with this token (they hold its row with
-- FOR SHARE: JobClaim's gate), so that the statement after it sees what
-- they took.
UPDATE api_tokens SET revoked_at = now() WHERE name = @name AND revoked_at IS NULL RETURNING *;

-- name: TokenByName :one
SELECT * FROM api_tokens WHERE name = @name;

-- name: TokenUpsertByName :exec
-- Registers a token given in the environment under its name. Idempotent for
-- the same secret; a changed secret replaces the name's old one (which stops
-- working), and a revoked name is brought back, because the environment is
-- the source of truth for this token.
INSERT INTO api_tokens (name, role, token_hash) VALUES (@name, @role, @token_hash)
ON CONFLICT (name) DO UPDATE
SET token_hash = EXCLUDED.token_hash, role = EXCLUDED.role, revoked_at = NULL,
    last_used_at = CASE WHEN api_tokens.token_hash = EXCLUDED.token_hash THEN api_tokens.last_used_at END;

-- name: TokensChanged :exec
-- Tells every server (on the channel their job listener hears) that a
-- token was revoked or given another secret, so that they forget the
-- tokens they remember: sent in the transaction of the change, it
-- arrives only if the change committed. The payload is no queue name
-- (those never start with "!"), so waiting claims ignore it.
SELECT pg_notify('leasehold_jobs', '!tokens');

-- name: TokensActive :many
-- Which of these remembered tokens are still active: what each server
-- checks once a minute, in case a notification of a change was lost.
SELECT token_hash FROM api_tokens WHERE token_hash = ANY(@token_hashes::bytea[]) AND revoked_at IS NULL;

-- name: TokensTouch :exec
-- Records the use of these tokens, each at most once a minute: one
-- statement for every token a server saw used since its last one.
UPDATE api_tokens SET last_used_at = now()
WHERE id = ANY(@ids::bigint[]) AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
