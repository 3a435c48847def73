-- Checkpoints (SPEC "Checkpoints"): the last state an attempt saved to
-- resume from, a JSON value of at most 64 KiB (checked by the queue,
-- which refuses a larger one before it is sent) with the step it ends.
-- checkpoint_attempt is the attempt that saved it, checkpoint_at when.
-- Kept across attempts (a later attempt receives it in its claim) until
-- a retry that starts over clears it. NULL: none saved.
ALTER TABLE jobs
    ADD COLUMN checkpoint jsonb,
    ADD COLUMN checkpoint_step integer CHECK (checkpoint_step >= 0),
    ADD COLUMN checkpoint_attempt integer,
    ADD COLUMN checkpoint_at timestamptz;
