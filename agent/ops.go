package agent

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

type handler func(s *Session, env protocol.Envelope) (any, *protocol.Error)

// handlers answer the requests after the handshake, by op.
var handlers map[string]handler

func init() {
	handlers = map[string]handler{
		protocol.OpPing:          handlePing,
		protocol.OpStats:         handleStats,
		protocol.OpStartWorkflow: handleStartWorkflow,
		protocol.OpRecordStep:    handleRecordStep,
		protocol.OpFinish:        handleFinish,
		protocol.OpGetResult:     handleGetResult,
		protocol.OpGetWorkflow:   handleGetWorkflow,
		protocol.OpListWorkflows: handleListWorkflows,
		protocol.OpListSteps:     handleListSteps,
		protocol.OpCancel:        handleCancel,
		protocol.OpResume:        handleResume,

		protocol.OpRegister:          handleRegister,
		protocol.OpRegisterQueues:    handleRegisterQueues,
		protocol.OpDebounceWorkflow:  handleDebounceWorkflow,
		protocol.OpSetWorkflowDelay:  handleSetWorkflowDelay,
		protocol.OpGetQueue:          handleGetQueue,
		protocol.OpListQueues:        handleListQueues,
		protocol.OpDeleteQueue:       handleDeleteQueue,
		protocol.OpListVersions:      handleListVersions,
		protocol.OpPromoteVersion:    handlePromoteVersion,
		protocol.OpRenameApplication: handleRenameApplication,

		protocol.OpCreateSchedule:   handleCreateSchedule,
		protocol.OpGetSchedule:      handleGetSchedule,
		protocol.OpListSchedules:    handleListSchedules,
		protocol.OpPauseSchedule:    setScheduleStatus(sysdb.SchedulePaused),
		protocol.OpResumeSchedule:   setScheduleStatus(sysdb.ScheduleActive),
		protocol.OpDeleteSchedule:   handleDeleteSchedule,
		protocol.OpBackfillSchedule: handleBackfillSchedule,
		protocol.OpTriggerSchedule:  handleTriggerSchedule,
	}
	for op, h := range communicationHandlers() {
		handlers[op] = h
	}
}

// decode decodes a request body and, for a message with rules of its own
// (protocol.Validator: the registrations and the other writes of shared
// configuration), checks them, so that no handler writes a value the
// protocol refuses.
func decode(env protocol.Envelope, v any) *protocol.Error {
	if err := protocol.DecodeBody(env.Body, v); err != nil {
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s: %v", env.Op, err)
	}
	if m, ok := v.(protocol.Validator); ok {
		if err := m.Validate(env.Op); err != nil {
			return protocol.Errorf(protocol.CodeInvalidArgument, "%v", err)
		}
	}
	return nil
}

// required checks (field name, value) pairs, in order: the first empty value
// is the error.
func required(op string, fieldsAndValues ...string) *protocol.Error {
	for i := 0; i+1 < len(fieldsAndValues); i += 2 {
		if fieldsAndValues[i+1] == "" {
			return protocol.Errorf(protocol.CodeInvalidArgument, "%s: %s is required", op, fieldsAndValues[i])
		}
	}
	return nil
}

// decodeRef decodes a request that names one workflow.
func decodeRef(env protocol.Envelope) (protocol.WorkflowRef, *protocol.Error) {
	var m protocol.WorkflowRef
	if perr := decode(env, &m); perr != nil {
		return m, perr
	}
	return m, required(env.Op, "workflow_id", m.WorkflowID)
}

// protocolError maps a database-layer error to the catalog.
func protocolError(s *Session, op string, err error) *protocol.Error {
	var (
		notFound   *sysdb.NotFoundError
		conflict   *sysdb.ConflictingWorkflowError
		dedup      *sysdb.DeduplicatedError
		fenced     *sysdb.FencedError
		unexpected *sysdb.UnexpectedStepError
		stepClash  *sysdb.StepConflictError
		active     *sysdb.WorkflowActiveError
		inUse      *sysdb.WorkflowIDInUseError
	)
	switch {
	case errors.As(err, &notFound):
		return protocol.Errorf(protocol.CodeWorkflowNotFound, "%s", notFound.Error())
	case errors.As(err, &conflict):
		// The reason alone: a binding wraps it as its SDK does (DBOS Python:
		// "Conflicting workflow invocation with the same ID (<id>): <reason>").
		return protocol.Errorf(protocol.CodeWorkflowConflict, "%s", conflict.Reason)
	case errors.As(err, &dedup):
		e := protocol.Errorf(protocol.CodeDeduplicated, "%s", dedup.Error())
		e.Data = map[string]any{"queue_name": dedup.QueueName, "deduplication_id": dedup.DeduplicationID}
		return e
	case errors.As(err, &fenced):
		return protocol.Errorf(protocol.CodeFenced, "%s", fenced.Error())
	case errors.As(err, &unexpected):
		e := protocol.Errorf(protocol.CodeUnexpectedStep, "%s", unexpected.Error())
		e.Data = map[string]any{"recorded": unexpected.Recorded, "attempted": unexpected.Attempted}
		return e
	case errors.As(err, &stepClash):
		return protocol.Errorf(protocol.CodeStepConflict, "%s", stepClash.Error())
	case errors.As(err, &active):
		return protocol.Errorf(protocol.CodeWorkflowActive, "%s", active.Error())
	case errors.As(err, &inUse):
		e := protocol.Errorf(protocol.CodeWorkflowIDInUse, "%s", inUse.Error())
		e.Data = map[string]any{"workflow_id": inUse.WorkflowID, "status": inUse.Status, "name": inUse.Name}
		return e
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.Errorf(protocol.CodeTimeout, "%s timed out", op)
	case errors.Is(err, context.Canceled):
		return protocol.Errorf(protocol.CodeShuttingDown, "%s was abandoned: the session or agent is closing", op)
	case sysdb.IsConnectionError(err):
		return protocol.Errorf(protocol.CodeDatabaseDown, "%s: the system database is unreachable", op)
	}
	s.log.Error("request failed", zap.String("op", op), zap.Error(err))
	return protocol.Errorf(protocol.CodeInternal, "%s failed: %s", op, sysdb.Redact(err.Error()))
}

func handlePing(*Session, protocol.Envelope) (any, *protocol.Error) {
	return protocol.Empty{}, nil
}

func handleStartWorkflow(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.StartWorkflow
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "name", m.Name); perr != nil {
		return nil, perr
	}
	if m.TimeoutMS < 0 || m.DeadlineEpochMS < 0 || m.DelayMS < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: timeout_ms, deadline_epoch_ms and delay_ms must not be negative", env.Op)
	}
	if perr := checkAttributes(env.Op, m.Attributes); perr != nil {
		return nil, perr
	}
	var parent *sysdb.StepCaller
	if m.Parent != nil {
		c, perr := s.stepCaller(env.Op, protocol.Caller{WorkflowID: m.Parent.WorkflowID, OwnerXID: m.Parent.OwnerXID, FunctionID: m.Parent.FunctionID})
		if perr != nil {
			return nil, perr
		}
		parent = &c
	}
	switch m.DeduplicationPolicy {
	case "", protocol.DedupReject, protocol.DedupReturnExisting:
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: deduplication_policy must be %q or %q", env.Op, protocol.DedupReject, protocol.DedupReturnExisting)
	}
	switch m.WorkflowIDReusePolicy {
	case "", protocol.ReuseReturnExisting, protocol.ReuseReject:
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: workflow_id_reuse_policy must be %q or %q", env.Op, protocol.ReuseReturnExisting, protocol.ReuseReject)
	}
	if a.draining.Load() {
		return nil, protocol.Errorf(protocol.CodeShuttingDown, "the agent is shutting down")
	}
	hello, group := s.handshaken()
	if m.WorkflowID == "" {
		m.WorkflowID = newUUID()
	}
	version := m.AppVersion
	owner := group.app
	forOther := m.ApplicationName != "" && m.ApplicationName != group.app
	if forOther {
		// For another application (DBOS's EnqueueOptions application_name):
		// its row, with no version of the caller's (unset, the row goes to
		// that application's latest version, as DBOS's client leaves it).
		owner = m.ApplicationName
	} else if version == "" {
		version = group.version
	}

	// A worker that registered the function runs a direct start itself, at
	// once. Any other direct start goes through the internal queue, where
	// a worker of the application picks it up.
	runHere := false
	if !forOther && m.QueueName == "" && m.RunHere && hello.Role == protocol.RoleWorker && version == group.version {
		a.mu.Lock()
		if g := a.groups[group]; g != nil {
			if w := g.workers[s]; w != nil {
				_, runHere = w.functions[m.Name]
			}
		}
		a.mu.Unlock()
	}
	queue := m.QueueName
	status := sysdb.StatusEnqueued
	if m.DelayMS > 0 {
		runHere = false // a delayed start always waits on a queue
		status = sysdb.StatusDelayed
	}
	if runHere {
		status = sysdb.StatusPending
	} else if queue == "" {
		queue = sysdb.InternalQueueName
	}

	token := a.newOwnerToken()
	p := sysdb.WorkflowInsertParams{
		ID:                 m.WorkflowID,
		Name:               m.Name,
		Status:             status,
		CreatorXID:         token,
		ClassName:          optional(m.ClassName),
		ConfigName:         optional(m.ConfigName),
		QueueName:          optional(queue),
		QueuePartitionKey:  optional(m.PartitionKey),
		DeduplicationID:    optional(m.DeduplicationID),
		Priority:           m.Priority,
		AuthenticatedUser:  optional(m.AuthenticatedUser),
		AssumedRole:        optional(m.AssumedRole),
		AuthenticatedRoles: rolesColumn(m.AuthenticatedRoles),
		ExecutorID:         a.cfg.ExecutorID,
		ApplicationVersion: optional(version),
		ApplicationID:      m.AppID,
		ApplicationName:    optional(owner),
		Serialization:      optional(m.Serialization),
		Inputs:             m.Inputs,
		Attributes:         m.Attributes,
		RejectExisting:     m.WorkflowIDReusePolicy == protocol.ReuseReject,
		ParentStep:         parent,
	}
	if parent != nil {
		p.ParentWorkflowID = &parent.WorkflowID
	}
	if m.TimeoutMS > 0 {
		p.TimeoutMS = &m.TimeoutMS
		if runHere {
			deadline := time.Now().UnixMilli() + m.TimeoutMS
			p.DeadlineEpochMS = &deadline
		}
	}
	if m.DeadlineEpochMS > 0 {
		p.DeadlineEpochMS = &m.DeadlineEpochMS
	}
	if m.DelayMS > 0 {
		until := time.Now().UnixMilli() + m.DelayMS
		p.DelayUntilEpochMS = &until
	}
	res, err := a.db.WorkflowInsert(s.ctx, p)
	var dedup *sysdb.DeduplicatedError
	if errors.As(err, &dedup) && m.DeduplicationPolicy == protocol.DedupReturnExisting {
		holder, found, lerr := a.db.WorkflowByDeduplicationID(s.ctx, queue, m.DeduplicationID)
		if lerr != nil {
			return nil, protocolError(s, env.Op, lerr)
		}
		if found {
			wf, gerr := a.db.WorkflowGet(s.ctx, holder)
			if gerr != nil {
				return nil, protocolError(s, env.Op, gerr)
			}
			if parent != nil {
				// The parent's step points at the workflow that holds the
				// id, as DBOS records an attached child.
				err := a.steps.record(s.ctx, sysdb.StepRecordParams{
					WorkflowID:      parent.WorkflowID,
					OwnerXID:        parent.OwnerXID,
					FunctionID:      parent.FunctionID,
					Name:            m.Name,
					ChildWorkflowID: &holder,
					ApplicationName: parent.ApplicationName,
				})
				if err != nil {
					return nil, runError(s, env.Op, parent.WorkflowID, parent.OwnerXID, err)
				}
			}
			return &protocol.StartWorkflowReply{WorkflowID: holder, Status: wf.Status, Created: false}, nil
		}
		// The holder finished between the insert and the lookup: the id
		// is free again.
		res, err = a.db.WorkflowInsert(s.ctx, p)
	}
	if err != nil {
		if parent != nil {
			return nil, runError(s, env.Op, parent.WorkflowID, parent.OwnerXID, err)
		}
		return nil, protocolError(s, env.Op, err)
	}
	reply := &protocol.StartWorkflowReply{WorkflowID: m.WorkflowID, Status: res.Status, Created: res.Created}
	if !res.Created {
		if runHere && res.Status == sysdb.StatusEnqueued {
			if grant := a.claimForCaller(s, group, m.WorkflowID, m.Name); grant != nil {
				reply.Status, reply.Run = sysdb.StatusPending, grant
			}
		}
		return reply, nil
	}
	if !runHere {
		if forOther {
			a.wakeQueue(queue)
		} else if version == group.version {
			a.wakePoller(group, queue)
		} else {
			a.wakePoller(groupKey{app: group.app, version: version}, queue)
		}
		return reply, nil
	}
	// Track the run so that capacity and a closing connection account for
	// it, then hand the grant to the caller.
	a.mu.Lock()
	var w *worker
	if g := a.groups[group]; g != nil {
		w = g.workers[s]
	}
	if w != nil {
		a.trackRunLocked(m.WorkflowID, token, sysdb.InternalQueueName, "", w)
	}
	a.mu.Unlock()
	reply.Run = &protocol.Run{
		WorkflowID:        m.WorkflowID,
		Name:              m.Name,
		ClassName:         m.ClassName,
		ConfigName:        m.ConfigName,
		Inputs:            m.Inputs,
		Serialization:     m.Serialization,
		OwnerXID:          token,
		DeadlineEpochMS:   derefInt(p.DeadlineEpochMS),
		RecoveryAttempts:  1,
		AuthenticatedUser: m.AuthenticatedUser,
		History:           []protocol.Step{},
	}
	reply.Run.AssumedRole = m.AssumedRole
	reply.Run.AuthenticatedRoles = m.AuthenticatedRoles
	reply.Run.Attributes = m.Attributes
	return reply, nil
}

func handleRecordStep(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.RecordStep
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID, "owner_xid", m.OwnerXID, "name", m.Name); perr != nil {
		return nil, perr
	}
	if m.FunctionID < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: function_id must not be negative", env.Op)
	}
	_, group := s.handshaken()
	p := sysdb.StepRecordParams{
		WorkflowID:      m.WorkflowID,
		OwnerXID:        m.OwnerXID,
		FunctionID:      m.FunctionID,
		Name:            m.Name,
		Output:          m.Output,
		Error:           m.Error,
		Serialization:   optional(m.Serialization),
		ChildWorkflowID: optional(m.ChildWorkflowID),
		StartedAt:       optionalInt(m.StartedAtMS),
		CompletedAt:     optionalInt(m.CompletedAtMS),
		ApplicationName: optional(group.app),
	}
	if err := a.steps.record(s.ctx, p); err != nil {
		return nil, runError(s, env.Op, m.WorkflowID, m.OwnerXID, err)
	}
	return protocol.Empty{}, nil
}

func handleFinish(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.Finish
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID, "owner_xid", m.OwnerXID); perr != nil {
		return nil, perr
	}
	if m.Status != sysdb.StatusSuccess && m.Status != sysdb.StatusError {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: status must be SUCCESS or ERROR", env.Op)
	}
	// The outcome must be written even if the connection drops now: the
	// run is over either way.
	res, err := a.finishes.write(context.WithoutCancel(s.ctx), sysdb.WorkflowFinishParams{
		WorkflowID: m.WorkflowID,
		OwnerXID:   m.OwnerXID,
		Status:     m.Status,
		Output:     m.Output,
		Error:      m.Error,
	})
	a.endRun(m.WorkflowID, m.OwnerXID)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	a.waiters.wake(m.WorkflowID)
	return &protocol.FinishReply{Applied: res.Applied, Result: resultMessage(res.Stored)}, nil
}

func resultMessage(wf sysdb.Workflow) protocol.WorkflowResult {
	return protocol.WorkflowResult{
		WorkflowID:    wf.ID,
		Status:        wf.Status,
		Output:        wf.Output,
		Error:         wf.Error,
		Serialization: deref(wf.Serialization),
	}
}

func handleGetResult(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.GetResult
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID); perr != nil {
		return nil, perr
	}
	ctx := s.requestContext(env.ID)
	if m.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(m.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	wf, err := s.agent.waiters.wait(ctx, m.WorkflowID, m.WaitForCreation)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	return resultMessage(wf), nil
}

func handleGetWorkflow(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.GetWorkflow
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID); perr != nil {
		return nil, perr
	}
	wf, err := s.agent.db.WorkflowGet(s.ctx, m.WorkflowID)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	info := workflowInfo(wf)
	if !m.LoadPayloads {
		info.Inputs, info.Output, info.Error = nil, nil, nil
	}
	return info, nil
}

func workflowInfo(wf sysdb.Workflow) protocol.WorkflowInfo {
	return protocol.WorkflowInfo{
		WorkflowID:        wf.ID,
		Status:            wf.Status,
		Name:              wf.Name,
		ClassName:         deref(wf.ClassName),
		ConfigName:        deref(wf.ConfigName),
		QueueName:         deref(wf.QueueName),
		ExecutorID:        deref(wf.ExecutorID),
		AppVersion:        deref(wf.ApplicationVersion),
		AppName:           deref(wf.ApplicationName),
		AuthenticatedUser: deref(wf.AuthenticatedUser),
		CreatedAtMS:       wf.CreatedAt,
		UpdatedAtMS:       wf.UpdatedAt,
		StartedAtMS:       derefInt(wf.StartedAt),
		CompletedAtMS:     derefInt(wf.CompletedAt),
		RecoveryAttempts:  wf.RecoveryAttempts,
		TimeoutMS:         derefInt(wf.TimeoutMS),
		DeadlineEpochMS:   derefInt(wf.DeadlineEpochMS),
		Priority:          wf.Priority,
		DeduplicationID:   deref(wf.DeduplicationID),
		PartitionKey:      deref(wf.QueuePartitionKey),
		ParentWorkflowID:  deref(wf.ParentWorkflowID),
		ForkedFrom:        deref(wf.ForkedFrom),
		WasForkedFrom:     wf.WasForkedFrom,
		Serialization:     deref(wf.Serialization),
		Inputs:            wf.Inputs,
		Output:            wf.Output,
		Error:             wf.Error,
		Attributes:        wf.Attributes,
		DelayUntilEpochMS: derefInt(wf.DelayUntilEpochMS),
		ScheduleName:      deref(wf.ScheduleName),
		// DBOS's identity columns, as the binding checks required roles.
		AssumedRole:        deref(wf.AssumedRole),
		AuthenticatedRoles: rolesOf(wf.AuthenticatedRoles),
		AppID:              wf.ApplicationID,
	}
}

func handleListWorkflows(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.ListWorkflows
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if m.Limit < 0 || m.Offset < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: limit and offset must not be negative", env.Op)
	}
	p := sysdb.WorkflowListParams{
		WorkflowIDs:        m.WorkflowIDs,
		Statuses:           m.Statuses,
		Names:              m.Names,
		QueueNames:         m.QueueNames,
		QueuesOnly:         m.QueuesOnly,
		ExecutorIDs:        m.ExecutorIDs,
		ApplicationVersion: m.AppVersions,
		ParentWorkflowIDs:  m.ParentIDs,
		AuthenticatedUsers: m.Users,
		ForkedFrom:         m.ForkedFrom,
		ScheduleNames:      m.ScheduleNames,
		ApplicationNames:   m.ApplicationNames,
		Attributes:         m.Attributes,
		WasForkedFrom:      m.WasForkedFrom,
		IsFork:             m.IsFork,
		HasParent:          m.HasParent,
		CreatedAfter:       optionalInt(m.StartTimeMS),
		CreatedBefore:      optionalInt(m.EndTimeMS),
		CompletedAfter:     optionalInt(m.CompletedAfterMS),
		CompletedBefore:    optionalInt(m.CompletedBeforeMS),
		StartedAfter:       optionalInt(m.DequeuedAfterMS),
		StartedBefore:      optionalInt(m.DequeuedBeforeMS),
		Limit:              m.Limit,
		Offset:             m.Offset,
		SortDesc:           m.SortDesc,
		LoadInputs:         m.LoadInputs,
		LoadOutputs:        m.LoadOutputs,
	}
	if m.IDPrefix != "" {
		p.IDPrefixes = []string{m.IDPrefix}
	}
	p.IDPrefixes = append(p.IDPrefixes, m.IDPrefixes...)
	wfs, err := s.agent.db.WorkflowList(s.ctx, p)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	reply := &protocol.ListWorkflowsReply{Workflows: make([]protocol.WorkflowInfo, len(wfs))}
	for i, wf := range wfs {
		reply.Workflows[i] = workflowInfo(wf)
	}
	return reply, nil
}

func handleListSteps(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	m, perr := decodeRef(env)
	if perr != nil {
		return nil, perr
	}
	steps, err := s.agent.db.StepList(s.ctx, m.WorkflowID)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	reply := &protocol.ListStepsReply{Steps: make([]protocol.Step, len(steps))}
	for i, st := range steps {
		reply.Steps[i] = stepMessage(st)
	}
	return reply, nil
}

func handleCancel(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.CancelWorkflow
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID); perr != nil {
		return nil, perr
	}
	found, err := a.db.WorkflowCancel(s.ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{m.WorkflowID}, IncludeChildren: m.CancelChildren})
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	if len(found) == 0 {
		return nil, protocol.Errorf(protocol.CodeWorkflowNotFound, "workflow %s does not exist", m.WorkflowID)
	}
	for _, id := range found {
		a.cancelLocalRun(id)
		a.waiters.wake(id)
	}
	return protocol.Empty{}, nil
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

func handleResume(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.ResumeWorkflow
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	ids := m.WorkflowIDs
	switch {
	case m.WorkflowID != "" && len(ids) > 0:
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: give workflow_id or workflow_ids, not both", env.Op)
	case m.WorkflowID != "":
		ids = []string{m.WorkflowID}
	case len(ids) == 0:
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: workflow_id is required", env.Op)
	}
	for _, id := range ids {
		if id == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: workflow_ids has an empty id", env.Op)
		}
	}
	found, err := a.db.WorkflowResume(s.ctx, sysdb.WorkflowResumeParams{WorkflowIDs: ids, QueueName: m.QueueName, RequireAll: true})
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	if missing := missingIDs(ids, found); len(missing) > 0 {
		perr := protocol.Errorf(protocol.CodeWorkflowNotFound, "workflows %s do not exist", strings.Join(missing, ", "))
		if len(missing) == 1 {
			perr = protocol.Errorf(protocol.CodeWorkflowNotFound, "workflow %s does not exist", missing[0])
		}
		// As DBOS names them: the missing ids, joined.
		perr.Data = map[string]any{"workflow_id": strings.Join(missing, ", ")}
		return nil, perr
	}
	queue := m.QueueName
	if queue == "" {
		queue = sysdb.InternalQueueName
	}
	a.wakeQueue(queue)
	return protocol.Empty{}, nil
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

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optionalInt(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
