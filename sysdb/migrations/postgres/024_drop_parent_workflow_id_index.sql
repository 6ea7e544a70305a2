-- dbos:online
-- 024: as 022, for parent_workflow_id (rebuilt partial by 025).
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_workflow_status_parent_workflow_id;
