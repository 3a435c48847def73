DROP TABLE IF EXISTS effects, artifacts;
