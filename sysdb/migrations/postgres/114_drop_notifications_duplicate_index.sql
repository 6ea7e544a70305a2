-- dbos:online
-- 114: idx_notifications (012) has the same columns, in the same order, as
-- idx_workflow_topic (001); keeping both only slows sends down.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.idx_notifications;
