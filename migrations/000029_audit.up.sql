-- The audit trail (SPEC "Roles and audit"): one row per change a person
-- or a token made, written in the transaction of the change, so that a
-- change that rolls back leaves none. actor is "user:NAME", "token:NAME"
-- or "cli:NAME" (the server's own commands, run by NAME on the machine);
-- addr is the client address as the sign-in throttle sees it ('' from the
-- command line). Paging goes by id, newest first; retention by at.
CREATE TABLE audit_log (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    actor  text NOT NULL,
    role   text NOT NULL DEFAULT '',
    addr   text NOT NULL DEFAULT '',
    action text NOT NULL,
    target text NOT NULL DEFAULT '',
    detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, id);
CREATE INDEX audit_log_action_idx ON audit_log (action, id);
