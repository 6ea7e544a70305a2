-- 101: queues belong to an application too (NULL: unclaimed).

ALTER TABLE {{schema}}.queues ADD COLUMN IF NOT EXISTS application_name text;
