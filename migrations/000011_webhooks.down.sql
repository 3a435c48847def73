DROP TRIGGER jobs_webhook_succeeded ON jobs;
DROP TRIGGER jobs_webhook_failure ON jobs;
DROP FUNCTION webhook_job_succeeded();
DROP FUNCTION webhook_job_failure();
DROP FUNCTION webhook_enabled(text);
DROP TABLE webhook_worker_offline;
DROP TABLE webhook_outbox;
DROP TABLE webhook_settings;
