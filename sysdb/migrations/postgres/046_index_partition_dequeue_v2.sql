-- dbos:online
-- 046: as 045 with workflow_uuid last, making the order total so that the
-- head of each partition is a single index probe. Replaced by 117.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_partition_dequeue_v2
    ON {{schema}}.workflow_status (queue_name, status, queue_partition_key, priority, created_at, workflow_uuid)
    WHERE status IN ('ENQUEUED', 'PENDING') AND queue_partition_key IS NOT NULL;
