-- 105: SQL clients can enqueue for a given application. The argument comes
-- last and defaults to NULL (unclaimed), so existing callers are unaffected.
-- The 16-argument signature of 038 is replaced, not overloaded.

DROP FUNCTION IF EXISTS {{schema}}.enqueue_workflow(text, text, json[], json, text, text, text, text, bigint, bigint, text, integer, text, text, text, bigint);

CREATE OR REPLACE FUNCTION {{schema}}.enqueue_workflow(
    workflow_name        text,
    queue_name           text,
    positional_args      json[]  DEFAULT ARRAY[]::json[],
    named_args           json    DEFAULT '{}'::json,
    class_name           text    DEFAULT NULL,
    config_name          text    DEFAULT NULL,
    workflow_id          text    DEFAULT NULL,
    app_version          text    DEFAULT NULL,
    timeout_ms           bigint  DEFAULT NULL,
    deadline_epoch_ms    bigint  DEFAULT NULL,
    deduplication_id     text    DEFAULT NULL,
    priority             integer DEFAULT NULL,
    queue_partition_key  text    DEFAULT NULL,
    authenticated_user   text    DEFAULT NULL,
    authenticated_roles  text    DEFAULT NULL,
    delay_until_epoch_ms bigint  DEFAULT NULL,
    application_name     text    DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $body$
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
    IF enqueue_workflow.delay_until_epoch_ms < 0 THEN
        RAISE EXCEPTION 'delay_until_epoch_ms must be >= 0';
    END IF;

    BEGIN
        -- Enqueueing an id that exists only touches updated_at, so a retried
        -- call is harmless; a deduplication id already active on the queue
        -- violates uq_workflow_status_dedup_id.
        INSERT INTO {{schema}}.workflow_status (
            workflow_uuid, status, inputs, serialization,
            name, class_name, config_name, application_name,
            authenticated_user, authenticated_roles,
            queue_name, deduplication_id, priority, queue_partition_key, delay_until_epoch_ms,
            application_version, workflow_timeout_ms, workflow_deadline_epoch_ms,
            created_at, updated_at, recovery_attempts,
            parent_workflow_id, owner_xid
        ) VALUES (
            new_id,
            CASE WHEN enqueue_workflow.delay_until_epoch_ms IS NULL THEN 'ENQUEUED' ELSE 'DELAYED' END,
            json_build_object('positionalArgs', enqueue_workflow.positional_args,
                              'namedArgs', enqueue_workflow.named_args)::text,
            'portable_json',
            enqueue_workflow.workflow_name, enqueue_workflow.class_name, enqueue_workflow.config_name,
            enqueue_workflow.application_name,
            enqueue_workflow.authenticated_user, enqueue_workflow.authenticated_roles,
            enqueue_workflow.queue_name, enqueue_workflow.deduplication_id,
            coalesce(enqueue_workflow.priority, 0), enqueue_workflow.queue_partition_key,
            enqueue_workflow.delay_until_epoch_ms,
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
