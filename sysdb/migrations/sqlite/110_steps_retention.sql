ALTER TABLE operation_outputs ADD COLUMN retention_timestamp INTEGER;
