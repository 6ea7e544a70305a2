-- dbos:online
-- 047: the index of 045 is superseded by 046.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_workflow_status_partition_dequeue;
