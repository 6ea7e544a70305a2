DROP INDEX IF EXISTS idx_workflow_status_forked_from;
