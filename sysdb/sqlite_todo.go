package sysdb

import (
	"context"
	"errors"
	"time"
)

// TEMPORARY while the SQLite backend is written: each group below is
// deleted as its file implements it, and this file with the last.
var errSQLiteTODO = errors.New("not yet implemented on SQLite")

var _ = time.Second

// ---- group B: workflows and steps (sqlite_workflows.go) ----

func (*SQLite) WorkflowList(ctx context.Context, p WorkflowListParams) (r0 []Workflow, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowChildren(ctx context.Context, workflowID string) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowFinish(ctx context.Context, p WorkflowFinishParams) (r0 WorkflowFinishResult, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowFinishMany(ctx context.Context, outcomes []WorkflowFinishParams) (r0 []WorkflowFinishOutcome, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowCancel(ctx context.Context, p WorkflowCancelParams) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowResume(ctx context.Context, p WorkflowResumeParams) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowDelete(ctx context.Context, p WorkflowDeleteParams) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowRecover(ctx context.Context, p WorkflowRecoverParams) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowRequeue(ctx context.Context, claims []WorkflowClaim) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowUnclaim(ctx context.Context, claims []WorkflowClaim) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowOrphaned(ctx context.Context, p WorkflowOrphanedParams) (r0 []WorkflowClaim, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowDeadLetter(ctx context.Context, workflowIDs []string, minAttempts int64) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StepRecord(ctx context.Context, p StepRecordParams) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StepRecordMany(ctx context.Context, steps []StepRecordParams) (r0 []error, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StepList(ctx context.Context, workflowID string) (r0 []Step, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StepListMany(ctx context.Context, workflowIDs []string) (r0 map[string][]Step, err error) {
	err = errSQLiteTODO
	return
}

// ---- end of group B ----

// (separator)

// (separator)

// ---- group D: communication (sqlite_communication.go) ----

// ---- end of group D ----

// (separator)
