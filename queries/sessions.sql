-- name: SessionCreate :exec
INSERT INTO sessions (token_hash, user_id, csrf_token, expires_at)
VALUES (@token_hash, @user_id, @csrf_token, now() + (@ttl_s::integer) * interval '1 second');

-- name: SessionGet :one
-- A live session and its user; sliding expiry is renewed by SessionTouch.
SELECT s.token_hash, s.csrf_token, s.expires_at, s.last_seen_at, u.id AS user_id, u.username, u.role,
       (s.last_seen_at < now() - interval '1 minute')::boolean AS touch_due
FROM sessions s JOIN users u ON u.id = s.user_id
WHERE s.token_hash = @token_hash AND s.expires_at > now();

-- name: SessionTouch :exec
-- Extends a session in use, at most once a minute so reads stay reads.
UPDATE sessions SET last_seen_at = now(), expires_at = now() + (@ttl_s::integer) * interval '1 second'
WHERE token_hash = @token_hash AND last_seen_at < now() - interval '1 minute';

-- name: SessionDelete :exec
DELETE FROM sessions WHERE token_hash = @token_hash;

-- name: SessionDeleteExpired :exec
DELETE FROM sessions WHERE expires_at <= now();

-- name: SessionsAlive :many
-- Which of these sessions (of a server's open event streams) are live,
-- renewing those in use, each at most once a minute (as SessionTouch):
-- one statement for every stream of the server.
WITH renewed AS (
    UPDATE sessions SET last_seen_at = now(), expires_at = now() + (@ttl_s::integer) * interval '1 second'
    WHERE token_hash = ANY(@token_hashes::bytea[]) AND expires_at > now() AND last_seen_at < now() - interval '1 minute'
    RETURNING token_hash
)
SELECT token_hash FROM sessions WHERE token_hash = ANY(@token_hashes::bytea[]) AND expires_at > now()
UNION SELECT token_hash FROM renewed;
