-- 016: delayed enqueue. A workflow waits as DELAYED until this instant, then
-- becomes ENQUEUED; the partial index finds the ones that are due.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN delay_until_epoch_ms bigint;

CREATE INDEX idx_workflow_status_delayed
    ON {{schema}}.workflow_status (delay_until_epoch_ms)
    WHERE status = 'DELAYED';
