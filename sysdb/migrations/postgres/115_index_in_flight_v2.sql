-- dbos:online
-- 115: the dequeue index of 032 again, now carrying application_name as a
-- non-key column so per-application counts are index-only scans. The old
-- one is dropped by 116.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_in_flight_v2
    ON {{schema}}.workflow_status (queue_name, status, priority, created_at)
    INCLUDE (application_name)
    WHERE status IN ('ENQUEUED', 'PENDING');
