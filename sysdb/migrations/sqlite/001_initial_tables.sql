-- The first schema: workflows, their steps, messages, events and streams.
-- Every instant is epoch milliseconds; the default below is the form DBOS
-- Python writes on Python < 3.12 (whole seconds), which every SQLite accepts.
CREATE TABLE workflow_status (
  workflow_uuid TEXT PRIMARY KEY,
  status TEXT,
  name TEXT,
  authenticated_user TEXT,
  assumed_role TEXT,
  authenticated_roles TEXT,
  request TEXT,
  output TEXT,
  error TEXT,
  executor_id TEXT,
  created_at INTEGER NOT NULL DEFAULT (strftime('%s','now') * 1000),
  updated_at INTEGER NOT NULL DEFAULT (strftime('%s','now') * 1000),
  application_version TEXT,
  application_id TEXT,
  class_name TEXT DEFAULT NULL,
  config_name TEXT DEFAULT NULL,
  recovery_attempts INTEGER DEFAULT 0,
  queue_name TEXT,
  workflow_timeout_ms INTEGER,
  workflow_deadline_epoch_ms INTEGER,
  inputs TEXT,
  started_at_epoch_ms INTEGER,
  deduplication_id TEXT,
  priority INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX workflow_status_created_at_index ON workflow_status (created_at);
CREATE INDEX workflow_status_executor_id_index ON workflow_status (executor_id);
CREATE INDEX workflow_status_status_index ON workflow_status (status);
CREATE UNIQUE INDEX uq_workflow_status_queue_name_dedup_id ON workflow_status (queue_name, deduplication_id);

CREATE TABLE operation_outputs (
  workflow_uuid TEXT NOT NULL REFERENCES workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE,
  function_id INTEGER NOT NULL,
  function_name TEXT NOT NULL DEFAULT '',
  output TEXT,
  error TEXT,
  child_workflow_id TEXT,
  PRIMARY KEY (workflow_uuid, function_id)
);

CREATE TABLE notifications (
  message_uuid TEXT NOT NULL DEFAULT (hex(randomblob(16))) PRIMARY KEY,
  destination_uuid TEXT NOT NULL REFERENCES workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE,
  topic TEXT,
  message TEXT NOT NULL,
  created_at_epoch_ms INTEGER NOT NULL DEFAULT (strftime('%s','now') * 1000)
);
CREATE INDEX idx_workflow_topic ON notifications (destination_uuid, topic);

CREATE TABLE workflow_events (
  workflow_uuid TEXT NOT NULL REFERENCES workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (workflow_uuid, key)
);

CREATE TABLE streams (
  workflow_uuid TEXT NOT NULL REFERENCES workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  "offset" INTEGER NOT NULL,
  PRIMARY KEY (workflow_uuid, key, "offset")
);
