-- Periodic jobs. The active scheduler (one server: the "scheduler" leader
-- role) enqueues a schedule's job at each tick of its cron expression, with
-- the idempotency key schedule:NAME:TICK, so a tick makes one job however
-- many servers run. next_run_at is the next tick to fire (NULL while
-- paused); last_run_at the last tick that was enqueued. last_job_id is no
-- foreign key: retention deletes old jobs, and a link to a pruned job only
-- answers 404.
CREATE TABLE schedules (
    name        text        PRIMARY KEY CHECK (name ~ '^[a-z0-9_.-]{1,64}$'),
    cron        text        NOT NULL,
    timezone    text        NOT NULL DEFAULT 'UTC',
    job         jsonb       NOT NULL,
    paused      boolean     NOT NULL DEFAULT false,
    next_run_at timestamptz,
    last_run_at timestamptz,
    last_job_id bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The schedule a job was made by (NULL for submitted jobs). No index: it is
-- shown, never searched. Adding a nullable column without a default
-- rewrites nothing.
ALTER TABLE jobs ADD COLUMN schedule text;
