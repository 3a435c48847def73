-- Before roles a token was an admin's or a worker's and every user could
-- do everything: operator and viewer tokens cannot be kept (they would
-- become admins), so they go; users lose their role.
DELETE FROM api_tokens WHERE role IN ('operator', 'viewer');
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check CHECK (role IN ('admin', 'worker'));
ALTER TABLE users DROP COLUMN role;
