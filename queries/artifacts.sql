-- name: ArtifactInsert :one
-- Records an artifact of the current attempt; no row when the lease is not
-- current (stale token, job no longer running, or deadline passed).
INSERT INTO artifacts (job_id, attempt, kind, name, content_type, size, sha256, width, height)
SELECT j.id, j.attempt, @kind, @name, @content_type, @size, @sha256, sqlc.narg('width'), sqlc.narg('height')
FROM jobs j
WHERE j.id = @job_id AND lease_is_current(j.state, j.lease_token, j.lease_owner, j.lease_until, @lease_token, @worker_id)
RETURNING *;

-- name: ArtifactGet :one
SELECT * FROM artifacts WHERE id = @id;

-- name: ArtifactListByJob :many
SELECT * FROM artifacts WHERE job_id = @job_id ORDER BY attempt, id;

-- name: ArtifactCountBySHA :one
-- Files are shared by content; one is removable only when no row names it.
SELECT count(*) FROM artifacts WHERE sha256 = @sha256;
