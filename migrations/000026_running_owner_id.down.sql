CREATE INDEX jobs_running_owner_idx ON jobs (lease_owner) WHERE state = 'running';
DROP INDEX jobs_running_idx;
ALTER INDEX jobs_running_owner_idx RENAME TO jobs_running_idx;
