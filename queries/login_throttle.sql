-- Failed sign-ins: the throttle of auth.SignIn. Every query takes an
-- optional @now (tests); servers use the database clock.

-- name: LoginLocks :one
-- How many seconds sign-ins of (name, address), and of address whatever
-- the name, are still refused; 0 when they are not.
SELECT
    COALESCE((SELECT EXTRACT(EPOCH FROM f.locked_until - coalesce(sqlc.narg('now')::timestamptz, now()))
              FROM login_failures f
              WHERE f.name_hash = @name_hash AND f.address = @address
                AND f.locked_until > coalesce(sqlc.narg('now')::timestamptz, now())), 0)::float8 AS name_locked_s,
    COALESCE((SELECT EXTRACT(EPOCH FROM a.locked_until - coalesce(sqlc.narg('now')::timestamptz, now()))
              FROM login_address_failures a
              WHERE a.address = @address
                AND a.locked_until > coalesce(sqlc.narg('now')::timestamptz, now())), 0)::float8 AS address_locked_s;

-- name: LoginFailureRecord :one
-- Counts one failed sign-in, for (name, address) and for address. The
-- rules live here and only here:
--   (name, address): from the fifth failure since the last success,
--     locked for 2^(n-5) s, at most 15 minutes;
--   address: from the 100th failure of a 15-minute window (which starts
--     at its first failure), locked until the window ends.
WITH clock AS (
    SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS now
), pair AS (
    INSERT INTO login_failures AS f (name_hash, address, failures, last_failed_at)
    SELECT @name_hash, @address, 1, clock.now FROM clock
    ON CONFLICT (name_hash, address) DO UPDATE
    SET failures = f.failures + 1,
        locked_until = CASE WHEN f.failures + 1 >= 5
                            THEN EXCLUDED.last_failed_at + LEAST(900, power(2, f.failures + 1 - 5)) * interval '1 second' END,
        last_failed_at = EXCLUDED.last_failed_at
    RETURNING f.failures
), addr AS (
    INSERT INTO login_address_failures AS a (address, window_start, failures)
    SELECT @address, clock.now, 1 FROM clock
    ON CONFLICT (address) DO UPDATE
    SET window_start = CASE WHEN a.window_start <= EXCLUDED.window_start - interval '15 minutes'
                            THEN EXCLUDED.window_start ELSE a.window_start END,
        failures = CASE WHEN a.window_start <= EXCLUDED.window_start - interval '15 minutes'
                        THEN 1 ELSE a.failures + 1 END,
        locked_until = CASE WHEN a.window_start > EXCLUDED.window_start - interval '15 minutes' AND a.failures + 1 >= 100
                            THEN a.window_start + interval '15 minutes' END
    RETURNING a.failures
)
SELECT pair.failures::integer AS name_failures, addr.failures::integer AS address_failures FROM pair, addr;

-- name: LoginFailureClear :exec
-- A success from address forgets that name's failures from it.
DELETE FROM login_failures WHERE name_hash = @name_hash AND address = @address;

-- name: LoginFailureClearName :exec
-- Setting a password lifts that name's locks at every address.
DELETE FROM login_failures WHERE name_hash = @name_hash;

-- name: LoginFailureDeleteStale :one
-- Forgets names that have not failed for a day (their locks are long
-- over) and address windows that have ended: the tables hold only what
-- can still refuse someone, or count towards it.
WITH clock AS (
    SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS now
), names AS (
    DELETE FROM login_failures f USING clock WHERE f.last_failed_at < clock.now - interval '24 hours' RETURNING 1
), addrs AS (
    DELETE FROM login_address_failures a USING clock WHERE a.window_start <= clock.now - interval '15 minutes' RETURNING 1
)
SELECT ((SELECT count(*) FROM names) + (SELECT count(*) FROM addrs))::bigint AS deleted;
