-- Postgres indexes this column (GIN); SQLite has no equivalent and no index.
ALTER TABLE workflow_status ADD COLUMN attributes TEXT;
