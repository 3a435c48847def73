-- Screenshots and text artifacts of each attempt. The bytes live in files
-- named by their SHA-256 outside any web root; this is their metadata.
CREATE TABLE artifacts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id       bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt      integer     NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('screenshot', 'text')),
    -- The name the worker gave, for display only: never a path.
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    content_type text        NOT NULL,
    size         bigint      NOT NULL CHECK (size >= 0),
    sha256       text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    width        integer,
    height       integer,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX artifacts_job_idx ON artifacts (job_id, attempt, id);
CREATE INDEX artifacts_sha256_idx ON artifacts (sha256);

-- The side-effect ledger: an external action of a job under a key is run
-- by one attempt and, once recorded done, never again.
CREATE TABLE effects (
    job_id      bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    key         text        NOT NULL CHECK (key ~ '^[A-Za-z0-9_.:-]{1,128}$'),
    attempt     integer     NOT NULL,
    lease_token bigint      NOT NULL,
    state       text        NOT NULL CHECK (state IN ('started', 'done')),
    result      jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, key)
);
