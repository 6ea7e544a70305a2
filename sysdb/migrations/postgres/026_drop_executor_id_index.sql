-- dbos:online
-- 026: recovery no longer looks workflows up by executor through this index,
-- so it only costs writes.
DROP INDEX {{concurrently}} IF EXISTS {{schema}}.workflow_status_executor_id_index;
