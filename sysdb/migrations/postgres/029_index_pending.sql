-- dbos:online
-- 029: recovery scans PENDING workflows; a partial index on just those is
-- touched only when a workflow enters or leaves PENDING. With 030 it replaces
-- the full status index (dropped by 031).
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_pending
    ON {{schema}}.workflow_status (created_at)
    WHERE status = 'PENDING';
