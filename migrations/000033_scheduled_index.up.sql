-- The reaper's index of scheduled jobs (maintenance/reaper.go): pending
-- jobs whose run_at is after their created_at, i.e. retries waiting out
-- their backoff and jobs submitted for later. The reaper reads from it how
-- long until the next one is due, and whether any fell due since it last
-- looked (JobNextDeadline). A job submitted to run at once (run_at =
-- created_at) is never in it, so most inserts write one index entry less
-- than with the index of every pending job it replaces.
DROP INDEX jobs_scheduled_idx;
CREATE INDEX jobs_scheduled_idx ON jobs (run_at) WHERE state = 'pending' AND run_at > created_at;
