-- dbos:online
-- 035: the index of 003 is superseded by 032 and 034.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_workflow_status_queue_status_started;
