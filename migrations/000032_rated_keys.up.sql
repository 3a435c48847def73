-- Rate limits combine with concurrency keys and queue caps
-- (queue/ratelimit.go). A job that names rate-limit keys is claimed by the
-- rate-limited claim alone, whatever else limits it: that claim takes the
-- locks of its concurrency key and of its capped queue, as the limited
-- claims do, and counts what runs under them. So each claim path has its
-- own index, and none reads past the others' jobs:
--   jobs_claim_keyed_idx        keyed jobs without rate limits (the limited claims)
--   jobs_claim_rated_idx        rate-limited jobs without a key, by queue in
--                               claim order (each queue read on its own, so a
--                               capped queue's waiting jobs are not in the way
--                               of the others')
--   jobs_claim_rated_keyed_idx  rate-limited keyed jobs, by key (each key read
--                               only as far as it has room, as the limited
--                               claims read theirs)
DROP INDEX jobs_claim_keyed_idx;
CREATE INDEX jobs_claim_keyed_idx ON jobs (concurrency_key, priority, run_at, id)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL AND rate_limits IS NULL;
DROP INDEX jobs_claim_rated_idx;
CREATE INDEX jobs_claim_rated_idx ON jobs (queue, priority, run_at, id)
    WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NULL;
CREATE INDEX jobs_claim_rated_keyed_idx ON jobs (concurrency_key, priority, run_at, id)
    WHERE state = 'pending' AND rate_limits IS NOT NULL AND concurrency_key IS NOT NULL;
