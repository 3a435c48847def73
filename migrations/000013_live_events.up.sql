-- Live updates for the dashboard (GET /events): the database tells every
-- server what changed, on one channel, leasehold_events, whoever wrote it
-- (a server's handler, a direct worker, the reaper of another server).
-- Each statement that changes jobs sends at most one notification, however
-- many rows it changed: a 20,000-job drain sends one per claimed or
-- completed batch, never one per job. A payload is a JSON object:
--   {"k":"jobs","ids":[…]|null,"s":[states]}  jobs submitted, changed state,
--       attempt or cancel request, or deleted; ids null when more than 100
--   {"k":"job","ids":[…]|null}  something new on these jobs' pages
--       (a progress message or other event, an artifact)
--   {"k":"worker","id":"…","c":bool}  a worker's presence; c says whether
--       anything but last_seen changed (or the worker is new)
-- Heartbeats change none of these, so they send nothing; and nothing at
-- all is sent while no server has an open event stream (live_watchers).

-- Nobody is told anything while no dashboard is open: a server with open
-- event streams keeps a row here (refreshed every 20 s, lasting a
-- minute), and without one the triggers return at once. A notification
-- wakes every listening session of the database, each of which then
-- commits a transaction to read it: unwatched, a drain's claims and
-- completions would wake the workers' listeners twice per batch for
-- nothing (measured: 0.013 commits per job became 0.037). Unlogged: after
-- a crash it is empty, and the servers write their rows again.
CREATE UNLOGGED TABLE live_watchers (
    server text        PRIMARY KEY,
    until  timestamptz NOT NULL
);

CREATE FUNCTION live_watched() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM live_watchers WHERE until > now())
$$;

CREATE FUNCTION live_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    states text[];
BEGIN
    IF NOT live_watched() THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        -- Aggregated apart, never joined (see jobs_count_update): what a
        -- heartbeat or an empty claim changes (nothing of these) is equal
        -- before and after.
        IF (SELECT ROW(count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'running'),
                       count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'dead'),
                       count(*) FILTER (WHERE state = 'cancelled'), COALESCE(sum(attempt), 0),
                       count(*) FILTER (WHERE cancel_requested))
            FROM new_rows)
           IS NOT DISTINCT FROM
           (SELECT ROW(count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'running'),
                       count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'dead'),
                       count(*) FILTER (WHERE state = 'cancelled'), COALESCE(sum(attempt), 0),
                       count(*) FILTER (WHERE cancel_requested))
            FROM old_rows) THEN
            RETURN NULL;
        END IF;
        SELECT array_agg(id) INTO ids FROM (SELECT id FROM new_rows LIMIT 101) t;
        SELECT array_agg(DISTINCT s) INTO states
        FROM (SELECT state::text AS s FROM new_rows UNION SELECT state::text FROM old_rows) t;
    ELSIF TG_OP = 'INSERT' THEN
        SELECT array_agg(id) INTO ids FROM (SELECT id FROM new_rows LIMIT 101) t;
        SELECT array_agg(DISTINCT state::text) INTO states FROM new_rows;
    ELSE
        SELECT array_agg(id) INTO ids FROM (SELECT id FROM old_rows LIMIT 101) t;
        SELECT array_agg(DISTINCT state::text) INTO states FROM old_rows;
    END IF;
    IF ids IS NULL THEN
        RETURN NULL; -- the statement changed no row
    END IF;
    PERFORM pg_notify('leasehold_events', json_build_object(
        'k', 'jobs', 'ids', CASE WHEN cardinality(ids) <= 100 THEN ids END, 's', states)::text);
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_live_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_notify_jobs();
CREATE TRIGGER jobs_live_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_notify_jobs();
CREATE TRIGGER jobs_live_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_notify_jobs();

-- Progress messages, failures, refusals, effects (events) and uploads
-- (artifacts): one notification per statement naming the jobs.
CREATE FUNCTION live_notify_job_activity() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
BEGIN
    IF NOT live_watched() THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(job_id) INTO ids FROM (SELECT DISTINCT job_id FROM new_rows LIMIT 101) t;
    IF ids IS NOT NULL THEN
        PERFORM pg_notify('leasehold_events', json_build_object(
            'k', 'job', 'ids', CASE WHEN cardinality(ids) <= 100 THEN ids END)::text);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER events_live_insert AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_notify_job_activity();
CREATE TRIGGER artifacts_live_insert AFTER INSERT ON artifacts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION live_notify_job_activity();

-- Presence: every report notifies (a worker reports every 10 s), so that
-- each server knows when a worker falls silent without reading the table;
-- c tells a report that changes what /workers shows from one that does
-- not. Whatever columns workers gains, only last_seen is left out.
CREATE FUNCTION live_notify_worker() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT live_watched() THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('leasehold_events', json_build_object(
        'k', 'worker', 'id', left(NEW.id, 200),
        'c', TG_OP = 'INSERT' OR (to_jsonb(OLD) - 'last_seen') IS DISTINCT FROM (to_jsonb(NEW) - 'last_seen'))::text);
    RETURN NULL;
END $$;

CREATE TRIGGER workers_live AFTER INSERT OR UPDATE ON workers
    FOR EACH ROW EXECUTE FUNCTION live_notify_worker();
