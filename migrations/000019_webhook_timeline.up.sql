-- One timeline row per webhook event's failures: the first failed attempt
-- writes a webhook.failed event and every later one updates it (attempt
-- count, last status and error, next try), so that a receiver failing for
-- 24 h leaves one row, not one per attempt. The outbox row remembers it.
ALTER TABLE webhook_outbox ADD COLUMN timeline_id bigint;

-- An updated timeline row is news for the job's open pages too.
CREATE TRIGGER events_live_update AFTER UPDATE ON events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_notify_job_activity();
