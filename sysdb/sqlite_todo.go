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

func (*SQLite) MessageSend(ctx context.Context, p MessageSendParams) (r0 bool, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) MessageConsume(ctx context.Context, p MessageConsumeParams) (r0 Received, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) MessageList(ctx context.Context, destinationID string) (r0 []Notification, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) SleepRecord(ctx context.Context, p SleepParams) (r0 SleepTimes, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) EventSet(ctx context.Context, p EventSetParams) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) EventGet(ctx context.Context, workflowID, key string) (r0 *Payload, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) EventList(ctx context.Context, workflowID string) (r0 []Event, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) EventHistory(ctx context.Context, workflowID string) (r0 []EventHistoryEntry, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StreamWrite(ctx context.Context, p StreamWriteParams) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StreamRead(ctx context.Context, workflowID, key string, offset, limit int) (r0 StreamRead, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StreamList(ctx context.Context, workflowID string) (r0 []StreamEntry, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) StepGet(ctx context.Context, workflowID string, functionID int) (r0 *Step, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowFork(ctx context.Context, p WorkflowForkParams) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowRewind(ctx context.Context, p WorkflowRewindParams) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowSetAttributes(ctx context.Context, workflowID string, attributes *string, merge bool) (err error) {
	err = errSQLiteTODO
	return
}

// ---- end of group D ----

// (separator)
