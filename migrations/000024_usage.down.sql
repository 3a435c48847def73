DROP FUNCTION usage_counters_add(jsonb, jsonb);
DROP TABLE usage_totals;
DROP TABLE attempt_usage;
ALTER TABLE jobs DROP COLUMN steps_spent, DROP COLUMN cost_spent_micros, DROP COLUMN max_steps, DROP COLUMN max_cost;
