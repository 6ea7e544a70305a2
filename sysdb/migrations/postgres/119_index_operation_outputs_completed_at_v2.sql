-- dbos:online
-- 119: the step-completion index of 019 again, carrying application_name
-- like 115. The old one is dropped by 120.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_operation_outputs_completed_at_function_name_v2
    ON {{schema}}.operation_outputs (completed_at_epoch_ms, function_name)
    INCLUDE (application_name);
