DROP FUNCTION rate_limits_spent(timestamptz);
DROP FUNCTION rate_window_start(integer, timestamptz);
DROP TABLE rate_limit_budgets;
DROP INDEX jobs_claim_rated_idx;
DROP INDEX jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON jobs (priority, run_at, id) WHERE state = 'pending' AND concurrency_key IS NULL;
ALTER TABLE jobs DROP COLUMN rate_limits;
