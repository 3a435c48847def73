-- The overview's latest dead letters, by when they died (a job retried by
-- hand and dead again is recent though its id is old).
CREATE INDEX jobs_dead_finished_idx ON jobs (finished_at DESC NULLS LAST, id DESC) WHERE state = 'dead';
