-- 108: limits that apply to each partition of a queue; setting any of them
-- makes the queue partitioned. Adding nullable columns is catalog-only.

ALTER TABLE {{schema}}.queues ADD COLUMN IF NOT EXISTS partition_concurrency integer;
ALTER TABLE {{schema}}.queues ADD COLUMN IF NOT EXISTS partition_worker_concurrency integer;
ALTER TABLE {{schema}}.queues ADD COLUMN IF NOT EXISTS partition_rate_limit_max integer;
ALTER TABLE {{schema}}.queues ADD COLUMN IF NOT EXISTS partition_rate_limit_period_sec double precision;
