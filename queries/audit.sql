-- name: AuditInsert :exec
INSERT INTO audit_log (actor, role, addr, action, target, detail)
VALUES (@actor, @role, @addr, @action, @target, @detail);

-- name: AuditList :many
-- The newest rows first, older than @before (0: from the newest), each
-- filter applied when set: actor exactly, action exactly or by its prefix
-- up to a dot ("job" matches "job.retry"), target exactly, and a time
-- range.
SELECT id, at, actor, role, addr, action, target, detail
FROM audit_log
WHERE (@before::bigint = 0 OR id < @before)
  AND (sqlc.narg('actor')::text IS NULL OR actor = sqlc.narg('actor'))
  AND (sqlc.narg('action')::text IS NULL OR action = sqlc.narg('action')
       OR starts_with(action, sqlc.narg('action') || '.'))
  AND (sqlc.narg('target')::text IS NULL OR target = sqlc.narg('target'))
  AND (sqlc.narg('since')::timestamptz IS NULL OR at >= sqlc.narg('since'))
  AND (sqlc.narg('until')::timestamptz IS NULL OR at < sqlc.narg('until'))
ORDER BY id DESC
LIMIT @page_size;

-- name: AuditPrune :execrows
-- Deletes up to batch rows older than keep_ms milliseconds, in database time.
DELETE FROM audit_log
WHERE id IN (
    SELECT id FROM audit_log
    WHERE at < now() - (interval '1 millisecond' * @keep_ms::bigint)
    ORDER BY id LIMIT @batch
);

-- name: AuditCountExpired :one
-- Counts the rows older than keep_ms milliseconds, in database time: what
-- AuditPrune would delete, batch after batch (server prune --dry-run).
SELECT count(*) FROM audit_log
WHERE at < now() - (interval '1 millisecond' * @keep_ms::bigint);
