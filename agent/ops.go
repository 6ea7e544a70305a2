package agent

import (
	"context"
	"errors"
	"strings"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The session adapter: each request's handler decodes its body, makes the
// checks of the wire's shape (a field the engine takes in another form),
// calls the engine method and encodes its result. Every error is mapped to
// the catalog once, by protocolError, after the handler returns.

type handler func(s *Session, env protocol.Envelope) (any, error)

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

		protocol.OpRegister:            handleRegister,
		protocol.OpRegisterQueues:      handleRegisterQueues,
		protocol.OpDebounceWorkflow:    handleDebounceWorkflow,
		protocol.OpSetWorkflowDelay:    handleSetWorkflowDelay,
		protocol.OpSetWorkflowPriority: handleSetWorkflowPriority,
		protocol.OpGetQueue:            handleGetQueue,
		protocol.OpListQueues:          handleListQueues,
		protocol.OpDeleteQueue:         handleDeleteQueue,
		protocol.OpListVersions:        handleListVersions,
		protocol.OpPromoteVersion:      handlePromoteVersion,
		protocol.OpRenameApplication:   handleRenameApplication,

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

// caller is who makes the session's requests, as its hello said.
func (s *Session) caller() Caller {
	hello, group := s.handshaken()
	c := Caller{App: group.app, Version: group.version, Worker: hello != nil && hello.Role == protocol.RoleWorker, session: s}
	if hello != nil && hello.WakeTimeFormat == protocol.WakeTimeEpochMS {
		c.WakeTimeFormat = sysdb.WakeEpochMS
	}
	return c
}

// decode decodes a request body and, for a message with rules of its own
// (protocol.Validator: the registrations and the other writes of shared
// configuration), checks them, so that no handler writes a value the
// protocol refuses.
func decode(env protocol.Envelope, v any) error {
	if err := protocol.DecodeBody(env.Body, v); err != nil {
		return &InvalidArgumentError{Message: bodyError(env.Op, err)}
	}
	if m, ok := v.(protocol.Validator); ok {
		if err := m.Validate(env.Op); err != nil {
			return &InvalidArgumentError{Message: err.Error()}
		}
	}
	return nil
}

// bodyError is the message of a body that does not decode: a field that
// breaks a rule of its type (a float that is no integer of its range) is
// named by its path from the op, as the other field errors are.
func bodyError(op string, err error) string {
	var fe *protocol.FieldError
	if errors.As(err, &fe) {
		return op + "." + fe.Error()
	}
	return op + ": " + err.Error()
}

// stepRef is a protocol caller in the engine's form.
func stepRef(c protocol.Caller) StepRef {
	return StepRef{WorkflowID: c.WorkflowID, OwnerXID: c.OwnerXID, FunctionID: c.FunctionID, InStep: c.InStep}
}

// optionalStepRef is stepRef for an optional caller.
func optionalStepRef(c *protocol.Caller) *StepRef {
	if c == nil {
		return nil
	}
	r := stepRef(*c)
	return &r
}

// protocolError maps an error of the engine to the catalog: the one place
// that does. What it does not know is logged and answered as internal.
func (s *Session) protocolError(op string, err error) *protocol.Error {
	var (
		invalid    *InvalidArgumentError
		cancelled  *WorkflowCancelledError
		closing    *ShuttingDownError
		missing    *WorkflowsNotFoundError
		held       *DebounceKeyHeldError
		queueStore *QueueRegistrationError
		contention *ContentionError
		notFound   *sysdb.NotFoundError
		conflict   *sysdb.ConflictingWorkflowError
		dedup      *sysdb.DeduplicatedError
		fenced     *sysdb.FencedError
		unexpected *sysdb.UnexpectedStepError
		stepClash  *sysdb.StepConflictError
		active     *sysdb.WorkflowActiveError
		inUse      *sysdb.WorkflowIDInUseError
		owned      *sysdb.NameOwnedError
		noVersion  *sysdb.VersionNotFoundError
		notDelayed *sysdb.NotDelayedError
		noSchedule *sysdb.ScheduleNotFoundError
		exists     *sysdb.ScheduleExistsError
	)
	switch {
	case errors.As(err, &invalid):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", invalid.Message)
	case errors.As(err, &cancelled):
		return protocol.Errorf(protocol.CodeWorkflowCancelled, "%s", cancelled.Error())
	case errors.As(err, &closing):
		return protocol.Errorf(protocol.CodeShuttingDown, "%s", closing.Message)
	case errors.As(err, &missing):
		e := protocol.Errorf(protocol.CodeWorkflowNotFound, "%s", missing.Error())
		// As DBOS names them: the missing ids, joined.
		e.Data = map[string]any{"workflow_id": strings.Join(missing.WorkflowIDs, ", ")}
		return e
	case errors.As(err, &held):
		e := protocol.Errorf(protocol.CodeDeduplicated, "%s", held.Error())
		// DBOS's DBOSQueueDeduplicatedError names the holder.
		e.Data = map[string]any{"workflow_id": held.HolderID, "queue_name": held.QueueName, "deduplication_id": held.DeduplicationID}
		return e
	case errors.As(err, &queueStore):
		return protocol.Errorf(protocol.CodeDatabaseDown, "%s", queueStore.Error())
	case errors.As(err, &contention):
		return protocol.Errorf(protocol.CodeInternal, "%s", contention.Message)
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
	// What only the database knows about shared configuration (a name
	// another application owns, a version or schedule that is not there)
	// is the caller's to fix.
	case errors.As(err, &owned):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", owned.Error())
	case errors.As(err, &noVersion):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", noVersion.Error())
	case errors.As(err, &notDelayed):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", notDelayed.Error())
	case errors.As(err, &noSchedule):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", noSchedule.Error())
	case errors.As(err, &exists):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", exists.Error())
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

func handlePing(*Session, protocol.Envelope) (any, error) {
	return protocol.Empty{}, nil
}

func handleStartWorkflow(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.StartWorkflow
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	p := StartWorkflowParams{
		WorkflowID: m.WorkflowID, Name: m.Name, ClassName: m.ClassName, ConfigName: m.ConfigName,
		Inputs: m.Inputs, Serialization: m.Serialization, QueueName: m.QueueName, Priority: m.Priority,
		DeduplicationID: m.DeduplicationID, PartitionKey: m.PartitionKey,
		Timeout: millis(m.TimeoutMS), Deadline: epochMillis(m.DeadlineEpochMS), Delay: millis(m.DelayMS),
		AppVersion: m.AppVersion, RunHere: m.RunHere, AuthenticatedUser: m.AuthenticatedUser,
		AssumedRole: m.AssumedRole, AuthenticatedRoles: m.AuthenticatedRoles,
		DeduplicationPolicy: m.DeduplicationPolicy, WorkflowIDReusePolicy: m.WorkflowIDReusePolicy,
		Attributes: m.Attributes, ApplicationName: m.ApplicationName, AppID: m.AppID,
	}
	if m.Parent != nil {
		p.Parent = &StepRef{WorkflowID: m.Parent.WorkflowID, OwnerXID: m.Parent.OwnerXID, FunctionID: m.Parent.FunctionID}
	}
	res, err := s.agent.StartWorkflow(s.ctx, s.caller(), p)
	if err != nil {
		return nil, err
	}
	return &protocol.StartWorkflowReply{WorkflowID: res.WorkflowID, Status: res.Status, Created: res.Created, Run: res.Run}, nil
}

func handleRecordStep(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.RecordStep
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	err := s.agent.RecordStep(s.ctx, s.caller(), RecordStepParams{
		WorkflowID: m.WorkflowID, OwnerXID: m.OwnerXID, FunctionID: m.FunctionID, Name: m.Name,
		Output: m.Output, Error: m.Error, Serialization: m.Serialization, ChildWorkflowID: m.ChildWorkflowID,
		StartedAt: epochMillis(m.StartedAtMS), CompletedAt: epochMillis(m.CompletedAtMS),
	})
	if err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleFinish(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.Finish
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	res, err := s.agent.Finish(s.ctx, FinishParams{WorkflowID: m.WorkflowID, OwnerXID: m.OwnerXID, Status: m.Status, Output: m.Output, Error: m.Error})
	if err != nil {
		return nil, err
	}
	return &protocol.FinishReply{Applied: res.Applied, Result: resultMessage(res.Result)}, nil
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

func handleGetResult(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.GetResult
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	wf, err := s.agent.GetResult(s.requestContext(env.ID), GetResultParams{
		WorkflowID: m.WorkflowID, Timeout: millis(m.TimeoutMS), WaitForCreation: m.WaitForCreation,
	})
	if err != nil {
		return nil, err
	}
	return resultMessage(wf), nil
}

func handleGetWorkflow(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.GetWorkflow
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	wf, err := s.agent.GetWorkflow(s.ctx, GetWorkflowParams{WorkflowID: m.WorkflowID, LoadPayloads: m.LoadPayloads})
	if err != nil {
		return nil, err
	}
	info := workflowInfo(wf)
	if m.CheckOwnerXID != "" {
		owned := wf.OwnerXID != nil && *wf.OwnerXID == m.CheckOwnerXID
		info.OwnerMatches = &owned
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

func handleListWorkflows(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.ListWorkflows
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	p := ListWorkflowsParams{
		WorkflowIDs: m.WorkflowIDs, Statuses: m.Statuses, Names: m.Names, QueueNames: m.QueueNames,
		QueuesOnly: m.QueuesOnly, ExecutorIDs: m.ExecutorIDs, AppVersions: m.AppVersions,
		ParentWorkflowIDs: m.ParentIDs, AuthenticatedUsers: m.Users, ForkedFrom: m.ForkedFrom,
		ScheduleNames: m.ScheduleNames, ApplicationNames: m.ApplicationNames, Attributes: m.Attributes,
		WasForkedFrom: m.WasForkedFrom, IsFork: m.IsFork, HasParent: m.HasParent,
		CreatedAfter: epochMillis(m.StartTimeMS), CreatedBefore: epochMillis(m.EndTimeMS),
		CompletedAfter: epochMillis(m.CompletedAfterMS), CompletedBefore: epochMillis(m.CompletedBeforeMS),
		DequeuedAfter: epochMillis(m.DequeuedAfterMS), DequeuedBefore: epochMillis(m.DequeuedBeforeMS),
		Limit: m.Limit, Offset: m.Offset, SortDesc: m.SortDesc, LoadInputs: m.LoadInputs, LoadOutputs: m.LoadOutputs,
	}
	// The wire has one prefix of its first version beside the list.
	if m.IDPrefix != "" {
		p.IDPrefixes = []string{m.IDPrefix}
	}
	p.IDPrefixes = append(p.IDPrefixes, m.IDPrefixes...)
	wfs, err := s.agent.ListWorkflows(s.ctx, p)
	if err != nil {
		return nil, err
	}
	reply := &protocol.ListWorkflowsReply{Workflows: make([]protocol.WorkflowInfo, len(wfs))}
	for i, wf := range wfs {
		reply.Workflows[i] = workflowInfo(wf)
	}
	return reply, nil
}

// decodeRef decodes a request that names one workflow.
func decodeRef(env protocol.Envelope) (protocol.WorkflowRef, error) {
	var m protocol.WorkflowRef
	return m, decode(env, &m)
}

func handleListSteps(s *Session, env protocol.Envelope) (any, error) {
	m, err := decodeRef(env)
	if err != nil {
		return nil, err
	}
	steps, err := s.agent.ListSteps(s.ctx, m.WorkflowID)
	if err != nil {
		return nil, err
	}
	reply := &protocol.ListStepsReply{Steps: make([]protocol.Step, len(steps))}
	for i, st := range steps {
		reply.Steps[i] = stepMessage(st)
	}
	return reply, nil
}

func handleCancel(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.CancelWorkflow
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if _, err := s.agent.Cancel(s.ctx, CancelParams{WorkflowID: m.WorkflowID, CancelChildren: m.CancelChildren}); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleResume(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.ResumeWorkflow
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	// The wire names one workflow or a list, not both.
	ids := m.WorkflowIDs
	switch {
	case m.WorkflowID != "" && len(ids) > 0:
		return nil, invalidf("%s: give workflow_id or workflow_ids, not both", env.Op)
	case m.WorkflowID != "":
		ids = []string{m.WorkflowID}
	}
	if err := s.agent.Resume(s.ctx, ResumeParams{WorkflowIDs: ids, QueueName: m.QueueName}); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
