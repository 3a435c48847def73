-- The workers page lists each worker's newest running jobs. With id in the
-- index of running jobs by owner, that is a short range of it per worker;
-- without, every running job was read and sorted (10,000 of them took
-- 18 ms of the page at 1 M jobs). The claim writes this index as it wrote
-- the one it replaces.
CREATE INDEX jobs_running_owner_id_idx ON jobs (lease_owner, id) WHERE state = 'running';
DROP INDEX jobs_running_idx;
ALTER INDEX jobs_running_owner_id_idx RENAME TO jobs_running_idx;
