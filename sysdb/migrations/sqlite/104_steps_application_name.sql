ALTER TABLE operation_outputs ADD COLUMN application_name TEXT DEFAULT NULL;
