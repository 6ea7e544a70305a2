-- 005: record when each step started and finished, so tools can show step
-- durations.

ALTER TABLE {{schema}}.operation_outputs
    ADD COLUMN started_at_epoch_ms bigint,
    ADD COLUMN completed_at_epoch_ms bigint;
