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

// ---- group C: queues, versions, schedules (sqlite_queues.go) ----

func (*SQLite) QueueDequeue(ctx context.Context, p QueueDequeueParams) (r0 []Workflow, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) QueueList(ctx context.Context) (r0 []QueueSummary, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) QueueRegister(ctx context.Context, p QueueRegisterParams) (r0 QueueConfig, r1 bool, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) QueueRegisterMany(ctx context.Context, p []QueueRegisterParams) (r0 []QueueRegisterResult, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) QueueGet(ctx context.Context, name string) (r0 QueueConfig, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) QueueDelete(ctx context.Context, name string) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) QueuePartitions(ctx context.Context, queue string) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowByDeduplicationID(ctx context.Context, queue, deduplicationID string) (r0 string, r1 bool, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowReleaseDelayed(ctx context.Context, applicationName *string) (r0 []QueuedWorkflow, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowSetPriority(ctx context.Context, workflowID string, priority int) (r0 bool, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowSetDelay(ctx context.Context, workflowID string, delayUntilEpochMS int64) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowCancelTimedOut(ctx context.Context, limit int, applicationName *string) (r0 []string, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) WorkflowDebounce(ctx context.Context, p WorkflowDebounceParams) (r0 DebounceResult, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) VersionRegister(ctx context.Context, name string, applicationName *string) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) VersionList(ctx context.Context, applicationName *string) (r0 []AppVersion, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) VersionPromote(ctx context.Context, name string, applicationName *string) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) VersionLatest(ctx context.Context, applicationName *string) (r0 AppVersion, r1 bool, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) ScheduleCreate(ctx context.Context, s Schedule) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) ScheduleGet(ctx context.Context, name string) (r0 Schedule, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) ScheduleList(ctx context.Context, p ScheduleListParams) (r0 []Schedule, err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) ScheduleSetStatus(ctx context.Context, name, status string) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) ScheduleDelete(ctx context.Context, name string) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) ScheduleSetLastFired(ctx context.Context, name string, firedAt time.Time) (err error) {
	err = errSQLiteTODO
	return
}

func (*SQLite) ApplicationRename(ctx context.Context, p ApplicationRenameParams) (r0 ApplicationRowCounts, err error) {
	err = errSQLiteTODO
	return
}

// ---- end of group C ----

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
