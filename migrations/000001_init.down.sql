DROP TABLE IF EXISTS job_counts, api_tokens, workers, events, attempts, jobs;
DROP FUNCTION IF EXISTS jobs_count_insert, jobs_count_update, jobs_count_delete, job_counts_apply;
DROP SEQUENCE IF EXISTS lease_token_seq;
DROP TYPE IF EXISTS attempt_outcome, job_state;
