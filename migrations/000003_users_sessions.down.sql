DROP TABLE IF EXISTS sessions, users;
