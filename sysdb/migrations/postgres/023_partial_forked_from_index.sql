-- dbos:online
-- 023: index forked_from only where it is set.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_forked_from
    ON {{schema}}.workflow_status (forked_from)
    WHERE forked_from IS NOT NULL;
