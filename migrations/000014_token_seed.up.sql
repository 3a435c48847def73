-- A lease token's low 20 bits came from gen_random_uuid() for every
-- claimed row, and that strong random draw (with the text conversions
-- around it) was about 3 µs a row: a tenth of a claim's work. One claim
-- statement leases its jobs to one worker, and a worker sees only the
-- tokens of its own claims; so one secret per statement guards them as
-- well as one per row: the low bits are the job id hashed with a seed
-- drawn once per statement, unknown to any other worker.
CREATE FUNCTION lease_token_seed() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT ('x' || translate(left(gen_random_uuid()::text, 18), '-', ''))::bit(64)::bigint
$$;

-- The next token for job_id in a statement whose seed is seed: still
-- larger than every token before it (the sequence is the high part), and
-- below 2^53 for JSON clients.
CREATE FUNCTION lease_token_next(job_id bigint, seed bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT (nextval('lease_token_seq') << 20) | (hashint8extended(job_id, seed) & 1048575)
$$;
