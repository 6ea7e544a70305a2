-- dbos:online
-- 117: the partitioned dequeue index of 046 again, carrying application_name
-- like 115. The old one is dropped by 118.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_partition_dequeue_v3
    ON {{schema}}.workflow_status (queue_name, status, queue_partition_key, priority, created_at, workflow_uuid)
    INCLUDE (application_name)
    WHERE status IN ('ENQUEUED', 'PENDING') AND queue_partition_key IS NOT NULL;
