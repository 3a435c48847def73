-- Every UPDATE of a row evaluates every CHECK constraint of its table,
-- whatever columns it changed. A claim and a completion each did so for
-- jobs: two regular expressions (kind, queue) and jsonb_typeof of the
-- payload, which decompresses a large payload first. In a profile of
-- the PostgreSQL backend running claims and completions, pg_regexec alone
-- was 15 % of the samples. A domain's constraint is checked when a value
-- is assigned to it (an insert, or an update that sets the column), never
-- again: the same rules as domains leave claims, completions and
-- heartbeats without them. (Changing a column to a domain with a
-- constraint rewrites the table once, and its indexes; so does the down
-- migration.)
CREATE DOMAIN job_kind AS text
    CONSTRAINT jobs_kind_check CHECK (VALUE ~ '^[a-z0-9_.-]{1,64}$');
CREATE DOMAIN job_queue AS text
    CONSTRAINT jobs_queue_check CHECK (VALUE ~ '^[a-z0-9_.-]{1,64}$');
CREATE DOMAIN job_payload AS jsonb
    CONSTRAINT jobs_payload_check CHECK (jsonb_typeof(VALUE) = 'object');

-- The timeline view reads kind and queue: it is made again, unchanged.
DROP VIEW job_timeline;
ALTER TABLE jobs
    DROP CONSTRAINT jobs_kind_check,
    DROP CONSTRAINT jobs_queue_check,
    DROP CONSTRAINT jobs_payload_check,
    ALTER COLUMN kind TYPE job_kind,
    ALTER COLUMN queue TYPE job_queue,
    ALTER COLUMN payload TYPE job_payload;
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

-- A SQL function that PostgreSQL cannot inline (a body with FROM, or with
-- a subquery) is parsed and planned again in every statement that calls
-- it; a PL/pgSQL function keeps its plans for the session. The four below
-- run once per statement of every claim or completion (the counters, the
-- trigger conditions of live updates and webhooks, freed limits): as SQL
-- they were 8 % of the same profile.
CREATE OR REPLACE FUNCTION job_counts_apply(d_pending bigint, d_running bigint, d_succeeded bigint,
                                            d_dead bigint, d_cancelled bigint, d_claims bigint,
                                            d_completions bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_counts
       SET pending = pending + d_pending,
           running = running + d_running,
           succeeded = succeeded + d_succeeded,
           dead = dead + d_dead,
           cancelled = cancelled + d_cancelled,
           claims_total = claims_total + d_claims,
           completions_total = completions_total + d_completions
     WHERE shard = pg_backend_pid() % 64;
END $$;

CREATE OR REPLACE FUNCTION live_watched() RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM live_watchers WHERE until > now());
END $$;

CREATE OR REPLACE FUNCTION webhook_enabled(event text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM webhook_settings s WHERE webhook_enabled.event = ANY (s.events));
END $$;

CREATE OR REPLACE FUNCTION job_limits_freed(queues text[], keyed boolean) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_notify('leasehold_jobs', CASE WHEN length(names) > 7000 THEN '' ELSE names END)
    FROM (SELECT string_agg(DISTINCT q, ',') AS names
          FROM unnest(queues) AS q
          WHERE keyed OR q IN (SELECT name FROM queue_settings WHERE max_running IS NOT NULL)) freed
    WHERE names IS NOT NULL;
END $$;
