DROP FUNCTION IF EXISTS lease_is_current(job_state, bigint, text, timestamptz, bigint, text);
DROP FUNCTION IF EXISTS lease_token_next();
