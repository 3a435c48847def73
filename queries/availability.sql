-- name: AvailabilitySet :one
-- Sets the window of a device label or a worker (scope), replacing one it had.
INSERT INTO availability_windows (scope, name, spec, zone, starts, ends, updated_by)
VALUES (@scope, @name, @spec, @zone, @starts::integer[], @ends::integer[], sqlc.narg('updated_by'))
ON CONFLICT (scope, name) DO UPDATE
SET spec = excluded.spec, zone = excluded.zone, starts = excluded.starts, ends = excluded.ends,
    updated_at = now(), updated_by = excluded.updated_by
RETURNING *;

-- name: AvailabilityDelete :execrows
DELETE FROM availability_windows WHERE scope = @scope AND name = @name;

-- name: AvailabilityList :many
SELECT * FROM availability_windows ORDER BY scope, name;

-- name: AvailabilityClosesAt :one
-- availability_closes for a test that holds the SQL and the Go to the
-- same answers: whether the window is open at @at, and when it closes in
-- seconds since the epoch (0 when never or closed).
SELECT (c IS NOT NULL)::boolean AS open,
       (CASE WHEN c IS NULL OR c = 'infinity' THEN 0 ELSE extract(epoch FROM c) END)::float8 AS closes_epoch
FROM availability_closes(@zone::text, @starts::integer[], @ends::integer[], @at::timestamptz) AS c;
