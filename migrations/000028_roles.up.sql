-- Roles (SPEC "Roles and audit"): a person is a viewer, an operator or an
-- admin; an API token also may be an operator or a viewer. Every user
-- before this could do everything: they are admins.
ALTER TABLE users ADD COLUMN role text NOT NULL DEFAULT 'admin'
    CONSTRAINT users_role_check CHECK (role IN ('viewer', 'operator', 'admin'));
ALTER TABLE users ALTER COLUMN role DROP DEFAULT;
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check
    CHECK (role IN ('admin', 'operator', 'viewer', 'worker'));
