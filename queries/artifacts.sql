-- name: ArtifactInsert :one
-- Records an artifact of the current attempt; no row when the lease is not
-- current (stale token, job no longer running, or deadline passed).
INSERT INTO artifacts (job_id, attempt, kind, name, content_type, size, sha256, width, height, step, screen_hash)
SELECT j.id, j.attempt, @kind, @name, @content_type, @size, @sha256, sqlc.narg('width'), sqlc.narg('height'), sqlc.narg('step'), sqlc.narg('screen_hash')
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

-- name: ArtifactFileLock :exec
-- Holds the file of @sha256 until the transaction ends. An upload takes it
-- while it makes sure the file is there and records the row that names it;
-- a collector takes it (ArtifactFileTryLock) to check that no row names
-- the file and remove it. So neither can see the other half done.
SELECT pg_advisory_xact_lock(hashtextextended('leasehold:artifact:' || @sha256::text, 0));

-- name: ArtifactFileTryLock :one
-- ArtifactFileLock without waiting: false while an upload of the same
-- content holds it (the collector then leaves the file alone). Check the
-- rows in a later statement: this one's snapshot may predate the lock.
SELECT pg_try_advisory_xact_lock(hashtextextended('leasehold:artifact:' || @sha256::text, 0)) AS locked;
