-- From 100 on, every DBOS SDK numbers its migrations alike (41-99 are unused
-- on SQLite). Versions 105 and 113 rewrite Postgres functions: nothing to do
-- here, so they have no file, and the runner records them all the same.
ALTER TABLE workflow_status ADD COLUMN application_name TEXT DEFAULT NULL;
