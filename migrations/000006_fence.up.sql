-- Fencing tokens that cannot be guessed: the sequence still orders them
-- (its value sits in the high bits, so a job's next token is larger than
-- every token it had), and 20 bits from the strong random source sit
-- below it. Tokens stay under 2^53 (JSON numbers) for 2^33 claims.
-- Tokens handed out before this migration were the bare sequence values,
-- all smaller than any token from here on.
CREATE FUNCTION lease_token_next() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT (nextval('lease_token_seq') << 20) | ('x' || left(gen_random_uuid()::text, 5))::bit(20)::bigint
$$;

-- The fence, said once: a write of an attempt is accepted only from the
-- lease's owner, with the attempt's current token, while the job runs and
-- before its deadline (an expired lease that the reaper has not taken back
-- yet is lost all the same). A SQL function of one expression, so the
-- planner inlines it into every statement that calls it.
CREATE FUNCTION lease_is_current(job_state job_state, job_token bigint, job_owner text, job_until timestamptz,
                                 token bigint, owner text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT job_state = 'running' AND job_token = token AND job_owner = owner AND job_until > now()
$$;
