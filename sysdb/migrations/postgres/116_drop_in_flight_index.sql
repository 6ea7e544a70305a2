-- dbos:online
-- 116: the index of 032 is superseded by 115.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_workflow_status_in_flight;
