-- 004: remember which workflow a fork was copied from. The full index is
-- turned into a partial one by 022/023.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN forked_from text;

CREATE INDEX idx_workflow_status_forked_from ON {{schema}}.workflow_status (forked_from);
