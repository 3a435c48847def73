-- People who sign in to the dashboard.
CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username      text        NOT NULL UNIQUE CHECK (username ~ '^[A-Za-z0-9_.@-]{1,64}$'),
    -- argon2id, in the PHC string format.
    password_hash text        NOT NULL,
    -- Failed sign-ins since the last success; each one past a few locks
    -- the account for longer (throttling per account, not per address).
    failed_logins integer     NOT NULL DEFAULT 0,
    locked_until  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_login_at timestamptz
);

-- Signed-in sessions. Only the SHA-256 of the cookie's token is stored,
-- so a copy of this table signs nobody in.
CREATE TABLE sessions (
    token_hash   bytea PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);
CREATE INDEX sessions_user_idx ON sessions (user_id);
