-- 019: list or filter steps by completion time and name. Replaced by the
-- covering index of 119 and dropped by 120.

CREATE INDEX idx_operation_outputs_completed_at_function_name
    ON {{schema}}.operation_outputs (completed_at_epoch_ms, function_name);
