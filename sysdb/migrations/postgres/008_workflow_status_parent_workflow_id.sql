-- 008: link child workflows to the workflow that started them. The full
-- index is turned into a partial one by 024/025.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN parent_workflow_id text;

CREATE INDEX idx_workflow_status_parent_workflow_id
    ON {{schema}}.workflow_status (parent_workflow_id);
