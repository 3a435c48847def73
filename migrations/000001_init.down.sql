DROP TABLE IF EXISTS job_counts;
DROP FUNCTION IF EXISTS jobs_count_insert, jobs_count_update, jobs_count_delete, job_counts_apply;
DROP TABLE IF EXISTS api_tokens, workers, events, attempts, jobs;
DROP SEQUENCE IF EXISTS lease_token_seq;
DROP TYPE IF EXISTS attempt_outcome, job_state;
