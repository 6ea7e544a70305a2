// Package sysdb owns the DBOS system database: its schema and migrations, and
// every query the agent runs against it, behind the SystemDatabase interface.
//
// The interface speaks in plain Go values (strings, int64 epoch milliseconds,
// pointers for SQL NULL); no driver type appears in a signature, so a second
// backend can be held to the same conformance suite. Payloads (inputs,
// outputs, errors) are opaque strings with a serialization tag: this layer
// never decodes them.
package sysdb

import (
	"context"
	"fmt"
	"time"
)

// Workflow statuses as the DBOS SDKs store them.
const (
	StatusPending                     = "PENDING"
	StatusEnqueued                    = "ENQUEUED"
	StatusDelayed                     = "DELAYED"
	StatusSuccess                     = "SUCCESS"
	StatusError                       = "ERROR"
	StatusCancelled                   = "CANCELLED"
	StatusMaxRecoveryAttemptsExceeded = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
)

// InternalQueueName is the queue every DBOS runtime polls: recovered and
// resumed workflows that had no queue of their own go there.
const InternalQueueName = "_dbos_internal_queue"

// SystemDatabase is everything the engine needs from the system database for
// workflows and steps. Implementations must be safe for concurrent use.
//
// Methods follow a noun-first naming (WorkflowInsert, StepRecord) and take one
// params struct where there is more than an id, so that adding a field is not
// a signature change.
type SystemDatabase interface {
	// WorkflowInsert creates a workflow row, or recognises an existing one.
	// It is idempotent on the id: inserting an id that exists returns the
	// stored row's identity with Created=false, unless the stored name or
	// queue differ from the request (ConflictingWorkflowError). A duplicate
	// deduplication id on an active row of the same queue is a
	// DeduplicatedError. An enqueued or delayed row's created_at is above
	// that of every row of its queue and priority waiting ENQUEUED, so an
	// enqueue made after another returned is dequeued after it by every
	// DBOS SDK, which order by (priority, created_at) alone.
	WorkflowInsert(ctx context.Context, p WorkflowInsertParams) (WorkflowInsertResult, error)

	// WorkflowGet returns one workflow with its inputs and outcome, or a
	// NotFoundError.
	WorkflowGet(ctx context.Context, workflowID string) (Workflow, error)

	// WorkflowList returns the workflows matching every filter set in p.
	WorkflowList(ctx context.Context, p WorkflowListParams) ([]Workflow, error)

	// WorkflowChildren returns the ids of every descendant of workflowID
	// (children, grandchildren, ...), breadth first.
	WorkflowChildren(ctx context.Context, workflowID string) ([]string, error)

	// WorkflowFinish records a run's outcome, provided the row is still
	// PENDING and owned by p.OwnerXID. A run that lost the race learns the
	// stored state instead (Applied=false).
	WorkflowFinish(ctx context.Context, p WorkflowFinishParams) (WorkflowFinishResult, error)

	// WorkflowFinishMany records many outcomes in one transaction, each as
	// WorkflowFinish would, and returns one outcome per input, in order. The
	// error return is for failures of the whole batch (nothing was
	// committed).
	WorkflowFinishMany(ctx context.Context, outcomes []WorkflowFinishParams) ([]WorkflowFinishOutcome, error)

	// WorkflowCancel marks the workflows (and their descendants when asked)
	// CANCELLED unless they already finished, and returns the ids that exist.
	WorkflowCancel(ctx context.Context, p WorkflowCancelParams) ([]string, error)

	// WorkflowResume puts the workflows back on a queue (the internal queue by
	// default) with a fresh recovery budget unless they succeeded or failed,
	// and returns the ids that exist.
	WorkflowResume(ctx context.Context, p WorkflowResumeParams) ([]string, error)

	// WorkflowDelete removes the workflows (and their descendants when asked)
	// with everything stored under them.
	WorkflowDelete(ctx context.Context, p WorkflowDeleteParams) error

	// WorkflowRecover re-enqueues the PENDING workflows of the given
	// executors and version for another run, on their own queue or the
	// internal queue, and returns their ids.
	WorkflowRecover(ctx context.Context, p WorkflowRecoverParams) ([]string, error)

	// WorkflowRequeue hands specific claimed workflows back to their queue
	// when the run that owned them is gone (a worker's connection closed).
	// Only rows still PENDING and owned by the given token move.
	WorkflowRequeue(ctx context.Context, claims []WorkflowClaim) ([]string, error)

	// WorkflowUnclaim hands back claimed workflows that never reached a
	// worker (none could take them): like WorkflowRequeue, but the claim
	// does not count as a recovery attempt nor against a rate limit, and
	// what it stamped is restored from each claim's PreClaim.
	WorkflowUnclaim(ctx context.Context, claims []WorkflowClaim) ([]string, error)

	// WorkflowOrphaned lists the PENDING workflows of p.ExecutorID whose
	// owner token starts with p.OwnerPrefix and whose row has not changed
	// for p.OlderThan: claims one agent made that may have no live run
	// (the rescuer then keeps those no run holds and requeues them).
	WorkflowOrphaned(ctx context.Context, p WorkflowOrphanedParams) ([]WorkflowClaim, error)

	// WorkflowDeadLetter moves claimed workflows whose recovery attempts
	// reached minAttempts to MAX_RECOVERY_ATTEMPTS_EXCEEDED and returns the
	// ids it moved.
	WorkflowDeadLetter(ctx context.Context, workflowIDs []string, minAttempts int64) ([]string, error)

	// StepRecord checkpoints one step. See StepRecordMany.
	StepRecord(ctx context.Context, p StepRecordParams) error

	// StepRecordMany checkpoints many steps in one transaction and returns
	// one result per input, in order (nil for a durable record). A step is
	// recorded only while its workflow is owned by the record's OwnerXID
	// (else FencedError); a step id holds one record: a retried write of the
	// same record succeeds, another name at that id is an
	// UnexpectedStepError and other content a StepConflictError. The error
	// return is for failures of the whole batch (nothing was committed).
	StepRecordMany(ctx context.Context, steps []StepRecordParams) ([]error, error)

	// StepList returns the recorded steps of a workflow by function id.
	StepList(ctx context.Context, workflowID string) ([]Step, error)

	// StepListMany returns the recorded steps of several workflows in one
	// read, by workflow id (workflows without steps have no entry).
	StepListMany(ctx context.Context, workflowIDs []string) (map[string][]Step, error)

	// QueueDequeue claims up to the limits' worth of ENQUEUED workflows of
	// one queue (or of one partition of it) for this executor, in
	// (priority, created_at) order, and returns them with their inputs, each
	// with a fresh owner token. Losing a race for the rows to another
	// executor is not an error: the claim is empty and the next poll tries
	// again. Partition limits without a PartitionKey are an error.
	QueueDequeue(ctx context.Context, p QueueDequeueParams) ([]Workflow, error)

	// QueueList summarises every queue: those registered in the queues
	// table and those that active workflows name.
	QueueList(ctx context.Context) ([]QueueSummary, error)

	// QueueSystem holds queue registrations, delays, debounce, timeouts,
	// application versions and schedules.
	QueueSystem

	// Communication holds messages, events, streams, sleeps, fork, rewind
	// and attributes.
	Communication

	// Close releases the database connections.
	Close()
}

// QueueSummary is one queue's registration (when it has one) and how many
// of its workflows are in each active state.
type QueueSummary struct {
	Name               string
	Registered         bool
	Concurrency        *int
	WorkerConcurrency  *int
	RateLimitMax       *int
	RateLimitPeriodSec *float64
	PriorityEnabled    bool
	PartitionQueue     bool
	ApplicationName    *string
	Enqueued           int64
	Pending            int64
	Delayed            int64
}

// Workflow is one row of workflow_status with its payloads. Instants are
// epoch milliseconds; nil means SQL NULL.
type Workflow struct {
	ID                 string
	Status             string
	Name               string
	ClassName          *string
	ConfigName         *string
	QueueName          *string
	QueuePartitionKey  *string
	DeduplicationID    *string
	Priority           int
	AuthenticatedUser  *string
	AssumedRole        *string
	AuthenticatedRoles *string
	ExecutorID         *string
	ApplicationVersion *string
	ApplicationID      *string
	ApplicationName    *string
	CreatedAt          int64
	UpdatedAt          int64
	StartedAt          *int64
	CompletedAt        *int64
	RecoveryAttempts   int64
	TimeoutMS          *int64
	DeadlineEpochMS    *int64
	DelayUntilEpochMS  *int64
	ForkedFrom         *string
	WasForkedFrom      bool
	ParentWorkflowID   *string
	OwnerXID           *string
	CreatorXID         *string
	RateLimited        bool
	Attributes         *string // JSON object text
	ScheduleName       *string
	DebounceDeadline   *int64
	IsDebounced        bool
	// Serialization tags Inputs, Output and Error.
	Serialization *string
	Inputs        *string
	Output        *string
	Error         *string
	// PayloadsLoaded says whether Inputs/Output/Error were read.
	PayloadsLoaded bool
	// PreClaim is set on the workflows QueueDequeue returns: the row before
	// the claim, for WorkflowUnclaim.
	PreClaim *PreClaim
}

// Active reports whether the workflow may still run.
func (w Workflow) Active() bool {
	return w.Status == StatusPending || w.Status == StatusEnqueued || w.Status == StatusDelayed
}

// WorkflowInsertParams describes a new workflow row.
type WorkflowInsertParams struct {
	ID     string
	Name   string
	Status string // PENDING (direct start), ENQUEUED or DELAYED
	// CreatorXID is the inserting request's token: a retry with the same
	// token recognises its own row (Created=true again). For a PENDING
	// insert it also becomes the owner token of the run.
	CreatorXID         string
	ClassName          *string
	ConfigName         *string
	QueueName          *string
	QueuePartitionKey  *string
	DeduplicationID    *string
	Priority           int
	AuthenticatedUser  *string
	AssumedRole        *string
	AuthenticatedRoles *string
	ExecutorID         string
	ApplicationVersion *string
	ApplicationID      *string
	ApplicationName    *string
	TimeoutMS          *int64
	DeadlineEpochMS    *int64
	DelayUntilEpochMS  *int64
	ParentWorkflowID   *string
	Attributes         *string
	ScheduleName       *string
	DebounceDeadline   *int64
	IsDebounced        bool
	Serialization      *string
	Inputs             *string
	// RejectExisting makes an id already taken by another request's row a
	// WorkflowIDInUseError (DBOS's workflow_id_reuse_policy "reject"), found
	// before any other conflict and changing nothing; a retry of the
	// request that made the row (same CreatorXID) still recognises it.
	RejectExisting bool
	// ParentStep, for a child started from workflow code, records the
	// parent's step ParentStep.FunctionID (named Name, pointing at this
	// child) in the insert's transaction, while ParentStep.OwnerXID owns the
	// parent (else FencedError). Another child recorded at that step is an
	// UnexpectedStepError. ParentWorkflowID must name the same parent.
	ParentStep *StepCaller
}

// WorkflowInsertResult is the identity of the stored row after an insert.
type WorkflowInsertResult struct {
	// Created is true when this request (by its CreatorXID) made the row.
	Created           bool
	Status            string
	Name              string
	QueueName         *string
	QueuePartitionKey *string
	TimeoutMS         *int64
	DeadlineEpochMS   *int64
	OwnerXID          *string
}

// WorkflowListParams filters a listing; zero values do not filter.
type WorkflowListParams struct {
	WorkflowIDs        []string
	IDPrefixes         []string
	Statuses           []string
	Names              []string
	QueueNames         []string
	QueuesOnly         bool // with no Statuses: DELAYED, ENQUEUED and PENDING only, as DBOS
	ExecutorIDs        []string
	ApplicationVersion []string
	ApplicationNames   []string
	AuthenticatedUsers []string
	ParentWorkflowIDs  []string
	ForkedFrom         []string
	DeduplicationIDs   []string
	ScheduleNames      []string
	CreatedAfter       *int64 // inclusive, epoch ms
	CreatedBefore      *int64 // inclusive, epoch ms
	CompletedAfter     *int64
	CompletedBefore    *int64
	StartedAfter       *int64
	StartedBefore      *int64
	HasParent          *bool
	IsFork             *bool
	// WasForkedFrom matches the workflows a fork was made from (true) or
	// not (false), DBOS's was_forked_from column.
	WasForkedFrom *bool
	// Attributes (JSON object text) matches the workflows whose attributes
	// contain it, as DBOS queries them: jsonb containment (@>), which the
	// partial GIN index on attributes serves. Not an object is an error.
	Attributes *string
	Limit      int // 0 = no limit
	Offset     int
	SortDesc   bool
	// LoadInputs and LoadOutputs read the payload tables too.
	LoadInputs  bool
	LoadOutputs bool
}

// WorkflowFinishParams is a run's outcome.
type WorkflowFinishParams struct {
	WorkflowID string
	OwnerXID   string
	Status     string // SUCCESS or ERROR
	Output     *string
	Error      *string
}

// WorkflowFinishResult says whether the outcome was stored and, when it was
// not, what the row holds instead.
type WorkflowFinishResult struct {
	Applied bool
	// Stored is the outcome that stands. For a winner only ID, Status,
	// Output, Error and Serialization are set (it is the request's own
	// outcome, not read back); for a loser it is the whole row, with
	// payloads, carrying the winner's outcome.
	Stored Workflow
}

// WorkflowFinishOutcome is one outcome of a WorkflowFinishMany: the result,
// or why that outcome could not be recorded.
type WorkflowFinishOutcome struct {
	Result WorkflowFinishResult
	Err    error
}

// WorkflowCancelParams selects workflows to cancel.
type WorkflowCancelParams struct {
	WorkflowIDs      []string
	IncludeChildren  bool
	OnlyIfOwnedByXID string // when set, cancel only while this token owns the row
}

// WorkflowResumeParams selects workflows to resume.
type WorkflowResumeParams struct {
	WorkflowIDs []string
	QueueName   string // empty = InternalQueueName
	// RequireAll resumes nothing unless every id exists (DBOS Python's
	// resume_workflows is all or nothing); the ids found are returned
	// either way, so the caller can name the missing ones.
	RequireAll bool
}

// WorkflowDeleteParams selects workflows to delete.
type WorkflowDeleteParams struct {
	WorkflowIDs     []string
	IncludeChildren bool
}

// WorkflowRecoverParams selects the PENDING workflows to recover.
type WorkflowRecoverParams struct {
	ExecutorIDs        []string
	ApplicationVersion string  // empty = any version
	ApplicationName    *string // nil = any application; else mine or unclaimed
}

// WorkflowClaim names a run: a workflow and the owner token of that run.
type WorkflowClaim struct {
	WorkflowID string
	OwnerXID   string
	// PreClaim, for WorkflowUnclaim, is the row as it was before the claim
	// (the claimed Workflow's PreClaim); nil keeps what the claim stamped.
	PreClaim *PreClaim
}

// PreClaim is what a dequeue's claim overwrote in a workflow row: it stamps
// the claimer's version, application and executor, and starts the timeout's
// clock. WorkflowUnclaim puts these back, so that a claim that reached no
// worker leaves the row as its enqueuer wrote it. Otherwise an unversioned
// row claimed for a worker that left meanwhile would belong to that
// worker's version from then on, and the latest version's workers, the
// only ones that take unversioned work, would never run it.
type PreClaim struct {
	ApplicationVersion *string
	ApplicationName    *string
	ExecutorID         *string
	DeadlineEpochMS    *int64
}

// WorkflowOrphanedParams selects the claims WorkflowOrphaned lists.
type WorkflowOrphanedParams struct {
	ExecutorID string
	// OwnerPrefix is required: a claim of another process (an SDK on the
	// same executor id) is never listed.
	OwnerPrefix string
	// OlderThan is measured on the database's clock against updated_at.
	OlderThan time.Duration
	// HeldTokens are the owner tokens of live runs: their rows are not
	// listed, however old.
	HeldTokens []string
	// Limit bounds one listing (required, > 0).
	Limit int
}

// StepRecordParams is one step's checkpoint.
type StepRecordParams struct {
	WorkflowID      string
	OwnerXID        string
	FunctionID      int
	Name            string
	Output          *string
	Error           *string
	Serialization   *string
	ChildWorkflowID *string
	StartedAt       *int64 // epoch ms
	CompletedAt     *int64
	ApplicationName *string
}

// Step is one recorded row of operation_outputs.
type Step struct {
	FunctionID      int
	Name            string
	Output          *string
	Error           *string
	Serialization   *string
	ChildWorkflowID *string
	StartedAt       *int64
	CompletedAt     *int64
}

// QueueLimits are a queue's flow-control options as DBOS defines them.
type QueueLimits struct {
	// GlobalConcurrency caps PENDING workflows of the queue across all
	// executors.
	GlobalConcurrency *int
	// WorkerConcurrency caps what this worker runs; LocalRunning is how many
	// it runs now.
	WorkerConcurrency *int
	LocalRunning      int
	// RateLimitMax workflows may start per RateLimitPeriod.
	RateLimitMax    *int
	RateLimitPeriod time.Duration
	// The Partition limits apply within the dequeue's PartitionKey, the
	// limits above to the whole queue even when a PartitionKey is set.
	// PartitionLocalRunning is how many of the partition this worker runs.
	PartitionConcurrency       *int
	PartitionWorkerConcurrency *int
	PartitionLocalRunning      int
	PartitionRateLimitMax      *int
	PartitionRateLimitPeriod   time.Duration
}

// QueueDequeueParams asks for work from one queue.
type QueueDequeueParams struct {
	QueueName          string
	ExecutorID         string
	ApplicationVersion string
	// ApplicationName, when set, restricts claims to rows of that
	// application or unclaimed ones, and stamps unclaimed rows.
	ApplicationName *string
	Limits          QueueLimits
	// PartitionKey restricts the claim to one partition of the queue.
	PartitionKey string
	// MaxClaim bounds one claim so row locks stay short; 0 = no bound
	// beyond the limits.
	MaxClaim int
	// WorkflowNames, when set, claims only workflows of these names: the
	// functions the claiming workers can run.
	WorkflowNames []string
	// WorkflowIDs, when set, claims only these workflows (a worker taking
	// a recovered child it calls, to run it in the caller's thread).
	WorkflowIDs []string
	// OwnerPrefix starts every owner token the claim issues, so that the
	// claimer can later recognise the rows it claimed (see
	// WorkflowOrphaned).
	OwnerPrefix string
}

// finishRun names one run in WorkflowFinishMany's bookkeeping: the outcomes
// a backend applied are keyed by it, with the serialization of their row.
type finishRun struct{ id, owner string }

// checkFinishes starts a WorkflowFinishMany: one result per outcome, an
// error in those whose status is neither SUCCESS nor ERROR; valid says
// whether any is left to write.
func checkFinishes(outcomes []WorkflowFinishParams) (results []WorkflowFinishOutcome, valid bool) {
	results = make([]WorkflowFinishOutcome, len(outcomes))
	for i, in := range outcomes {
		if in.Status != StatusSuccess && in.Status != StatusError {
			results[i].Err = fmt.Errorf("finish workflow %s: status must be SUCCESS or ERROR, not %q", in.WorkflowID, in.Status)
			continue
		}
		valid = true
	}
	return results, valid
}

// settleFinishes ends a WorkflowFinishMany once its transaction committed:
// an applied outcome's result is the request itself (no need to read it
// back); a lost one (a run recovered elsewhere or cancelled meanwhile, rare)
// gets the outcome that stands, read with get. It returns the ids applied,
// for ChannelWorkflowStatus.
func settleFinishes(ctx context.Context, outcomes []WorkflowFinishParams, results []WorkflowFinishOutcome,
	applied map[finishRun]*string, get func(context.Context, string) (Workflow, error)) []string {
	won := make([]string, 0, len(applied))
	for i, in := range outcomes {
		if results[i].Err != nil {
			continue
		}
		serialization, ok := applied[finishRun{in.WorkflowID, in.OwnerXID}]
		if !ok {
			stored, err := get(ctx, in.WorkflowID)
			results[i] = WorkflowFinishOutcome{Result: WorkflowFinishResult{Stored: stored}, Err: err}
			continue
		}
		won = append(won, in.WorkflowID)
		results[i].Result = WorkflowFinishResult{Applied: true, Stored: Workflow{
			ID: in.WorkflowID, Status: in.Status, Output: in.Output, Error: in.Error, Serialization: serialization,
		}}
	}
	return won
}
