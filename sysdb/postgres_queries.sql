-- The fixed statements of the Postgres backend. Each starts with a
-- "-- name: X" line; {{schema}} is replaced by the quoted schema name when the
-- backend opens. Queries whose shape depends on the request (listing filters)
-- are built in Go from the columns named here.

-- name: WorkflowInsert
-- The row and its inputs in one statement. On conflict the row is left as it
-- is (the no-op update makes RETURNING report the stored row); the caller
-- compares creator_xid to learn whether this request made it, and the inputs
-- are written only by the request that made it (again, harmlessly, by its
-- retry). A duplicate deduplication id fails the whole statement.
--
-- created_at is a queue's order: every DBOS SDK's dequeue takes the ENQUEUED
-- rows by (priority, created_at) with no tie-break (the schema is DBOS's: no
-- sequence may be added, and workflow_uuid is random), and a millisecond
-- holds many enqueues. So an enqueued (or delayed) row is stamped at least
-- one above every row of its queue and priority that waits ENQUEUED
-- (whoever wrote it, on whatever clock), else at the database clock: an
-- enqueue made after another's returned sorts after it for every reader;
-- two in flight at once may tie, as concurrent enqueues have no order.
-- Values run ahead of the clock only while a queue and priority gets more
-- than an enqueue a millisecond. The maximum is a top-1 probe of the
-- dequeue index (queue_name, status, priority, created_at).
WITH clock AS (
    SELECT (EXTRACT(epoch FROM now()) * 1000)::bigint AS now_ms
), stamp AS (
    SELECT CASE WHEN $6::text IS NOT NULL AND $2 IN ('ENQUEUED', 'DELAYED') THEN GREATEST(clock.now_ms, (
        SELECT w.created_at + 1 FROM {{schema}}.workflow_status w
        WHERE w.queue_name = $6 AND w.status = 'ENQUEUED' AND w.priority = $9
        ORDER BY w.created_at DESC LIMIT 1
    )) ELSE clock.now_ms END AS created_at, clock.now_ms
    FROM clock
), stored AS (
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
        (SELECT created_at FROM stamp), (SELECT now_ms FROM stamp),
        CASE WHEN $2 = 'PENDING' THEN 1 ELSE 0 END,
        $17, $18, $19,
        $20, $21::jsonb, $22,
        $23, $24, $25,
        $26, CASE WHEN $2 = 'PENDING' THEN $26 END
    )
    ON CONFLICT (workflow_uuid) DO UPDATE SET creator_xid = workflow_status.creator_xid
    RETURNING status, name, class_name, config_name, queue_name, queue_partition_key,
        workflow_timeout_ms, workflow_deadline_epoch_ms, owner_xid, creator_xid
), inputs AS (
    INSERT INTO {{schema}}.workflow_input (workflow_uuid, inputs)
    SELECT $1, $27 FROM stored WHERE stored.creator_xid = $26
    ON CONFLICT (workflow_uuid) DO NOTHING
    RETURNING 1
)
-- inputs is referenced so the reader sees it ran (data-modifying CTEs run
-- regardless).
SELECT * FROM stored WHERE (SELECT count(*) FROM inputs) >= 0

-- name: WorkflowFinishMany
-- A batch of outcomes in one statement, so one round trip and one commit in
-- autocommit: each is written only while its run still owns the PENDING row.
-- locked takes the rows in a fixed order (concurrent batches, and the step
-- batches that lock the same way, cannot deadlock); under READ COMMITTED a
-- row changed meanwhile is re-read against the conditions. The output upsert
-- overwrites: an earlier run that was cancelled or dead-lettered may have
-- left an outcome behind, and the winning run's outcome is the one that
-- counts. The result lists the outcomes that were applied.
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
        AS i(workflow_uuid, owner_xid, status, output, error)
), locked AS (
    SELECT ws.workflow_uuid FROM {{schema}}.workflow_status ws
    WHERE ws.workflow_uuid = ANY($1)
    ORDER BY ws.workflow_uuid
    FOR NO KEY UPDATE
), done AS (
    UPDATE {{schema}}.workflow_status ws
    SET status = i.status,
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        completed_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        deduplication_id = NULL,
        owner_xid = NULL
    FROM input i
    WHERE ws.workflow_uuid = i.workflow_uuid AND ws.status = 'PENDING' AND ws.owner_xid = i.owner_xid
      AND ws.workflow_uuid IN (SELECT workflow_uuid FROM locked)
    RETURNING ws.workflow_uuid, i.owner_xid, ws.serialization
), stored AS (
    INSERT INTO {{schema}}.workflow_output (workflow_uuid, output, error)
    SELECT d.workflow_uuid, i.output, i.error
    FROM done d JOIN input i ON i.workflow_uuid = d.workflow_uuid AND i.owner_xid = d.owner_xid
    ON CONFLICT (workflow_uuid) DO UPDATE SET output = EXCLUDED.output, error = EXCLUDED.error
    RETURNING workflow_uuid
)
-- stored is referenced so the reader sees it ran (data-modifying CTEs run
-- regardless).
SELECT workflow_uuid, owner_xid, serialization FROM done WHERE (SELECT count(*) FROM stored) >= 0

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
      AND (NOT $3 OR (SELECT count(*) FROM existing) = (SELECT count(DISTINCT id) FROM unnest($1::text[]) id))
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
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
    FROM unnest($1::text[], $2::text[]) AS c(workflow_uuid, owner_xid)
    WHERE w.workflow_uuid = c.workflow_uuid AND w.owner_xid = c.owner_xid AND w.status = 'PENDING'
    RETURNING w.workflow_uuid, w.queue_name

-- name: WorkflowOrphaned
-- The claims of one agent ($2: the prefix of the tokens it issues) on its
-- executor that have not changed for $3 ms; the agent keeps those no live
-- run holds. The ordering makes batches progress through a backlog.
SELECT workflow_uuid, owner_xid FROM {{schema}}.workflow_status
WHERE status = 'PENDING' AND executor_id = $1
  AND starts_with(owner_xid, $2::text)
  AND updated_at <= (EXTRACT(epoch FROM now()) * 1000)::bigint - $3
  AND owner_xid <> ALL($5::text[])
ORDER BY updated_at, workflow_uuid
LIMIT $4

-- name: WorkflowUnclaim
-- Claims that never reached a worker go back as they were: the claim counts
-- as no attempt and no start against a rate limit, and where the claim
-- carries what it overwrote ($4 true) the version, application, executor
-- and deadline it stamped are restored ($5..$8).
UPDATE {{schema}}.workflow_status AS w
    SET status = 'ENQUEUED', owner_xid = NULL, started_at_epoch_ms = NULL,
        queue_name = COALESCE(NULLIF(w.queue_name, ''), $3),
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint,
        recovery_attempts = GREATEST(w.recovery_attempts - 1, 0),
        rate_limited = false,
        application_version = CASE WHEN c.restore THEN c.application_version ELSE w.application_version END,
        application_name = CASE WHEN c.restore THEN c.application_name ELSE w.application_name END,
        executor_id = CASE WHEN c.restore THEN c.executor_id ELSE w.executor_id END,
        workflow_deadline_epoch_ms = CASE WHEN c.restore THEN c.deadline ELSE w.workflow_deadline_epoch_ms END
    FROM unnest($1::text[], $2::text[], $4::boolean[], $5::text[], $6::text[], $7::text[], $8::bigint[])
        AS c(workflow_uuid, owner_xid, restore, application_version, application_name, executor_id, deadline)
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

-- name: StepRecordOne
-- StepRecordMany for a batch of one record, as most are when few steps are
-- in flight: the same lock, insert and result, with the record's values as
-- parameters instead of arrays to unnest and join (measured with pgbench at
-- one in flight: 0.38 ms a commit against 0.45, and 211 µs of Postgres CPU
-- against 262).
WITH owners AS (
    SELECT workflow_uuid, owner_xid FROM {{schema}}.workflow_status
    WHERE workflow_uuid = $1
    FOR NO KEY UPDATE
), inserted AS (
    INSERT INTO {{schema}}.operation_outputs (
        workflow_uuid, function_id, function_name, output, error, serialization,
        child_workflow_id, started_at_epoch_ms, completed_at_epoch_ms, application_name
    )
    SELECT o.workflow_uuid, $2, $4, $5, $6, $7, $8, $9, $10, $11
    FROM owners o WHERE o.owner_xid = $3
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
-- A claimer without a version ("") leaves the row unversioned (NULL), the
-- one way a row says it has none.
-- The instants are the clock's now, not the transaction's start (now()):
-- a dequeue transaction may have begun before the row's insert committed,
-- and a deadline counted from then would cut the workflow's timeout short.
UPDATE {{schema}}.workflow_status
SET status = 'PENDING',
    application_version = NULLIF($2, ''),
    executor_id = $3,
    owner_xid = $6::text || gen_random_uuid()::text,
    started_at_epoch_ms = (EXTRACT(epoch FROM clock_timestamp()) * 1000)::bigint,
    updated_at = (EXTRACT(epoch FROM clock_timestamp()) * 1000)::bigint,
    rate_limited = $4,
    recovery_attempts = recovery_attempts + 1,
    workflow_deadline_epoch_ms = CASE
        WHEN workflow_timeout_ms IS NOT NULL AND workflow_deadline_epoch_ms IS NULL
        THEN (EXTRACT(epoch FROM clock_timestamp()) * 1000)::bigint + workflow_timeout_ms
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

-- name: WorkflowSetPriority
UPDATE {{schema}}.workflow_status
SET priority = $2, updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
WHERE workflow_uuid = $1 AND status IN ('ENQUEUED', 'DELAYED')

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

-- name: DebounceStepRecord
-- The caller's step of a debounce from workflow code, written after
-- WorkflowOwnerLock and the bounce, in their transaction.
INSERT INTO {{schema}}.operation_outputs (
    workflow_uuid, function_id, function_name, output, serialization,
    started_at_epoch_ms, completed_at_epoch_ms, application_name
) VALUES (
    $1, $2, $3, $4, $5,
    (EXTRACT(epoch FROM now()) * 1000)::bigint, (EXTRACT(epoch FROM now()) * 1000)::bigint, $6
)

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

-- ---------------------------------------------------------------------------
-- Messages, events, streams, sleeps, fork, rewind and attributes
-- (Communication). A write made for a running workflow is sent in one batch
-- after WorkflowOwnerLock: one round trip, one implicit transaction, and the
-- statement's snapshot is taken once the lock is held, so it sees every
-- write of the runs that held the lock before.

-- name: WorkflowOwnerLock
-- The same lock StepRecordMany takes: every change of owner_xid (finish,
-- cancel, recovery, claim) waits for it, and so does every other fenced write.
SELECT owner_xid FROM {{schema}}.workflow_status WHERE workflow_uuid = $1 FOR NO KEY UPDATE

-- name: StepGate
-- Shared CTEs of a write recorded as a step. The including statement defines
-- "blocked" first (a row there means the write must not happen: a missing
-- destination, a closed stream). $1 the caller's workflow (NULL: no caller),
-- $2 its owner token, $3 the step id, $4 the step name, $5 whether to record
-- the step (false from inside a step), $6 the application name. "allowed"
-- has a row when the write may go ahead: the caller owns its workflow,
-- nothing blocks, and the step (when recorded) is this call's. A step met
-- at the id is left as it is, and the write skipped: the caller compares the
-- name recorded.
fence AS (
    SELECT 1 WHERE $1::text IS NULL OR EXISTS (
        SELECT 1 FROM {{schema}}.workflow_status WHERE workflow_uuid = $1 AND owner_xid = $2::text)
), recorded AS (
    SELECT function_name FROM {{schema}}.operation_outputs
    WHERE $5::boolean AND workflow_uuid = $1 AND function_id = $3::int4
), step AS (
    INSERT INTO {{schema}}.operation_outputs (
        workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms, application_name
    )
    SELECT $1, $3, $4::text, (EXTRACT(epoch FROM now()) * 1000)::bigint, (EXTRACT(epoch FROM now()) * 1000)::bigint, $6::text
    FROM fence
    WHERE $5 AND NOT EXISTS (SELECT 1 FROM recorded) AND NOT EXISTS (SELECT 1 FROM blocked)
    ON CONFLICT (workflow_uuid, function_id) DO NOTHING
    RETURNING 1
), allowed AS (
    SELECT 1 FROM fence
    WHERE NOT EXISTS (SELECT 1 FROM blocked) AND (NOT $5 OR EXISTS (SELECT 1 FROM step))
)

-- name: StepGateResult
-- The first columns every StepGate statement returns.
EXISTS (SELECT 1 FROM fence), (SELECT function_name FROM recorded), EXISTS (SELECT 1 FROM step),
EXISTS (SELECT 1 FROM blocked)

-- name: MessageSend
-- $7..$12 the messages (destination, topic, message, serialization, random
-- id, idempotency key), $13 whether to deliver to the destinations' forks
-- too. Forks are resolved here, in the insert's snapshot. A message's id is
-- "<idempotency key>::<destination>", else its random id (a fork's copy: a
-- uuid derived from it), so a retried send inserts nothing twice. Missing
-- destinations block the whole send.
--
-- created_at_epoch_ms is the order: every DBOS SDK's recv takes the oldest
-- unconsumed message by it alone, with no tie-break, and a millisecond holds
-- many sends (a bulk shares its transaction's now()). So each destination
-- gets strictly increasing values, across its topics (listings order by it
-- too): a message lands after every message already there (whoever wrote
-- it, on whatever clock), and a bulk's messages, in their list order, end
-- at the database clock (the earlier ones the milliseconds before, never at
-- or below one already there). A sender's next send sees its last, so one
-- sender's messages keep their order for every reader; two sends in flight
-- at once may tie, as concurrent sends have no order. Values run ahead of
-- the clock only while a destination gets more than a message a millisecond.
WITH RECURSIVE msgs AS (
    SELECT * FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
        WITH ORDINALITY AS m(destination, topic, message, serialization, random_id, idempotency_key, ord)
), forks(root, id) AS (
    SELECT w.forked_from, w.workflow_uuid FROM {{schema}}.workflow_status w
    WHERE $13::boolean AND w.forked_from IN (SELECT destination FROM msgs)
    UNION
    SELECT f.root, w.workflow_uuid FROM {{schema}}.workflow_status w JOIN forks f ON w.forked_from = f.id
), blocked AS (
    SELECT DISTINCT m.destination FROM msgs m
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.workflow_status w WHERE w.workflow_uuid = m.destination)
), {{> StepGate}}, targeted AS (
    SELECT u.*,
           row_number() OVER (PARTITION BY u.target ORDER BY u.ord, u.depth) - 1 AS nth,
           count(*) OVER (PARTITION BY u.target) AS of_target
    FROM (
        SELECT m.*, m.destination AS target, 0 AS depth FROM msgs m
        UNION ALL
        SELECT m.*, f.id, 1 FROM msgs m JOIN forks f ON f.root = m.destination
    ) u
), base AS (
    SELECT k.target,
           GREATEST((EXTRACT(epoch FROM now()) * 1000)::bigint - (k.of_target - 1),
                    (SELECT max(n.created_at_epoch_ms) + 1 FROM {{schema}}.notifications n
                     WHERE n.destination_uuid = k.target)) AS first_at
    FROM (SELECT DISTINCT target, of_target FROM targeted) k
), sent AS (
    INSERT INTO {{schema}}.notifications (destination_uuid, topic, message, serialization, message_uuid, created_at_epoch_ms)
    SELECT t.target, t.topic, t.message, t.serialization,
           COALESCE(t.idempotency_key || '::' || t.target,
                    CASE WHEN t.depth = 0 THEN t.random_id ELSE md5(t.random_id || '::' || t.target)::uuid::text END),
           b.first_at + t.nth
    FROM targeted t JOIN base b ON b.target = t.target
    WHERE EXISTS (SELECT 1 FROM allowed)
    ORDER BY t.ord, t.depth, t.target
    ON CONFLICT (message_uuid) DO NOTHING
    RETURNING 1
)
SELECT {{> StepGateResult}}, ARRAY(SELECT destination FROM blocked ORDER BY destination), (SELECT count(*) FROM sent)

-- name: MessageConsume
-- $1 workflow, $2 owner, $3 step id, $4 topic, $5/$6 what to record when no
-- message waits, $7 application name, $8 record nothing when no message
-- waits, $9 when the recv began (epoch ms; NULL: now). The oldest message is taken with SKIP
-- LOCKED, so concurrent consumers never get the same one, and only when the
-- step is not recorded yet. The step insert has no ON CONFLICT: meeting a
-- record fails the statement, which puts the message back.
WITH fence AS (
    SELECT 1 FROM {{schema}}.workflow_status WHERE workflow_uuid = $1 AND owner_xid = $2
), recorded AS (
    SELECT function_name, output, serialization FROM {{schema}}.operation_outputs
    WHERE workflow_uuid = $1 AND function_id = $3
), consumed AS (
    UPDATE {{schema}}.notifications SET consumed = true, consumed_by_function_id = $3
    WHERE message_uuid = (
        SELECT message_uuid FROM {{schema}}.notifications
        WHERE destination_uuid = $1 AND topic = $4 AND NOT consumed
          AND EXISTS (SELECT 1 FROM fence) AND NOT EXISTS (SELECT 1 FROM recorded)
        ORDER BY created_at_epoch_ms
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )
    RETURNING message, serialization
), step AS (
    INSERT INTO {{schema}}.operation_outputs (
        workflow_uuid, function_id, function_name, output, serialization,
        started_at_epoch_ms, completed_at_epoch_ms, application_name
    )
    SELECT $1, $3, 'DBOS.recv',
           CASE WHEN c.message IS NULL THEN $5::text ELSE c.message END,
           CASE WHEN c.message IS NULL THEN $6::text ELSE c.serialization END,
           COALESCE($9::bigint, (EXTRACT(epoch FROM now()) * 1000)::bigint), (EXTRACT(epoch FROM now()) * 1000)::bigint, $7::text
    FROM fence LEFT JOIN consumed c ON true
    WHERE NOT EXISTS (SELECT 1 FROM recorded) AND (NOT $8::boolean OR c.message IS NOT NULL)
    RETURNING output, serialization
)
SELECT EXISTS (SELECT 1 FROM fence),
       (SELECT function_name FROM recorded), (SELECT output FROM recorded), (SELECT serialization FROM recorded),
       EXISTS (SELECT 1 FROM step), EXISTS (SELECT 1 FROM consumed),
       (SELECT output FROM step), (SELECT serialization FROM step)

-- name: MessageList
SELECT destination_uuid, topic, message, serialization, message_uuid, created_at_epoch_ms,
       consumed, consumed_by_function_id
FROM {{schema}}.notifications
WHERE destination_uuid = $1
ORDER BY created_at_epoch_ms, message_uuid

-- name: SleepRecord
-- $1 workflow, $2 owner, $3 step id, $4 duration in ms, $5 whether to record,
-- $6 application name, $7 record the wake time as the completion (a sleep's
-- span is the sleep; a wait's deadline is registered as an instant), $8 the
-- wake time's format: false as DBOS Python records it (JSON epoch seconds, a
-- float), true as DBOS TypeScript does (JSON epoch ms, an integer). Both times
-- come from one truncated clock reading, so a projected span is exactly the
-- duration. Two racing calls agree: the loser reads the winner's.
WITH clock AS (
    SELECT floor(EXTRACT(epoch FROM now()) * 1000)::bigint AS now_ms
), fence AS (
    SELECT 1 FROM {{schema}}.workflow_status WHERE workflow_uuid = $1 AND owner_xid = $2
), recorded AS (
    SELECT function_name, output FROM {{schema}}.operation_outputs
    WHERE $5::boolean AND workflow_uuid = $1 AND function_id = $3
), step AS (
    INSERT INTO {{schema}}.operation_outputs (
        workflow_uuid, function_id, function_name, output, serialization,
        started_at_epoch_ms, completed_at_epoch_ms, application_name
    )
    SELECT $1, $3, 'DBOS.sleep',
           CASE WHEN $8::boolean THEN to_json(clock.now_ms + $4::bigint)::text
                ELSE to_json(round((clock.now_ms + $4::bigint) / 1000.0, 3))::text END,
           'portable_json',
           clock.now_ms, CASE WHEN $7::boolean THEN clock.now_ms + $4::bigint ELSE clock.now_ms END, $6::text
    FROM fence, clock
    WHERE $5 AND NOT EXISTS (SELECT 1 FROM recorded)
    ON CONFLICT (workflow_uuid, function_id) DO NOTHING
    RETURNING output
)
SELECT EXISTS (SELECT 1 FROM fence), (SELECT function_name FROM recorded),
       COALESCE((SELECT output FROM step), (SELECT output FROM recorded)),
       (SELECT now_ms FROM clock)

-- name: EventSet
-- $7 key, $8 value, $9 serialization. The history row is keyed by the step
-- id: from inside a step, the step's id.
WITH blocked AS (
    SELECT 1 WHERE false
), {{> StepGate}}, event AS (
    INSERT INTO {{schema}}.workflow_events (workflow_uuid, key, value, serialization)
    SELECT $1, $7, $8, $9 FROM allowed
    ON CONFLICT (workflow_uuid, key) DO UPDATE SET value = EXCLUDED.value, serialization = EXCLUDED.serialization
    RETURNING 1
), history AS (
    INSERT INTO {{schema}}.workflow_events_history (workflow_uuid, function_id, key, value, serialization)
    SELECT $1, $3, $7, $8, $9 FROM allowed
    ON CONFLICT (workflow_uuid, function_id, key) DO UPDATE SET value = EXCLUDED.value, serialization = EXCLUDED.serialization
    RETURNING 1
)
SELECT {{> StepGateResult}}, EXISTS (SELECT 1 FROM event) AND EXISTS (SELECT 1 FROM history)

-- name: EventGet
SELECT value, serialization FROM {{schema}}.workflow_events WHERE workflow_uuid = $1 AND key = $2

-- name: EventList
SELECT key, value, serialization FROM {{schema}}.workflow_events WHERE workflow_uuid = $1 ORDER BY key

-- name: EventHistory
SELECT function_id, key, value, serialization FROM {{schema}}.workflow_events_history
WHERE workflow_uuid = $1
ORDER BY function_id, key

-- name: StreamClosed
-- Whether a streams row is a closing marker: the portable one every SDK
-- writes now, or the bare sentinel the Go SDK writes.
((value = '"__DBOS_STREAM_CLOSED__"' AND serialization = 'portable_json') OR value = '__DBOS_STREAM_CLOSED__')

-- name: StreamWrite
-- $7 key, $8 value, $9 serialization. The offset is the next free one; a
-- writer that did not take the workflow's lock can race for it (a unique
-- violation the caller retries). Nothing blocks it: as DBOS Python 3.4, a
-- write after the closing marker is appended and never read (readers stop
-- at the marker).
WITH blocked AS (
    SELECT 1 WHERE false
), {{> StepGate}}, written AS (
    INSERT INTO {{schema}}.streams (workflow_uuid, key, value, "offset", function_id, serialization)
    SELECT $1, $7, $8,
           COALESCE((SELECT MAX("offset") FROM {{schema}}.streams WHERE workflow_uuid = $1 AND key = $7), -1) + 1,
           $3, $9
    FROM allowed
    RETURNING "offset"
)
SELECT {{> StepGateResult}}, EXISTS (SELECT 1 FROM written)

-- name: StreamRead
-- The writer's status and the stream's values in [$3, $4] from one
-- snapshot ($4 NULL: to the end); the caller keeps the consecutive ones.
SELECT w.status, s."offset", s.value, s.serialization, s.function_id
FROM {{schema}}.workflow_status w
LEFT JOIN {{schema}}.streams s
  ON s.workflow_uuid = w.workflow_uuid AND s.key = $2 AND s."offset" >= $3
 AND ($4::int4 IS NULL OR s."offset" <= $4)
WHERE w.workflow_uuid = $1
ORDER BY s."offset"

-- name: StreamList
SELECT key, "offset", value, serialization, function_id FROM {{schema}}.streams
WHERE workflow_uuid = $1
ORDER BY key, "offset"

-- name: StepGet
SELECT function_id, function_name, output, error, serialization, child_workflow_id,
       started_at_epoch_ms, completed_at_epoch_ms
FROM {{schema}}.operation_outputs
WHERE workflow_uuid = $1 AND function_id = $2

-- name: ChildStepRecord
-- A parent's step pointing at the child it started, while the parent's run
-- still owns it (its row is locked by WorkflowOwnerLock first). Returns
-- whether this call recorded it, and what the step holds.
WITH inserted AS (
    INSERT INTO {{schema}}.operation_outputs (
        workflow_uuid, function_id, function_name, child_workflow_id,
        started_at_epoch_ms, completed_at_epoch_ms, application_name
    )
    SELECT $1, $3, $4, $5,
           (EXTRACT(epoch FROM now()) * 1000)::bigint, (EXTRACT(epoch FROM now()) * 1000)::bigint, $6
    FROM {{schema}}.workflow_status
    WHERE workflow_uuid = $1 AND owner_xid = $2
    ON CONFLICT (workflow_uuid, function_id) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM inserted), o.function_name, o.child_workflow_id
FROM (SELECT 1) AS one
LEFT JOIN {{schema}}.operation_outputs o ON o.workflow_uuid = $1 AND o.function_id = $3

-- name: WorkflowFork
-- One statement: the fork is inserted (a fork already made under that id by
-- an earlier attempt is left alone) and everything else is copied only when
-- this statement inserted it. $1 original, $2 fork, $3 start step, $4
-- application version (NULL: the original's), $5 queue, $6 partition key,
-- $7 timeout, $8 owner when the original has none, $9/$10 child ids
-- replaced (old, new). Steps are copied from start step 1 on: DBOS
-- TypeScript numbers its first step 0 (DBOS Python 1, where a fork from 1
-- finds nothing below it to copy).
WITH original AS (
    SELECT w.*, COALESCE(i.inputs, w.inputs) AS original_inputs
    FROM {{schema}}.workflow_status w
    LEFT JOIN {{schema}}.workflow_input i ON i.workflow_uuid = w.workflow_uuid
    WHERE w.workflow_uuid = $1
), forked AS (
    INSERT INTO {{schema}}.workflow_status (
        workflow_uuid, status, name, class_name, config_name, application_id,
        authenticated_user, authenticated_roles, assumed_role, serialization, attributes, application_name,
        forked_from, queue_name, queue_partition_key, application_version, workflow_timeout_ms,
        recovery_attempts, created_at, updated_at
    )
    SELECT $2, 'ENQUEUED', o.name, o.class_name, o.config_name, o.application_id,
           o.authenticated_user, o.authenticated_roles, o.assumed_role, o.serialization, o.attributes,
           COALESCE(o.application_name, $8::text),
           $1, $5, $6, COALESCE($4::text, o.application_version), $7,
           0, (EXTRACT(epoch FROM now()) * 1000)::bigint, (EXTRACT(epoch FROM now()) * 1000)::bigint
    FROM original o
    ON CONFLICT (workflow_uuid) DO NOTHING
    RETURNING workflow_uuid, application_name
), inputs AS (
    INSERT INTO {{schema}}.workflow_input (workflow_uuid, inputs)
    SELECT f.workflow_uuid, o.original_inputs FROM forked f CROSS JOIN original o
    ON CONFLICT (workflow_uuid) DO UPDATE SET inputs = EXCLUDED.inputs
    RETURNING 1
), marked AS (
    UPDATE {{schema}}.workflow_status SET was_forked_from = TRUE
    WHERE workflow_uuid = $1 AND EXISTS (SELECT 1 FROM forked)
    RETURNING 1
), steps AS (
    INSERT INTO {{schema}}.operation_outputs (
        workflow_uuid, function_id, function_name, output, error, serialization, child_workflow_id,
        started_at_epoch_ms, completed_at_epoch_ms, application_name
    )
    SELECT f.workflow_uuid, s.function_id, s.function_name, s.output, s.error, s.serialization,
           COALESCE(r.new_id, s.child_workflow_id), s.started_at_epoch_ms, s.completed_at_epoch_ms, f.application_name
    FROM forked f
    JOIN {{schema}}.operation_outputs s ON s.workflow_uuid = $1 AND s.function_id < $3::int4
    LEFT JOIN unnest($9::text[], $10::text[]) AS r(old_id, new_id) ON r.old_id = s.child_workflow_id
    WHERE $3 > 0
    RETURNING 1
), history AS (
    INSERT INTO {{schema}}.workflow_events_history (workflow_uuid, function_id, key, value, serialization)
    SELECT f.workflow_uuid, h.function_id, h.key, h.value, h.serialization
    FROM forked f
    JOIN {{schema}}.workflow_events_history h ON h.workflow_uuid = $1 AND h.function_id < $3
    WHERE $3 > 0
    RETURNING 1
), events AS (
    INSERT INTO {{schema}}.workflow_events (workflow_uuid, key, value, serialization)
    SELECT DISTINCT ON (h.key) f.workflow_uuid, h.key, h.value, h.serialization
    FROM forked f
    JOIN {{schema}}.workflow_events_history h ON h.workflow_uuid = $1 AND h.function_id < $3
    WHERE $3 > 0
    ORDER BY h.key, h.function_id DESC
    RETURNING 1
), streams AS (
    INSERT INTO {{schema}}.streams (workflow_uuid, key, value, "offset", function_id, serialization)
    SELECT f.workflow_uuid, s.key, s.value, s."offset", s.function_id, s.serialization
    FROM forked f
    JOIN {{schema}}.streams s ON s.workflow_uuid = $1 AND s.function_id < $3
    WHERE $3 > 0
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM original), EXISTS (SELECT 1 FROM forked),
       (SELECT forked_from FROM {{schema}}.workflow_status WHERE workflow_uuid = $2)

-- name: WorkflowRewind
-- One statement: the cut applies only when the status update does, which a
-- concurrent change of the row (a resume, a claim) stops. Events whose key
-- the discarded run published are restored to the last value published
-- below the cut (workflow_events_history is the undo log), or unpublished.
-- $1 workflow, $2 start step, $3 queue, $4 partition key, $5 application
-- version (NULL keeps the recorded one).
WITH current_status AS (
    SELECT status FROM {{schema}}.workflow_status WHERE workflow_uuid = $1
), rewound AS (
    UPDATE {{schema}}.workflow_status
    SET status = 'ENQUEUED', queue_name = $3, queue_partition_key = $4,
        application_version = COALESCE($5::text, application_version),
        recovery_attempts = 0, workflow_deadline_epoch_ms = NULL, deduplication_id = NULL, owner_xid = NULL,
        started_at_epoch_ms = NULL, completed_at = NULL, output = NULL, error = NULL,
        updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
    WHERE workflow_uuid = $1 AND COALESCE(status, '') NOT IN ('PENDING', 'ENQUEUED', 'DELAYED')
    RETURNING 1
), discarded AS (
    SELECT DISTINCT key FROM {{schema}}.workflow_events_history WHERE workflow_uuid = $1 AND function_id >= $2::int4
), surviving AS (
    SELECT DISTINCT ON (h.key) h.key, h.value, h.serialization
    FROM {{schema}}.workflow_events_history h JOIN discarded d ON d.key = h.key
    WHERE h.workflow_uuid = $1 AND h.function_id < $2
    ORDER BY h.key, h.function_id DESC
), restored AS (
    INSERT INTO {{schema}}.workflow_events (workflow_uuid, key, value, serialization)
    SELECT $1, key, value, serialization FROM surviving WHERE EXISTS (SELECT 1 FROM rewound)
    ON CONFLICT (workflow_uuid, key) DO UPDATE SET value = EXCLUDED.value, serialization = EXCLUDED.serialization
    RETURNING 1
), unpublished AS (
    DELETE FROM {{schema}}.workflow_events e
    WHERE e.workflow_uuid = $1 AND e.key IN (SELECT key FROM discarded)
      AND e.key NOT IN (SELECT key FROM surviving) AND EXISTS (SELECT 1 FROM rewound)
    RETURNING 1
), reopened AS (
    DELETE FROM {{schema}}.streams
    WHERE workflow_uuid = $1 AND function_id >= $2 AND {{> StreamClosed}} AND EXISTS (SELECT 1 FROM rewound)
    RETURNING 1
), steps AS (
    DELETE FROM {{schema}}.operation_outputs
    WHERE workflow_uuid = $1 AND function_id >= $2 AND EXISTS (SELECT 1 FROM rewound)
    RETURNING 1
), history AS (
    DELETE FROM {{schema}}.workflow_events_history
    WHERE workflow_uuid = $1 AND function_id >= $2 AND EXISTS (SELECT 1 FROM rewound)
    RETURNING 1
), messages AS (
    DELETE FROM {{schema}}.notifications
    WHERE destination_uuid = $1 AND (consumed_by_function_id >= $2 OR NOT consumed) AND EXISTS (SELECT 1 FROM rewound)
    RETURNING 1
), outcome AS (
    DELETE FROM {{schema}}.workflow_output WHERE workflow_uuid = $1 AND EXISTS (SELECT 1 FROM rewound)
    RETURNING 1
)
SELECT (SELECT status FROM current_status), EXISTS (SELECT 1 FROM rewound)

-- name: WorkflowSetAttributes
UPDATE {{schema}}.workflow_status
SET attributes = CASE WHEN $3 THEN COALESCE(attributes, '{}'::jsonb) || $2::jsonb ELSE $2::jsonb END,
    updated_at = (EXTRACT(epoch FROM now()) * 1000)::bigint
WHERE workflow_uuid = $1
