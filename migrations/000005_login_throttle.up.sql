-- Failed sign-ins, counted per (name as typed, client address) and per
-- client address, so that a stranger can neither lock someone else out
-- nor tell a real account from an unknown name. Shared by every server.
--
-- UNLOGGED: these rows are written on every failed sign-in and are worth
-- little after a crash (PostgreSQL empties them then), so they skip the
-- WAL. No index beyond the primary keys, and room on each page
-- (fillfactor), so that counting a failure is a HOT update.
CREATE UNLOGGED TABLE login_failures (
    -- SHA-256 of the name as typed, trimmed and lower-cased: what people
    -- type there is sometimes their password, so it is not kept.
    name_hash      bytea       NOT NULL,
    -- The client's address: one IPv4 address, or an IPv6 /64.
    address        cidr        NOT NULL,
    -- Failures since the last success; from the fifth, sign-ins of this
    -- name from this address are refused until locked_until.
    failures       integer     NOT NULL,
    locked_until   timestamptz,
    last_failed_at timestamptz NOT NULL,
    PRIMARY KEY (name_hash, address)
) WITH (fillfactor = 70);

-- Failures per client address whatever the names, in a fixed 15-minute
-- window from its first failure.
CREATE UNLOGGED TABLE login_address_failures (
    address      cidr        PRIMARY KEY,
    window_start timestamptz NOT NULL,
    failures     integer     NOT NULL,
    locked_until timestamptz
) WITH (fillfactor = 70);

-- The lock moved from users to login_failures.
ALTER TABLE users DROP COLUMN failed_logins, DROP COLUMN locked_until;
