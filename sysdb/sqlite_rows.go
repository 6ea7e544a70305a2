package sysdb

import (
	"database/sql"
	"encoding/json"
	"strings"
)

// Row scanning shared by the SQLite backend's files: the workflow select
// list and its scanner, the step columns, and list parameters.

// sqliteRowScanner is a *sql.Row or *sql.Rows.
type sqliteRowScanner interface {
	Scan(dest ...any) error
}

// sqliteWorkflowColumns are read for every workflow, in scanSQLiteWorkflow's
// order. The instants DBOS Python stamps are cast to INTEGER: a row written
// by another client with a REAL clock value still reads as epoch ms.
var sqliteWorkflowColumns = []string{
	"w.workflow_uuid", "w.status", "w.name", "w.class_name", "w.config_name",
	"w.queue_name", "w.queue_partition_key", "w.deduplication_id", "w.priority",
	"w.authenticated_user", "w.assumed_role", "w.authenticated_roles",
	"w.executor_id", "w.application_version", "w.application_id", "w.application_name",
	"CAST(w.created_at AS INTEGER)", "CAST(w.updated_at AS INTEGER)",
	"CAST(w.started_at_epoch_ms AS INTEGER)", "CAST(w.completed_at AS INTEGER)",
	"w.recovery_attempts", "w.workflow_timeout_ms", "w.workflow_deadline_epoch_ms", "w.delay_until_epoch_ms",
	"w.forked_from", "w.was_forked_from", "w.parent_workflow_id", "w.owner_xid", "w.creator_xid",
	"w.rate_limited", "w.attributes", "w.schedule_name", "w.debounce_deadline_epoch_ms", "w.is_debounced",
	"w.serialization",
}

// sqliteWorkflowSelect is "SELECT <columns> FROM workflow_status AS w [joins]"
// for scanSQLiteWorkflow with the same flags; callers append WHERE/ORDER BY
// on alias w.
func sqliteWorkflowSelect(loadInputs, loadOutputs bool) string {
	cols := append([]string(nil), sqliteWorkflowColumns...)
	from := "workflow_status AS w"
	// COALESCE: rows written before the payload tables existed keep their
	// payloads on workflow_status.
	if loadInputs {
		cols = append(cols, "COALESCE(i.inputs, w.inputs)")
		from += " LEFT JOIN workflow_input AS i ON i.workflow_uuid = w.workflow_uuid"
	}
	if loadOutputs {
		cols = append(cols, "COALESCE(o.output, w.output)", "COALESCE(o.error, w.error)")
		from += " LEFT JOIN workflow_output AS o ON o.workflow_uuid = w.workflow_uuid"
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + from
}

// scanSQLiteWorkflow reads one row selected by sqliteWorkflowSelect with the
// same flags. Columns NULL in rows other clients wrote (status, name,
// recovery_attempts, the booleans) read as zero values.
func scanSQLiteWorkflow(sc sqliteRowScanner, loadInputs, loadOutputs bool) (Workflow, error) {
	var w Workflow
	var status, name, attributes sql.NullString
	var priority, recoveryAttempts sql.NullInt64
	var wasForked, rateLimited, debounced sql.NullBool
	dest := []any{
		&w.ID, &status, &name, &w.ClassName, &w.ConfigName,
		&w.QueueName, &w.QueuePartitionKey, &w.DeduplicationID, &priority,
		&w.AuthenticatedUser, &w.AssumedRole, &w.AuthenticatedRoles,
		&w.ExecutorID, &w.ApplicationVersion, &w.ApplicationID, &w.ApplicationName,
		&w.CreatedAt, &w.UpdatedAt, &w.StartedAt, &w.CompletedAt,
		&recoveryAttempts, &w.TimeoutMS, &w.DeadlineEpochMS, &w.DelayUntilEpochMS,
		&w.ForkedFrom, &wasForked, &w.ParentWorkflowID, &w.OwnerXID, &w.CreatorXID,
		&rateLimited, &attributes, &w.ScheduleName, &w.DebounceDeadline, &debounced,
		&w.Serialization,
	}
	if loadInputs {
		dest = append(dest, &w.Inputs)
	}
	if loadOutputs {
		dest = append(dest, &w.Output, &w.Error)
	}
	if err := sc.Scan(dest...); err != nil {
		return Workflow{}, err
	}
	w.Status, w.Name = status.String, name.String
	w.Priority = int(priority.Int64)
	w.RecoveryAttempts = recoveryAttempts.Int64
	w.WasForkedFrom, w.RateLimited, w.IsDebounced = wasForked.Bool, rateLimited.Bool, debounced.Bool
	if attributes.Valid {
		a := attributes.String
		w.Attributes = &a
	}
	w.PayloadsLoaded = loadInputs && loadOutputs
	return w, nil
}

// scanSQLiteWorkflows reads every row of rows (selected by
// sqliteWorkflowSelect with the same flags) and closes it.
func scanSQLiteWorkflows(rows *sql.Rows, loadInputs, loadOutputs bool) ([]Workflow, error) {
	defer rows.Close()
	var out []Workflow
	for rows.Next() {
		w, err := scanSQLiteWorkflow(rows, loadInputs, loadOutputs)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// sqliteStepColumns are an operation_outputs row in scanSQLiteStep's order.
const sqliteStepColumns = "function_id, function_name, output, error, serialization, child_workflow_id, " +
	"CAST(started_at_epoch_ms AS INTEGER), CAST(completed_at_epoch_ms AS INTEGER)"

// scanSQLiteStep reads sqliteStepColumns, after any leading destinations
// (such as the workflow id) given in before.
func scanSQLiteStep(sc sqliteRowScanner, before ...any) (Step, error) {
	var s Step
	var fid int64
	dest := append(before, &fid, &s.Name, &s.Output, &s.Error, &s.Serialization, &s.ChildWorkflowID, &s.StartedAt, &s.CompletedAt)
	if err := sc.Scan(dest...); err != nil {
		return Step{}, err
	}
	s.FunctionID = int(fid)
	return s, nil
}

// sqliteList is a list parameter: the values as a JSON array, for
// "column IN (SELECT value FROM json_each(?))", so that a list of any length
// is one parameter (SQLite has no arrays, and caps parameters per statement).
func sqliteList[T any](values []T) string {
	if len(values) == 0 {
		return "[]"
	}
	b, err := json.Marshal(values)
	if err != nil {
		panic("sysdb: list parameter: " + err.Error()) // strings and numbers always marshal
	}
	return string(b)
}

// sqliteInList is the SQL "IN (SELECT value FROM json_each(?))" that matches
// a sqliteList parameter.
const sqliteInList = " IN (SELECT value FROM json_each(?))"

// sqliteNullString is a *string as a driver value (nil: NULL).
func sqliteNullString(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// sqliteNullInt64 is a *int64 as a driver value (nil: NULL).
func sqliteNullInt64(v *int64) any {
	if v == nil {
		return nil
	}
	return *v
}

// sqliteBool is a bool as DBOS Python stores one on SQLite (SQLAlchemy's
// Boolean: 0 or 1).
func sqliteBool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
