DROP FUNCTION failure_group_of(bigint, integer, text);
DROP INDEX jobs_dead_group_idx;
DROP INDEX attempts_failure_group_idx;
ALTER TABLE jobs DROP COLUMN failure_group;
ALTER TABLE attempts DROP COLUMN failure_group;
ALTER TABLE artifacts DROP COLUMN screen_hash;
DROP TABLE failure_groups;
DROP FUNCTION error_signature(text);
