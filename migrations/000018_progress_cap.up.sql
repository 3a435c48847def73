-- Progress events are capped per attempt (issue 17): an executor that
-- reports 2,000 progress messages of 64 KB made one attempt 130 MB of
-- events, and every read of it (the job page, the bundle) that big. An
-- attempt keeps its newest progress events; the write past the cap
-- deletes the oldest and counts them in the attempt's one
-- progress_dropped event, which stands on the timeline where they were.
--
-- The index finds an attempt's progress (and its progress_dropped row)
-- without reading the job's other events; only those two types are in it.
CREATE INDEX events_progress_idx ON events (job_id, attempt, type, id)
    WHERE type IN ('progress', 'progress_dropped');

-- event_progress writes one progress event of the lease (token, owner)
-- of job p_job, fenced like every write of an attempt, and keeps the
-- attempt's newest p_keep. NULL when the fence refuses. PL/pgSQL so that
-- the count runs after the lock: the row lock on the job orders the
-- progress writes of one job (each statement below sees what the one
-- before it left), so the cap and the count are exact.
CREATE FUNCTION event_progress(p_job bigint, p_token bigint, p_owner text, p_detail jsonb, p_keep integer)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n integer;
    new_id bigint;
    cut bigint;
    gone bigint;
    gone_at timestamptz;
BEGIN
    SELECT j.attempt INTO n FROM jobs j
    WHERE j.id = p_job AND lease_is_current(j.state, j.lease_token, j.lease_owner, j.lease_until, p_token, p_owner)
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO events (job_id, type, attempt, detail) VALUES (p_job, 'progress', n, p_detail)
    RETURNING id INTO new_id;
    -- The newest of those past the cap (this write included in the count).
    SELECT e.id INTO cut FROM events e
    WHERE e.job_id = p_job AND e.attempt = n AND e.type = 'progress'
    ORDER BY e.id DESC OFFSET p_keep LIMIT 1;
    IF cut IS NULL THEN
        RETURN new_id;
    END IF;
    WITH d AS (
        DELETE FROM events e
        WHERE e.job_id = p_job AND e.attempt = n AND e.type = 'progress' AND e.id <= cut
        RETURNING e.at
    )
    SELECT count(*), max(d.at) INTO gone, gone_at FROM d;
    UPDATE events e
       SET detail = jsonb_build_object('dropped', (e.detail->>'dropped')::bigint + gone, 'kept', p_keep),
           at = gone_at
     WHERE e.job_id = p_job AND e.attempt = n AND e.type = 'progress_dropped';
    IF NOT FOUND THEN
        INSERT INTO events (job_id, type, attempt, detail, at)
        VALUES (p_job, 'progress_dropped', n, jsonb_build_object('dropped', gone, 'kept', p_keep), gone_at);
    END IF;
    RETURN new_id;
END $$;
