-- dbos:online
-- 045: keep dequeues from one partition selective when many partitions are
-- busy. Replaced by 046 and dropped by 047.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_partition_dequeue
    ON {{schema}}.workflow_status (queue_name, status, queue_partition_key, priority, created_at)
    WHERE status IN ('ENQUEUED', 'PENDING') AND queue_partition_key IS NOT NULL;
