CREATE TYPE job_state AS ENUM ('pending', 'running', 'succeeded', 'dead', 'cancelled');
CREATE TYPE attempt_outcome AS ENUM ('succeeded', 'failed', 'lease_expired', 'cancelled', 'released');

-- Fencing tokens come from one sequence, so a token is larger than every
-- token any job was given before it, and names exactly one attempt.
CREATE SEQUENCE lease_token_seq AS bigint;

-- Heartbeats are the most frequent write: they touch only heartbeat_at and
-- lease_until, which no index covers, so with room left on each page
-- (fillfactor) they are HOT updates that write no index entries. That is
-- why the expiry path scans the small partial index of running jobs
-- instead of an index on lease_until.
CREATE TABLE jobs (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind               text        NOT NULL CHECK (kind ~ '^[a-z0-9_.-]{1,64}$'),
    queue              text        NOT NULL DEFAULT 'default' CHECK (queue ~ '^[a-z0-9_.-]{1,64}$'),
    priority           integer     NOT NULL DEFAULT 0,
    payload            jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(payload) = 'object'),
    -- Copied from payload.app and payload.device for filtering and routing.
    app                text,
    device             text,
    state              job_state   NOT NULL DEFAULT 'pending',
    attempt            integer     NOT NULL DEFAULT 0,
    max_attempts       integer     NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    -- Counted attempts (failed, lease_expired) since the last manual retry.
    counted_attempts   integer     NOT NULL DEFAULT 0,
    run_at             timestamptz NOT NULL DEFAULT now(),
    lease_owner        text,
    lease_until        timestamptz,
    lease_token        bigint      NOT NULL DEFAULT 0,
    lease_ms           integer     NOT NULL DEFAULT 30000 CHECK (lease_ms BETWEEN 100 AND 3600000),
    heartbeat_at       timestamptz,
    attempt_started_at timestamptz,
    timeout_ms         integer     CHECK (timeout_ms > 0),
    cancel_requested   boolean     NOT NULL DEFAULT false,
    idempotency_key    text        UNIQUE,
    backoff_base_ms    integer     NOT NULL DEFAULT 1000 CHECK (backoff_base_ms >= 0),
    backoff_max_ms     integer     NOT NULL DEFAULT 600000 CHECK (backoff_max_ms >= 0),
    last_error         text,
    result             jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz
) WITH (fillfactor = 80);

-- The claim path: due pending jobs in claim order.
CREATE INDEX jobs_claim_idx ON jobs (priority, run_at, id) WHERE state = 'pending';
-- Scheduled jobs (retries in backoff, run_at in the future): the reaper
-- wakes when the next one is due and tells the workers.
CREATE INDEX jobs_scheduled_idx ON jobs (run_at) WHERE state = 'pending';
-- The expiry path and the per-worker counts: running jobs only, a few
-- hundred rows at most, whatever the size of the table.
CREATE INDEX jobs_running_idx ON jobs (lease_owner) WHERE state = 'running';
-- Keyset listing, newest first, per filter.
CREATE INDEX jobs_state_id_idx ON jobs (state, id);
CREATE INDEX jobs_kind_id_idx ON jobs (kind, id);
CREATE INDEX jobs_queue_id_idx ON jobs (queue, id);
CREATE INDEX jobs_app_id_idx ON jobs (app, id) WHERE app IS NOT NULL;

CREATE TABLE attempts (
    job_id       bigint          NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    number       integer         NOT NULL,
    worker_id    text            NOT NULL,
    lease_token  bigint          NOT NULL,
    started_at   timestamptz     NOT NULL DEFAULT now(),
    -- While the attempt runs, its heartbeat and deadline live on the job
    -- row (one cheap write per heartbeat); they are copied here when the
    -- attempt ends.
    heartbeat_at timestamptz,
    lease_until  timestamptz,
    ended_at     timestamptz,
    outcome      attempt_outcome,
    error        text,
    PRIMARY KEY (job_id, number)
);
CREATE INDEX attempts_token_idx ON attempts (lease_token);

CREATE TABLE events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id  bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    type    text        NOT NULL,
    attempt integer,
    detail  jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX events_job_idx ON events (job_id, id);

CREATE TABLE workers (
    id         text PRIMARY KEY,
    device     text,
    queues     text[]      NOT NULL DEFAULT '{}',
    started_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9_.@-]{1,64}$'),
    role         text        NOT NULL CHECK (role IN ('admin', 'worker')),
    -- SHA-256 of the token; the token itself is shown once and never stored.
    token_hash   bytea       NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

-- Exact counts per state without COUNT(*) over jobs: triggers add each
-- change to one of 64 rows, picked by the
-- backend, so concurrent writers rarely wait on the same row. Each row
-- holds every column, so a change locks one row, and one backend always
-- picks the same row. The *_total columns only grow (for /metrics).
CREATE TABLE job_counts (
    shard           integer PRIMARY KEY,
    pending         bigint NOT NULL DEFAULT 0,
    running         bigint NOT NULL DEFAULT 0,
    succeeded       bigint NOT NULL DEFAULT 0,
    dead            bigint NOT NULL DEFAULT 0,
    cancelled       bigint NOT NULL DEFAULT 0,
    claims_total    bigint NOT NULL DEFAULT 0,
    completions_total bigint NOT NULL DEFAULT 0,
    expired_total   bigint NOT NULL DEFAULT 0,
    refused_total   bigint NOT NULL DEFAULT 0
);
INSERT INTO job_counts (shard) SELECT generate_series(0, 63);

CREATE FUNCTION job_counts_apply(d_pending bigint, d_running bigint, d_succeeded bigint,
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

CREATE FUNCTION jobs_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE FUNCTION jobs_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_insert();
-- Row-level, because transition tables cannot go with a column list.
-- Heartbeats do not name state, so they never fire it.
CREATE TRIGGER jobs_count_update AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION jobs_count_update();
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_delete();
