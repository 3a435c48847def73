-- Usage and budgets (migration 24).

-- name: UsageAdd :one
-- Adds one usage report to the current attempt of @job_id, fenced like
-- every write of an attempt (no row: refused): to the attempt's row for
-- the model and currency, to the job's cost spent, and to the totals
-- /metrics reads. spent says the job's max_cost is reached.
WITH j AS (
    UPDATE jobs SET cost_spent_micros = cost_spent_micros + @cost_micros
    WHERE id = @job_id
      AND lease_is_current(state, lease_token, lease_owner, lease_until, @lease_token, @worker_id)
    RETURNING id, attempt, cost_spent_micros, max_cost
), a AS (
    INSERT INTO attempt_usage AS u (job_id, attempt, model, currency, input_tokens, output_tokens, cost_micros, counters)
    SELECT j.id, j.attempt, @model, @currency, @input_tokens, @output_tokens, @cost_micros, @counters::jsonb FROM j
    ON CONFLICT (job_id, attempt, model, currency) DO UPDATE
    SET input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens,
        cost_micros = u.cost_micros + excluded.cost_micros,
        counters = usage_counters_add(u.counters, excluded.counters),
        reports = u.reports + 1,
        reported_at = now()
), t AS (
    INSERT INTO usage_totals AS t (currency, model, input_tokens, output_tokens, cost_micros, reports)
    SELECT @currency, @model, @input_tokens, @output_tokens, @cost_micros, 1 FROM j
    ON CONFLICT (currency, model) DO UPDATE
    SET input_tokens = t.input_tokens + excluded.input_tokens,
        output_tokens = t.output_tokens + excluded.output_tokens,
        cost_micros = t.cost_micros + excluded.cost_micros,
        reports = t.reports + 1
)
SELECT j.cost_spent_micros, (j.max_cost IS NOT NULL AND j.cost_spent_micros >= j.max_cost)::boolean AS spent FROM j;

-- name: UsageListByJob :many
-- A job's usage, attempt by attempt (few rows: one per attempt and model).
SELECT attempt, model, currency, input_tokens, output_tokens, cost_micros, counters, reports, created_at, reported_at
FROM attempt_usage WHERE job_id = @job_id
ORDER BY attempt, model, currency;

-- name: UsageSummary :many
-- Usage from @from to @to (by when an attempt first reported it), summed
-- by @group_by: 'app', 'kind' or 'day' (UTC), one row per group and
-- currency, biggest cost first, at most @max rows.
SELECT (CASE @group_by::text
            WHEN 'app' THEN coalesce(j.app, '')
            WHEN 'kind' THEN j.kind
            ELSE to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') END)::text AS key,
       u.currency,
       count(DISTINCT u.job_id)::bigint AS jobs,
       sum(u.input_tokens)::bigint AS input_tokens,
       sum(u.output_tokens)::bigint AS output_tokens,
       sum(u.cost_micros)::bigint AS cost_micros
FROM attempt_usage u JOIN jobs j ON j.id = u.job_id
WHERE u.created_at >= @from_at AND u.created_at < @to_at
GROUP BY 1, 2
ORDER BY CASE WHEN @group_by::text = 'day' THEN 1 ELSE 0 END, 6 DESC, 1, 2
LIMIT @max;

-- name: UsageTotals :many
-- What every currency and model used since the beginning, for /metrics.
SELECT currency, model, input_tokens, output_tokens, cost_micros, reports FROM usage_totals
ORDER BY currency, model;

-- name: EventProgressStep :one
-- EventProgress of a step, which also counts the step against the job's
-- max_steps when it has one (a job without pays one index probe, no
-- write); spent says the budget is reached. No row: refused.
WITH p AS (
    SELECT event_progress(@job_id::bigint, @lease_token::bigint, @worker_id::text, @detail::jsonb, @keep::integer) AS id
), s AS (
    UPDATE jobs SET steps_spent = steps_spent + 1
    WHERE id = @job_id AND max_steps IS NOT NULL AND (SELECT p.id FROM p) IS NOT NULL
    RETURNING (steps_spent >= max_steps) AS spent
)
SELECT p.id::bigint AS id, coalesce((SELECT s.spent FROM s), false)::boolean AS spent
FROM p WHERE p.id IS NOT NULL;
