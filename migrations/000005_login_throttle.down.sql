ALTER TABLE users ADD COLUMN failed_logins integer NOT NULL DEFAULT 0, ADD COLUMN locked_until timestamptz;
DROP TABLE IF EXISTS login_failures, login_address_failures;
