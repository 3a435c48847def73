-- name: UserCount :one
SELECT count(*) FROM users;

-- name: UserUpsertPassword :exec
-- Sets a user's password (the LEASEHOLD_ADMIN_PASSWORD bootstrap).
INSERT INTO users (username, password_hash) VALUES (@username, @password_hash)
ON CONFLICT (username) DO UPDATE SET password_hash = EXCLUDED.password_hash;

-- name: UserByName :one
SELECT u.id, u.username, u.password_hash FROM users u WHERE u.username = @username;

-- name: UserLoginSucceeded :exec
UPDATE users SET last_login_at = now() WHERE id = @id;
