-- Failure groups (SPEC "Search and failure groups"): failed attempts, and
-- the dead letters they leave, grouped by cause, so that a hundred dead
-- letters with one cause are one row to read and one action to take.
--
-- A cause is the error with what differs between two occurrences of it
-- masked (error_signature), and, when the attempt took a screenshot, the
-- perceptual hash of its last one (artifacts.screen_hash, computed at
-- upload, its status bar left out): "timed out" on the login screen and
-- "timed out" on a crash dialog are two causes.
--
-- An attempt is put in its group when it ends (JobFail, JobReapExpired:
-- failure_group_of), never on a page view. The job keeps the group of its
-- last failure, which is what its dead letter is grouped by.

-- error_signature masks, in this order: UUIDs; dates and times; a URL's
-- path and query (its scheme and host stay: they often are the cause);
-- file paths of two parts or more; hex numbers (0x…, or eight hex digits
-- or more with a digit among them: ids, hashes, addresses); then every
-- remaining number, also inside words ("worker w-17", "app7"). Runs of
-- white space become one space. NULL for no error or an empty one.
CREATE FUNCTION error_signature(error text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN nullif(left(btrim(regexp_replace(
    regexp_replace(
    regexp_replace(
    regexp_replace(
    regexp_replace(
    regexp_replace(
    regexp_replace(
    regexp_replace(
    regexp_replace(error,
        '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
        '\d{4}-\d{2}-\d{2}([T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?', '<time>', 'g'),
        '\m\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\M', '<time>', 'g'),
        '([a-zA-Z][a-zA-Z0-9+.-]*://[^\s/''"()<>]+)/[^\s''"()<>]*', '\1/<path>', 'g'),
        '(^|[\s''"(=,\[])(/[^\s''"()<>,/]+){2,}/?', '\1<path>', 'g'),
        '\m[A-Za-z]:\\[^\s''"()<>]+', '<path>', 'g'),
        '\m(0[xX][0-9a-fA-F]+|(?=[0-9a-fA-F]{8,}\M)[0-9a-fA-F]*[0-9][0-9a-fA-F]*)\M', '#', 'g'),
        '\d+(\.\d+)?', '#', 'g'),
    '\s+', ' ', 'g')), 500), '');

CREATE TABLE failure_groups (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    signature text NOT NULL,
    -- The dHash of the first member's last screenshot; NULL: no screenshot.
    screen_hash bigint,
    -- The first member, as it was: its error unmasked, and the screenshot
    -- the group shows (no foreign keys: retention may remove the job and
    -- its artifacts; the group stays, as a cause seen before).
    error text NOT NULL,
    job_id bigint NOT NULL,
    attempt integer NOT NULL,
    screenshot_id bigint,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- One group per exact cause, even when two attempts start one at once
-- (failure_group_of inserts with ON CONFLICT DO NOTHING).
CREATE UNIQUE INDEX failure_groups_screen_key ON failure_groups (signature, screen_hash) WHERE screen_hash IS NOT NULL;
CREATE UNIQUE INDEX failure_groups_blind_key ON failure_groups (signature) WHERE screen_hash IS NULL;

ALTER TABLE artifacts ADD COLUMN screen_hash bigint;
ALTER TABLE attempts ADD COLUMN failure_group bigint;
ALTER TABLE jobs ADD COLUMN failure_group bigint;

-- A group's failed attempts, and its last seen (the newest entry).
CREATE INDEX attempts_failure_group_idx ON attempts (failure_group, ended_at) WHERE failure_group IS NOT NULL;
-- The dead-letter queue by group: counts, first and last death and apps
-- read from the index alone.
CREATE INDEX jobs_dead_group_idx ON jobs (failure_group, id) INCLUDE (finished_at, app) WHERE state = 'dead';

-- failure_group_of returns the group of a failed attempt of job p_job
-- (number p_attempt) that ended with p_error, creating it when the cause
-- is new; NULL for no error. Its screen is the hash of the attempt's last
-- screenshot; a group matches when its signature is the same and its
-- screen is within 8 bits (screenhash.Similar; the nearest wins), or when
-- neither has a screenshot.
CREATE FUNCTION failure_group_of(p_job bigint, p_attempt integer, p_error text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    sig text := error_signature(p_error);
    shot bigint;
    hash bigint;
    found bigint;
BEGIN
    IF sig IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT id, screen_hash INTO shot, hash FROM artifacts
    WHERE job_id = p_job AND attempt = p_attempt AND kind = 'screenshot'
    ORDER BY id DESC LIMIT 1;
    IF hash IS NULL THEN
        SELECT id INTO found FROM failure_groups WHERE signature = sig AND screen_hash IS NULL;
    ELSE
        SELECT id INTO found FROM failure_groups
        WHERE signature = sig AND screen_hash IS NOT NULL
          AND bit_count((screen_hash # hash)::bit(64)) <= 8
        ORDER BY bit_count((screen_hash # hash)::bit(64)), id
        LIMIT 1;
    END IF;
    IF found IS NOT NULL THEN
        RETURN found;
    END IF;
    INSERT INTO failure_groups (signature, screen_hash, error, job_id, attempt, screenshot_id)
    VALUES (sig, hash, left(p_error, 2000), p_job, p_attempt, CASE WHEN hash IS NOT NULL THEN shot END)
    ON CONFLICT DO NOTHING
    RETURNING id INTO found;
    IF found IS NULL THEN
        -- Another attempt created the same group meanwhile, and committed
        -- (the insert waited for it); this statement sees it.
        SELECT id INTO found FROM failure_groups WHERE signature = sig AND screen_hash IS NOT DISTINCT FROM hash;
    END IF;
    RETURN found;
END
$$;

-- The dead letters of before this migration are grouped by their error
-- alone (no screenshot had a hash yet), and their last attempts with them.
UPDATE jobs SET failure_group = failure_group_of(id, attempt, last_error)
WHERE state = 'dead' AND last_error IS NOT NULL;
UPDATE attempts a SET failure_group = j.failure_group
FROM jobs j
WHERE j.state = 'dead' AND j.failure_group IS NOT NULL AND a.job_id = j.id AND a.number = j.attempt
  AND a.outcome IN ('failed', 'lease_expired');
