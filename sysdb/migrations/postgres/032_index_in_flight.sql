-- dbos:online
-- 032: the dequeue query's own index: its filter and sort order, over the
-- queued and running workflows only. Replaced by 115 and dropped by 116.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_in_flight
    ON {{schema}}.workflow_status (queue_name, status, priority, created_at)
    WHERE status IN ('ENQUEUED', 'PENDING');
