DROP FUNCTION IF EXISTS event_progress(bigint, bigint, text, jsonb, integer);
DROP INDEX IF EXISTS events_progress_idx;
