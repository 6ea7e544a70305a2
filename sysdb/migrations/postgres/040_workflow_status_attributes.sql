-- 040: free-form JSON metadata on a workflow, searchable by containment
-- (@>) through a GIN index. The column is new and empty, so the index builds
-- instantly in the transaction.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN IF NOT EXISTS attributes jsonb;

CREATE INDEX IF NOT EXISTS idx_workflow_status_attributes
    ON {{schema}}.workflow_status USING gin (attributes)
    WHERE attributes IS NOT NULL;
