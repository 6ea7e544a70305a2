-- 104: copy the owning application onto each step, so step listings can be
-- filtered without joining workflow_status.

ALTER TABLE {{schema}}.operation_outputs ADD COLUMN IF NOT EXISTS application_name text;
