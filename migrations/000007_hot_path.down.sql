DROP VIEW IF EXISTS job_timeline;
DROP VIEW IF EXISTS job_attempts;
DROP FUNCTION IF EXISTS job_backoff(integer, integer, integer);
DROP FUNCTION IF EXISTS job_state_after_failure(boolean, boolean, integer, integer);

DROP TRIGGER jobs_count_update ON jobs;
DROP FUNCTION jobs_count_update();
CREATE FUNCTION jobs_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_apply(
        (NEW.state = 'pending')::int - (OLD.state = 'pending')::int,
        (NEW.state = 'running')::int - (OLD.state = 'running')::int,
        (NEW.state = 'succeeded')::int - (OLD.state = 'succeeded')::int,
        (NEW.state = 'dead')::int - (OLD.state = 'dead')::int,
        (NEW.state = 'cancelled')::int - (OLD.state = 'cancelled')::int,
        (NEW.state = 'running')::int,
        (NEW.state = 'succeeded')::int);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_update AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION jobs_count_update();

DROP INDEX jobs_idempotency_key_idx;
ALTER TABLE jobs ADD CONSTRAINT jobs_idempotency_key_key UNIQUE (idempotency_key);

-- Write back what the up migration derived, as the older schema keeps it.
INSERT INTO attempts (job_id, number, worker_id, lease_token, started_at, heartbeat_at, lease_until, ended_at, outcome)
SELECT id, attempt, lease_owner, lease_token, attempt_started_at, heartbeat_at, lease_until,
       CASE WHEN state = 'succeeded' THEN finished_at END,
       CASE WHEN state = 'succeeded' THEN 'succeeded'::attempt_outcome END
FROM jobs WHERE state IN ('running', 'succeeded') AND attempt > 0
ON CONFLICT DO NOTHING;
INSERT INTO events (job_id, at, type, detail)
SELECT id, created_at, 'created', jsonb_build_object('kind', kind, 'queue', queue) FROM jobs;
INSERT INTO events (job_id, at, type, attempt, detail)
SELECT job_id, started_at, 'claimed', number, jsonb_build_object('worker', worker_id, 'lease_token', lease_token)
FROM attempts;
INSERT INTO events (job_id, at, type, attempt, detail)
SELECT id, finished_at, 'succeeded', attempt, jsonb_build_object('worker', lease_owner, 'lease_token', lease_token)
FROM jobs WHERE state = 'succeeded';
