-- dbos:online
-- 111: the step sweep walks steps in retention order.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_operation_outputs_retention
    ON {{schema}}.operation_outputs (retention_timestamp);
