DROP INDEX IF EXISTS jobs_dead_finished_idx;
