-- What a worker's device-info command last said about its phone, sent with
-- presence: the facts (the last run that gave any), when they were
-- gathered (database clock: now() minus their age when sent), the error of
-- the last run when it failed, and whether the worker claims (with why
-- not: adb offline, battery low).
ALTER TABLE workers
    ADD COLUMN info         jsonb CHECK (info IS NULL OR jsonb_typeof(info) = 'object'),
    ADD COLUMN info_at      timestamptz,
    ADD COLUMN info_error   text,
    ADD COLUMN claiming     boolean NOT NULL DEFAULT true,
    ADD COLUMN not_claiming text;

-- Each worker's outcomes of the last 24 hours, and its last job, without
-- a scan of jobs or attempts. Succeeded jobs keep their attempt on the
-- job row: the completion is a non-HOT update already (state is indexed),
-- so this costs it one more index entry. Attempt rows are written only by
-- failures, expiries, releases and cancels.
CREATE INDEX jobs_succeeded_owner_idx ON jobs (lease_owner, finished_at) WHERE state = 'succeeded';
CREATE INDEX attempts_worker_ended_idx ON attempts (worker_id, ended_at) INCLUDE (outcome);
