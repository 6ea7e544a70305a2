-- dbos:online
-- 037: filter workflows by the time they were dequeued.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_started_at
    ON {{schema}}.workflow_status (started_at_epoch_ms)
    WHERE started_at_epoch_ms IS NOT NULL;
