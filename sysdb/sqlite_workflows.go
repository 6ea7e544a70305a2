package sysdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	if in.ID == "" || in.Name == "" {
		return WorkflowInsertResult{}, errors.New("workflow insert: id and name are required")
	}
	switch in.Status {
	case StatusPending, StatusEnqueued, StatusDelayed:
	default:
		return WorkflowInsertResult{}, fmt.Errorf("workflow insert: status must be PENDING, ENQUEUED or DELAYED, not %q", in.Status)
	}
	if in.CreatorXID == "" {
		return WorkflowInsertResult{}, errors.New("workflow insert: a creator token is required")
	}
	if in.Attributes != nil && !json.Valid([]byte(*in.Attributes)) {
		// Postgres refuses it as jsonb; the file must hold what DBOS Python
		// can json.loads.
		return WorkflowInsertResult{}, fmt.Errorf("workflow insert %s: attributes are not JSON: %s", in.ID, strconv.Quote(*in.Attributes))
	}
	if parent := in.ParentStep; parent != nil {
		if err := checkCaller(parent); err != nil {
			return WorkflowInsertResult{}, fmt.Errorf("workflow insert %s: parent step: %w", in.ID, err)
		}
		if in.ParentWorkflowID == nil || *in.ParentWorkflowID != parent.WorkflowID {
			return WorkflowInsertResult{}, fmt.Errorf("workflow insert %s: the parent step is of %s but the parent workflow is %q",
				in.ID, parent.WorkflowID, deref(in.ParentWorkflowID))
		}
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

// insertWorkflow is WorkflowInsert's transaction: the parent's fence, the
// row (unless its id exists), its inputs, and the parent's step.
func (s *SQLite) insertWorkflow(ctx context.Context, tx *sql.Tx, in WorkflowInsertParams, res *WorkflowInsertResult) error {
	if in.ParentStep != nil {
		if err := sqliteOwnerOf(ctx, tx, *in.ParentStep); err != nil {
			return err
		}
	}
	var className, configName, creator *string
	readStored := func() error {
		return tx.QueryRowContext(ctx, `SELECT status, name, class_name, config_name, queue_name, queue_partition_key,
				workflow_timeout_ms, workflow_deadline_epoch_ms, owner_xid, creator_xid
			FROM workflow_status WHERE workflow_uuid = ?`, in.ID).
			Scan(&res.Status, &res.Name, &className, &configName, &res.QueueName, &res.QueuePartitionKey,
				&res.TimeoutMS, &res.DeadlineEpochMS, &res.OwnerXID, &creator)
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
			// Another child at the step (this request's own earlier write,
			// its acknowledgement lost, names this child).
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
		err := tx.QueryRowContext(ctx, `SELECT CAST(created_at AS INTEGER) FROM workflow_status
			WHERE queue_name = ? AND status = 'ENQUEUED' AND priority = ?
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
	if isSQLiteConstraint(err, 0) && in.DeduplicationID != nil {
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

var _ = strings.Join
