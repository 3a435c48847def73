DROP TRIGGER events_live_update ON events;
ALTER TABLE webhook_outbox DROP COLUMN timeline_id;
