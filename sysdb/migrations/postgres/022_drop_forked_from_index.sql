-- dbos:online
-- 022: most rows have no forked_from, so the full index of 004 is mostly
-- NULLs; it is rebuilt as a partial index by 023.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_workflow_status_forked_from;
