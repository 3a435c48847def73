DROP INDEX jobs_scheduled_idx;
CREATE INDEX jobs_scheduled_idx ON jobs (run_at) WHERE state = 'pending';
