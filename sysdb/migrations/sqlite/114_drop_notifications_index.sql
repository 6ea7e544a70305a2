-- A duplicate of idx_workflow_topic.
DROP INDEX IF EXISTS idx_notifications;
