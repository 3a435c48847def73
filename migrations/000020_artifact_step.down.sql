ALTER TABLE artifacts DROP COLUMN step;
