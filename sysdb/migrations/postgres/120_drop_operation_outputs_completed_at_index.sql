-- dbos:online
-- 120: the index of 019 is superseded by 119.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_operation_outputs_completed_at_function_name;
