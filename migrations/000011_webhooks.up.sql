-- Webhooks: a durable outbox, written by the statement that makes the
-- transition (in its transaction), so that no event is lost and none is
-- announced for a transition that rolled back. Direct workers write
-- transitions too and do not know the server's configuration: the event
-- types to record live here, in webhook_settings, which a server with a
-- webhook URL writes at start (and one without sets to none).

CREATE TABLE webhook_settings (
    only_row             boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    events               text[]      NOT NULL DEFAULT '{}',
    -- Since when worker.offline is enabled: a worker already gone then is
    -- not announced.
    worker_offline_since timestamptz,
    updated_at           timestamptz NOT NULL DEFAULT now()
);
INSERT INTO webhook_settings DEFAULT VALUES;

-- Pending deliveries only: the sender deletes an event once it is
-- delivered or given up (its timeline event says which).
CREATE TABLE webhook_outbox (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The event's id for receivers: the same in every delivery attempt.
    event_id    uuid        NOT NULL DEFAULT gen_random_uuid(),
    type        text        NOT NULL,
    -- No foreign key: retention may delete a job while its event waits,
    -- and the event still goes out.
    job_id      bigint,
    worker_id   text,
    at          timestamptz NOT NULL DEFAULT now(),
    -- Delivery attempts started; the next one is due at next_at.
    attempts    integer     NOT NULL DEFAULT 0,
    next_at     timestamptz NOT NULL DEFAULT now(),
    -- The body sent, kept from the first failed attempt so that every
    -- later one sends the same.
    body        text,
    last_status integer,
    last_error  text
);
CREATE INDEX webhook_outbox_next_idx ON webhook_outbox (next_at);

-- Which workers' going offline was announced: the last_seen it was
-- announced for. A worker that comes back has a later last_seen, and its
-- next going offline is announced again.
CREATE TABLE webhook_worker_offline (
    worker_id text        PRIMARY KEY,
    last_seen timestamptz NOT NULL
);

CREATE FUNCTION webhook_enabled(event text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM webhook_settings WHERE event = ANY (events))
$$;

-- job.dead (moved to the dead letters) and job.failed (an attempt failed or
-- its lease expired, and the job will retry). Row by row, because these
-- transitions are rare, and the WHEN clause is evaluated without calling
-- the function: claims, completions and heartbeats pay nothing for it.
CREATE FUNCTION webhook_job_failure() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev text := CASE WHEN NEW.state = 'dead' THEN 'job.dead' ELSE 'job.failed' END;
BEGIN
    IF webhook_enabled(ev) THEN
        INSERT INTO webhook_outbox (type, job_id) VALUES (ev, NEW.id);
        PERFORM pg_notify('leasehold_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_webhook_failure AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN ((NEW.state = 'dead' AND OLD.state <> 'dead')
          OR (NEW.state = 'pending' AND OLD.state = 'running' AND NEW.counted_attempts > OLD.counted_attempts))
    EXECUTE FUNCTION webhook_job_failure();

-- job.succeeded is on the hot path: once per statement, and only while it
-- is enabled (the WHEN clause reads one row per statement). A job that
-- succeeded in this transaction has finished_at = now(), the transaction's
-- time; completions are fenced to running jobs, so each succeeds once.
CREATE FUNCTION webhook_job_succeeded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (type, job_id)
    SELECT 'job.succeeded', id FROM new_rows WHERE state = 'succeeded' AND finished_at = now();
    IF FOUND THEN
        PERFORM pg_notify('leasehold_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_webhook_succeeded AFTER UPDATE ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (webhook_enabled('job.succeeded'))
    EXECUTE FUNCTION webhook_job_succeeded();
