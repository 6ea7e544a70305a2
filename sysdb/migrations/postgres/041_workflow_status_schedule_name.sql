-- 041: remember which schedule started a workflow, to list a schedule's runs.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN IF NOT EXISTS schedule_name text;

CREATE INDEX IF NOT EXISTS idx_workflow_status_schedule_name
    ON {{schema}}.workflow_status (schedule_name)
    WHERE schedule_name IS NOT NULL;
