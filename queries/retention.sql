-- Retention: finished jobs older than their state's retention go, with
-- their history (attempts, events, effects, artifacts: ON DELETE CASCADE),
-- in small batches, each its own short statement. The per-state counters
-- stay exact through the statement-level delete trigger.

-- name: RetentionScan :many
-- One keyset step through the jobs of a finished state in id order. No
-- index on finished_at is needed (one would cost every completion an index
-- write): a job finishes after it is created, so the walk stops at the
-- first job created after the cutoff (young), having read only the jobs
-- created before it. Expired: finished before the cutoff.
SELECT id,
       coalesce(finished_at < now() - (@keep_ms::bigint) * interval '1 millisecond', false)::boolean AS expired,
       (created_at >= now() - (@keep_ms::bigint) * interval '1 millisecond')::boolean AS young
FROM jobs
WHERE state = @state AND state <> 'running' AND id > @after -- (the index's predicate)
ORDER BY id
LIMIT @batch;

-- name: RetentionDelete :one
-- Deletes those of @ids that are still finished in @state and expired
-- (a dead job retried meanwhile is pending again and stays), skipping rows
-- another transaction holds rather than waiting for them. Returns how many
-- went and the files their artifacts named (the statement's snapshot still
-- sees the artifact rows that the cascade removes).
WITH gone AS (
    DELETE FROM jobs
    WHERE id IN (SELECT j.id FROM jobs j
                 WHERE j.id = ANY(@ids::bigint[]) AND j.state = @state
                   AND j.finished_at < now() - (@keep_ms::bigint) * interval '1 millisecond'
                 FOR UPDATE SKIP LOCKED)
    RETURNING id
)
SELECT (SELECT count(*) FROM gone)::bigint AS jobs,
       ARRAY(SELECT DISTINCT a.sha256 FROM artifacts a JOIN gone g ON g.id = a.job_id)::text[] AS sums;

-- name: RetentionFreedFiles :many
-- For a dry run: the files that deleting the jobs @ids would leave
-- unreferenced.
WITH doomed AS (SELECT unnest(@ids::bigint[]) AS id),
cand AS (SELECT DISTINCT a.sha256 FROM artifacts a JOIN doomed d ON d.id = a.job_id)
SELECT c.sha256 FROM cand c
WHERE NOT EXISTS (SELECT 1 FROM artifacts b
                  WHERE b.sha256 = c.sha256 AND NOT EXISTS (SELECT 1 FROM doomed d WHERE d.id = b.job_id));

-- name: ArtifactSHAsReferenced :many
-- Which of @sums some artifact row still names (artifacts_sha256_idx).
SELECT DISTINCT sha256 FROM artifacts WHERE sha256 = ANY(@sums::text[]);

-- name: ArtifactStorage :one
-- The artifact files on disk and their bytes (see artifact_storage).
SELECT coalesce(sum(files), 0)::bigint AS files, coalesce(sum(bytes), 0)::bigint AS bytes FROM artifact_storage;

-- name: ArtifactStorageAdd :exec
-- Counts files placed (positive) or removed (negative).
UPDATE artifact_storage SET files = files + @files, bytes = bytes + @bytes
WHERE shard = pg_backend_pid() % 16;

-- name: ArtifactStorageSet :exec
-- Sets the figures to what a sweep of the files counted.
UPDATE artifact_storage SET files = CASE WHEN shard = 0 THEN @files::bigint ELSE 0 END,
                            bytes = CASE WHEN shard = 0 THEN @bytes::bigint ELSE 0 END;
