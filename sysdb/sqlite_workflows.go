package sysdb

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Workflows and steps on SQLite. Every write is one IMMEDIATE transaction on
// the single writer connection (s.write), so the statements of one operation
// see each other and no other writer interleaves: where Postgres locks rows
// in a fixed order against concurrent finishes and recoveries, SQLite's
// database-wide write lock already serialises them. Values are stored as
// DBOS Python 3.4 stores them on SQLite: instants as epoch-ms integers,
// booleans as 0/1, attributes as JSON text.

// WorkflowInsert implements SystemDatabase.
func (s *SQLite) WorkflowInsert(ctx context.Context, in WorkflowInsertParams) (WorkflowInsertResult, error) {
	if err := validateWorkflowInsert(in); err != nil {
		return WorkflowInsertResult{}, err
	}
	var res WorkflowInsertResult
	err := s.write(ctx, "insert workflow "+in.ID, func(tx *sql.Tx) error {
		res = WorkflowInsertResult{}
		return s.insertWorkflow(ctx, tx, in, &res)
	})
	if err != nil {
		return WorkflowInsertResult{}, err
	}
	if res.Created && res.Status == StatusEnqueued && res.QueueName != nil {
		s.notes.add(ChannelQueue, *res.QueueName)
	}
	return res, nil
}

// validateWorkflowInsert refuses an insert request before any write.
func validateWorkflowInsert(in WorkflowInsertParams) error {
	if in.ID == "" || in.Name == "" {
		return errors.New("workflow insert: id and name are required")
	}
	switch in.Status {
	case StatusPending, StatusEnqueued, StatusDelayed:
	default:
		return fmt.Errorf("workflow insert: status must be PENDING, ENQUEUED or DELAYED, not %q", in.Status)
	}
	if in.CreatorXID == "" {
		return errors.New("workflow insert: a creator token is required")
	}
	if in.Attributes != nil && !json.Valid([]byte(*in.Attributes)) {
		// Postgres refuses it as jsonb; the file must hold what DBOS Python
		// can json.loads.
		return fmt.Errorf("workflow insert %s: attributes are not JSON: %s", in.ID, strconv.Quote(*in.Attributes))
	}
	if parent := in.ParentStep; parent != nil {
		if err := checkCaller(parent); err != nil {
			return fmt.Errorf("workflow insert %s: parent step: %w", in.ID, err)
		}
		if in.ParentWorkflowID == nil || *in.ParentWorkflowID != parent.WorkflowID {
			return fmt.Errorf("workflow insert %s: the parent step is of %s but the parent workflow is %q",
				in.ID, parent.WorkflowID, deref(in.ParentWorkflowID))
		}
	}
	return nil
}

// sqliteOwnerOf reads the owner token of a workflow inside tx, for a fenced
// write: a NotFoundError when the row is missing, a FencedError when
// caller's run no longer owns it.
func sqliteOwnerOf(ctx context.Context, tx *sql.Tx, caller StepCaller) error {
	var owner *string
	err := tx.QueryRowContext(ctx, "SELECT owner_xid FROM workflow_status WHERE workflow_uuid = ?", caller.WorkflowID).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &NotFoundError{WorkflowID: caller.WorkflowID}
	case err != nil:
		return err
	case owner == nil || *owner != caller.OwnerXID:
		return &FencedError{WorkflowID: caller.WorkflowID}
	}
	return nil
}

// insertWorkflow is WorkflowInsert inside the caller's write transaction
// tx: the parent's fence, the row (unless its id exists), its inputs, and
// the parent's step. It announces nothing: the caller adds ChannelQueue
// after its commit when res.Created and the row is ENQUEUED on a queue.
func (s *SQLite) insertWorkflow(ctx context.Context, tx *sql.Tx, in WorkflowInsertParams, res *WorkflowInsertResult) error {
	if err := validateWorkflowInsert(in); err != nil {
		return &nonRetryable{err}
	}
	if in.ParentStep != nil {
		if err := sqliteOwnerOf(ctx, tx, *in.ParentStep); err != nil {
			return err
		}
	}
	var status, name, className, configName, creator *string
	readStored := func() error {
		err := tx.QueryRowContext(ctx, `SELECT status, name, class_name, config_name, queue_name, queue_partition_key,
				workflow_timeout_ms, workflow_deadline_epoch_ms, owner_xid, creator_xid
			FROM workflow_status WHERE workflow_uuid = ?`, in.ID).
			Scan(&status, &name, &className, &configName, &res.QueueName, &res.QueuePartitionKey,
				&res.TimeoutMS, &res.DeadlineEpochMS, &res.OwnerXID, &creator)
		res.Status, res.Name = deref(status), deref(name)
		return err
	}
	err := readStored()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if err := s.insertWorkflowRow(ctx, tx, in); err != nil {
			return err
		}
		if err := readStored(); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	res.Created = creator != nil && *creator == in.CreatorXID
	if !res.Created && in.RejectExisting {
		// Before the parent's step: the error rolls the transaction back,
		// so no step points at the workflow in use.
		return &WorkflowIDInUseError{WorkflowID: in.ID, Status: res.Status, Name: res.Name}
	}
	if !res.Created {
		if reason := insertConflict(in, *res, className, configName); reason != "" {
			return &ConflictingWorkflowError{WorkflowID: in.ID, Reason: reason}
		}
	} else {
		// Only the request that made the row writes its inputs (again,
		// harmlessly, on its retry).
		if _, err := tx.ExecContext(ctx, `INSERT INTO workflow_input (workflow_uuid, inputs, retention_timestamp)
			VALUES (?, ?, ?) ON CONFLICT (workflow_uuid) DO NOTHING`, in.ID, in.Inputs, nowMS()); err != nil {
			return err
		}
	}
	if c := in.ParentStep; c != nil {
		now := nowMS()
		_, err := tx.ExecContext(ctx, `INSERT INTO operation_outputs (
				workflow_uuid, function_id, function_name, child_workflow_id,
				started_at_epoch_ms, completed_at_epoch_ms, application_name, retention_timestamp)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workflow_uuid, function_id) DO NOTHING`,
			c.WorkflowID, c.FunctionID, in.Name, in.ID, now, now, c.ApplicationName, now)
		if err != nil {
			return err
		}
		var name string
		var child *string
		if err := tx.QueryRowContext(ctx, "SELECT function_name, child_workflow_id FROM operation_outputs WHERE workflow_uuid = ? AND function_id = ?",
			c.WorkflowID, c.FunctionID).Scan(&name, &child); err != nil {
			return err
		}
		if deref(child) != in.ID {
			// Another child is recorded at the step. (A retry of this
			// request finds its own earlier record, naming this child.)
			recorded := name
			if child != nil {
				recorded += " (child " + *child + ")"
			}
			return &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: recorded, Attempted: in.Name + " (child " + in.ID + ")"}
		}
	}
	return nil
}

// insertWorkflowRow inserts a new row. created_at is a queue's order: every
// DBOS SDK's dequeue takes ENQUEUED rows by (priority, created_at) with no
// tie-break, and a millisecond holds many enqueues, so an enqueued or
// delayed row is stamped at least one above every row of its queue and
// priority that waits ENQUEUED (whoever wrote it), else at the clock. The
// write lock serialises inserts, so an enqueue made after another returned
// always sorts after it.
func (s *SQLite) insertWorkflowRow(ctx context.Context, tx *sql.Tx, in WorkflowInsertParams) error {
	now := nowMS()
	created := now
	if in.QueueName != nil && (in.Status == StatusEnqueued || in.Status == StatusDelayed) {
		var last sql.NullInt64
		// The IN term repeats the predicate of the partial dequeue index
		// (queue_name, status, priority, created_at): SQLite uses a partial
		// index only for queries that state its WHERE, and without it this
		// top-1 probe walks the created_at index across every queue.
		err := tx.QueryRowContext(ctx, `SELECT CAST(created_at AS INTEGER) FROM workflow_status
			WHERE queue_name = ? AND status IN ('ENQUEUED', 'PENDING') AND status = 'ENQUEUED' AND priority = ?
			ORDER BY created_at DESC LIMIT 1`, *in.QueueName, in.Priority).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if last.Valid && last.Int64+1 > created {
			created = last.Int64 + 1
		}
	}
	var attempts int64
	var owner *string
	if in.Status == StatusPending {
		attempts, owner = 1, &in.CreatorXID
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO workflow_status (
			workflow_uuid, status, name, class_name, config_name,
			queue_name, queue_partition_key, deduplication_id, priority,
			authenticated_user, assumed_role, authenticated_roles,
			executor_id, application_version, application_id, application_name,
			created_at, updated_at, recovery_attempts,
			workflow_timeout_ms, workflow_deadline_epoch_ms, delay_until_epoch_ms,
			parent_workflow_id, attributes, schedule_name,
			debounce_deadline_epoch_ms, is_debounced, serialization,
			creator_xid, owner_xid
		) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		in.ID, in.Status, in.Name, in.ClassName, in.ConfigName,
		in.QueueName, in.QueuePartitionKey, in.DeduplicationID, in.Priority,
		in.AuthenticatedUser, in.AssumedRole, in.AuthenticatedRoles,
		in.ExecutorID, in.ApplicationVersion, in.ApplicationID, in.ApplicationName,
		created, now, attempts,
		in.TimeoutMS, in.DeadlineEpochMS, in.DelayUntilEpochMS,
		in.ParentWorkflowID, in.Attributes, in.ScheduleName,
		in.DebounceDeadline, sqliteBool(in.IsDebounced), in.Serialization,
		in.CreatorXID, owner,
	)
	if isSQLiteConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE) && in.DeduplicationID != nil {
		return &DeduplicatedError{WorkflowID: in.ID, QueueName: deref(in.QueueName), DeduplicationID: deref(in.DeduplicationID)}
	}
	return err
}

// WorkflowGet implements SystemDatabase.
func (s *SQLite) WorkflowGet(ctx context.Context, workflowID string) (Workflow, error) {
	var w Workflow
	err := s.read(ctx, "get workflow "+workflowID, func(tx *sql.Tx) error {
		var err error
		w, err = scanSQLiteWorkflow(tx.QueryRowContext(ctx, sqliteWorkflowSelect(true, true)+" WHERE w.workflow_uuid = ?", workflowID), true, true)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Workflow{}, &NotFoundError{WorkflowID: workflowID}
	}
	return w, err
}

// WorkflowList implements SystemDatabase.
func (s *SQLite) WorkflowList(ctx context.Context, in WorkflowListParams) ([]Workflow, error) {
	var where []string
	var args []any
	anyOf := func(column string, values []string) {
		if len(values) > 0 {
			where = append(where, column+sqliteInList)
			args = append(args, sqliteList(values))
		}
	}
	anyOf("w.workflow_uuid", in.WorkflowIDs)
	anyOf("w.status", in.Statuses)
	anyOf("w.name", in.Names)
	anyOf("w.queue_name", in.QueueNames)
	anyOf("w.executor_id", in.ExecutorIDs)
	anyOf("w.application_version", in.ApplicationVersion)
	anyOf("w.authenticated_user", in.AuthenticatedUsers)
	anyOf("w.parent_workflow_id", in.ParentWorkflowIDs)
	anyOf("w.forked_from", in.ForkedFrom)
	anyOf("w.deduplication_id", in.DeduplicationIDs)
	anyOf("w.schedule_name", in.ScheduleNames)
	if len(in.ApplicationNames) > 0 {
		where = append(where, "(w.application_name"+sqliteInList+" OR w.application_name IS NULL)")
		args = append(args, sqliteList(in.ApplicationNames))
	}
	if len(in.IDPrefixes) > 0 {
		// substr, not LIKE: SQLite's LIKE ignores ASCII case.
		var alts []string
		for _, prefix := range in.IDPrefixes {
			alts = append(alts, "substr(w.workflow_uuid, 1, ?) = ?")
			args = append(args, len([]rune(prefix)), prefix)
		}
		where = append(where, "("+strings.Join(alts, " OR ")+")")
	}
	if in.QueuesOnly {
		where = append(where, "w.queue_name IS NOT NULL")
		if len(in.Statuses) == 0 {
			where = append(where, "w.status IN ('DELAYED', 'ENQUEUED', 'PENDING')")
		}
	}
	bound := func(column, op string, v *int64) {
		if v != nil {
			where = append(where, column+" "+op+" ?")
			args = append(args, *v)
		}
	}
	bound("w.created_at", ">=", in.CreatedAfter)
	bound("w.created_at", "<=", in.CreatedBefore)
	bound("w.completed_at", ">=", in.CompletedAfter)
	bound("w.completed_at", "<=", in.CompletedBefore)
	bound("w.started_at_epoch_ms", ">=", in.StartedAfter)
	bound("w.started_at_epoch_ms", "<=", in.StartedBefore)
	isNull := func(column string, notNull *bool) {
		if notNull == nil {
			return
		}
		if *notNull {
			where = append(where, column+" IS NOT NULL")
		} else {
			where = append(where, column+" IS NULL")
		}
	}
	isNull("w.parent_workflow_id", in.HasParent)
	isNull("w.forked_from", in.IsFork)
	if in.WasForkedFrom != nil {
		where = append(where, "COALESCE(w.was_forked_from, 0) = ?")
		args = append(args, sqliteBool(*in.WasForkedFrom))
	}
	if in.Attributes != nil {
		if !isJSONObject(*in.Attributes) {
			return nil, fmt.Errorf("list workflows: attributes filter is not a JSON object: %s", strconv.Quote(*in.Attributes))
		}
		where = append(where, "w.attributes IS NOT NULL AND "+sqliteJSONContainsFunc+"(w.attributes, ?)")
		args = append(args, *in.Attributes)
	}
	query := sqliteWorkflowSelect(in.LoadInputs, in.LoadOutputs)
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	if in.SortDesc {
		query += " ORDER BY w.created_at DESC, w.workflow_uuid DESC"
	} else {
		query += " ORDER BY w.created_at ASC, w.workflow_uuid ASC"
	}
	if in.Limit > 0 || in.Offset > 0 {
		limit := in.Limit
		if limit <= 0 {
			limit = -1 // SQLite's "no limit", needed before an OFFSET
		}
		query += " LIMIT ? OFFSET ?"
		args = append(args, limit, max(in.Offset, 0))
	}
	var out []Workflow
	err := s.read(ctx, "list workflows", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = scanSQLiteWorkflows(rows, in.LoadInputs, in.LoadOutputs)
		return err
	})
	return out, err
}

// sqliteChildrenQuery lists every descendant of ?, breadth first by depth.
const sqliteChildrenQuery = `WITH RECURSIVE descendants(workflow_uuid, depth) AS (
    SELECT workflow_uuid, 1 FROM workflow_status WHERE parent_workflow_id = ?
    UNION
    SELECT w.workflow_uuid, d.depth + 1
    FROM workflow_status w JOIN descendants d ON w.parent_workflow_id = d.workflow_uuid
    WHERE d.depth < 10000
)
SELECT workflow_uuid FROM descendants GROUP BY workflow_uuid ORDER BY MIN(depth), workflow_uuid`

// WorkflowChildren implements SystemDatabase.
func (s *SQLite) WorkflowChildren(ctx context.Context, workflowID string) ([]string, error) {
	var ids []string
	err := s.read(ctx, "list children of "+workflowID, func(tx *sql.Tx) error {
		var err error
		ids, err = sqliteStrings(tx.QueryContext(ctx, sqliteChildrenQuery, workflowID))
		return err
	})
	return ids, err
}

// sqliteStrings collects a one-column result.
func sqliteStrings(rows *sql.Rows, err error) ([]string, error) {
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

// withDescendants returns ids followed by every descendant not already in
// it, read in tx.
func sqliteWithDescendants(ctx context.Context, tx *sql.Tx, ids []string) ([]string, error) {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, id := range ids {
		children, err := sqliteStrings(tx.QueryContext(ctx, sqliteChildrenQuery, id))
		if err != nil {
			return nil, err
		}
		for _, c := range children {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// WorkflowFinish implements SystemDatabase.
func (s *SQLite) WorkflowFinish(ctx context.Context, in WorkflowFinishParams) (WorkflowFinishResult, error) {
	results, err := s.WorkflowFinishMany(ctx, []WorkflowFinishParams{in})
	if err != nil {
		return WorkflowFinishResult{}, err
	}
	return results[0].Result, results[0].Err
}

// WorkflowFinishMany implements SystemDatabase: one transaction (one
// fsync) for the batch; each outcome is written only while its run still
// owns the PENDING row. The output upsert overwrites: an earlier run that
// was cancelled or dead-lettered may have left an outcome behind.
func (s *SQLite) WorkflowFinishMany(ctx context.Context, outcomes []WorkflowFinishParams) ([]WorkflowFinishOutcome, error) {
	results, valid := checkFinishes(outcomes)
	if !valid {
		return results, nil
	}
	applied := map[finishRun]*string{}
	err := s.write(ctx, "finish workflows", func(tx *sql.Tx) error {
		clear(applied)
		update, err := tx.PrepareContext(ctx, `UPDATE workflow_status
			SET status = ?, updated_at = ?, completed_at = ?, deduplication_id = NULL, owner_xid = NULL
			WHERE workflow_uuid = ? AND status = 'PENDING' AND owner_xid = ?
			RETURNING serialization`)
		if err != nil {
			return err
		}
		defer update.Close()
		output, err := tx.PrepareContext(ctx, `INSERT INTO workflow_output (workflow_uuid, output, error, retention_timestamp)
			VALUES (?, ?, ?, ?)
			ON CONFLICT (workflow_uuid) DO UPDATE SET output = excluded.output, error = excluded.error`)
		if err != nil {
			return err
		}
		defer output.Close()
		now := nowMS()
		for i, in := range outcomes {
			if results[i].Err != nil {
				continue
			}
			if _, done := applied[finishRun{in.WorkflowID, in.OwnerXID}]; done {
				continue
			}
			var serialization *string
			err := update.QueryRowContext(ctx, in.Status, now, now, in.WorkflowID, in.OwnerXID).Scan(&serialization)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := output.ExecContext(ctx, in.WorkflowID, in.Output, in.Error, now); err != nil {
				return err
			}
			applied[finishRun{in.WorkflowID, in.OwnerXID}] = serialization
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	won := settleFinishes(ctx, outcomes, results, applied, s.WorkflowGet)
	s.notes.add(ChannelWorkflowStatus, won...)
	return results, nil
}

// WorkflowCancel implements SystemDatabase.
func (s *SQLite) WorkflowCancel(ctx context.Context, in WorkflowCancelParams) ([]string, error) {
	if len(in.WorkflowIDs) == 0 {
		return nil, nil
	}
	var found, changed []string
	err := s.write(ctx, "cancel workflows", func(tx *sql.Tx) error {
		ids := in.WorkflowIDs
		if in.IncludeChildren {
			var err error
			if ids, err = sqliteWithDescendants(ctx, tx, ids); err != nil {
				return err
			}
		}
		var owner any
		if in.OnlyIfOwnedByXID != "" {
			owner = in.OnlyIfOwnedByXID
		}
		now := nowMS()
		var err error
		found, changed, err = sqliteFlagged(ctx, tx, ids, `UPDATE workflow_status
			SET status = 'CANCELLED', updated_at = ?, completed_at = ?,
				started_at_epoch_ms = NULL, queue_name = NULL, deduplication_id = NULL, owner_xid = NULL
			WHERE workflow_uuid`+sqliteInList+`
			  AND status NOT IN ('SUCCESS', 'ERROR', 'CANCELLED')
			  AND (? IS NULL OR owner_xid = ?)
			RETURNING workflow_uuid`, now, now, sqliteList(ids), owner, owner)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.notes.add(ChannelWorkflowStatus, changed...)
	return found, nil
}

// sqliteFlagged reads which of ids exist, runs update (whose RETURNING
// lists the ids it changed), and returns the existing ids in stored order
// and the changed ones.
func sqliteFlagged(ctx context.Context, tx *sql.Tx, ids []string, update string, args ...any) (found, changed []string, err error) {
	found, err = sqliteStrings(tx.QueryContext(ctx, "SELECT workflow_uuid FROM workflow_status WHERE workflow_uuid"+sqliteInList, sqliteList(ids)))
	if err != nil || len(found) == 0 {
		return found, nil, err
	}
	if update == "" {
		return found, nil, nil
	}
	changed, err = sqliteStrings(tx.QueryContext(ctx, update, args...))
	return found, changed, err
}

// WorkflowResume implements SystemDatabase.
func (s *SQLite) WorkflowResume(ctx context.Context, in WorkflowResumeParams) ([]string, error) {
	if len(in.WorkflowIDs) == 0 {
		return nil, nil
	}
	queue := in.QueueName
	if queue == "" {
		queue = InternalQueueName
	}
	distinct := map[string]bool{}
	for _, id := range in.WorkflowIDs {
		distinct[id] = true
	}
	var found, changed []string
	err := s.write(ctx, "resume workflows", func(tx *sql.Tx) error {
		var err error
		found, _, err = sqliteFlagged(ctx, tx, in.WorkflowIDs, "")
		if err != nil || len(found) == 0 || (in.RequireAll && len(found) != len(distinct)) {
			changed = nil
			return err
		}
		changed, err = sqliteStrings(tx.QueryContext(ctx, `UPDATE workflow_status
			SET status = 'ENQUEUED', queue_name = ?, recovery_attempts = 0,
				workflow_deadline_epoch_ms = NULL, deduplication_id = NULL, owner_xid = NULL,
				started_at_epoch_ms = NULL, completed_at = NULL, updated_at = ?
			WHERE workflow_uuid`+sqliteInList+` AND status NOT IN ('SUCCESS', 'ERROR')
			RETURNING workflow_uuid`, queue, nowMS(), sqliteList(in.WorkflowIDs)))
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(changed) > 0 {
		s.notes.add(ChannelQueue, queue)
	}
	return found, nil
}

// WorkflowDelete implements SystemDatabase.
func (s *SQLite) WorkflowDelete(ctx context.Context, in WorkflowDeleteParams) error {
	if len(in.WorkflowIDs) == 0 {
		return nil
	}
	return s.write(ctx, "delete workflows", func(tx *sql.Tx) error {
		ids := in.WorkflowIDs
		if in.IncludeChildren {
			var err error
			if ids, err = sqliteWithDescendants(ctx, tx, ids); err != nil {
				return err
			}
		}
		list := sqliteList(ids)
		// The payload and step tables have no foreign key to
		// workflow_status; messages, events and streams cascade from it.
		for _, table := range []string{"workflow_input", "workflow_output", "operation_outputs", "workflow_status"} {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE workflow_uuid"+sqliteInList, list); err != nil {
				return err
			}
		}
		return nil
	})
}

// WorkflowRecover implements SystemDatabase.
func (s *SQLite) WorkflowRecover(ctx context.Context, in WorkflowRecoverParams) ([]string, error) {
	if len(in.ExecutorIDs) == 0 {
		return nil, nil
	}
	// NULLIF: rows of old SDKs stored "no queue" as the empty string.
	return s.collectQueued(ctx, "recover workflows", func(tx *sql.Tx) (*sql.Rows, error) {
		return tx.QueryContext(ctx, `UPDATE workflow_status
			SET status = 'ENQUEUED', owner_xid = NULL, started_at_epoch_ms = NULL,
				queue_name = COALESCE(NULLIF(queue_name, ''), ?), updated_at = ?
			WHERE status = 'PENDING'
			  AND executor_id`+sqliteInList+`
			  AND (? = '' OR application_version = ?)
			  AND (? IS NULL OR application_name = ? OR application_name IS NULL)
			RETURNING workflow_uuid, queue_name`,
			InternalQueueName, nowMS(), sqliteList(in.ExecutorIDs),
			in.ApplicationVersion, in.ApplicationVersion, in.ApplicationName, in.ApplicationName)
	})
}

// collectQueued runs, in one write transaction, the statements returning
// (id, queue) rows of workflows made available on queues, and announces each
// queue once committed.
func (s *SQLite) collectQueued(ctx context.Context, what string, run ...func(tx *sql.Tx) (*sql.Rows, error)) ([]string, error) {
	var ids, queues []string
	err := s.write(ctx, what, func(tx *sql.Tx) error {
		ids, queues = nil, nil
		for _, r := range run {
			rows, err := r(tx)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				var queue *string
				if err := rows.Scan(&id, &queue); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
				if queue != nil {
					queues = append(queues, *queue)
				}
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.notes.add(ChannelQueue, queues...)
	return ids, nil
}

// WorkflowRequeue implements SystemDatabase.
func (s *SQLite) WorkflowRequeue(ctx context.Context, claims []WorkflowClaim) ([]string, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	now := nowMS()
	run := make([]func(tx *sql.Tx) (*sql.Rows, error), len(claims))
	for i, c := range claims {
		run[i] = func(tx *sql.Tx) (*sql.Rows, error) {
			return tx.QueryContext(ctx, `UPDATE workflow_status
				SET status = 'ENQUEUED', owner_xid = NULL, started_at_epoch_ms = NULL,
					queue_name = COALESCE(NULLIF(queue_name, ''), ?), updated_at = ?
				WHERE workflow_uuid = ? AND owner_xid = ? AND status = 'PENDING'
				RETURNING workflow_uuid, queue_name`, InternalQueueName, now, c.WorkflowID, c.OwnerXID)
		}
	}
	return s.collectQueued(ctx, "requeue workflows", run...)
}

// WorkflowUnclaim implements SystemDatabase: claims that never reached a
// worker go back as they were. The claim counts as no attempt and no start
// against a rate limit, and where the claim carries what it overwrote the
// version, application, executor and deadline it stamped are restored.
func (s *SQLite) WorkflowUnclaim(ctx context.Context, claims []WorkflowClaim) ([]string, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	now := nowMS()
	run := make([]func(tx *sql.Tx) (*sql.Rows, error), len(claims))
	for i, c := range claims {
		restore := c.PreClaim != nil
		var pc PreClaim
		if restore {
			pc = *c.PreClaim
		}
		run[i] = func(tx *sql.Tx) (*sql.Rows, error) {
			return tx.QueryContext(ctx, `UPDATE workflow_status
				SET status = 'ENQUEUED', owner_xid = NULL, started_at_epoch_ms = NULL,
					queue_name = COALESCE(NULLIF(queue_name, ''), ?2), updated_at = ?3,
					recovery_attempts = MAX(COALESCE(recovery_attempts, 0) - 1, 0),
					rate_limited = 0,
					application_version = CASE WHEN ?1 THEN ?4 ELSE application_version END,
					application_name = CASE WHEN ?1 THEN ?5 ELSE application_name END,
					executor_id = CASE WHEN ?1 THEN ?6 ELSE executor_id END,
					workflow_deadline_epoch_ms = CASE WHEN ?1 THEN ?7 ELSE workflow_deadline_epoch_ms END
				WHERE workflow_uuid = ?8 AND owner_xid = ?9 AND status = 'PENDING'
				RETURNING workflow_uuid, queue_name`,
				sqliteBool(restore), InternalQueueName, now,
				pc.ApplicationVersion, pc.ApplicationName, pc.ExecutorID, pc.DeadlineEpochMS,
				c.WorkflowID, c.OwnerXID)
		}
	}
	return s.collectQueued(ctx, "unclaim workflows", run...)
}

// WorkflowOrphaned implements SystemDatabase.
func (s *SQLite) WorkflowOrphaned(ctx context.Context, in WorkflowOrphanedParams) ([]WorkflowClaim, error) {
	if in.OwnerPrefix == "" || in.ExecutorID == "" || in.Limit <= 0 {
		return nil, errors.New("workflow orphaned: an executor id, an owner prefix and a positive limit are required")
	}
	var claims []WorkflowClaim
	err := s.read(ctx, "list orphaned claims", func(tx *sql.Tx) error {
		claims = nil
		rows, err := tx.QueryContext(ctx, `SELECT workflow_uuid, owner_xid FROM workflow_status
			WHERE status = 'PENDING' AND executor_id = ?
			  AND substr(owner_xid, 1, ?) = ?
			  AND updated_at <= ?
			  AND owner_xid NOT`+sqliteInList+`
			ORDER BY updated_at, workflow_uuid
			LIMIT ?`,
			in.ExecutorID, len([]rune(in.OwnerPrefix)), in.OwnerPrefix, nowMS()-in.OlderThan.Milliseconds(),
			sqliteList(in.HeldTokens), in.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c WorkflowClaim
			if err := rows.Scan(&c.WorkflowID, &c.OwnerXID); err != nil {
				return err
			}
			claims = append(claims, c)
		}
		return rows.Err()
	})
	return claims, err
}

// WorkflowDeadLetter implements SystemDatabase.
func (s *SQLite) WorkflowDeadLetter(ctx context.Context, workflowIDs []string, minAttempts int64) ([]string, error) {
	if len(workflowIDs) == 0 {
		return nil, nil
	}
	var moved []string
	err := s.write(ctx, "dead-letter workflows", func(tx *sql.Tx) error {
		now := nowMS()
		var err error
		moved, err = sqliteStrings(tx.QueryContext(ctx, `UPDATE workflow_status
			SET status = 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', deduplication_id = NULL, started_at_epoch_ms = NULL,
				queue_name = NULL, owner_xid = NULL, updated_at = ?, completed_at = ?
			WHERE workflow_uuid`+sqliteInList+` AND status = 'PENDING' AND recovery_attempts >= ?
			RETURNING workflow_uuid`, now, now, sqliteList(workflowIDs), minAttempts))
		return err
	})
	if err != nil {
		return nil, err
	}
	s.notes.add(ChannelWorkflowStatus, moved...)
	return moved, nil
}

// StepRecord implements SystemDatabase.
func (s *SQLite) StepRecord(ctx context.Context, step StepRecordParams) error {
	results, err := s.StepRecordMany(ctx, []StepRecordParams{step})
	if err != nil {
		return err
	}
	return results[0]
}

// StepRecordMany implements SystemDatabase: the batch is one transaction,
// so one fsync (group commit). Under the write lock the owners read are
// those the inserts are checked against: no finish, cancel or recovery can
// change them in between.
func (s *SQLite) StepRecordMany(ctx context.Context, steps []StepRecordParams) ([]error, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	var results []error
	err := s.write(ctx, "record steps", func(tx *sql.Tx) error {
		results = make([]error, len(steps))
		return s.recordSteps(ctx, tx, steps, results)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// sqliteStepInsertChunk bounds the rows of one multi-row step insert
// (11 parameters a row, well under SQLite's 32766 parameters a statement).
const sqliteStepInsertChunk = 128

// recordSteps writes a batch inside tx: it reads the owners of the batch's
// workflows in one statement, inserts the records whose run owns its
// workflow in multi-row statements that report what they inserted, then
// compares the records that met an existing one with what is stored.
func (s *SQLite) recordSteps(ctx context.Context, tx *sql.Tx, steps []StepRecordParams, results []error) error {
	var workflowIDs []string
	owners := map[string]*string{} // present: the workflow exists
	for _, st := range steps {
		if _, seen := owners[st.WorkflowID]; !seen {
			owners[st.WorkflowID] = nil
			workflowIDs = append(workflowIDs, st.WorkflowID)
		}
	}
	clear(owners)
	rows, err := tx.QueryContext(ctx, "SELECT workflow_uuid, owner_xid FROM workflow_status WHERE workflow_uuid"+sqliteInList, sqliteList(workflowIDs))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var owner *string
		if err := rows.Scan(&id, &owner); err != nil {
			rows.Close()
			return err
		}
		owners[id] = owner
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}

	// Each record once (the first of duplicates in the batch is written;
	// the others are compared with it below).
	firstAt := map[stepRecordKey]int{}
	var writes []int
	for i, st := range steps {
		owner, exists := owners[st.WorkflowID]
		switch {
		case !exists:
			results[i] = &NotFoundError{WorkflowID: st.WorkflowID}
			continue
		case owner == nil || *owner != st.OwnerXID:
			results[i] = &FencedError{WorkflowID: st.WorkflowID}
			continue
		}
		key := stepRecordKey{st.WorkflowID, st.FunctionID, st.OwnerXID}
		if _, dup := firstAt[key]; !dup {
			firstAt[key] = i
			writes = append(writes, i)
		}
	}
	inserted := map[stepKey]bool{}
	now := nowMS()
	for start := 0; start < len(writes); start += sqliteStepInsertChunk {
		chunk := writes[start:min(start+sqliteStepInsertChunk, len(writes))]
		var q strings.Builder
		q.WriteString(`INSERT INTO operation_outputs (
			workflow_uuid, function_id, function_name, output, error, serialization,
			child_workflow_id, started_at_epoch_ms, completed_at_epoch_ms, application_name, retention_timestamp) VALUES `)
		args := make([]any, 0, 11*len(chunk))
		for j, i := range chunk {
			if j > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			st := steps[i]
			args = append(args, st.WorkflowID, st.FunctionID, st.Name, st.Output, st.Error, st.Serialization,
				st.ChildWorkflowID, st.StartedAt, st.CompletedAt, st.ApplicationName, now)
		}
		q.WriteString(" ON CONFLICT (workflow_uuid, function_id) DO NOTHING RETURNING workflow_uuid, function_id")
		rows, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			var fid int64
			if err := rows.Scan(&id, &fid); err != nil {
				rows.Close()
				return err
			}
			inserted[stepKey{id, int(fid)}] = true
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}

	var get *sql.Stmt
	for i, st := range steps {
		if results[i] != nil {
			continue
		}
		if inserted[stepKey{st.WorkflowID, st.FunctionID}] && firstAt[stepRecordKey{st.WorkflowID, st.FunctionID, st.OwnerXID}] == i {
			continue // durable once committed
		}
		// Met an existing record (earlier, or earlier in this batch):
		// compare with what is stored. The transaction sees its own writes.
		if get == nil {
			if get, err = tx.PrepareContext(ctx, "SELECT "+sqliteStepColumns+" FROM operation_outputs WHERE workflow_uuid = ? AND function_id = ?"); err != nil {
				return err
			}
			defer get.Close()
		}
		rec, err := scanSQLiteStep(get.QueryRowContext(ctx, st.WorkflowID, st.FunctionID))
		if err != nil {
			return fmt.Errorf("workflow %s step %d: read the conflicting record: %w", st.WorkflowID, st.FunctionID, err)
		}
		results[i] = compareStep(st, rec)
	}
	return nil
}

// StepList implements SystemDatabase.
func (s *SQLite) StepList(ctx context.Context, workflowID string) ([]Step, error) {
	var steps []Step
	err := s.read(ctx, "list steps of "+workflowID, func(tx *sql.Tx) error {
		steps = nil
		rows, err := tx.QueryContext(ctx, "SELECT "+sqliteStepColumns+" FROM operation_outputs WHERE workflow_uuid = ? ORDER BY function_id", workflowID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			st, err := scanSQLiteStep(rows)
			if err != nil {
				return err
			}
			steps = append(steps, st)
		}
		return rows.Err()
	})
	return steps, err
}

// StepListMany implements SystemDatabase.
func (s *SQLite) StepListMany(ctx context.Context, workflowIDs []string) (map[string][]Step, error) {
	out := map[string][]Step{}
	if len(workflowIDs) == 0 {
		return out, nil
	}
	err := s.read(ctx, "list steps", func(tx *sql.Tx) error {
		out = map[string][]Step{}
		rows, err := tx.QueryContext(ctx, "SELECT workflow_uuid, "+sqliteStepColumns+" FROM operation_outputs WHERE workflow_uuid"+sqliteInList+
			" ORDER BY workflow_uuid, function_id", sqliteList(workflowIDs))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			st, err := scanSQLiteStep(rows, &id)
			if err != nil {
				return err
			}
			out[id] = append(out[id], st)
		}
		return rows.Err()
	})
	return out, err
}

// sqliteJSONContainsFunc is the SQL function WorkflowList's attributes
// filter calls: Postgres's jsonb containment (@>), which DBOS queries
// attributes with, for SQLite, where attributes are JSON text.
const sqliteJSONContainsFunc = "dbos_agent_jsonb_contains"

func init() {
	// Registered before any connection opens: the driver installs it on
	// every new connection.
	err := sqlite.RegisterDeterministicScalarFunction(sqliteJSONContainsFunc, 2,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			container, ok1 := sqliteFuncText(args[0])
			contained, ok2 := sqliteFuncText(args[1])
			if !ok1 || !ok2 {
				return nil, nil // NULL in, NULL out, as @> is strict
			}
			ok, err := jsonContains(container, contained)
			if err != nil {
				return nil, err
			}
			return sqliteBool(ok), nil
		})
	if err != nil {
		panic("sysdb: register " + sqliteJSONContainsFunc + ": " + err.Error())
	}
}

// sqliteFuncText is a function argument as text (false for NULL).
func sqliteFuncText(v driver.Value) ([]byte, bool) {
	switch t := v.(type) {
	case string:
		return []byte(t), true
	case []byte:
		return t, true
	}
	return nil, false
}

// jsonContains reports whether the JSON document container contains
// contained as Postgres's jsonb @> decides: an object contains an object
// whose every key it has, with a value containing that key's value; an
// array contains an array whose every element some element of it contains
// (order and duplicates do not matter), and at top level a scalar equal to
// one of its elements; scalars contain only an equal scalar (numbers by
// value). contained must be JSON; a container that is not contains nothing.
func jsonContains(container, contained []byte) (bool, error) {
	b, err := decodeJSONNumbers(contained)
	if err != nil {
		return false, fmt.Errorf("%s: contained value is not JSON: %w", sqliteJSONContainsFunc, err)
	}
	a, err := decodeJSONNumbers(container)
	if err != nil {
		// A column another client filled with text that is not JSON (jsonb
		// admits none on Postgres) contains nothing, rather than failing
		// every listing that filters on it.
		return false, nil
	}
	if arr, ok := a.([]any); ok {
		switch b.(type) {
		case []any, map[string]any:
		default:
			for _, e := range arr {
				if jsonValueContains(e, b) {
					return true, nil
				}
			}
			return false, nil
		}
	}
	return jsonValueContains(a, b), nil
}

func decodeJSONNumbers(doc []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func jsonValueContains(a, b any) bool {
	switch bv := b.(type) {
	case map[string]any:
		av, ok := a.(map[string]any)
		if !ok {
			return false
		}
		for k, want := range bv {
			have, ok := av[k]
			if !ok || !jsonValueContains(have, want) {
				return false
			}
		}
		return true
	case []any:
		av, ok := a.([]any)
		if !ok {
			return false
		}
		for _, want := range bv {
			found := false
			for _, have := range av {
				if jsonValueContains(have, want) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	case json.Number:
		an, ok := a.(json.Number)
		if !ok {
			return false
		}
		x, okx := new(big.Rat).SetString(an.String())
		y, oky := new(big.Rat).SetString(bv.String())
		if !okx || !oky {
			return an == bv
		}
		return x.Cmp(y) == 0
	default: // string, bool, nil
		switch a.(type) {
		case map[string]any, []any, json.Number:
			return false
		}
		return a == b
	}
}
