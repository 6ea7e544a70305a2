-- 002: partitioned queues. A workflow may name the partition of its queue it
-- runs in; each partition has its own concurrency budget.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN queue_partition_key text;
