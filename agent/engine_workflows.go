package agent

import (
	"context"
	"errors"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The engine's workflow operations: start, record a step, finish, read,
// list, cancel, resume, fork, rewind, delete, attributes.

// StartWorkflowParams is a workflow to create (idempotent on its id).
type StartWorkflowParams struct {
	// WorkflowID is the workflow's id; empty, the engine makes a UUID.
	WorkflowID    string
	Name          string
	ClassName     string
	ConfigName    string
	Inputs        *string
	Serialization string
	// QueueName enqueues the workflow; without it the workflow starts now
	// (run by the caller, with RunHere, or through the internal queue).
	QueueName       string
	Priority        int
	DeduplicationID string
	PartitionKey    string
	// Timeout bounds the run (0 none); Deadline is an absolute one.
	Timeout  time.Duration
	Deadline time.Time
	// AppVersion defaults to the caller's.
	AppVersion string
	// RunHere asks, for a direct start by a worker that registered the
	// function, to run it in the calling process: the result then carries
	// the run grant.
	RunHere            bool
	AuthenticatedUser  string
	AssumedRole        string
	AuthenticatedRoles []string
	// Delay keeps the workflow DELAYED that long before it can be dequeued.
	Delay time.Duration
	// DeduplicationPolicy is protocol.DedupReject (default) or
	// protocol.DedupReturnExisting.
	DeduplicationPolicy string
	// WorkflowIDReusePolicy is protocol.ReuseReturnExisting (default) or
	// protocol.ReuseReject.
	WorkflowIDReusePolicy string
	// Parent, for a workflow started from workflow code, makes it that
	// workflow's child, recorded at the parent's step.
	Parent *StepRef
	// Attributes are a JSON object as text.
	Attributes *string
	// ApplicationName owns the workflow when it names another application
	// than the caller's; then AppVersion defaults to none and the workflow
	// is not run here.
	ApplicationName string
	AppID           *string
}

// StartWorkflowResult is the workflow a start created or found.
type StartWorkflowResult struct {
	WorkflowID string
	Status     string
	// Created is false when the id (or the deduplication id, with
	// return_existing) was taken already.
	Created bool
	// Run is the run grant when the caller runs the workflow itself.
	Run *protocol.Run
}

// StartWorkflow creates a workflow, or finds the one holding its id. A
// worker that registered the function and asks to (RunHere) runs a direct
// start itself, at once; any other direct start goes through the internal
// queue, where a worker of the application picks it up.
func (a *Agent) StartWorkflow(ctx context.Context, c Caller, p StartWorkflowParams) (StartWorkflowResult, error) {
	const op = protocol.OpStartWorkflow
	if err := required(op, "name", p.Name); err != nil {
		return StartWorkflowResult{}, err
	}
	if p.Timeout < 0 || negativeEpoch(p.Deadline) || p.Delay < 0 {
		return StartWorkflowResult{}, invalidf("%s: timeout_ms, deadline_epoch_ms and delay_ms must not be negative", op)
	}
	if err := checkAttributes(op, p.Attributes); err != nil {
		return StartWorkflowResult{}, err
	}
	var parent *sysdb.StepCaller
	if p.Parent != nil {
		pc, err := stepCaller(op, c, StepRef{WorkflowID: p.Parent.WorkflowID, OwnerXID: p.Parent.OwnerXID, FunctionID: p.Parent.FunctionID})
		if err != nil {
			return StartWorkflowResult{}, err
		}
		parent = &pc
	}
	if err := checkDeduplicationID(op+".deduplication_id", p.DeduplicationID, ""); err != nil {
		return StartWorkflowResult{}, err
	}
	if err := checkKeys(op, "workflow_id", p.WorkflowID, "partition_key", p.PartitionKey); err != nil {
		return StartWorkflowResult{}, err
	}
	switch p.DeduplicationPolicy {
	case "", protocol.DedupReject, protocol.DedupReturnExisting:
	default:
		return StartWorkflowResult{}, invalidf("%s: deduplication_policy must be %q or %q", op, protocol.DedupReject, protocol.DedupReturnExisting)
	}
	switch p.WorkflowIDReusePolicy {
	case "", protocol.ReuseReturnExisting, protocol.ReuseReject:
	default:
		return StartWorkflowResult{}, invalidf("%s: workflow_id_reuse_policy must be %q or %q", op, protocol.ReuseReturnExisting, protocol.ReuseReject)
	}
	if err := a.refuseWhileDraining(); err != nil {
		return StartWorkflowResult{}, err
	}
	group := c.group()
	if p.WorkflowID == "" {
		p.WorkflowID = newUUID()
	}
	version := p.AppVersion
	owner := group.app
	forOther := p.ApplicationName != "" && p.ApplicationName != group.app
	if forOther {
		// For another application (DBOS's EnqueueOptions application_name):
		// its row, with no version of the caller's (unset, the row goes to
		// that application's latest version, as DBOS's client leaves it).
		owner = p.ApplicationName
	} else if version == "" {
		version = group.version
	}

	// A worker that registered the function runs a direct start itself, at
	// once. Any other direct start goes through the internal queue, where
	// a worker of the application picks it up.
	runHere := false
	if !forOther && p.QueueName == "" && p.RunHere && c.Worker && c.session != nil && version == group.version {
		a.mu.Lock()
		if w := a.workerOfLocked(c.session); w != nil {
			_, runHere = w.functions[p.Name]
		}
		a.mu.Unlock()
	}
	queue := p.QueueName
	status := sysdb.StatusEnqueued
	if p.Delay > 0 {
		runHere = false // a delayed start always waits on a queue
		status = sysdb.StatusDelayed
	}
	if runHere {
		status = sysdb.StatusPending
	} else if queue == "" {
		queue = sysdb.InternalQueueName
	}

	token := a.newOwnerToken()
	ins := sysdb.WorkflowInsertParams{
		ID:                 p.WorkflowID,
		Name:               p.Name,
		Status:             status,
		CreatorXID:         token,
		ClassName:          optional(p.ClassName),
		ConfigName:         optional(p.ConfigName),
		QueueName:          optional(queue),
		QueuePartitionKey:  optional(p.PartitionKey),
		DeduplicationID:    optional(p.DeduplicationID),
		Priority:           p.Priority,
		AuthenticatedUser:  optional(p.AuthenticatedUser),
		AssumedRole:        optional(p.AssumedRole),
		AuthenticatedRoles: rolesColumn(p.AuthenticatedRoles),
		ExecutorID:         a.cfg.ExecutorID,
		ApplicationVersion: optional(version),
		ApplicationID:      p.AppID,
		ApplicationName:    optional(owner),
		Serialization:      optional(p.Serialization),
		Inputs:             p.Inputs,
		Attributes:         p.Attributes,
		RejectExisting:     p.WorkflowIDReusePolicy == protocol.ReuseReject,
		ParentStep:         parent,
	}
	if parent != nil {
		ins.ParentWorkflowID = &parent.WorkflowID
	}
	if p.Timeout > 0 {
		ins.TimeoutMS = optionalDuration(p.Timeout)
		if runHere {
			deadline := time.Now().UnixMilli() + *ins.TimeoutMS
			ins.DeadlineEpochMS = &deadline
		}
	}
	if !p.Deadline.IsZero() {
		ins.DeadlineEpochMS = optionalEpoch(p.Deadline)
	}
	if p.Delay > 0 {
		until := time.Now().UnixMilli() + p.Delay.Milliseconds()
		ins.DelayUntilEpochMS = &until
	}
	res, err := a.db.WorkflowInsert(ctx, ins)
	var dedup *sysdb.DeduplicatedError
	if errors.As(err, &dedup) && p.DeduplicationPolicy == protocol.DedupReturnExisting {
		holder, found, lerr := a.db.WorkflowByDeduplicationID(ctx, queue, p.DeduplicationID)
		if lerr != nil {
			return StartWorkflowResult{}, lerr
		}
		if found {
			wf, gerr := a.db.WorkflowGet(ctx, holder)
			if gerr != nil {
				return StartWorkflowResult{}, gerr
			}
			if parent != nil {
				// The parent's step points at the workflow that holds the
				// id, as DBOS records an attached child.
				err := a.recordStep(ctx, sysdb.StepRecordParams{
					WorkflowID:      parent.WorkflowID,
					OwnerXID:        parent.OwnerXID,
					FunctionID:      parent.FunctionID,
					Name:            p.Name,
					ChildWorkflowID: &holder,
					ApplicationName: parent.ApplicationName,
				})
				if err != nil {
					return StartWorkflowResult{}, a.runFailed(ctx, parent.WorkflowID, parent.OwnerXID, err)
				}
			}
			return StartWorkflowResult{WorkflowID: holder, Status: wf.Status, Created: false}, nil
		}
		// The holder finished between the insert and the lookup: the id
		// is free again.
		res, err = a.db.WorkflowInsert(ctx, ins)
	}
	if err != nil {
		if parent != nil {
			return StartWorkflowResult{}, a.runFailed(ctx, parent.WorkflowID, parent.OwnerXID, err)
		}
		return StartWorkflowResult{}, err
	}
	result := StartWorkflowResult{WorkflowID: p.WorkflowID, Status: res.Status, Created: res.Created}
	if res.Created {
		a.counters.workflowsStarted.Add(1)
	}
	if !res.Created {
		if runHere && res.Status == sysdb.StatusEnqueued {
			if grant := a.claimForCaller(ctx, c.session, group, p.WorkflowID, p.Name); grant != nil {
				result.Status, result.Run = sysdb.StatusPending, grant
			}
		}
		return result, nil
	}
	if !runHere {
		if forOther {
			a.wakeQueue(queue)
		} else {
			a.wakePoller(groupKey{app: group.app, version: version}, queue)
		}
		return result, nil
	}
	// Track the run so that capacity and a closing connection account for
	// it, then hand the grant to the caller.
	a.mu.Lock()
	if w := a.workerOfLocked(c.session); w != nil {
		a.trackRunLocked(p.WorkflowID, token, sysdb.InternalQueueName, "", w)
	}
	a.mu.Unlock()
	result.Run = &protocol.Run{
		WorkflowID:        p.WorkflowID,
		Name:              p.Name,
		ClassName:         p.ClassName,
		ConfigName:        p.ConfigName,
		Inputs:            p.Inputs,
		Serialization:     p.Serialization,
		OwnerXID:          token,
		DeadlineEpochMS:   derefInt(ins.DeadlineEpochMS),
		RecoveryAttempts:  1,
		AuthenticatedUser: p.AuthenticatedUser,
		History:           []protocol.Step{},
	}
	result.Run.AssumedRole = p.AssumedRole
	result.Run.AuthenticatedRoles = p.AuthenticatedRoles
	result.Run.Attributes = p.Attributes
	return result, nil
}

// RecordStepParams is one step's checkpoint, written for the run that owns
// the workflow.
type RecordStepParams struct {
	WorkflowID      string
	OwnerXID        string
	FunctionID      int
	Name            string
	Output          *string
	Error           *string
	Serialization   string
	ChildWorkflowID string
	// StartedAt and CompletedAt are the step's times (zero: none).
	StartedAt   time.Time
	CompletedAt time.Time
}

// RecordStep checkpoints a step. Under load the checkpoints of every
// session share commits; it returns once the step is durable. A run that
// no longer owns its workflow gets sysdb.FencedError (or
// WorkflowCancelledError) and ends here.
func (a *Agent) RecordStep(ctx context.Context, c Caller, p RecordStepParams) error {
	record, err := stepRecord(c, p)
	if err != nil {
		return err
	}
	if err := a.recordStep(ctx, record); err != nil {
		return a.runFailed(ctx, p.WorkflowID, p.OwnerXID, err)
	}
	a.counters.stepsRecorded.Add(1)
	return nil
}

// RecordStepThen is RecordStep for a caller that does not wait: it checks
// the record and queues it, and then is called with RecordStep's answer
// once the record is durable or has failed. then runs on the goroutine of
// the commit that made the record durable, so it must not block; an answer
// that needs the database (the run was fenced) is worked out on a goroutine
// of its own first. The error returned (invalid params, ctx ended while the
// queue was full) is the answer, and then is not called.
func (a *Agent) RecordStepThen(ctx context.Context, c Caller, p RecordStepParams, then func(error)) error {
	record, err := stepRecord(c, p)
	if err != nil {
		return err
	}
	if a.oneShot {
		then(a.RecordStep(ctx, c, p))
		return nil
	}
	return a.steps.submit(ctx, record, func(res batchResult[struct{}]) {
		if res.err == nil {
			a.counters.stepsRecorded.Add(1)
			then(nil)
			return
		}
		if !a.sup.goFn("record_step failed", func() { then(a.runFailed(ctx, p.WorkflowID, p.OwnerXID, res.err)) }) {
			then(res.err)
		}
	})
}

// stepRecord checks a step record and turns it into the database's form.
func stepRecord(c Caller, p RecordStepParams) (sysdb.StepRecordParams, error) {
	const op = protocol.OpRecordStep
	if err := required(op, "workflow_id", p.WorkflowID, "owner_xid", p.OwnerXID, "name", p.Name); err != nil {
		return sysdb.StepRecordParams{}, err
	}
	if err := checkFunctionID(op, "function_id", p.FunctionID); err != nil {
		return sysdb.StepRecordParams{}, err
	}
	return sysdb.StepRecordParams{
		WorkflowID:      p.WorkflowID,
		OwnerXID:        p.OwnerXID,
		FunctionID:      p.FunctionID,
		Name:            p.Name,
		Output:          p.Output,
		Error:           p.Error,
		Serialization:   optional(p.Serialization),
		ChildWorkflowID: optional(p.ChildWorkflowID),
		StartedAt:       optionalEpoch(p.StartedAt),
		CompletedAt:     optionalEpoch(p.CompletedAt),
		ApplicationName: optional(c.App),
	}, nil
}

// FinishParams is a run's outcome.
type FinishParams struct {
	WorkflowID string
	OwnerXID   string
	// Status is sysdb.StatusSuccess or sysdb.StatusError.
	Status string
	Output *string
	Error  *string
}

// FinishResult says whether the outcome was stored, and the outcome the
// workflow has (another one when a concurrent run finished first).
type FinishResult struct {
	Applied bool
	Result  sysdb.Workflow
}

// Finish records a run's outcome, ends the run here and wakes those waiting
// for the result. The outcome is written even if ctx ends meanwhile: the
// run is over either way.
func (a *Agent) Finish(ctx context.Context, p FinishParams) (FinishResult, error) {
	const op = protocol.OpFinish
	if err := required(op, "workflow_id", p.WorkflowID, "owner_xid", p.OwnerXID); err != nil {
		return FinishResult{}, err
	}
	if p.Status != sysdb.StatusSuccess && p.Status != sysdb.StatusError {
		return FinishResult{}, invalidf("%s: status must be SUCCESS or ERROR", op)
	}
	res, err := a.finishWorkflow(context.WithoutCancel(ctx), sysdb.WorkflowFinishParams{
		WorkflowID: p.WorkflowID,
		OwnerXID:   p.OwnerXID,
		Status:     p.Status,
		Output:     p.Output,
		Error:      p.Error,
	})
	a.endRun(p.WorkflowID, p.OwnerXID)
	if err != nil {
		return FinishResult{}, err
	}
	if res.Applied {
		if p.Status == sysdb.StatusSuccess {
			a.counters.workflowsSucceeded.Add(1)
		} else {
			a.counters.workflowsFailed.Add(1)
		}
	}
	a.waiters.wake(p.WorkflowID)
	return FinishResult{Applied: res.Applied, Result: res.Stored}, nil
}

// GetResultParams names a workflow whose outcome to wait for.
type GetResultParams struct {
	WorkflowID string
	// Timeout bounds the wait (0: until ctx ends).
	Timeout time.Duration
	// WaitForCreation waits for a workflow that does not exist yet rather
	// than failing with sysdb.NotFoundError.
	WaitForCreation bool
}

// GetResult waits for a workflow to end and returns it with its outcome.
// A wait past its timeout fails with context.DeadlineExceeded.
func (a *Agent) GetResult(ctx context.Context, p GetResultParams) (sysdb.Workflow, error) {
	if err := required(protocol.OpGetResult, "workflow_id", p.WorkflowID); err != nil {
		return sysdb.Workflow{}, err
	}
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	return a.waiters.wait(ctx, p.WorkflowID, p.WaitForCreation)
}

// GetWorkflowParams names a workflow to read.
type GetWorkflowParams struct {
	WorkflowID string
	// LoadPayloads includes the inputs, output and error.
	LoadPayloads bool
}

// GetWorkflow reads a workflow's row (sysdb.NotFoundError when there is
// none).
func (a *Agent) GetWorkflow(ctx context.Context, p GetWorkflowParams) (sysdb.Workflow, error) {
	if err := required(protocol.OpGetWorkflow, "workflow_id", p.WorkflowID); err != nil {
		return sysdb.Workflow{}, err
	}
	wf, err := a.db.WorkflowGet(ctx, p.WorkflowID)
	if err != nil {
		return sysdb.Workflow{}, err
	}
	if !p.LoadPayloads {
		wf = payloadsCleared(wf)
	}
	return wf, nil
}

// ListWorkflowsParams filters a listing of workflows; every filter set must
// hold (empty lists and nil pointers filter nothing).
type ListWorkflowsParams struct {
	WorkflowIDs        []string
	IDPrefixes         []string
	Statuses           []string
	Names              []string
	QueueNames         []string
	QueuesOnly         bool
	ExecutorIDs        []string
	AppVersions        []string
	ParentWorkflowIDs  []string
	AuthenticatedUsers []string
	ForkedFrom         []string
	ScheduleNames      []string
	// ApplicationNames keeps these applications' rows and unclaimed ones.
	ApplicationNames []string
	// Attributes keeps the rows whose attributes contain this JSON object.
	Attributes    *string
	WasForkedFrom *bool
	IsFork        *bool
	HasParent     *bool
	// The times bound the rows' creation, completion and dequeue (zero:
	// unbounded).
	CreatedAfter, CreatedBefore     time.Time
	CompletedAfter, CompletedBefore time.Time
	DequeuedAfter, DequeuedBefore   time.Time
	// Limit caps the rows (0 all); Offset skips rows.
	Limit, Offset int
	SortDesc      bool
	LoadInputs    bool
	LoadOutputs   bool
}

// ListWorkflows lists the workflows the filters keep.
func (a *Agent) ListWorkflows(ctx context.Context, p ListWorkflowsParams) ([]sysdb.Workflow, error) {
	if p.Limit < 0 || p.Offset < 0 {
		return nil, invalidf("%s: limit and offset must not be negative", protocol.OpListWorkflows)
	}
	if err := checkAttributes(protocol.OpListWorkflows, p.Attributes); err != nil {
		return nil, err
	}
	return a.db.WorkflowList(ctx, sysdb.WorkflowListParams{
		WorkflowIDs:        p.WorkflowIDs,
		IDPrefixes:         p.IDPrefixes,
		Statuses:           p.Statuses,
		Names:              p.Names,
		QueueNames:         p.QueueNames,
		QueuesOnly:         p.QueuesOnly,
		ExecutorIDs:        p.ExecutorIDs,
		ApplicationVersion: p.AppVersions,
		ParentWorkflowIDs:  p.ParentWorkflowIDs,
		AuthenticatedUsers: p.AuthenticatedUsers,
		ForkedFrom:         p.ForkedFrom,
		ScheduleNames:      p.ScheduleNames,
		ApplicationNames:   p.ApplicationNames,
		Attributes:         p.Attributes,
		WasForkedFrom:      p.WasForkedFrom,
		IsFork:             p.IsFork,
		HasParent:          p.HasParent,
		CreatedAfter:       optionalEpoch(p.CreatedAfter),
		CreatedBefore:      optionalEpoch(p.CreatedBefore),
		CompletedAfter:     optionalEpoch(p.CompletedAfter),
		CompletedBefore:    optionalEpoch(p.CompletedBefore),
		StartedAfter:       optionalEpoch(p.DequeuedAfter),
		StartedBefore:      optionalEpoch(p.DequeuedBefore),
		Limit:              p.Limit,
		Offset:             p.Offset,
		SortDesc:           p.SortDesc,
		LoadInputs:         p.LoadInputs,
		LoadOutputs:        p.LoadOutputs,
	})
}

// ListSteps lists a workflow's recorded steps, by function id.
func (a *Agent) ListSteps(ctx context.Context, workflowID string) ([]sysdb.Step, error) {
	if err := required(protocol.OpListSteps, "workflow_id", workflowID); err != nil {
		return nil, err
	}
	return a.db.StepList(ctx, workflowID)
}

// CancelParams names a workflow to cancel.
type CancelParams struct {
	WorkflowID string
	// CancelChildren cancels every workflow it started too, recursively.
	CancelChildren bool
}

// Cancel cancels a workflow (and with CancelChildren its descendants): a
// run of this agent's workers is told at once and its slot freed, a run
// elsewhere learns at its next step; waiters for the results wake. It
// returns the workflows cancelled, and sysdb.NotFoundError when the
// workflow does not exist.
func (a *Agent) Cancel(ctx context.Context, p CancelParams) ([]string, error) {
	if err := required(protocol.OpCancel, "workflow_id", p.WorkflowID); err != nil {
		return nil, err
	}
	found, err := a.db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{p.WorkflowID}, IncludeChildren: p.CancelChildren})
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, &sysdb.NotFoundError{WorkflowID: p.WorkflowID}
	}
	for _, id := range found {
		a.cancelLocalRun(id)
		a.waiters.wake(id)
	}
	return found, nil
}

// cancelLocalRun tells the worker running a cancelled workflow, if it is
// one of ours, and frees its slot. A run elsewhere learns at its next step.
func (a *Agent) cancelLocalRun(workflowID string) {
	a.mu.Lock()
	r := a.runs[workflowID]
	a.mu.Unlock()
	if r == nil {
		return
	}
	a.endRun(workflowID, r.ownerXID)
	_ = r.worker.session.push(protocol.PushCancel, &protocol.CancelPush{WorkflowID: workflowID})
}

// ResumeParams names workflows to resume.
type ResumeParams struct {
	WorkflowIDs []string
	// QueueName is the queue they are resumed onto (default the internal
	// queue).
	QueueName string
}

// Resume puts cancelled or failed-over workflows back on a queue, from their
// last recorded step, all or none: when one does not exist nothing is
// resumed (WorkflowsNotFoundError).
func (a *Agent) Resume(ctx context.Context, p ResumeParams) error {
	const op = protocol.OpResume
	if len(p.WorkflowIDs) == 0 {
		return invalidf("%s: workflow_id is required", op)
	}
	for _, id := range p.WorkflowIDs {
		if id == "" {
			return invalidf("%s: workflow_ids has an empty id", op)
		}
	}
	found, err := a.db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: p.WorkflowIDs, QueueName: p.QueueName, RequireAll: true})
	if err != nil {
		return err
	}
	if missing := missingIDs(p.WorkflowIDs, found); len(missing) > 0 {
		return &WorkflowsNotFoundError{WorkflowIDs: missing}
	}
	a.wakeQueue(queueOrInternal(p.QueueName))
	return nil
}

// missingIDs is the ids (each once, in order) not in found.
func missingIDs(ids, found []string) []string {
	seen := make(map[string]bool, len(ids))
	for _, id := range found {
		seen[id] = true
	}
	var missing []string
	for _, id := range ids {
		if !seen[id] {
			missing = append(missing, id)
			seen[id] = true
		}
	}
	return missing
}

// ForkParams is a new workflow to start from another's steps.
type ForkParams struct {
	WorkflowID string
	// StartStep is the first step that runs anew; the steps below it are
	// copied.
	StartStep int
	// NewWorkflowID is the fork's id (default a new UUID).
	NewWorkflowID string
	// AppVersion defaults to the original's.
	AppVersion   string
	QueueName    string
	PartitionKey string
	Timeout      time.Duration
	// ReplacementChildren maps a child of the original to the workflow the
	// fork's copied step points at instead.
	ReplacementChildren map[string]string
}

// Fork starts a new workflow from another's steps below StartStep,
// ENQUEUED on its queue, and returns the new workflow's id.
func (a *Agent) Fork(ctx context.Context, c Caller, p ForkParams) (string, error) {
	const op = protocol.OpForkWorkflow
	if err := required(op, "workflow_id", p.WorkflowID); err != nil {
		return "", err
	}
	if p.StartStep < 0 || p.Timeout < 0 {
		return "", invalidf("%s: start_step and timeout_ms must not be negative", op)
	}
	if err := checkKeys(op, "new_workflow_id", p.NewWorkflowID, "partition_key", p.PartitionKey); err != nil {
		return "", err
	}
	if p.NewWorkflowID == "" {
		p.NewWorkflowID = newUUID()
	}
	err := a.db.WorkflowFork(ctx, sysdb.WorkflowForkParams{
		OriginalID:          p.WorkflowID,
		NewID:               p.NewWorkflowID,
		StartStep:           p.StartStep,
		ApplicationVersion:  optional(p.AppVersion),
		QueueName:           p.QueueName,
		QueuePartitionKey:   optional(p.PartitionKey),
		TimeoutMS:           optionalDuration(p.Timeout),
		ReplacementChildren: p.ReplacementChildren,
		ApplicationName:     optional(c.App),
	})
	if err != nil {
		return "", err
	}
	a.wakeQueue(queueOrInternal(p.QueueName))
	return p.NewWorkflowID, nil
}

// RewindParams names an ended workflow to run again from a step.
type RewindParams struct {
	WorkflowID string
	// StartStep is the first step to run again (0, DBOS TypeScript's first
	// step, runs it all again).
	StartStep    int
	AppVersion   string
	QueueName    string
	PartitionKey string
}

// Rewind runs an ended workflow again under its own id from StartStep: its
// history from there is dropped and it is ENQUEUED on its queue.
func (a *Agent) Rewind(ctx context.Context, p RewindParams) error {
	const op = protocol.OpRewindWorkflow
	if err := required(op, "workflow_id", p.WorkflowID); err != nil {
		return err
	}
	if p.StartStep < 0 {
		return invalidf("%s: start_step must not be negative", op)
	}
	err := a.db.WorkflowRewind(ctx, sysdb.WorkflowRewindParams{
		WorkflowID:         p.WorkflowID,
		StartStep:          p.StartStep,
		ApplicationVersion: optional(p.AppVersion),
		QueueName:          p.QueueName,
		QueuePartitionKey:  optional(p.PartitionKey),
	})
	if err != nil {
		return err
	}
	a.wakeQueue(queueOrInternal(p.QueueName))
	return nil
}

// DeleteParams names workflows to delete with everything stored under
// them.
type DeleteParams struct {
	WorkflowIDs []string
	// DeleteChildren deletes every workflow they started too, recursively.
	DeleteChildren bool
}

// Delete deletes workflows (it does not cancel them); waiters for their
// results wake.
func (a *Agent) Delete(ctx context.Context, p DeleteParams) error {
	if len(p.WorkflowIDs) == 0 {
		return invalidf("%s: workflow_ids is empty", protocol.OpDeleteWorkflow)
	}
	if err := a.db.WorkflowDelete(ctx, sysdb.WorkflowDeleteParams{WorkflowIDs: p.WorkflowIDs, IncludeChildren: p.DeleteChildren}); err != nil {
		return err
	}
	for _, id := range p.WorkflowIDs {
		a.waiters.wake(id)
	}
	return nil
}

// UpdateAttributesParams replaces, merges into or (nil) clears a workflow's
// attributes.
type UpdateAttributesParams struct {
	WorkflowID string
	// Attributes is a JSON object as text; nil clears them.
	Attributes *string
	// Merge adds the object's top-level keys instead of replacing.
	Merge bool
}

// UpdateAttributes changes a workflow's attributes.
func (a *Agent) UpdateAttributes(ctx context.Context, p UpdateAttributesParams) error {
	m := protocol.UpdateAttributes{WorkflowID: p.WorkflowID, Attributes: p.Attributes, Merge: p.Merge}
	if err := m.Validate(protocol.OpUpdateAttributes); err != nil {
		return &InvalidArgumentError{Message: err.Error()}
	}
	return a.db.WorkflowSetAttributes(ctx, p.WorkflowID, p.Attributes, p.Merge)
}

// WorkflowChildren lists every descendant of a workflow, breadth first.
func (a *Agent) WorkflowChildren(ctx context.Context, workflowID string) ([]string, error) {
	return a.db.WorkflowChildren(ctx, workflowID)
}

// checkKeys refuses a key longer than the database indexes
// (protocol.MaxKeyBytes), naming its field: pairs of path and value.
func checkKeys(op string, pathsAndValues ...string) error {
	for i := 0; i+1 < len(pathsAndValues); i += 2 {
		if n := len(pathsAndValues[i+1]); n > protocol.MaxKeyBytes {
			return invalidf("%s.%s: %d bytes; at most %d", op, pathsAndValues[i], n, protocol.MaxKeyBytes)
		}
	}
	return nil
}

// checkDeduplicationID refuses a deduplication id longer than the database
// indexes (protocol.MaxDeduplicationIDBytes); what says what path names,
// when that is not the id itself.
func checkDeduplicationID(path, id, what string) error {
	if len(id) > protocol.MaxDeduplicationIDBytes {
		return invalidf("%s: %s%d bytes; at most %d", path, what, len(id), protocol.MaxDeduplicationIDBytes)
	}
	return nil
}

// checkAttributes accepts nil or the JSON text of an object, by the rule
// update_workflow_attributes applies.
func checkAttributes(op string, attributes *string) error {
	if err := protocol.CheckAttributes(op+".attributes", attributes); err != nil {
		return &InvalidArgumentError{Message: err.Error()}
	}
	return nil
}
