-- The count triggers as migration 7 left them; the per-queue counts go.
CREATE OR REPLACE FUNCTION jobs_count_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM job_counts_apply(
        count(*) FILTER (WHERE state = 'pending'),
        count(*) FILTER (WHERE state = 'running'),
        count(*) FILTER (WHERE state = 'succeeded'),
        count(*) FILTER (WHERE state = 'dead'),
        count(*) FILTER (WHERE state = 'cancelled'),
        0, 0)
    FROM new_rows
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION jobs_count_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM job_counts_apply(
        -count(*) FILTER (WHERE state = 'pending'),
        -count(*) FILTER (WHERE state = 'running'),
        -count(*) FILTER (WHERE state = 'succeeded'),
        -count(*) FILTER (WHERE state = 'dead'),
        -count(*) FILTER (WHERE state = 'cancelled'),
        0, 0)
    FROM old_rows
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION jobs_count_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM job_counts_apply(n.pending - o.pending, n.running - o.running, n.succeeded - o.succeeded,
                             n.dead - o.dead, n.cancelled - o.cancelled,
                             n.attempts - o.attempts, n.succeeded - o.succeeded)
    FROM (SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
                 count(*) FILTER (WHERE state = 'running') AS running,
                 count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                 count(*) FILTER (WHERE state = 'dead') AS dead,
                 count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                 COALESCE(sum(attempt), 0) AS attempts
          FROM new_rows) n,
         (SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
                 count(*) FILTER (WHERE state = 'running') AS running,
                 count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                 count(*) FILTER (WHERE state = 'dead') AS dead,
                 count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                 COALESCE(sum(attempt), 0) AS attempts
          FROM old_rows) o
    WHERE (n.pending, n.running, n.succeeded, n.dead, n.cancelled, n.attempts)
          IS DISTINCT FROM (o.pending, o.running, o.succeeded, o.dead, o.cancelled, o.attempts);
    RETURN NULL;
END $$;

DROP FUNCTION queue_running_apply(text[], bigint[]);
DROP TABLE queue_running;
