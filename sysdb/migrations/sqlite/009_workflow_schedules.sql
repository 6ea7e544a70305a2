CREATE TABLE workflow_schedules (
  schedule_id TEXT PRIMARY KEY,
  schedule_name TEXT NOT NULL UNIQUE,
  workflow_name TEXT NOT NULL,
  workflow_class_name TEXT,
  schedule TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'ACTIVE',
  context TEXT NOT NULL
);
