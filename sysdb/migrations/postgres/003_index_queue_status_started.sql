-- 003: speed up the dequeue and rate-limit queries, which filter on queue,
-- status and start time. Superseded by 032/034 and dropped by 035.

CREATE INDEX idx_workflow_status_queue_status_started
    ON {{schema}}.workflow_status (queue_name, status, started_at_epoch_ms);
