-- 100: first of the versions every DBOS SDK shares. Rows now belong to an
-- application; NULL means unclaimed, readable and claimable by any. One
-- table per migration so that a busy table does not hold up the others.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN IF NOT EXISTS application_name text;
