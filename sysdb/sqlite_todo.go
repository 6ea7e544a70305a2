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

// ---- end of group D ----

// (separator)
