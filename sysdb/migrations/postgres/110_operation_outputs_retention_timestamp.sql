-- 110: steps are swept by age as well; existing rows take the migration
-- time.

ALTER TABLE {{schema}}.operation_outputs
    ADD COLUMN IF NOT EXISTS retention_timestamp bigint NOT NULL
        DEFAULT (extract(epoch FROM now()) * 1000.0)::bigint;
