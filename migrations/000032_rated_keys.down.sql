DROP INDEX jobs_claim_rated_keyed_idx;
DROP INDEX jobs_claim_rated_idx;
CREATE INDEX jobs_claim_rated_idx ON jobs (priority, run_at, id)
    WHERE state = 'pending' AND rate_limits IS NOT NULL;
DROP INDEX jobs_claim_keyed_idx;
CREATE INDEX jobs_claim_keyed_idx ON jobs (concurrency_key, priority, run_at, id)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL;
