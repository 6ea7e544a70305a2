ALTER TABLE application_versions ADD COLUMN application_name TEXT DEFAULT NULL;
