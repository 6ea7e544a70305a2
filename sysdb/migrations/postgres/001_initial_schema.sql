-- 001: the original system schema. Every later migration builds on these
-- tables; the notify triggers let waiting recv/get_event callers wake up
-- without polling. The events trigger (and its function) is removed again by
-- 044, the notifications one is still in use.

CREATE TABLE {{schema}}.workflow_status (
    workflow_uuid              text NOT NULL,
    status                     text,
    name                       text,
    authenticated_user         text,
    assumed_role               text,
    authenticated_roles        text,
    request                    text,
    output                     text,
    error                      text,
    executor_id                text,
    created_at                 bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint,
    updated_at                 bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint,
    application_version        text,
    application_id             text,
    class_name                 varchar(255) DEFAULT NULL,
    config_name                varchar(255) DEFAULT NULL,
    recovery_attempts          bigint DEFAULT 0,
    queue_name                 text,
    workflow_timeout_ms        bigint,
    workflow_deadline_epoch_ms bigint,
    inputs                     text,
    started_at_epoch_ms        bigint,
    deduplication_id           text,
    priority                   integer NOT NULL DEFAULT 0,
    CONSTRAINT workflow_status_pkey PRIMARY KEY (workflow_uuid),
    -- Replaced by the partial unique index of 027 and dropped by 028.
    CONSTRAINT uq_workflow_status_queue_name_dedup_id UNIQUE (queue_name, deduplication_id)
);

CREATE INDEX workflow_status_created_at_index ON {{schema}}.workflow_status (created_at);
CREATE INDEX workflow_status_executor_id_index ON {{schema}}.workflow_status (executor_id);
CREATE INDEX workflow_status_status_index ON {{schema}}.workflow_status (status);

CREATE TABLE {{schema}}.operation_outputs (
    workflow_uuid     text NOT NULL,
    function_id       integer NOT NULL,
    function_name     text NOT NULL DEFAULT '',
    output            text,
    error             text,
    child_workflow_id text,
    CONSTRAINT operation_outputs_pkey PRIMARY KEY (workflow_uuid, function_id),
    -- Dropped by 112.
    CONSTRAINT operation_outputs_workflow_uuid_fkey FOREIGN KEY (workflow_uuid)
        REFERENCES {{schema}}.workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE
);

CREATE TABLE {{schema}}.notifications (
    destination_uuid    text NOT NULL,
    topic               text,
    message             text NOT NULL,
    created_at_epoch_ms bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint,
    message_uuid        text NOT NULL DEFAULT gen_random_uuid(),
    CONSTRAINT notifications_pkey PRIMARY KEY (message_uuid),
    CONSTRAINT notifications_destination_uuid_fkey FOREIGN KEY (destination_uuid)
        REFERENCES {{schema}}.workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE
);

CREATE INDEX idx_workflow_topic ON {{schema}}.notifications (destination_uuid, topic);

CREATE TABLE {{schema}}.workflow_events (
    workflow_uuid text NOT NULL,
    key           text NOT NULL,
    value         text NOT NULL,
    CONSTRAINT workflow_events_pkey PRIMARY KEY (workflow_uuid, key),
    CONSTRAINT workflow_events_workflow_uuid_fkey FOREIGN KEY (workflow_uuid)
        REFERENCES {{schema}}.workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE
);

CREATE TABLE {{schema}}.streams (
    workflow_uuid text NOT NULL,
    key           text NOT NULL,
    value         text NOT NULL,
    "offset"      integer NOT NULL,
    CONSTRAINT streams_pkey PRIMARY KEY (workflow_uuid, key, "offset"),
    CONSTRAINT streams_workflow_uuid_fkey FOREIGN KEY (workflow_uuid)
        REFERENCES {{schema}}.workflow_status (workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE
);

CREATE TABLE {{schema}}.event_dispatch_kv (
    service_name     text NOT NULL,
    workflow_fn_name text NOT NULL,
    key              text NOT NULL,
    value            text,
    update_seq       numeric(38,0),
    update_time      numeric(38,15),
    CONSTRAINT event_dispatch_kv_pkey PRIMARY KEY (service_name, workflow_fn_name, key)
);

-- Wake recv() waiters: the payload names the destination workflow and topic.
CREATE FUNCTION {{schema}}.notifications_function() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM pg_notify('dbos_notifications_channel', NEW.destination_uuid || '::' || NEW.topic);
    RETURN NEW;
END;
$body$;

CREATE TRIGGER dbos_notifications_trigger
    AFTER INSERT ON {{schema}}.notifications
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.notifications_function();

-- Wake get_event() waiters: the payload names the workflow and event key.
CREATE FUNCTION {{schema}}.workflow_events_function() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM pg_notify('dbos_workflow_events_channel', NEW.workflow_uuid || '::' || NEW.key);
    RETURN NEW;
END;
$body$;

CREATE TRIGGER dbos_workflow_events_trigger
    AFTER INSERT ON {{schema}}.workflow_events
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.workflow_events_function();
