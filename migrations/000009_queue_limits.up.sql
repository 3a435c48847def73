-- Queues and limits: a queue can be paused or capped (max_running), and a
-- job can name a concurrency key that at most concurrency_limit running
-- jobs share. The claim's fast path (JobClaim) leaves out everything a
-- limit applies to, so that it costs what it cost before when no limit is
-- set; JobClaimLimited* claim the rest, serialised per queue and per key.

-- Settings of a queue; a queue without a row is unpaused and uncapped.
CREATE TABLE queue_settings (
    name        text        PRIMARY KEY CHECK (name ~ '^[a-z0-9_.-]{1,64}$'),
    paused      boolean     NOT NULL DEFAULT false,
    -- Who paused it ("user:alice", "token:ci") and when; kept after a
    -- resume until the next pause, so that the last pause can be read.
    paused_by   text,
    paused_at   timestamptz,
    -- At most this many of the queue's jobs run at once; NULL: no cap.
    max_running integer     CHECK (max_running >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Adding columns with constant defaults rewrites nothing.
ALTER TABLE jobs
    ADD COLUMN concurrency_key text CHECK (char_length(concurrency_key) BETWEEN 1 AND 200),
    ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 1 CHECK (concurrency_limit >= 1);

-- The fast claim's index leaves keyed jobs out, so that a key's waiting
-- jobs are not in its way however many there are; they have an index of
-- their own, by key, in claim order within the key.
DROP INDEX jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON jobs (priority, run_at, id) WHERE state = 'pending' AND concurrency_key IS NULL;
CREATE INDEX jobs_claim_keyed_idx ON jobs (concurrency_key, priority, run_at, id)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL;
-- How many jobs of a key run now: only keyed jobs are in it, so claims and
-- completions of other jobs add nothing to it.
CREATE INDEX jobs_running_keyed_idx ON jobs (concurrency_key) WHERE state = 'running' AND concurrency_key IS NOT NULL;
-- A queue's pending jobs in claim order: the capped queues' claims and
-- the pending count of GET /api/v1/queues. Claims and completions never
-- enter it (a running or finished row is not pending); a job enters it
-- when it is submitted and when it is due for another attempt.
CREATE INDEX jobs_queue_pending_idx ON jobs (queue, priority, run_at, id) WHERE state = 'pending';

-- A statement that ends attempts (completion, failure, release, cancel)
-- may free room under a limit: then the idle workers of those queues are
-- woken, with one notification for the statement, to claim what waited
-- for it. Jobs no limit applies to send nothing (the hot path's
-- completions stay without a NOTIFY): keyed is whether any ended job had
-- a key; otherwise only capped queues are named.
CREATE FUNCTION job_limits_freed(queues text[], keyed boolean) RETURNS void LANGUAGE sql VOLATILE AS $$
    SELECT pg_notify('leasehold_jobs', CASE WHEN length(names) > 7000 THEN '' ELSE names END)
    FROM (SELECT string_agg(DISTINCT q, ',') AS names
          FROM unnest(queues) AS q
          WHERE keyed OR q IN (SELECT name FROM queue_settings WHERE max_running IS NOT NULL)) freed
    WHERE names IS NOT NULL
$$;
