-- 014: let any Postgres client start a workflow or send a message with plain
-- SQL, without a DBOS library. Payloads are written as portable JSON.
-- search_path is pinned on both functions by 020.

CREATE FUNCTION {{schema}}.enqueue_workflow(
    workflow_name       text,
    queue_name          text,
    positional_args     json[]  DEFAULT ARRAY[]::json[],
    named_args          json    DEFAULT '{}'::json,
    class_name          text    DEFAULT NULL,
    config_name         text    DEFAULT NULL,
    workflow_id         text    DEFAULT NULL,
    app_version         text    DEFAULT NULL,
    timeout_ms          bigint  DEFAULT NULL,
    deadline_epoch_ms   bigint  DEFAULT NULL,
    deduplication_id    text    DEFAULT NULL,
    priority            integer DEFAULT NULL,
    queue_partition_key text    DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $body$
DECLARE
    new_id  text := coalesce(enqueue_workflow.workflow_id, gen_random_uuid()::text);
    now_ms  bigint := (extract(epoch FROM now()) * 1000)::bigint;
BEGIN
    IF coalesce(enqueue_workflow.workflow_name, '') = '' THEN
        RAISE EXCEPTION 'Workflow name cannot be null or empty';
    END IF;
    IF coalesce(enqueue_workflow.queue_name, '') = '' THEN
        RAISE EXCEPTION 'Queue name cannot be null or empty';
    END IF;
    IF jsonb_typeof(enqueue_workflow.named_args::jsonb) <> 'object' THEN
        RAISE EXCEPTION 'Named args must be a JSON object';
    END IF;
    IF enqueue_workflow.workflow_id = '' THEN
        RAISE EXCEPTION 'Workflow ID cannot be an empty string if provided.';
    END IF;

    BEGIN
        -- Enqueueing an id that exists only touches updated_at, so a retried
        -- call is harmless; a deduplication id already active on the queue
        -- violates uq_workflow_status_dedup_id.
        INSERT INTO {{schema}}.workflow_status (
            workflow_uuid, status, inputs, serialization,
            name, class_name, config_name,
            authenticated_user, assumed_role,
            queue_name, deduplication_id, priority, queue_partition_key,
            application_version, workflow_timeout_ms, workflow_deadline_epoch_ms,
            created_at, updated_at, recovery_attempts,
            parent_workflow_id, owner_xid
        ) VALUES (
            new_id, 'ENQUEUED',
            json_build_object('positionalArgs', enqueue_workflow.positional_args,
                              'namedArgs', enqueue_workflow.named_args)::text,
            'portable_json',
            enqueue_workflow.workflow_name, enqueue_workflow.class_name, enqueue_workflow.config_name,
            '', '',
            enqueue_workflow.queue_name, enqueue_workflow.deduplication_id,
            coalesce(enqueue_workflow.priority, 0), enqueue_workflow.queue_partition_key,
            enqueue_workflow.app_version, enqueue_workflow.timeout_ms, enqueue_workflow.deadline_epoch_ms,
            now_ms, now_ms, 0,
            NULL, gen_random_uuid()::text
        )
        ON CONFLICT (workflow_uuid) DO UPDATE SET updated_at = excluded.updated_at;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'DBOS queue duplicated' USING
            ERRCODE = 'unique_violation',
            DETAIL = format('Workflow %s with queue %s and deduplication ID %s already exists',
                            new_id, enqueue_workflow.queue_name, enqueue_workflow.deduplication_id);
    END;

    RETURN new_id;
END;
$body$;

CREATE FUNCTION {{schema}}.send_message(
    destination_id text,
    message        json,
    topic          text DEFAULT NULL,
    message_id     text DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    -- A repeated message_id is a retried send and is ignored.
    INSERT INTO {{schema}}.notifications (destination_uuid, topic, message, message_uuid, serialization)
    VALUES (
        send_message.destination_id,
        coalesce(send_message.topic, '__null__topic__'),
        send_message.message,
        coalesce(send_message.message_id, gen_random_uuid()::text),
        'portable_json'
    )
    ON CONFLICT (message_uuid) DO NOTHING;
EXCEPTION WHEN foreign_key_violation THEN
    RAISE EXCEPTION 'DBOS non-existent workflow' USING
        ERRCODE = 'foreign_key_violation',
        DETAIL = format('Destination workflow %s does not exist', send_message.destination_id);
END;
$body$;
