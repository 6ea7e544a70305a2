-- dbos:online
-- 034: the rate limiter counts a queue's starts in a trailing window.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_rate_limited
    ON {{schema}}.workflow_status (queue_name, started_at_epoch_ms)
    WHERE rate_limited = true;
