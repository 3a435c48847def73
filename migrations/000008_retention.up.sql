-- What the artifact files take on disk, for /api/v1/stats without a scan
-- of the artifacts table (3 s at a million rows): the store adds a file
-- when it places new content and subtracts one when it removes a file; the
-- pruner's hourly sweep of the files sets the figures to what it counted.
-- Sharded like job_counts, so that concurrent uploads rarely wait on the
-- same row.
CREATE TABLE artifact_storage (
    shard integer PRIMARY KEY,
    files bigint  NOT NULL DEFAULT 0,
    bytes bigint  NOT NULL DEFAULT 0
);
INSERT INTO artifact_storage (shard) SELECT generate_series(0, 15);
-- The files there are now: one per distinct content.
UPDATE artifact_storage SET (files, bytes) = (
    SELECT count(*), coalesce(sum(size), 0)
    FROM (SELECT DISTINCT ON (sha256) size FROM artifacts ORDER BY sha256) f)
WHERE shard = 0;
