ALTER TABLE workflow_schedules ADD COLUMN application_name TEXT DEFAULT NULL;
