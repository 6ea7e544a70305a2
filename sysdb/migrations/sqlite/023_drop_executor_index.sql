DROP INDEX IF EXISTS workflow_status_executor_id_index;
