DROP INDEX IF EXISTS attempts_worker_ended_idx;
DROP INDEX IF EXISTS jobs_succeeded_owner_idx;
ALTER TABLE workers
    DROP COLUMN not_claiming,
    DROP COLUMN claiming,
    DROP COLUMN info_error,
    DROP COLUMN info_at,
    DROP COLUMN info;
