-- How many jobs run in each queue, kept by the count triggers beside
-- job_counts: the queue lists (/queues, /jobs/new, GET /api/v1/queues)
-- counted them by reading every running job from the heap, 480 ms at
-- 100,000 running jobs (docs/benchmarks.md, "Pages at 1,000,000 and
-- 10,000,000 jobs"). Sharded like job_counts (by the writing backend), so
-- that concurrent claims and completions of one queue rarely wait on one
-- row; a queue's count is the sum of its shards. A row at 0 stays: a
-- queue's rows are as many as the backends that ever wrote it (at most
-- 64).
CREATE TABLE queue_running (
    queue   text     NOT NULL,
    shard   smallint NOT NULL,
    running bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, shard)
);

INSERT INTO queue_running (queue, shard, running)
SELECT queue, 0, count(*) FROM jobs WHERE state = 'running' GROUP BY queue;

-- Adds @delta to the running count of each queue in @queues (the same
-- order), in queue order, so that two statements never lock two queues'
-- rows in opposite orders.
CREATE FUNCTION queue_running_apply(queues text[], deltas bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queue_running AS r (queue, shard, running)
    SELECT d.q, pg_backend_pid() % 64, d.n
    FROM unnest(queues, deltas) AS d(q, n)
    ORDER BY d.q
    ON CONFLICT (queue, shard) DO UPDATE SET running = r.running + excluded.running;
END $$;

CREATE OR REPLACE FUNCTION jobs_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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
    PERFORM queue_running_apply(array_agg(q), array_agg(n))
    FROM (SELECT queue AS q, count(*) AS n FROM new_rows WHERE state = 'running' GROUP BY queue) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION jobs_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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
    PERFORM queue_running_apply(array_agg(q), array_agg(n))
    FROM (SELECT queue AS q, -count(*) AS n FROM old_rows WHERE state = 'running' GROUP BY queue) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

-- The per-queue counts are looked at only when a running job is among
-- the rows (a claim, a completion, a heartbeat): an update of pending or
-- finished jobs costs what it did. A heartbeat's row is running before
-- and after, and writes nothing.
CREATE OR REPLACE FUNCTION jobs_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n record;
    o record;
BEGIN
    SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE state = 'dead') AS dead,
           count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
           COALESCE(sum(attempt), 0) AS attempts
    INTO n FROM new_rows;
    SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE state = 'dead') AS dead,
           count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
           COALESCE(sum(attempt), 0) AS attempts
    INTO o FROM old_rows;
    IF (n.pending, n.running, n.succeeded, n.dead, n.cancelled, n.attempts)
       IS DISTINCT FROM (o.pending, o.running, o.succeeded, o.dead, o.cancelled, o.attempts) THEN
        PERFORM job_counts_apply(n.pending - o.pending, n.running - o.running, n.succeeded - o.succeeded,
                                 n.dead - o.dead, n.cancelled - o.cancelled,
                                 n.attempts - o.attempts, n.succeeded - o.succeeded);
    END IF;
    IF n.running > 0 OR o.running > 0 THEN
        PERFORM queue_running_apply(array_agg(q), array_agg(d))
        FROM (SELECT q, sum(d) AS d
              FROM (SELECT queue AS q, 1 AS d FROM new_rows WHERE state = 'running'
                    UNION ALL
                    SELECT queue, -1 FROM old_rows WHERE state = 'running') x
              GROUP BY q HAVING sum(d) <> 0) c
        HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END $$;
