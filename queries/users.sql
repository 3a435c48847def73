-- name: UserCount :one
SELECT count(*) FROM users;

-- name: UserUpsertPassword :exec
-- Sets a user's password, creating the user with @role if there is none
-- (the LEASEHOLD_ADMIN_PASSWORD bootstrap); an existing user keeps its
-- role.
INSERT INTO users (username, password_hash, role) VALUES (@username, @password_hash, @role)
ON CONFLICT (username) DO UPDATE SET password_hash = EXCLUDED.password_hash;

-- name: UserAdd :one
-- A new user; a taken name is a unique violation.
INSERT INTO users (username, password_hash, role) VALUES (@username, @password_hash, @role)
RETURNING id, username, role, created_at, last_login_at;

-- name: UserSetRole :one
-- Changes @username's role, unless that would leave no admin: the admins'
-- rows are locked first, so that two demotions at once cannot both see
-- the other admin still there. changed is false for no such user, and
-- for the last admin given another role (then admin_left is false).
WITH admins AS MATERIALIZED (
    SELECT id FROM users WHERE role = 'admin' ORDER BY id FOR UPDATE
), target AS (
    SELECT x.id, x.role FROM users x WHERE x.username = @username::text
), changed AS (
    UPDATE users u SET role = @role
    FROM target t
    WHERE u.id = t.id
      AND (@role::text = 'admin' OR t.role <> 'admin' OR (SELECT count(*) FROM admins) > 1)
    RETURNING u.id
)
SELECT EXISTS (SELECT 1 FROM target)::boolean AS found,
       EXISTS (SELECT 1 FROM changed)::boolean AS changed;

-- name: UserRemove :one
-- Removes @username and its sessions, unless it is the last admin (as
-- UserSetRole).
WITH admins AS MATERIALIZED (
    SELECT id FROM users WHERE role = 'admin' ORDER BY id FOR UPDATE
), target AS (
    SELECT x.id, x.role FROM users x WHERE x.username = @username::text
), removed AS (
    DELETE FROM users u
    USING target t
    WHERE u.id = t.id AND (t.role <> 'admin' OR (SELECT count(*) FROM admins) > 1)
    RETURNING u.id
)
SELECT EXISTS (SELECT 1 FROM target)::boolean AS found,
       EXISTS (SELECT 1 FROM removed)::boolean AS removed;

-- name: UserList :many
SELECT id, username, role, created_at, last_login_at FROM users ORDER BY username;

-- name: UserByName :one
SELECT u.id, u.username, u.password_hash, u.role FROM users u WHERE u.username = @username;

-- name: UserLoginSucceeded :exec
UPDATE users SET last_login_at = now() WHERE id = @id;
