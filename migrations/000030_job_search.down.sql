DROP INDEX jobs_search_idx;
DROP FUNCTION job_search_text(text, jsonb, text, jsonb);
-- pg_trgm stays: another part of the database may have come to use it.
