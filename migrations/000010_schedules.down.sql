ALTER TABLE jobs DROP COLUMN schedule;
DROP TABLE schedules;
