-- 044: as 043, for workflow events (trigger from 001). The notifications
-- trigger stays: messages can be sent by plain SQL clients that never
-- notify themselves.

DROP TRIGGER IF EXISTS dbos_workflow_events_trigger ON {{schema}}.workflow_events;
DROP FUNCTION IF EXISTS {{schema}}.workflow_events_function();
