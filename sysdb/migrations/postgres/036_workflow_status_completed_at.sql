-- 036: record when a workflow reached its final state. The new column is
-- empty everywhere, so its partial index builds instantly in the transaction.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN IF NOT EXISTS completed_at bigint;

CREATE INDEX IF NOT EXISTS idx_workflow_status_completed_at
    ON {{schema}}.workflow_status (completed_at)
    WHERE completed_at IS NOT NULL;
