-- A claim turns a pending job into a running one, and since the state is
-- indexed that update is never HOT: it writes the new row version into
-- every index whose predicate it matches. Five did (the primary key,
-- jobs_running_idx, and the state, kind and queue listings), two more than
-- the leading PostgreSQL queue's claim. The kind, queue, app and state
-- listings now leave running jobs out, and one small index lists the
-- running jobs newest first (they are as many as the workers' slots at
-- most): a claim writes three index entries. The completion that follows
-- writes the listings' entries once, as it did. JobList reads running jobs
-- apart.
DROP INDEX jobs_state_id_idx;
DROP INDEX jobs_kind_id_idx;
DROP INDEX jobs_queue_id_idx;
DROP INDEX jobs_app_id_idx;
CREATE INDEX jobs_state_id_idx ON jobs (state, id) WHERE state <> 'running';
CREATE INDEX jobs_kind_id_idx ON jobs (kind, id) WHERE state <> 'running';
CREATE INDEX jobs_queue_id_idx ON jobs (queue, id) WHERE state <> 'running';
CREATE INDEX jobs_app_id_idx ON jobs (app, id) WHERE app IS NOT NULL AND state <> 'running';
CREATE INDEX jobs_running_id_idx ON jobs (id) WHERE state = 'running';
