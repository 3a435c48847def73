CREATE OR REPLACE FUNCTION job_limits_freed(queues text[], keyed boolean) RETURNS void LANGUAGE sql VOLATILE AS $$
    SELECT pg_notify('leasehold_jobs', CASE WHEN length(names) > 7000 THEN '' ELSE names END)
    FROM (SELECT string_agg(DISTINCT q, ',') AS names
          FROM unnest(queues) AS q
          WHERE keyed OR q IN (SELECT name FROM queue_settings WHERE max_running IS NOT NULL)) freed
    WHERE names IS NOT NULL
$$;
CREATE OR REPLACE FUNCTION webhook_enabled(event text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM webhook_settings WHERE event = ANY (events))
$$;
CREATE OR REPLACE FUNCTION live_watched() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM live_watchers WHERE until > now())
$$;
CREATE OR REPLACE FUNCTION job_counts_apply(d_pending bigint, d_running bigint, d_succeeded bigint,
                                            d_dead bigint, d_cancelled bigint, d_claims bigint,
                                            d_completions bigint)
RETURNS void LANGUAGE sql AS $$
    UPDATE job_counts
       SET pending = pending + d_pending,
           running = running + d_running,
           succeeded = succeeded + d_succeeded,
           dead = dead + d_dead,
           cancelled = cancelled + d_cancelled,
           claims_total = claims_total + d_claims,
           completions_total = completions_total + d_completions
     WHERE shard = pg_backend_pid() % 64
$$;

DROP VIEW job_timeline;
ALTER TABLE jobs
    ALTER COLUMN kind TYPE text,
    ALTER COLUMN queue TYPE text,
    ALTER COLUMN payload TYPE jsonb,
    ADD CONSTRAINT jobs_kind_check CHECK (kind ~ '^[a-z0-9_.-]{1,64}$'),
    ADD CONSTRAINT jobs_queue_check CHECK (queue ~ '^[a-z0-9_.-]{1,64}$'),
    ADD CONSTRAINT jobs_payload_check CHECK (jsonb_typeof(payload) = 'object');
CREATE VIEW job_timeline AS
SELECT j.id AS job_id, j.created_at AS at, 'created'::text AS type, NULL::integer AS attempt,
       jsonb_build_object('kind', j.kind, 'queue', j.queue) AS detail, 0 AS rank, 0::bigint AS id
FROM jobs j
UNION ALL
SELECT a.job_id, a.started_at, 'claimed', a.number,
       jsonb_build_object('worker', a.worker_id, 'lease_token', a.lease_token), 1, 0
FROM job_attempts a
UNION ALL
SELECT e.job_id, e.at, e.type, e.attempt, e.detail, 2, e.id
FROM events e
UNION ALL
SELECT j.id, j.finished_at, 'succeeded', j.attempt,
       jsonb_build_object('worker', j.lease_owner, 'lease_token', j.lease_token), 3, 0
FROM jobs j
WHERE j.state = 'succeeded';
DROP DOMAIN job_kind, job_queue, job_payload;
