-- Rate limits (SPEC "Rate limits"): a job may name rate-limit keys, and a
-- key has budgets per window. NULL rate_limits (every job that names none)
-- keeps a job on the fast claim path: jobs_claim_idx leaves rate-limited
-- jobs out, as it leaves out keyed ones, and jobs_claim_rated_idx holds
-- them, in claim order, for the rate-limited claim (queue/ratelimit.go).
ALTER TABLE jobs ADD COLUMN rate_limits text[]
    CHECK (rate_limits IS NULL OR (cardinality(rate_limits) BETWEEN 1 AND 8));

DROP INDEX jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON jobs (priority, run_at, id)
    WHERE state = 'pending' AND concurrency_key IS NULL AND rate_limits IS NULL;
CREATE INDEX jobs_claim_rated_idx ON jobs (priority, run_at, id)
    WHERE state = 'pending' AND rate_limits IS NOT NULL;

-- One row per key and window length: the budget, and the counter of the
-- window now running. Fixed windows: a window of window_s seconds starts
-- at a multiple of window_s since the Unix epoch (UTC midnight for a
-- day). The counter belongs to the window that starts at window_start;
-- a claim in a later window starts it again from 0 (so no row of an old
-- window is ever kept: nothing to prune). Claims lock the rows of the
-- keys they spend FOR UPDATE, which makes them exact under any number of
-- claimers.
CREATE TABLE rate_limit_budgets (
    key          text NOT NULL CHECK (length(key) BETWEEN 1 AND 200),
    window_s     integer NOT NULL CHECK (window_s IN (1, 60, 3600, 86400)),
    budget       integer NOT NULL CHECK (budget BETWEEN 1 AND 1000000000),
    window_start timestamptz NOT NULL DEFAULT 'epoch',
    used         integer NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    updated_by   text,
    PRIMARY KEY (key, window_s)
);

-- The start of the fixed window of window_s seconds that holds at.
CREATE FUNCTION rate_window_start(window_s integer, at timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT to_timestamp(floor(extract(epoch FROM at) / window_s) * window_s)
$$;

-- The keys with a budget spent in the window that holds at: no claim
-- takes a job that names one of them until that window ends. Claims call
-- it as an uncorrelated subquery, so that it runs once per statement.
CREATE FUNCTION rate_limits_spent(at timestamptz)
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT key), '{}') FROM rate_limit_budgets
    WHERE used >= budget AND window_start = rate_window_start(window_s, at)
$$;
