-- SQLite has no INCLUDE: application_name trails the key instead (115, 117, 119).
CREATE INDEX IF NOT EXISTS idx_workflow_status_in_flight_v2 ON workflow_status (queue_name, status, priority, created_at, application_name) WHERE "status" IN ('ENQUEUED', 'PENDING');
