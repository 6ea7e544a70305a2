-- dbos:online
-- 031: the full status index is replaced by the partial ones of 029 and 030.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.workflow_status_status_index;
