-- 006: keep every value an event had, per step, so a fork can restore the
-- events as they were at the step it restarts from; streams learn which step
-- wrote each value for the same reason.

CREATE TABLE {{schema}}.workflow_events_history (
    workflow_uuid text NOT NULL,
    function_id   integer NOT NULL,
    key           text NOT NULL,
    value         text NOT NULL,
    CONSTRAINT workflow_events_history_pkey PRIMARY KEY (workflow_uuid, function_id, key),
    CONSTRAINT workflow_events_history_workflow_uuid_fkey FOREIGN KEY (workflow_uuid)
        REFERENCES {{schema}}.workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE
);

ALTER TABLE {{schema}}.streams ADD COLUMN function_id integer NOT NULL DEFAULT 0;
