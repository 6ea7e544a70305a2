-- Every value an event took, by the step that set it, so a replay sees the
-- value as of that step.
CREATE TABLE workflow_events_history (
  workflow_uuid TEXT NOT NULL REFERENCES workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE,
  function_id INTEGER NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (workflow_uuid, function_id, key)
);
ALTER TABLE streams ADD COLUMN function_id INTEGER NOT NULL DEFAULT 0;
