DROP FUNCTION job_limits_freed(text[], boolean);
DROP INDEX jobs_queue_pending_idx;
DROP INDEX jobs_running_keyed_idx;
DROP INDEX jobs_claim_keyed_idx;
DROP INDEX jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON jobs (priority, run_at, id) WHERE state = 'pending';
ALTER TABLE jobs DROP COLUMN concurrency_limit, DROP COLUMN concurrency_key;
DROP TABLE queue_settings;
