-- Usage and budgets (SPEC "Usage and budgets"): what an attempt spent,
-- as its executor reports it, and the budget a job may carry.

-- A job's budget (NULL: none), and what it has spent of it over all its
-- attempts: the usage write and the progress write that spend it read
-- and add in the row they already lock for the fence, so a budget is
-- checked without summing anything. steps_spent counts only for a job
-- with max_steps (a job without pays no write for its steps).
ALTER TABLE jobs
    ADD COLUMN max_cost          bigint CHECK (max_cost > 0),
    ADD COLUMN max_steps         integer CHECK (max_steps > 0),
    ADD COLUMN cost_spent_micros bigint NOT NULL DEFAULT 0,
    ADD COLUMN steps_spent       integer NOT NULL DEFAULT 0;

-- One row per (job, attempt, model, currency), added to by every report:
-- an executor that reports each step makes one row, not one per step, so
-- the job page reads a handful and a sum over days reads what was used,
-- not how often it was said. created_at is when the attempt first
-- reported this model (the day it counts for); reported_at the last.
CREATE TABLE attempt_usage (
    job_id        bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt       integer NOT NULL,
    model         text NOT NULL,
    currency      text NOT NULL,
    input_tokens  bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cost_micros   bigint NOT NULL DEFAULT 0 CHECK (cost_micros >= 0),
    counters      jsonb NOT NULL DEFAULT '{}',
    reports       integer NOT NULL DEFAULT 1,
    created_at    timestamptz NOT NULL DEFAULT now(),
    reported_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt, model, currency)
);
CREATE INDEX attempt_usage_created_idx ON attempt_usage (created_at);

-- Totals since the beginning, never pruned: /metrics reads this small
-- table (one row per currency and model) rather than summing usage, and
-- its counters only grow, as Prometheus counters must, while retention
-- deletes old jobs with their usage.
CREATE TABLE usage_totals (
    currency      text NOT NULL,
    model         text NOT NULL,
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cost_micros   bigint NOT NULL DEFAULT 0,
    reports       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (currency, model)
);

-- Free-form counters added key by key: numbers sum (a key new on either
-- side is taken as it is).
CREATE FUNCTION usage_counters_add(a jsonb, b jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_object_agg(k, coalesce((a->>k)::numeric, 0) + coalesce((b->>k)::numeric, 0)), '{}'::jsonb)
    FROM (SELECT jsonb_object_keys(a) UNION SELECT jsonb_object_keys(b)) AS keys(k)
$$;
