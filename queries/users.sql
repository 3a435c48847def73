-- name: UserCount :one
SELECT count(*) FROM users;

-- name: UserUpsertPassword :exec
-- Sets a user's password (the LEASEHOLD_ADMIN_PASSWORD bootstrap), and
-- lifts any lock.
INSERT INTO users (username, password_hash) VALUES (@username, @password_hash)
ON CONFLICT (username) DO UPDATE SET password_hash = EXCLUDED.password_hash, failed_logins = 0, locked_until = NULL;

-- name: UserByName :one
-- Also whether the account is locked now, by the database clock.
SELECT u.*, (u.locked_until IS NOT NULL AND u.locked_until > now())::boolean AS locked,
       COALESCE(EXTRACT(EPOCH FROM u.locked_until - now()), 0)::float8 AS locked_for_s
FROM users u WHERE u.username = @username;

-- name: UserLoginFailed :one
-- Counts a failed sign-in; from the fifth on, the account is locked for
-- 2^(n-5) seconds, at most 15 minutes.
UPDATE users
SET failed_logins = failed_logins + 1,
    locked_until = CASE WHEN failed_logins + 1 >= 5
                        THEN now() + LEAST(900, power(2, failed_logins + 1 - 5)) * interval '1 second' END
WHERE id = @id
RETURNING failed_logins;

-- name: UserLoginSucceeded :exec
UPDATE users SET failed_logins = 0, locked_until = NULL, last_login_at = now() WHERE id = @id;
