DROP TRIGGER workers_live ON workers;
DROP FUNCTION live_notify_worker();
DROP TRIGGER artifacts_live_insert ON artifacts;
DROP TRIGGER events_live_insert ON events;
DROP FUNCTION live_notify_job_activity();
DROP TRIGGER jobs_live_delete ON jobs;
DROP TRIGGER jobs_live_update ON jobs;
DROP TRIGGER jobs_live_insert ON jobs;
DROP FUNCTION live_notify_jobs();
