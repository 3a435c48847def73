-- Search (SPEC "Search and failure groups"): q= on the jobs list looks
-- for its text in a job's app, payload (the instructions are in it),
-- last error and result, as a substring, case-insensitively.
--
-- A trigram index (pg_trgm) rather than full-text search: people paste
-- parts of package names, ids and error messages ("app7.settings",
-- "R5CT", "login scr"), which full text splits or stems away; trigrams
-- find any substring of three characters or more. docs/search.md has
-- both measured.
--
-- The index leaves running jobs out, as the list's other indexes do: a
-- claim and every heartbeat would otherwise write a new entry per
-- trigram of the job's text. A job is indexed when it is submitted and
-- again when its attempt ends; running jobs (at most the workers' slots)
-- are searched apart.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE FUNCTION job_search_text(app text, payload jsonb, last_error text, result jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN lower(coalesce(app, '') || ' ' || payload::text || ' ' || coalesce(last_error, '') || ' ' || coalesce(result::text, ''));

CREATE INDEX jobs_search_idx ON jobs USING gin (job_search_text(app, payload, last_error, result) gin_trgm_ops)
WHERE state <> 'running';
