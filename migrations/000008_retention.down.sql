DROP TABLE artifact_storage;
