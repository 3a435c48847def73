-- name: TokenCreate :one
INSERT INTO api_tokens (name, role, token_hash) VALUES (@name, @role, @token_hash) RETURNING *;

-- name: TokenEnsure :exec
-- Registers a token given in the environment; a no-op when it exists.
INSERT INTO api_tokens (name, role, token_hash) VALUES (@name, @role, @token_hash)
ON CONFLICT (token_hash) DO UPDATE SET revoked_at = NULL, role = EXCLUDED.role;

-- name: TokenByHash :one
SELECT * FROM api_tokens WHERE token_hash = @token_hash AND revoked_at IS NULL;

-- name: TokenList :many
SELECT * FROM api_tokens ORDER BY created_at, id;

-- name: TokenRevoke :one
UPDATE api_tokens SET revoked_at = now() WHERE name = @name AND revoked_at IS NULL RETURNING *;

-- name: TokenTouch :exec
-- Records use at most once a minute, so authentication stays read-mostly.
UPDATE api_tokens SET last_used_at = now()
WHERE id = @id AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
