DROP INDEX jobs_running_id_idx;
DROP INDEX jobs_state_id_idx;
DROP INDEX jobs_kind_id_idx;
DROP INDEX jobs_queue_id_idx;
DROP INDEX jobs_app_id_idx;
CREATE INDEX jobs_state_id_idx ON jobs (state, id);
CREATE INDEX jobs_kind_id_idx ON jobs (kind, id);
CREATE INDEX jobs_queue_id_idx ON jobs (queue, id);
CREATE INDEX jobs_app_id_idx ON jobs (app, id) WHERE app IS NOT NULL;
