-- The step of its attempt an artifact belongs to, as the executor names
-- it (progress events carry the same number in detail.step): a replay
-- pairs a screenshot with its own step's message. NULL: not given.
ALTER TABLE artifacts ADD COLUMN step integer CHECK (step >= 1);
