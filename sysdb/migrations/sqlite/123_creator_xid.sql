ALTER TABLE workflow_status ADD COLUMN creator_xid TEXT DEFAULT NULL;
