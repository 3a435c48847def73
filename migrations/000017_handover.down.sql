-- PostgreSQL cannot drop an enum value, and rebuilding attempt_outcome
-- would mean rebuilding the views over attempts: the value stays,
-- unused. Attempts that ended not_delivered read as released (neither
-- counts), which is what the schema before this one knew.
UPDATE attempts SET outcome = 'released' WHERE outcome = 'not_delivered';
ALTER TABLE jobs DROP COLUMN handover_pending;
