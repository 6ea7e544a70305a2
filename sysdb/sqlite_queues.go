package sysdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The queue, version and schedule part of the SQLite backend, with the
// Postgres backend's semantics (postgres_queue_system.go is the spec). The
// differences come from SQLite itself: every write is one IMMEDIATE
// transaction on the one writer connection, so a write transaction is
// serialised against every other writer on the file (other handles, DBOS
// Python processes) and needs no row locks; there is no server clock, so
// instants are nowMS(); and there are no arrays, so a list is one JSON
// parameter read with json_each.

var _ QueueSystem = (*SQLite)(nil)

// boundArgs collects the arguments of a statement built in Go, numbering
// each placeholder (?N) so that one value can be referred to twice.
type boundArgs struct{ values []any }

// add binds v and returns its placeholder.
func (a *boundArgs) add(v any) string {
	a.values = append(a.values, v)
	return "?" + strconv.Itoa(len(a.values))
}

// list binds vs as one JSON array and returns the subquery an IN clause
// takes it from: one parameter for a list of any length (a claim without a
// bound may take more rows than SQLite has parameters).
func (a *boundArgs) list(vs []string) string {
	return "(SELECT value FROM json_each(" + a.add(sqliteList(vs)) + "))"
}

// sqliteRandomUUID is SQL for a fresh random (version 4) UUID in the
// canonical lowercase form newUUID makes, drawn anew for every row.
const sqliteRandomUUID = `(lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' ||
	substr(lower(hex(randomblob(2))), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) ||
	substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))))`

// ---------------------------------------------------------------------------
// Dequeue

// QueueDequeue implements SystemDatabase, with the DBOS SDKs' semantics (see
// Postgres.QueueDequeue). The limits are counted and the rows claimed in one
// write transaction, which SQLite serialises against every other writer on
// the file: two executors, in this process or another, can never both fill
// the same free slots, whatever their candidates, so neither row locks nor
// SERIALIZABLE are needed. Rows are taken in (priority, created_at) order.
// A claim rolled back by a locked file is retried whole (nothing of it was
// committed); a poll of a queue with nothing ENQUEUED ends on a reader.
func (s *SQLite) QueueDequeue(ctx context.Context, in QueueDequeueParams) ([]Workflow, error) {
	lim := in.Limits
	claimLimit, err := localClaimLimit(in)
	if err != nil || claimLimit == 0 {
		return nil, err
	}
	// Every poll of every queue would otherwise take the file's write lock,
	// even on an idle queue, holding up the other writers (DBOS apps
	// included). An index probe on a reader finds most polls empty without
	// it; a row committed after the probe is the next poll's.
	if waiting, err := s.queueHasWork(ctx, in.QueueName, in.PartitionKey); err != nil || !waiting {
		return nil, err
	}
	var claimed []Workflow
	err = s.write(ctx, "dequeue from queue "+in.QueueName, func(tx *sql.Tx) error {
		claimed = nil
		now := nowMS()
		// partition is "" for a queue-wide count.
		budget, err := sharedClaimLimit(in, claimLimit,
			func(period time.Duration, partition string) (int, error) {
				var recent int
				err := tx.QueryRowContext(ctx, sqliteRecentStartsSQL(partition),
					in.QueueName, now-period.Milliseconds(), in.ApplicationName, partition).Scan(&recent)
				return recent, err
			},
			func(partition string) (int, error) {
				var n int
				err := tx.QueryRowContext(ctx, sqliteRunningSQL(partition), in.QueueName, in.ApplicationName, partition).Scan(&n)
				return n, err
			})
		if err != nil {
			return err
		}
		if budget == 0 {
			return nil
		}
		candidates, before, err := s.dequeueCandidates(ctx, tx, in, budget)
		if err != nil || len(candidates) == 0 {
			return err
		}
		// Each claimed row gets its own owner token, its first start time,
		// its deadline from its timeout, and one more recovery attempt. A
		// claimer without a version ("") leaves the row unversioned.
		rateLimited := lim.RateLimitMax != nil || lim.PartitionRateLimitMax != nil
		// One statement for the whole claim: each row's token is drawn in
		// SQL (randomblob is evaluated per row), not bound row by row.
		var claimArgs boundArgs
		ids := claimArgs.list(candidates)
		_, err = tx.ExecContext(ctx, `UPDATE workflow_status
			SET status = 'PENDING',
			    application_version = NULLIF(?2, ''),
			    executor_id = ?3,
			    owner_xid = ?4 || `+sqliteRandomUUID+`,
			    started_at_epoch_ms = ?5,
			    updated_at = ?5,
			    rate_limited = ?6,
			    recovery_attempts = coalesce(recovery_attempts, 0) + 1,
			    workflow_deadline_epoch_ms = CASE
			        WHEN workflow_timeout_ms IS NOT NULL AND workflow_deadline_epoch_ms IS NULL
			        THEN ?5 + workflow_timeout_ms
			        ELSE workflow_deadline_epoch_ms
			    END,
			    application_name = coalesce(application_name, ?7)
			WHERE workflow_uuid IN `+ids+` AND status = 'ENQUEUED'`,
			append(claimArgs.values, in.ApplicationVersion, in.ExecutorID, in.OwnerPrefix, nowMS(), rateLimited, in.ApplicationName)...)
		if err != nil {
			return err
		}
		// The writer's own transaction sees its claims.
		var args boundArgs
		rows, err := tx.QueryContext(ctx, sqliteWorkflowSelect(true, false)+" WHERE w.workflow_uuid IN "+args.list(candidates), args.values...)
		if err != nil {
			return err
		}
		defer rows.Close()
		index := map[string]Workflow{}
		for rows.Next() {
			w, err := scanSQLiteWorkflow(rows, true, false)
			if err != nil {
				return err
			}
			index[w.ID] = w
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Dispatch in queue order.
		for _, id := range candidates {
			if w, ok := index[id]; ok {
				w.PreClaim = before[id]
				claimed = append(claimed, w)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// The dequeue statements write their status and rate_limited terms as the
// partial indexes' predicates are: SQLite uses a partial index only for a
// query that repeats its WHERE terms (status = 'PENDING' alone does not
// imply status IN ('ENQUEUED', 'PENDING') to its planner, and the candidate
// select scanned the table without it). sqlite_queues_plan_test.go holds
// them to their indexes.

// sqliteRecentStartsSQL counts the rate-limited starts since ?2 of queue
// ?1 (application ?3, partition ?4).
func sqliteRecentStartsSQL(partition string) string {
	return `SELECT count(*) FROM workflow_status
		WHERE queue_name = ?1 AND rate_limited = TRUE
		  AND status NOT IN ('ENQUEUED', 'DELAYED')
		  AND started_at_epoch_ms > ?2
		  AND (?3 IS NULL OR application_name = ?3 OR application_name IS NULL)` + partitionTerm(partition, "?4")
}

// sqliteRunningSQL counts the PENDING workflows of queue ?1 (application
// ?2, partition ?3).
func sqliteRunningSQL(partition string) string {
	return `SELECT count(*) FROM workflow_status
		WHERE queue_name = ?1 AND status = 'PENDING' AND status IN ('ENQUEUED', 'PENDING')
		  AND (?2 IS NULL OR application_name = ?2 OR application_name IS NULL)` + partitionTerm(partition, "?3")
}

// sqliteHasWorkSQL finds one ENQUEUED workflow of queue ?1 (partition ?2).
func sqliteHasWorkSQL(partition string) string {
	return `SELECT 1 FROM workflow_status
		WHERE queue_name = ?1 AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING')` + partitionTerm(partition, "?2") + ` LIMIT 1`
}

// partitionTerm restricts a dequeue statement to one partition (the value
// bound at mark), or to none when partition is "": a term chosen here
// rather than "(mark = ” OR queue_partition_key = mark)", which no index
// serves. Either way the statement refers to mark, which is always bound.
func partitionTerm(partition, mark string) string {
	if partition == "" {
		return " AND " + mark + " = ''"
	}
	return " AND queue_partition_key = " + mark
}

// queueHasWork reports whether a queue (or one partition of it) has any
// ENQUEUED row, on a reader.
func (s *SQLite) queueHasWork(ctx context.Context, queue, partition string) (bool, error) {
	var found bool
	err := s.read(ctx, "dequeue from queue "+queue, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, sqliteHasWorkSQL(partition), queue, partition).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			found = false
			return nil
		}
		found = err == nil
		return err
	})
	return found, err
}

// sqliteCandidatesQuery is dequeueCandidates' select and its arguments.
func sqliteCandidatesQuery(in QueueDequeueParams, budget int) (string, []any) {
	var args boundArgs
	q := "SELECT workflow_uuid, application_version, application_name, executor_id, workflow_deadline_epoch_ms FROM workflow_status" +
		" WHERE queue_name = " + args.add(in.QueueName) + " AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING')"
	// Unversioned rows belong to the latest version only; with no version
	// registered, every executor counts as the latest (an executor without
	// a version, "", takes unversioned work only while there is none). The
	// latest is read in this transaction, which no writer can interleave.
	version := args.add(in.ApplicationVersion)
	app := args.add(in.ApplicationName)
	q += " AND (application_version = " + version + " OR (application_version IS NULL AND coalesce((" +
		"SELECT version_name FROM application_versions" +
		" WHERE " + app + " IS NULL OR application_name = " + app + " OR application_name IS NULL" +
		" ORDER BY version_timestamp DESC, created_at DESC, version_name DESC LIMIT 1), " + version + ") = " + version + "))"
	if in.ApplicationName != nil {
		q += " AND (application_name = " + app + " OR application_name IS NULL)"
	}
	if in.PartitionKey != "" {
		q += " AND queue_partition_key = " + args.add(in.PartitionKey)
	}
	if len(in.WorkflowNames) > 0 {
		q += " AND name IN " + args.list(in.WorkflowNames)
	}
	if len(in.WorkflowIDs) > 0 {
		q += " AND workflow_uuid IN " + args.list(in.WorkflowIDs)
	}
	q += " ORDER BY priority ASC, created_at ASC"
	if budget > 0 {
		q += " LIMIT " + args.add(budget)
	}
	return q, args.values
}

// dequeueCandidates selects, in queue order, up to budget (negative: no
// bound) ENQUEUED rows the claimer may take, with the columns the claim
// overwrites (PreClaim, so that an unclaim can restore them).
func (s *SQLite) dequeueCandidates(ctx context.Context, tx *sql.Tx, in QueueDequeueParams, budget int) ([]string, map[string]*PreClaim, error) {
	q, args := sqliteCandidatesQuery(in, budget)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var candidates []string
	before := map[string]*PreClaim{}
	for rows.Next() {
		var id string
		var pre PreClaim
		if err := rows.Scan(&id, &pre.ApplicationVersion, &pre.ApplicationName, &pre.ExecutorID, &pre.DeadlineEpochMS); err != nil {
			return nil, nil, err
		}
		candidates = append(candidates, id)
		before[id] = &pre
	}
	return candidates, before, rows.Err()
}

// QueueList implements SystemDatabase: registered queues and those active
// workflows name, by name.
func (s *SQLite) QueueList(ctx context.Context) ([]QueueSummary, error) {
	const query = `WITH active AS (
	    SELECT queue_name,
	           sum(status = 'ENQUEUED') AS enqueued,
	           sum(status = 'PENDING') AS pending,
	           sum(status = 'DELAYED') AS delayed
	    FROM workflow_status
	    WHERE status IN ('ENQUEUED', 'PENDING', 'DELAYED') AND queue_name IS NOT NULL
	    GROUP BY queue_name
	), names AS (
	    SELECT name FROM queues UNION SELECT queue_name FROM active
	)
	SELECT n.name, q.name IS NOT NULL,
	       q.concurrency, q.worker_concurrency, q.rate_limit_max, q.rate_limit_period_sec,
	       coalesce(q.priority_enabled, 0), coalesce(q.partition_queue, 0), q.application_name,
	       coalesce(a.enqueued, 0), coalesce(a.pending, 0), coalesce(a.delayed, 0)
	FROM names n
	LEFT JOIN queues q ON q.name = n.name
	LEFT JOIN active a ON a.queue_name = n.name
	ORDER BY n.name`
	var out []QueueSummary
	err := s.read(ctx, "list queues", func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q QueueSummary
			if err := rows.Scan(&q.Name, &q.Registered, &q.Concurrency, &q.WorkerConcurrency, &q.RateLimitMax, &q.RateLimitPeriodSec,
				&q.PriorityEnabled, &q.PartitionQueue, &q.ApplicationName, &q.Enqueued, &q.Pending, &q.Delayed); err != nil {
				return err
			}
			out = append(out, q)
		}
		return rows.Err()
	})
	return out, err
}

// ---------------------------------------------------------------------------
// Queue registrations

// QueueRegister implements QueueSystem (see Postgres.QueueRegister).
func (s *SQLite) QueueRegister(ctx context.Context, in QueueRegisterParams) (QueueConfig, bool, error) {
	results, err := s.QueueRegisterMany(ctx, []QueueRegisterParams{in})
	if err != nil {
		return QueueConfig{}, false, err
	}
	return results[0].Stored, results[0].Created, nil
}

// QueueRegisterMany implements QueueSystem: every registration in one write
// transaction, all or none.
func (s *SQLite) QueueRegisterMany(ctx context.Context, in []QueueRegisterParams) ([]QueueRegisterResult, error) {
	order, what, err := registrationOrder(in)
	if err != nil {
		return nil, err
	}
	results := make([]QueueRegisterResult, len(in))
	err = s.write(ctx, what, func(tx *sql.Tx) error {
		for _, i := range order {
			stored, created, err := s.registerQueueTx(ctx, tx, in[i])
			if err != nil {
				return err
			}
			results[i] = QueueRegisterResult{Stored: stored, Created: created}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// sqliteQueueColumns are read for every queue, in scanSQLiteQueue's order.
const sqliteQueueColumns = `queue_id, name, concurrency, worker_concurrency, rate_limit_max, rate_limit_period_sec,
	priority_enabled, partition_queue, polling_interval_sec,
	partition_concurrency, partition_worker_concurrency, partition_rate_limit_max, partition_rate_limit_period_sec,
	application_name, created_at, updated_at`

func scanSQLiteQueue(row interface{ Scan(...any) error }) (QueueConfig, error) {
	var q QueueConfig
	err := row.Scan(&q.ID, &q.Name, &q.Concurrency, &q.WorkerConcurrency, &q.RateLimitMax, &q.RateLimitPeriodSec,
		&q.PriorityEnabled, &q.PartitionQueue, &q.PollingIntervalSec,
		&q.PartitionConcurrency, &q.PartitionWorkerConcurrency, &q.PartitionRateLimitMax, &q.PartitionRateLimitPeriodSec,
		&q.ApplicationName, &q.CreatedAt, &q.UpdatedAt)
	return q, err
}

// registerQueueTx is one registration inside the write transaction, which
// no other writer interleaves: the owner read is the owner written against.
func (s *SQLite) registerQueueTx(ctx context.Context, tx *sql.Tx, in QueueRegisterParams) (QueueConfig, bool, error) {
	c := in.Config
	polling := c.PollingIntervalSec
	if polling <= 0 {
		polling = DefaultPollingIntervalSec
	}
	var current *string
	err := tx.QueryRowContext(ctx, "SELECT application_name FROM queues WHERE name = ?", c.Name).Scan(&current)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return QueueConfig{}, false, err
	}
	if exists {
		if err := ownedElsewhere("queue", c.Name, current, c.ApplicationName); err != nil {
			return QueueConfig{}, false, &nonRetryable{err}
		}
	}
	owner := resolveOwner(current, c.ApplicationName)
	now := nowMS()
	args := []any{c.Name, c.Concurrency, c.WorkerConcurrency, c.RateLimitMax, c.RateLimitPeriodSec,
		c.PriorityEnabled, c.PartitionQueue, polling, owner,
		c.PartitionConcurrency, c.PartitionWorkerConcurrency, c.PartitionRateLimitMax, c.PartitionRateLimitPeriodSec, now}
	created := false
	switch {
	case !exists:
		_, err = tx.ExecContext(ctx, `INSERT INTO queues (
			queue_id, name, concurrency, worker_concurrency, rate_limit_max, rate_limit_period_sec,
			priority_enabled, partition_queue, polling_interval_sec, created_at, updated_at, application_name,
			partition_concurrency, partition_worker_concurrency, partition_rate_limit_max, partition_rate_limit_period_sec
		) VALUES (?15, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?14, ?14, ?9, ?10, ?11, ?12, ?13)`, append(args, newUUID())...)
		if err != nil {
			return QueueConfig{}, false, err
		}
		created = true
	case in.UpdateExisting:
		_, err = tx.ExecContext(ctx, `UPDATE queues
			SET concurrency = ?2, worker_concurrency = ?3, rate_limit_max = ?4, rate_limit_period_sec = ?5,
			    priority_enabled = ?6, partition_queue = ?7, polling_interval_sec = ?8,
			    updated_at = ?14,
			    application_name = coalesce(application_name, ?9),
			    partition_concurrency = ?10, partition_worker_concurrency = ?11,
			    partition_rate_limit_max = ?12, partition_rate_limit_period_sec = ?13
			WHERE name = ?1`, args...)
		if err != nil {
			return QueueConfig{}, false, err
		}
	}
	stored, err := scanSQLiteQueue(tx.QueryRowContext(ctx, "SELECT "+sqliteQueueColumns+" FROM queues WHERE name = ?", c.Name))
	if err != nil {
		return QueueConfig{}, false, err
	}
	return stored, created, nil
}

// QueueGet implements QueueSystem.
func (s *SQLite) QueueGet(ctx context.Context, name string) (QueueConfig, error) {
	var q QueueConfig
	err := s.read(ctx, "get queue "+name, func(tx *sql.Tx) error {
		var err error
		q, err = scanSQLiteQueue(tx.QueryRowContext(ctx, "SELECT "+sqliteQueueColumns+" FROM queues WHERE name = ?", name))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return QueueConfig{}, &QueueNotFoundError{Name: name}
	}
	return q, err
}

// QueueDelete implements QueueSystem; a name not registered is a
// QueueNotFoundError.
func (s *SQLite) QueueDelete(ctx context.Context, name string) error {
	return s.execTouching(ctx, "delete queue "+name, &QueueNotFoundError{Name: name}, "DELETE FROM queues WHERE name = ?", name)
}

// QueuePartitions implements QueueSystem: a loose index scan, one seek per
// distinct key on the partition dequeue index.
func (s *SQLite) QueuePartitions(ctx context.Context, queue string) ([]string, error) {
	return s.queryStrings(ctx, "list partitions of queue "+queue, `WITH RECURSIVE partitions(pk) AS (
	    SELECT min(queue_partition_key) FROM workflow_status
	    WHERE queue_name = ?1 AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING') AND queue_partition_key IS NOT NULL
	    UNION ALL
	    SELECT (SELECT min(queue_partition_key) FROM workflow_status
	            WHERE queue_name = ?1 AND status = 'ENQUEUED' AND status IN ('ENQUEUED', 'PENDING')
	              AND queue_partition_key > partitions.pk)
	    FROM partitions WHERE partitions.pk IS NOT NULL
	)
	SELECT pk FROM partitions WHERE pk IS NOT NULL`, queue)
}

// queryStrings reads one text column on a reader.
func (s *SQLite) queryStrings(ctx context.Context, what, query string, args ...any) ([]string, error) {
	var out []string
	err := s.read(ctx, what, func(tx *sql.Tx) error {
		var err error
		out, err = collectStrings(ctx, tx, query, args...)
		return err
	})
	return out, err
}

// collectStrings reads one text column in tx.
func collectStrings(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// execTouching runs a statement in a write transaction and returns notFound
// when it touched no row.
func (s *SQLite) execTouching(ctx context.Context, what string, notFound error, query string, args ...any) error {
	var affected int64
	err := s.write(ctx, what, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		affected, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	if affected == 0 {
		return notFound
	}
	return nil
}

// ---------------------------------------------------------------------------
// Deduplication, delays, debounce and timeouts

// WorkflowByDeduplicationID implements QueueSystem. The id is cleared when
// its workflow leaves the queue, so a match is active.
func (s *SQLite) WorkflowByDeduplicationID(ctx context.Context, queue, deduplicationID string) (string, bool, error) {
	ids, err := s.queryStrings(ctx, "find deduplicated workflow",
		"SELECT workflow_uuid FROM workflow_status WHERE queue_name = ? AND deduplication_id = ?", queue, deduplicationID)
	if err != nil || len(ids) == 0 {
		return "", false, err
	}
	return ids[0], true, nil
}

// WorkflowReleaseDelayed implements QueueSystem. A debounced workflow gives
// up its deduplication id when released (it is a debounce key, held only
// while DELAYED).
func (s *SQLite) WorkflowReleaseDelayed(ctx context.Context, applicationName *string) ([]QueuedWorkflow, error) {
	var out []QueuedWorkflow
	err := s.write(ctx, "release delayed workflows", func(tx *sql.Tx) error {
		out = nil
		now := nowMS()
		rows, err := tx.QueryContext(ctx, `UPDATE workflow_status
			SET status = 'ENQUEUED',
			    updated_at = ?1,
			    deduplication_id = CASE WHEN is_debounced THEN NULL ELSE deduplication_id END
			WHERE status = 'DELAYED'
			  AND delay_until_epoch_ms <= ?1
			  AND (?2 IS NULL OR application_name = ?2 OR application_name IS NULL)
			RETURNING workflow_uuid, coalesce(queue_name, ''), application_version`, now, applicationName)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w QueuedWorkflow
			if err := rows.Scan(&w.WorkflowID, &w.QueueName, &w.ApplicationVersion); err != nil {
				return err
			}
			out = append(out, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	// One add for the statement, so each queue is announced once.
	queues := make([]string, 0, len(out))
	for _, w := range out {
		if w.QueueName != "" {
			queues = append(queues, w.QueueName)
		}
	}
	s.notes.add(ChannelQueue, queues...)
	return out, nil
}

// WorkflowSetDelay implements QueueSystem. A workflow that is not DELAYED
// (any more) is a NotDelayedError, a missing one a NotFoundError.
func (s *SQLite) WorkflowSetDelay(ctx context.Context, workflowID string, delayUntilEpochMS int64) error {
	if delayUntilEpochMS < 0 {
		return fmt.Errorf("set delay of workflow %s: the release time must not be negative", workflowID)
	}
	var updated int64
	var status *string
	err := s.write(ctx, "set delay of workflow "+workflowID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE workflow_status SET delay_until_epoch_ms = ?2, updated_at = ?3
			WHERE workflow_uuid = ?1 AND status = 'DELAYED'`, workflowID, delayUntilEpochMS, nowMS())
		if err != nil {
			return err
		}
		if updated, err = res.RowsAffected(); err != nil || updated > 0 {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT status FROM workflow_status WHERE workflow_uuid = ?", workflowID).Scan(&status)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &NotFoundError{WorkflowID: workflowID}
	case err != nil:
		return err
	case updated == 0:
		return &NotDelayedError{WorkflowID: workflowID, Status: deref(status)}
	}
	return nil
}

// WorkflowSetPriority implements QueueSystem.
func (s *SQLite) WorkflowSetPriority(ctx context.Context, workflowID string, priority int) (bool, error) {
	var updated int64
	err := s.write(ctx, "set priority of workflow "+workflowID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE workflow_status SET priority = ?2, updated_at = ?3
			WHERE workflow_uuid = ?1 AND status IN ('ENQUEUED', 'DELAYED')`, workflowID, priority, nowMS())
		if err != nil {
			return err
		}
		updated, err = res.RowsAffected()
		return err
	})
	return updated > 0, err
}

// WorkflowCancelTimedOut implements QueueSystem. A limit of 0 or less means
// no limit. The write transaction excludes any dequeue meanwhile, so
// nothing needs skipping.
func (s *SQLite) WorkflowCancelTimedOut(ctx context.Context, limit int, applicationName *string) ([]string, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var cancelled []string
	err := s.write(ctx, "cancel timed-out workflows", func(tx *sql.Tx) error {
		now := nowMS()
		var err error
		cancelled, err = collectStrings(ctx, tx, `SELECT workflow_uuid FROM workflow_status
			WHERE status IN ('ENQUEUED', 'PENDING', 'DELAYED')
			  AND workflow_deadline_epoch_ms IS NOT NULL
			  AND workflow_deadline_epoch_ms <= ?1
			  AND (?2 IS NULL OR application_name = ?2 OR application_name IS NULL)
			ORDER BY workflow_deadline_epoch_ms, workflow_uuid
			LIMIT ?3`, now, applicationName, limit)
		if err != nil || len(cancelled) == 0 {
			return err
		}
		args := boundArgs{values: []any{now}}
		_, err = tx.ExecContext(ctx, `UPDATE workflow_status
			SET status = 'CANCELLED', updated_at = ?1, completed_at = ?1,
			    started_at_epoch_ms = NULL, queue_name = NULL, deduplication_id = NULL, owner_xid = NULL
			WHERE workflow_uuid IN `+args.list(cancelled), args.values...)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.notes.add(ChannelWorkflowStatus, cancelled...)
	return cancelled, nil
}

// WorkflowDebounce implements QueueSystem: one write transaction, so the
// bounce and its new inputs land together (with a caller, also its step and
// the child it creates).
func (s *SQLite) WorkflowDebounce(ctx context.Context, in WorkflowDebounceParams) (DebounceResult, error) {
	if c := in.Caller; c != nil {
		if err := checkCaller(c); err != nil {
			return DebounceResult{}, fmt.Errorf("debounce workflow %s: caller: %w", in.Name, err)
		}
		if in.Create == nil {
			return DebounceResult{}, fmt.Errorf("debounce workflow %s: a caller needs the workflow to create", in.Name)
		}
	}
	var res DebounceResult
	err := s.write(ctx, "debounce workflow "+in.Name, func(tx *sql.Tx) error {
		res = DebounceResult{}
		if in.Caller == nil {
			return s.debounceTx(ctx, tx, in, &res)
		}
		return s.debounceAsStep(ctx, tx, in, &res)
	})
	if err != nil {
		return DebounceResult{}, err
	}
	return res, nil
}

// debounceTx bounces the pending debounce of the key, or reports its holder.
// The name is matched so that two workflows whose keys collide never
// overwrite each other's inputs; another application's workflow is never
// bounced, an unclaimed one is claimed.
func (s *SQLite) debounceTx(ctx context.Context, tx *sql.Tx, in WorkflowDebounceParams, res *DebounceResult) error {
	var bounced string
	err := tx.QueryRowContext(ctx, `UPDATE workflow_status
		SET delay_until_epoch_ms = CASE
		        WHEN debounce_deadline_epoch_ms IS NOT NULL AND debounce_deadline_epoch_ms < ?1
		        THEN debounce_deadline_epoch_ms
		        ELSE ?1
		    END,
		    serialization = ?2,
		    updated_at = ?7,
		    application_name = coalesce(application_name, ?6)
		WHERE name = ?3 AND queue_name = ?4 AND deduplication_id = ?5
		  AND status = 'DELAYED' AND is_debounced = 1
		  AND (?6 IS NULL OR application_name = ?6 OR application_name IS NULL)
		RETURNING workflow_uuid`,
		in.DelayUntilEpochMS, in.Serialization, in.Name, in.QueueName, in.DeduplicationID, in.ApplicationName, nowMS()).Scan(&bounced)
	if err == nil {
		res.BouncedID = &bounced
		_, err = tx.ExecContext(ctx, `INSERT INTO workflow_input (workflow_uuid, inputs) VALUES (?1, ?2)
			ON CONFLICT (workflow_uuid) DO UPDATE SET inputs = excluded.inputs`, bounced, in.Inputs)
		return err
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	var holder string
	err = tx.QueryRowContext(ctx, `SELECT workflow_uuid, is_debounced, name, application_name FROM workflow_status
		WHERE queue_name = ? AND deduplication_id = ?`, in.QueueName, in.DeduplicationID).
		Scan(&holder, &res.HolderIsDebounced, &res.HolderName, &res.HolderApplicationName)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // the key is free: the caller starts a new debounced workflow
	}
	if err != nil {
		return err
	}
	res.HolderID = &holder
	return nil
}

// debounceAsStep is a debounce from workflow code: while the caller owns its
// workflow, a step already recorded at the caller's id is the answer; else
// the bounce (or, the key being free, the insert of the caller's child at
// the next id) and the caller's step, all in tx.
func (s *SQLite) debounceAsStep(ctx context.Context, tx *sql.Tx, in WorkflowDebounceParams, res *DebounceResult) error {
	c := in.Caller
	var owner *string
	err := tx.QueryRowContext(ctx, "SELECT owner_xid FROM workflow_status WHERE workflow_uuid = ?", c.WorkflowID).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &nonRetryable{&NotFoundError{WorkflowID: c.WorkflowID}}
	case err != nil:
		return err
	case owner == nil || *owner != c.OwnerXID:
		return &nonRetryable{&FencedError{WorkflowID: c.WorkflowID}}
	}
	recorded, err := debounceStepAt(ctx, tx, c.WorkflowID, c.FunctionID)
	if err != nil {
		return err
	}
	if recorded != nil {
		return debounceReplaySQLite(ctx, tx, c, in.StepNameOr(), recorded, res)
	}
	if err := s.debounceTx(ctx, tx, in, res); err != nil {
		return err
	}
	if res.BouncedID == nil && res.HolderID == nil {
		create := *in.Create
		create.ParentWorkflowID = &c.WorkflowID
		create.ParentStep = &StepCaller{WorkflowID: c.WorkflowID, OwnerXID: c.OwnerXID, FunctionID: c.FunctionID + 1, ApplicationName: c.ApplicationName}
		var ins WorkflowInsertResult
		if err := s.insertWorkflow(ctx, tx, create, &ins); err != nil {
			return err
		}
		res.CreatedID = &create.ID
	}
	out := debounceStepOutput{BouncedWorkflowID: res.BouncedID, HolderWorkflowID: res.HolderID, HolderIsDebounced: res.HolderIsDebounced}
	if res.HolderID != nil {
		out.HolderWorkflowName, out.HolderApplicationName = &res.HolderName, res.HolderApplicationName
	}
	encoded, err := json.Marshal(out)
	if err != nil {
		return err
	}
	now := nowMS()
	_, err = tx.ExecContext(ctx, `INSERT INTO operation_outputs (
		    workflow_uuid, function_id, function_name, output, serialization,
		    started_at_epoch_ms, completed_at_epoch_ms, application_name
		) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)`,
		c.WorkflowID, c.FunctionID, in.StepNameOr(), string(encoded), PortableJSON, now, c.ApplicationName)
	return err
}

// debounceReplaySQLite answers a debounce whose step is recorded: what it
// records, and for a debounce that created its workflow, the child recorded
// at the next id.
func debounceReplaySQLite(ctx context.Context, tx *sql.Tx, c *StepCaller, stepName string, recorded *Step, res *DebounceResult) error {
	if recorded.Name != stepName {
		return &nonRetryable{&UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: recorded.Name, Attempted: stepName}}
	}
	var out debounceStepOutput
	if recorded.Output == nil || json.Unmarshal([]byte(*recorded.Output), &out) != nil {
		return &nonRetryable{fmt.Errorf("workflow %s step %d: the recorded %s is not a debounce result", c.WorkflowID, c.FunctionID, stepName)}
	}
	*res = DebounceResult{BouncedID: out.BouncedWorkflowID, HolderID: out.HolderWorkflowID, HolderIsDebounced: out.HolderIsDebounced,
		HolderApplicationName: out.HolderApplicationName, Replayed: true}
	if out.HolderWorkflowName != nil {
		res.HolderName = *out.HolderWorkflowName
	}
	if res.BouncedID != nil || res.HolderID != nil {
		return nil
	}
	child, err := debounceStepAt(ctx, tx, c.WorkflowID, c.FunctionID+1)
	if err != nil {
		return err
	}
	if child == nil || child.ChildWorkflowID == nil {
		return &nonRetryable{fmt.Errorf("workflow %s step %d: the debounce found its key free but step %d records no child", c.WorkflowID, c.FunctionID, c.FunctionID+1)}
	}
	res.CreatedID = child.ChildWorkflowID
	return nil
}

// debounceStepAt reads one step in tx, nil when none is recorded there.
func debounceStepAt(ctx context.Context, tx *sql.Tx, workflowID string, functionID int) (*Step, error) {
	var st Step
	err := tx.QueryRowContext(ctx, `SELECT function_id, function_name, output, error, serialization, child_workflow_id,
		    started_at_epoch_ms, completed_at_epoch_ms
		FROM operation_outputs WHERE workflow_uuid = ? AND function_id = ?`, workflowID, functionID).Scan(
		&st.FunctionID, &st.Name, &st.Output, &st.Error, &st.Serialization, &st.ChildWorkflowID, &st.StartedAt, &st.CompletedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// ---------------------------------------------------------------------------
// Application versions

// sqliteVersionScope matches an application's versions and the unclaimed
// ones (every version when the value bound at mark is NULL).
func sqliteVersionScope(mark string) string {
	return "(" + mark + " IS NULL OR application_name = " + mark + " OR application_name IS NULL)"
}

// VersionRegister implements QueueSystem (see Postgres.VersionRegister): an
// unclaimed row of that name is claimed in place, else a new row is
// inserted as the latest of what its application sees.
func (s *SQLite) VersionRegister(ctx context.Context, name string, applicationName *string) error {
	if name == "" {
		return errors.New("register application version: a name is required")
	}
	return s.write(ctx, "register application version "+name, func(tx *sql.Tx) error {
		claimed := false
		if applicationName != nil {
			res, err := tx.ExecContext(ctx, `UPDATE application_versions SET application_name = ?2
				WHERE version_name = ?1 AND application_name IS NULL`, name, applicationName)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			claimed = n > 0
		}
		if !claimed {
			now := nowMS()
			_, err := tx.ExecContext(ctx, `INSERT INTO application_versions (version_id, version_name, version_timestamp, created_at, application_name)
				SELECT ?3, ?1, max(?4, coalesce(max(version_timestamp), 0) + 1), ?4, ?2
				FROM application_versions WHERE `+sqliteVersionScope("?2")+`
				ON CONFLICT DO NOTHING`, name, applicationName, newUUID(), now)
			if err != nil {
				return err
			}
		}
		var owner *string
		if err := tx.QueryRowContext(ctx, "SELECT application_name FROM application_versions WHERE version_name = ?", name).Scan(&owner); err != nil {
			return err
		}
		if err := ownedElsewhere("application version", name, owner, applicationName); err != nil {
			return &nonRetryable{err}
		}
		return nil
	})
}

const sqliteVersionColumns = "version_id, version_name, version_timestamp, created_at, application_name"

func scanSQLiteVersion(row interface{ Scan(...any) error }) (AppVersion, error) {
	var v AppVersion
	err := row.Scan(&v.ID, &v.Name, &v.Timestamp, &v.CreatedAt, &v.ApplicationName)
	return v, err
}

// VersionList implements QueueSystem.
func (s *SQLite) VersionList(ctx context.Context, applicationName *string) ([]AppVersion, error) {
	var out []AppVersion
	err := s.read(ctx, "list application versions", func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, "SELECT "+sqliteVersionColumns+" FROM application_versions WHERE "+sqliteVersionScope("?1")+
			" ORDER BY version_timestamp DESC, created_at DESC, version_name DESC", applicationName)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scanSQLiteVersion(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}

// VersionPromote implements QueueSystem: the timestamp becomes now, bumped
// past the current latest so the promoted version sorts ahead even within a
// millisecond, and the row is stamped with its resolved owner.
func (s *SQLite) VersionPromote(ctx context.Context, name string, applicationName *string) error {
	return s.write(ctx, "promote application version "+name, func(tx *sql.Tx) error {
		var current *string
		err := tx.QueryRowContext(ctx, "SELECT application_name FROM application_versions WHERE version_name = ?", name).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return &nonRetryable{&VersionNotFoundError{Name: name}}
		}
		if err != nil {
			return err
		}
		if err := ownedElsewhere("application version", name, current, applicationName); err != nil {
			return &nonRetryable{err}
		}
		_, err = tx.ExecContext(ctx, `UPDATE application_versions
			SET version_timestamp = max(?4,
			        (SELECT coalesce(max(version_timestamp), 0) + 1 FROM application_versions WHERE `+sqliteVersionScope("?2")+`)),
			    application_name = ?3
			WHERE version_name = ?1 AND (application_name = ?3 OR application_name IS NULL)`,
			name, applicationName, resolveOwner(current, applicationName), nowMS())
		return err
	})
}

// VersionLatest implements QueueSystem.
func (s *SQLite) VersionLatest(ctx context.Context, applicationName *string) (AppVersion, bool, error) {
	var v AppVersion
	err := s.read(ctx, "get latest application version", func(tx *sql.Tx) error {
		var err error
		v, err = scanSQLiteVersion(tx.QueryRowContext(ctx, "SELECT "+sqliteVersionColumns+" FROM application_versions WHERE "+
			sqliteVersionScope("?1")+" ORDER BY version_timestamp DESC, created_at DESC, version_name DESC LIMIT 1", applicationName))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return AppVersion{}, false, nil
	}
	if err != nil {
		return AppVersion{}, false, err
	}
	return v, true, nil
}

// ---------------------------------------------------------------------------
// Schedules

// ScheduleCreate implements QueueSystem, with a fresh uuid when sc.ID is
// empty and the row newStoredSchedule makes.
func (s *SQLite) ScheduleCreate(ctx context.Context, sc Schedule) error {
	row, err := newStoredSchedule(sc)
	if err != nil {
		return err
	}
	id := sc.ID
	if id == "" {
		id = newUUID()
	}
	return s.write(ctx, "create schedule "+sc.Name, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO workflow_schedules (
			    schedule_id, schedule_name, workflow_name, workflow_class_name, schedule, status, context,
			    last_fired_at, automatic_backfill, cron_timezone, queue_name, application_name
			) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (schedule_name) DO NOTHING`,
			id, sc.Name, sc.WorkflowName, sc.WorkflowClassName, sc.Cron, row.status, row.context,
			row.lastFired, sc.AutomaticBackfill, row.timezone, sc.QueueName, sc.ApplicationName)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var owner *string
		if err := tx.QueryRowContext(ctx, "SELECT application_name FROM workflow_schedules WHERE schedule_name = ?", sc.Name).Scan(&owner); err != nil {
			return err
		}
		if err := ownedElsewhere("schedule", sc.Name, owner, sc.ApplicationName); err != nil {
			return &nonRetryable{err}
		}
		return &nonRetryable{&ScheduleExistsError{Name: sc.Name}}
	})
}

// sqliteScheduleColumns are read for every schedule, in scanSQLiteSchedule's
// order.
const sqliteScheduleColumns = `schedule_id, schedule_name, workflow_name, workflow_class_name, schedule, status, context,
	last_fired_at, automatic_backfill, NULLIF(cron_timezone, ''), queue_name, application_name`

func scanSQLiteSchedule(row interface{ Scan(...any) error }) (Schedule, error) {
	var sc Schedule
	err := row.Scan(&sc.ID, &sc.Name, &sc.WorkflowName, &sc.WorkflowClassName, &sc.Cron, &sc.Status, &sc.Context,
		&sc.LastFiredAtRaw, &sc.AutomaticBackfill, &sc.CronTimezone, &sc.QueueName, &sc.ApplicationName)
	if err != nil {
		return Schedule{}, err
	}
	if sc.LastFiredAtRaw != nil {
		if t, ok := ParseLastFiredAt(*sc.LastFiredAtRaw); ok {
			sc.LastFiredAt = &t
		}
	}
	return sc, nil
}

// ScheduleGet implements QueueSystem.
func (s *SQLite) ScheduleGet(ctx context.Context, name string) (Schedule, error) {
	var sc Schedule
	err := s.read(ctx, "get schedule "+name, func(tx *sql.Tx) error {
		var err error
		sc, err = scanSQLiteSchedule(tx.QueryRowContext(ctx, "SELECT "+sqliteScheduleColumns+" FROM workflow_schedules WHERE schedule_name = ?", name))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Schedule{}, &ScheduleNotFoundError{Name: name}
	}
	return sc, err
}

// ScheduleList implements QueueSystem, by name in byte order (as Postgres's
// COLLATE "C"). The name prefix is compared with substr, not LIKE, which on
// SQLite ignores ASCII case.
func (s *SQLite) ScheduleList(ctx context.Context, in ScheduleListParams) ([]Schedule, error) {
	var where []string
	var args boundArgs
	if len(in.Statuses) > 0 {
		where = append(where, "status IN "+args.list(in.Statuses))
	}
	if len(in.WorkflowNames) > 0 {
		where = append(where, "workflow_name IN "+args.list(in.WorkflowNames))
	}
	if in.NamePrefix != "" {
		mark := args.add(in.NamePrefix)
		where = append(where, "substr(schedule_name, 1, length("+mark+")) = "+mark)
	}
	if in.ApplicationName != nil {
		where = append(where, "(application_name = "+args.add(*in.ApplicationName)+" OR application_name IS NULL)")
	}
	if len(in.ApplicationNames) > 0 {
		where = append(where, "(application_name IN "+args.list(in.ApplicationNames)+" OR application_name IS NULL)")
	}
	query := "SELECT " + sqliteScheduleColumns + " FROM workflow_schedules"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY schedule_name COLLATE BINARY"
	var out []Schedule
	err := s.read(ctx, "list schedules", func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, query, args.values...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			sc, err := scanSQLiteSchedule(rows)
			if err != nil {
				return err
			}
			out = append(out, sc)
		}
		return rows.Err()
	})
	return out, err
}

// ScheduleSetStatus implements QueueSystem; last_fired_at is left alone.
func (s *SQLite) ScheduleSetStatus(ctx context.Context, name, status string) error {
	if status != ScheduleActive && status != SchedulePaused {
		return fmt.Errorf("set status of schedule %s: status must be ACTIVE or PAUSED, not %q", name, status)
	}
	return s.execTouching(ctx, "set status of schedule "+name, &ScheduleNotFoundError{Name: name},
		"UPDATE workflow_schedules SET status = ? WHERE schedule_name = ?", status, name)
}

// ScheduleDelete implements QueueSystem. A missing schedule is a
// ScheduleNotFoundError.
func (s *SQLite) ScheduleDelete(ctx context.Context, name string) error {
	return s.execTouching(ctx, "delete schedule "+name, &ScheduleNotFoundError{Name: name},
		"DELETE FROM workflow_schedules WHERE schedule_name = ?", name)
}

// ScheduleSetLastFired implements QueueSystem. The stored text may be any
// SDK's ISO 8601 flavour, so it is compared as an instant in Go, inside the
// write transaction (no other writer interleaves); a value that cannot be
// parsed is replaced.
func (s *SQLite) ScheduleSetLastFired(ctx context.Context, name string, firedAt time.Time) error {
	text := FormatLastFiredAt(firedAt)
	return s.write(ctx, "record last tick of schedule "+name, func(tx *sql.Tx) error {
		var stored *string
		err := tx.QueryRowContext(ctx, "SELECT last_fired_at FROM workflow_schedules WHERE schedule_name = ?", name).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			return &nonRetryable{&ScheduleNotFoundError{Name: name}}
		}
		if err != nil {
			return err
		}
		if stored != nil {
			if prev, ok := ParseLastFiredAt(*stored); ok && !firedAt.After(prev) {
				return nil // an agent that fired a later tick got here first
			}
		}
		_, err = tx.ExecContext(ctx, "UPDATE workflow_schedules SET last_fired_at = ? WHERE schedule_name = ?", text, name)
		return err
	})
}

// ---------------------------------------------------------------------------
// Application rename

// sqliteRenameSource matches the rows a rename moves: ?1's (NULL matches
// none by name) and, when ?2, the unclaimed ones.
const sqliteRenameSource = "(application_name = ?1 OR (?2 AND application_name IS NULL))"

// ApplicationRename implements QueueSystem as Postgres's does: the control
// plane and the active workflows in one transaction, then the terminal
// workflows and the steps in batches of workflow ids.
func (s *SQLite) ApplicationRename(ctx context.Context, in ApplicationRenameParams) (ApplicationRowCounts, error) {
	var out ApplicationRowCounts
	args := []any{in.OldName, in.AdoptUnclaimed, in.NewName}
	err := s.write(ctx, "rename application", func(tx *sql.Tx) error {
		out = ApplicationRowCounts{}
		for _, t := range []struct {
			table, extra string
			n            *int64
		}{
			{"queues", "", &out.Queues},
			{"workflow_schedules", "", &out.Schedules},
			{"application_versions", "", &out.Versions},
			{"workflow_status", " AND status IN ('" + StatusPending + "', '" + StatusEnqueued + "', '" + StatusDelayed + "')", &out.Workflows},
		} {
			res, err := tx.ExecContext(ctx, "UPDATE "+t.table+" SET application_name = ?3 WHERE "+sqliteRenameSource+t.extra, args...)
			if err != nil {
				return err
			}
			if *t.n, err = res.RowsAffected(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ApplicationRowCounts{}, err
	}
	terminal, err := s.renameInBatches(ctx, "workflow_status", in)
	if err != nil {
		return ApplicationRowCounts{}, err
	}
	out.Workflows += terminal
	if out.Steps, err = s.renameInBatches(ctx, "operation_outputs", in); err != nil {
		return ApplicationRowCounts{}, err
	}
	return out, nil
}

// renameInBatches re-owns a table's matching rows in ranges of workflow
// ids, each at most in.BatchSize workflows (see Postgres.renameInBatches);
// the last batch drops the lower bound.
func (s *SQLite) renameInBatches(ctx context.Context, table string, in ApplicationRenameParams) (int64, error) {
	update := "UPDATE " + table + " SET application_name = ?3 WHERE " + sqliteRenameSource
	args := []any{in.OldName, in.AdoptUnclaimed, in.NewName}
	if in.BatchSize <= 0 {
		var n int64
		err := s.write(ctx, "rename application in "+table, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, update, args...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		return n, err
	}
	upperQuery := "SELECT DISTINCT workflow_uuid FROM " + table + " WHERE " + sqliteRenameSource +
		" AND (?3 IS NULL OR workflow_uuid > ?3) ORDER BY workflow_uuid LIMIT 1 OFFSET ?4"
	var total int64
	var watermark *string
	for {
		var upper *string
		var moved int64
		err := s.write(ctx, "rename application in "+table, func(tx *sql.Tx) error {
			upper = nil
			err := tx.QueryRowContext(ctx, upperQuery, in.OldName, in.AdoptUnclaimed, watermark, in.BatchSize-1).Scan(&upper)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			q, a := update, args
			if upper != nil {
				q += " AND (?4 IS NULL OR workflow_uuid > ?4) AND workflow_uuid <= ?5"
				a = append(append([]any{}, args...), watermark, *upper)
			}
			res, err := tx.ExecContext(ctx, q, a...)
			if err != nil {
				return err
			}
			moved, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		total += moved
		if upper == nil {
			return total, nil
		}
		watermark = upper
	}
}
