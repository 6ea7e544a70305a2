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
