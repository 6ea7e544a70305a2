-- dbos:online
-- 118: the index of 046 is superseded by 117.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_workflow_status_partition_dequeue_v2;
