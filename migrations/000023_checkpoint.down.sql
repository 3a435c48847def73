ALTER TABLE jobs
    DROP COLUMN checkpoint,
    DROP COLUMN checkpoint_step,
    DROP COLUMN checkpoint_attempt,
    DROP COLUMN checkpoint_at;
