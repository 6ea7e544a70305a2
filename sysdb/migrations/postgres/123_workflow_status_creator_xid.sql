-- 123: the token of the insert that created a row, so a retried insert can
-- recognise its own row while owner_xid follows the execution that owns it.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN IF NOT EXISTS creator_xid text;
