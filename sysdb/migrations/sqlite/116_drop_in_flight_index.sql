DROP INDEX IF EXISTS idx_workflow_status_in_flight;
