-- 012: mark received messages instead of deleting them, so a fork can replay
-- them. The index added here duplicates idx_workflow_topic and goes in 114.

ALTER TABLE {{schema}}.notifications ADD COLUMN consumed boolean NOT NULL DEFAULT false;

CREATE INDEX idx_notifications ON {{schema}}.notifications (destination_uuid, topic);
