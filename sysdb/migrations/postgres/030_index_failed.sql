-- dbos:online
-- 030: find failed workflows quickly when troubleshooting.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_failed
    ON {{schema}}.workflow_status (status, created_at)
    WHERE status IN ('ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED');
