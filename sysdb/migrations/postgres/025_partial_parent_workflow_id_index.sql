-- dbos:online
-- 025: index parent_workflow_id only for child workflows.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_workflow_status_parent_workflow_id
    ON {{schema}}.workflow_status (parent_workflow_id)
    WHERE parent_workflow_id IS NOT NULL;
