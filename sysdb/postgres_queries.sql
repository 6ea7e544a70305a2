-- The fixed statements of the Postgres backend. Each starts with a
-- "-- name: X" line; {{schema}} is replaced by the quoted schema name when the
-- backend opens. Queries whose shape depends on the request (listing filters)
-- are built in Go from the columns named here.

-- name: WorkflowInsert
-- On conflict the row is left as it is (the no-op update makes RETURNING
-- report the stored row); the caller compares creator_xid to learn whether
-- this request made it.
INSERT INTO {{schema}}.workflow_status (
    workflow_uuid, status, name, class_name, config_name,
    queue_name, queue_partition_key, deduplication_id, priority,
    authenticated_user, assumed_role, authenticated_roles,
    executor_id, application_version, application_id, application_name,
    created_at, updated_at, recovery_attempts,
    workflow_timeout_ms, workflow_deadline_epoch_ms, delay_until_epoch_ms,
    parent_workflow_id, attributes, schedule_name,
    debounce_deadline_epoch_ms, is_debounced, serialization,
    creator_xid, owner_xid
) VALUES (
    $1, $2, $3, $4, $5,
    $6, $7, $8, $9,
    $10, $11, $12,
    $13, $14, $15, $16,
    (EXTRACT(epoch FROM now()) * 1000)::bigint, (EXTRACT(epoch FROM now()) * 1000)::bigint,
    CASE WHEN $2 = 'PENDING' THEN 1 ELSE 0 END,
    $17, $18, $19,
    $20, $21::jsonb, $22,
    $23, $24, $25,
    $26, CASE WHEN $2 = 'PENDING' THEN $26 END
)
ON CONFLICT (workflow_uuid) DO UPDATE SET creator_xid = workflow_status.creator_xid
RETURNING status, name, class_name, config_name, queue_name, queue_partition_key,
    workflow_timeout_ms, workflow_deadline_epoch_ms, owner_xid, creator_xid

-- name: WorkflowInputInsert
INSERT INTO {{schema}}.workflow_input (workflow_uuid, inputs)
VALUES ($1, $2)
ON CONFLICT (workflow_uuid) DO NOTHING

-- name: WorkflowFinish
-- One statement, so one round trip in autocommit: the outcome is written only
-- while the run still owns the PENDING row. The output upsert overwrites: an earlier run that was
-- cancelled or dead-lettered may have left an outcome behind, and the winning
-- run's outcome is the one that counts.
WITH done AS (
    UPDATE {{schema}}.workflow_status
    SET status = $3,
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        completed_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        deduplication_id = NULL,
        owner_xid = NULL
    WHERE workflow_uuid = $1 AND status = 'PENDING' AND owner_xid = $2
    RETURNING workflow_uuid, serialization
), stored AS (
    INSERT INTO {{schema}}.workflow_output (workflow_uuid, output, error)
    SELECT workflow_uuid, $4, $5 FROM done
    ON CONFLICT (workflow_uuid) DO UPDATE SET output = EXCLUDED.output, error = EXCLUDED.error
    RETURNING workflow_uuid
)
-- stored is referenced so the reader sees it ran (data-modifying CTEs run
-- regardless).
SELECT serialization FROM done WHERE (SELECT count(*) FROM stored) >= 0

-- name: WorkflowCancel
WITH existing AS (
    SELECT workflow_uuid FROM {{schema}}.workflow_status WHERE workflow_uuid = ANY($1)
), cancelled AS (
    UPDATE {{schema}}.workflow_status
    SET status = 'CANCELLED',
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        completed_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        started_at_epoch_ms = NULL, queue_name = NULL, deduplication_id = NULL, owner_xid = NULL
    WHERE workflow_uuid = ANY($1)
      AND status NOT IN ('SUCCESS', 'ERROR', 'CANCELLED')
      AND ($2::text IS NULL OR owner_xid = $2)
    RETURNING workflow_uuid
)
-- Every existing id, and whether this call cancelled it.
SELECT e.workflow_uuid, c.workflow_uuid IS NOT NULL
FROM existing e LEFT JOIN cancelled c ON c.workflow_uuid = e.workflow_uuid

-- name: WorkflowResume
WITH existing AS (
    SELECT workflow_uuid FROM {{schema}}.workflow_status WHERE workflow_uuid = ANY($1)
), resumed AS (
    UPDATE {{schema}}.workflow_status
    SET status = 'ENQUEUED', queue_name = $2, recovery_attempts = 0,
        workflow_deadline_epoch_ms = NULL, deduplication_id = NULL, owner_xid = NULL,
        started_at_epoch_ms = NULL, completed_at = NULL,
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
    WHERE workflow_uuid = ANY($1) AND status NOT IN ('SUCCESS', 'ERROR')
    RETURNING workflow_uuid
)
-- Every existing id, and whether this call resumed it.
SELECT e.workflow_uuid, r.workflow_uuid IS NOT NULL
FROM existing e LEFT JOIN resumed r ON r.workflow_uuid = e.workflow_uuid

-- name: WorkflowChildren
-- Every descendant, breadth first by depth.
WITH RECURSIVE descendants(workflow_uuid, depth) AS (
    SELECT workflow_uuid, 1 FROM {{schema}}.workflow_status WHERE parent_workflow_id = $1
    UNION
    SELECT w.workflow_uuid, d.depth + 1
    FROM {{schema}}.workflow_status w JOIN descendants d ON w.parent_workflow_id = d.workflow_uuid
    WHERE d.depth < 10000
)
SELECT workflow_uuid FROM descendants GROUP BY workflow_uuid ORDER BY MIN(depth), workflow_uuid

-- name: WorkflowDeleteInputs
DELETE FROM {{schema}}.workflow_input WHERE workflow_uuid = ANY($1)

-- name: WorkflowDeleteOutputs
DELETE FROM {{schema}}.workflow_output WHERE workflow_uuid = ANY($1)

-- name: WorkflowDeleteSteps
DELETE FROM {{schema}}.operation_outputs WHERE workflow_uuid = ANY($1)

-- name: WorkflowDeleteStatus
-- Messages, events and streams cascade from workflow_status.
DELETE FROM {{schema}}.workflow_status WHERE workflow_uuid = ANY($1)

-- name: WorkflowRecover
-- NULLIF: rows of old SDKs stored "no queue" as the empty string.
UPDATE {{schema}}.workflow_status
    SET status = 'ENQUEUED', owner_xid = NULL, started_at_epoch_ms = NULL,
        queue_name = COALESCE(NULLIF(queue_name, ''), $3),
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
    WHERE status = 'PENDING'
      AND executor_id = ANY($1)
      AND ($2::text = '' OR application_version = $2)
      AND ($4::text IS NULL OR application_name = $4 OR application_name IS NULL)
    RETURNING workflow_uuid, queue_name

-- name: WorkflowRequeue
UPDATE {{schema}}.workflow_status AS w
    SET status = 'ENQUEUED', owner_xid = NULL, started_at_epoch_ms = NULL,
        queue_name = COALESCE(NULLIF(w.queue_name, ''), $3),
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        -- $4: the claim never reached a worker, so it does not count as an
        -- attempt nor as a start against a rate limit.
        recovery_attempts = CASE WHEN $4 THEN GREATEST(w.recovery_attempts - 1, 0) ELSE w.recovery_attempts END,
        rate_limited = CASE WHEN $4 THEN false ELSE w.rate_limited END
    FROM unnest($1::text[], $2::text[]) AS c(workflow_uuid, owner_xid)
    WHERE w.workflow_uuid = c.workflow_uuid AND w.owner_xid = c.owner_xid AND w.status = 'PENDING'
    RETURNING w.workflow_uuid, w.queue_name

-- name: WorkflowDeadLetter
UPDATE {{schema}}.workflow_status
    SET status = 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', deduplication_id = NULL, started_at_epoch_ms = NULL,
        queue_name = NULL, owner_xid = NULL,
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        completed_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
    WHERE workflow_uuid = ANY($1) AND status = 'PENDING' AND recovery_attempts >= $2
    RETURNING workflow_uuid

-- name: StepRecordMany
-- A batch of step records in one statement. owners locks the batch's
-- workflow rows in a fixed order (so concurrent batches cannot deadlock)
-- against a concurrent finish, cancel or recovery, which all clear or change
-- owner_xid; under READ COMMITTED a row changed meanwhile is re-read, so a
-- record lands only while its run still owns the workflow. The result lists
-- the owners seen (kind 1) and the records inserted (kind 2).
WITH owners AS (
    SELECT workflow_uuid, owner_xid FROM {{schema}}.workflow_status
    WHERE workflow_uuid = ANY($1)
    ORDER BY workflow_uuid
    FOR NO KEY UPDATE
), records AS (
    SELECT * FROM unnest(
        $2::text[], $3::int4[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
        $9::text[], $10::int8[], $11::int8[], $12::text[]
    ) AS r(workflow_uuid, function_id, owner_xid, function_name, output, error, serialization,
           child_workflow_id, started_at_epoch_ms, completed_at_epoch_ms, application_name)
), inserted AS (
    INSERT INTO {{schema}}.operation_outputs (
        workflow_uuid, function_id, function_name, output, error, serialization,
        child_workflow_id, started_at_epoch_ms, completed_at_epoch_ms, application_name
    )
    SELECT r.workflow_uuid, r.function_id, r.function_name, r.output, r.error, r.serialization,
           r.child_workflow_id, r.started_at_epoch_ms, r.completed_at_epoch_ms, r.application_name
    FROM records r JOIN owners o ON o.workflow_uuid = r.workflow_uuid AND o.owner_xid = r.owner_xid
    ON CONFLICT (workflow_uuid, function_id) DO NOTHING
    RETURNING workflow_uuid, function_id
)
SELECT 1, workflow_uuid, owner_xid, 0 FROM owners
UNION ALL
SELECT 2, workflow_uuid, NULL, function_id FROM inserted

-- name: StepGetMany
SELECT o.workflow_uuid, o.function_id, o.function_name, o.output, o.error, o.serialization,
       o.child_workflow_id, o.started_at_epoch_ms, o.completed_at_epoch_ms
FROM {{schema}}.operation_outputs o
JOIN unnest($1::text[], $2::int4[]) AS k(workflow_uuid, function_id)
  ON o.workflow_uuid = k.workflow_uuid AND o.function_id = k.function_id

-- name: StepList
SELECT function_id, function_name, output, error, serialization, child_workflow_id,
       started_at_epoch_ms, completed_at_epoch_ms
FROM {{schema}}.operation_outputs
WHERE workflow_uuid = $1
ORDER BY function_id

-- name: LatestApplicationVersion
-- The newest registered version of an application (or of any application
-- when $1 is NULL), unclaimed versions included.
SELECT version_id, version_name, version_timestamp, created_at, application_name
FROM {{schema}}.application_versions
WHERE $1::text IS NULL OR application_name = $1 OR application_name IS NULL
ORDER BY version_timestamp DESC, created_at DESC, version_name DESC
LIMIT 1

-- name: QueueRunningCount
SELECT count(*) FROM {{schema}}.workflow_status
WHERE queue_name = $1 AND status = 'PENDING'
  AND ($2::text IS NULL OR application_name = $2 OR application_name IS NULL)
  AND ($3::text = '' OR queue_partition_key = $3)

-- name: QueueRecentStarts
SELECT count(*) FROM {{schema}}.workflow_status
WHERE queue_name = $1 AND rate_limited = TRUE
  AND status NOT IN ('ENQUEUED', 'DELAYED')
  AND started_at_epoch_ms > (EXTRACT(epoch FROM now()) * 1000)::bigint - $2
  AND ($3::text IS NULL OR application_name = $3 OR application_name IS NULL)
  AND ($4::text = '' OR queue_partition_key = $4)

-- name: QueueClaim
-- Claims the selected candidates: each gets its own owner token, its first
-- start time, its deadline from its timeout, and one more recovery attempt.
UPDATE {{schema}}.workflow_status
SET status = 'PENDING',
    application_version = $2,
    executor_id = $3,
    owner_xid = gen_random_uuid()::text,
    started_at_epoch_ms = (EXTRACT(epoch FROM now()) * 1000)::bigint,
    updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
    rate_limited = $4,
    recovery_attempts = recovery_attempts + 1,
    workflow_deadline_epoch_ms = CASE
        WHEN workflow_timeout_ms IS NOT NULL AND workflow_deadline_epoch_ms IS NULL
        THEN (EXTRACT(epoch FROM now()) * 1000)::bigint + workflow_timeout_ms
        ELSE workflow_deadline_epoch_ms
    END,
    application_name = COALESCE(application_name, $5)
WHERE workflow_uuid = ANY($1) AND status = 'ENQUEUED'
RETURNING workflow_uuid

-- name: QueueList
WITH active AS (
    SELECT queue_name,
           count(*) FILTER (WHERE status = 'ENQUEUED') AS enqueued,
           count(*) FILTER (WHERE status = 'PENDING') AS pending,
           count(*) FILTER (WHERE status = 'DELAYED') AS delayed
    FROM {{schema}}.workflow_status
    WHERE status IN ('ENQUEUED', 'PENDING', 'DELAYED') AND queue_name IS NOT NULL
    GROUP BY queue_name
)
SELECT COALESCE(q.name, a.queue_name), q.name IS NOT NULL,
       q.concurrency, q.worker_concurrency, q.rate_limit_max, q.rate_limit_period_sec,
       COALESCE(q.priority_enabled, false), COALESCE(q.partition_queue, false), q.application_name,
       COALESCE(a.enqueued, 0), COALESCE(a.pending, 0), COALESCE(a.delayed, 0)
FROM {{schema}}.queues q
FULL OUTER JOIN active a ON a.queue_name = q.name
ORDER BY 1

-- ---------------------------------------------------------------------------
-- Queues, delays, debounce, timeouts, versions and schedules (QueueSystem).

-- name: QueueOwnerLock
-- The owner of a queue name, locked against a concurrent registration.
SELECT application_name FROM {{schema}}.queues WHERE name = $1 FOR UPDATE

-- name: QueueInsert
-- As the SDKs write it: a fresh uuid, both instants from the database clock.
INSERT INTO {{schema}}.queues (
    queue_id, name, concurrency, worker_concurrency, rate_limit_max, rate_limit_period_sec,
    priority_enabled, partition_queue, polling_interval_sec, created_at, updated_at, application_name,
    partition_concurrency, partition_worker_concurrency, partition_rate_limit_max, partition_rate_limit_period_sec
) VALUES (
    gen_random_uuid()::text, $1, $2, $3, $4, $5,
    $6, $7, $8, (EXTRACT(epoch FROM now()) * 1000)::bigint, (EXTRACT(epoch FROM now()) * 1000)::bigint, $9,
    $10, $11, $12, $13
)
ON CONFLICT (name) DO NOTHING
RETURNING queue_id

-- name: QueueUpdate
-- Overwrites the configuration; an unclaimed row is claimed, an owned one
-- keeps its owner.
UPDATE {{schema}}.queues
SET concurrency = $2, worker_concurrency = $3, rate_limit_max = $4, rate_limit_period_sec = $5,
    priority_enabled = $6, partition_queue = $7, polling_interval_sec = $8,
    updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
    application_name = COALESCE(application_name, $9),
    partition_concurrency = $10, partition_worker_concurrency = $11,
    partition_rate_limit_max = $12, partition_rate_limit_period_sec = $13
WHERE name = $1

-- name: QueueGet
SELECT queue_id, name, concurrency, worker_concurrency, rate_limit_max, rate_limit_period_sec,
       priority_enabled, partition_queue, polling_interval_sec,
       partition_concurrency, partition_worker_concurrency, partition_rate_limit_max, partition_rate_limit_period_sec,
       application_name, created_at, updated_at
FROM {{schema}}.queues WHERE name = $1

-- name: QueueDelete
DELETE FROM {{schema}}.queues WHERE name = $1

-- name: QueuePartitions
-- A loose index scan: one seek per distinct key on the partition dequeue
-- index, so the cost follows the number of partitions, not the backlog.
WITH RECURSIVE partitions(pk) AS (
    SELECT MIN(queue_partition_key) FROM {{schema}}.workflow_status
    WHERE queue_name = $1 AND status = 'ENQUEUED' AND queue_partition_key IS NOT NULL
    UNION ALL
    SELECT (SELECT MIN(queue_partition_key) FROM {{schema}}.workflow_status
            WHERE queue_name = $1 AND status = 'ENQUEUED' AND queue_partition_key > partitions.pk)
    FROM partitions WHERE partitions.pk IS NOT NULL
)
SELECT pk FROM partitions WHERE pk IS NOT NULL

-- name: WorkflowByDeduplicationID
-- The id is cleared when its workflow leaves the queue, so a match is active.
SELECT workflow_uuid FROM {{schema}}.workflow_status
WHERE queue_name = $1 AND deduplication_id = $2

-- name: WorkflowReleaseDelayed
-- A debounced workflow gives up its deduplication id when released: the id is
-- a debounce key held only while DELAYED, so a later debounce with the same
-- key starts a fresh workflow instead of bouncing one already committed to
-- run.
WITH released AS (
    UPDATE {{schema}}.workflow_status
    SET status = 'ENQUEUED',
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        deduplication_id = CASE WHEN is_debounced THEN NULL ELSE deduplication_id END
    WHERE status = 'DELAYED'
      AND delay_until_epoch_ms <= (EXTRACT(epoch FROM now()) * 1000)::bigint
      AND ($1::text IS NULL OR application_name = $1 OR application_name IS NULL)
    RETURNING workflow_uuid, queue_name, application_version
)
SELECT workflow_uuid, COALESCE(queue_name, ''), application_version FROM released

-- name: WorkflowSetDelay
UPDATE {{schema}}.workflow_status
SET delay_until_epoch_ms = $2, updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
WHERE workflow_uuid = $1 AND status = 'DELAYED'

-- name: WorkflowStatusOf
SELECT status FROM {{schema}}.workflow_status WHERE workflow_uuid = $1

-- name: WorkflowCancelTimedOut
-- Oldest deadline first; rows a dequeue or another agent's sweep holds are
-- left for the next sweep. The status literals let the planner use
-- idx_workflow_status_deadline.
WITH timed_out AS (
    SELECT workflow_uuid FROM {{schema}}.workflow_status
    WHERE status IN ('ENQUEUED', 'PENDING', 'DELAYED')
      AND workflow_deadline_epoch_ms IS NOT NULL
      AND workflow_deadline_epoch_ms <= (EXTRACT(epoch FROM now()) * 1000)::bigint
      AND ($2::text IS NULL OR application_name = $2 OR application_name IS NULL)
    ORDER BY workflow_deadline_epoch_ms
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), cancelled AS (
    UPDATE {{schema}}.workflow_status AS w
    SET status = 'CANCELLED',
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        completed_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        started_at_epoch_ms = NULL, queue_name = NULL, deduplication_id = NULL, owner_xid = NULL
    FROM timed_out
    WHERE w.workflow_uuid = timed_out.workflow_uuid
    RETURNING w.workflow_uuid, w.workflow_deadline_epoch_ms
)
SELECT workflow_uuid FROM cancelled
ORDER BY workflow_deadline_epoch_ms, workflow_uuid

-- name: WorkflowDebounceBounce
-- Pushes back the debounced DELAYED workflow of (name, queue, key), capped at
-- its debounce deadline. The name is matched so that two workflows whose
-- keys collide never overwrite each other's inputs; another application's
-- workflow is never bounced, an unclaimed one is claimed.
UPDATE {{schema}}.workflow_status
SET delay_until_epoch_ms = CASE
        WHEN debounce_deadline_epoch_ms IS NOT NULL AND debounce_deadline_epoch_ms < $1
        THEN debounce_deadline_epoch_ms
        ELSE $1
    END,
    serialization = $2,
    updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
    application_name = COALESCE(application_name, $6)
WHERE name = $3 AND queue_name = $4 AND deduplication_id = $5
  AND status = 'DELAYED' AND is_debounced = TRUE
  AND ($6::text IS NULL OR application_name = $6 OR application_name IS NULL)
RETURNING workflow_uuid

-- name: WorkflowInputReplace
INSERT INTO {{schema}}.workflow_input (workflow_uuid, inputs)
VALUES ($1, $2)
ON CONFLICT (workflow_uuid) DO UPDATE SET inputs = EXCLUDED.inputs

-- name: WorkflowDebounceHolder
-- Not scoped to an application: a holder that blocked the bounce is reported.
SELECT workflow_uuid, is_debounced, name, application_name
FROM {{schema}}.workflow_status
WHERE queue_name = $1 AND deduplication_id = $2

-- name: VersionClaim
-- Claims a row registered before applications shared the database, in place:
-- the version keeps its timestamp.
UPDATE {{schema}}.application_versions SET application_name = $2
WHERE version_name = $1 AND application_name IS NULL

-- name: VersionInsert
-- A new version is the latest of what its application sees: its timestamp is
-- now, or just past a latest that a promotion moved beyond now. Targetless
-- DO NOTHING absorbs a concurrent registration of the name.
INSERT INTO {{schema}}.application_versions (version_id, version_name, version_timestamp, created_at, application_name)
SELECT gen_random_uuid()::text, $1,
       GREATEST((EXTRACT(epoch FROM now()) * 1000)::bigint, COALESCE(MAX(version_timestamp), 0) + 1),
       (EXTRACT(epoch FROM now()) * 1000)::bigint, $2
FROM {{schema}}.application_versions
WHERE $2::text IS NULL OR application_name = $2 OR application_name IS NULL
ON CONFLICT DO NOTHING

-- name: VersionOwner
SELECT application_name FROM {{schema}}.application_versions WHERE version_name = $1

-- name: VersionOwnerLock
SELECT application_name FROM {{schema}}.application_versions WHERE version_name = $1 FOR UPDATE

-- name: VersionList
SELECT version_id, version_name, version_timestamp, created_at, application_name
FROM {{schema}}.application_versions
WHERE $1::text IS NULL OR application_name = $1 OR application_name IS NULL
ORDER BY version_timestamp DESC, created_at DESC, version_name DESC

-- name: VersionPromote
-- The timestamp becomes now on the database clock, bumped past the current
-- latest so the promoted version sorts ahead even within one millisecond.
-- $3 is the resolved owner: the row is stamped with it (claiming an
-- unclaimed row, which would otherwise be every application's latest).
UPDATE {{schema}}.application_versions
SET version_timestamp = GREATEST(
        (EXTRACT(epoch FROM now()) * 1000)::bigint,
        (SELECT COALESCE(MAX(version_timestamp), 0) + 1 FROM {{schema}}.application_versions
         WHERE $2::text IS NULL OR application_name = $2 OR application_name IS NULL)),
    application_name = $3
WHERE version_name = $1 AND (application_name = $3 OR application_name IS NULL)

-- name: ScheduleInsert
INSERT INTO {{schema}}.workflow_schedules (
    schedule_id, schedule_name, workflow_name, workflow_class_name, schedule, status, context,
    last_fired_at, automatic_backfill, cron_timezone, queue_name, application_name
) VALUES (COALESCE(NULLIF($1, ''), gen_random_uuid()::text), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (schedule_name) DO NOTHING
RETURNING schedule_id

-- name: ScheduleOwner
SELECT application_name FROM {{schema}}.workflow_schedules WHERE schedule_name = $1

-- name: ScheduleSetStatus
UPDATE {{schema}}.workflow_schedules SET status = $2 WHERE schedule_name = $1

-- name: ScheduleDelete
DELETE FROM {{schema}}.workflow_schedules WHERE schedule_name = $1

-- name: ScheduleLastFiredLock
SELECT last_fired_at FROM {{schema}}.workflow_schedules WHERE schedule_name = $1 FOR UPDATE

-- name: ScheduleSetLastFired
UPDATE {{schema}}.workflow_schedules SET last_fired_at = $2 WHERE schedule_name = $1

-- name: StepListMany
SELECT workflow_uuid, function_id, function_name, output, error, serialization, child_workflow_id,
       started_at_epoch_ms, completed_at_epoch_ms
FROM {{schema}}.operation_outputs
WHERE workflow_uuid = ANY($1)
ORDER BY workflow_uuid, function_id
