-- Hand-over (SPEC lease rule 11). A job claimed through the worker API is
-- handed over: its lease first runs only for the hand-over deadline, and
-- the worker's first heartbeat (or its outcome) confirms that it has the
-- job. handover_pending says a claim is not yet confirmed; it is in no
-- index, so heartbeats stay HOT updates. A hand-over never confirmed ends
-- its attempt not_delivered, counting nothing.
--
-- The new enum value is only added here, not used: PostgreSQL refuses to
-- use a value added in the same transaction.
ALTER TYPE attempt_outcome ADD VALUE IF NOT EXISTS 'not_delivered';
ALTER TABLE jobs ADD COLUMN handover_pending boolean NOT NULL DEFAULT false;
