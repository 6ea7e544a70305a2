-- 007: a token naming the execution allowed to write a workflow's outcome,
-- so a stale run cannot overwrite a newer one.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN owner_xid text;
