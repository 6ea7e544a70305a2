package agent

import (
	"context"
	"errors"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// maxSendMessages bounds one send, as the DBOS SDKs bound send_bulk.
const maxSendMessages = 10_000

// defaultStreamReadLimit is how many values one read_stream answer holds at
// most when the request names no limit.
const defaultStreamReadLimit = 1000

// communicationHandlers are the ops of messages, events, streams, sleeps and
// steering.
func communicationHandlers() map[string]handler {
	return map[string]handler{
		protocol.OpSend:             handleSend,
		protocol.OpRecv:             handleRecv,
		protocol.OpSleep:            handleSleep,
		protocol.OpSetEvent:         handleSetEvent,
		protocol.OpGetEvent:         handleGetEvent,
		protocol.OpGetAllEvents:     handleGetAllEvents,
		protocol.OpWriteStream:      handleWriteStream,
		protocol.OpReadStream:       handleReadStream,
		protocol.OpForkWorkflow:     handleForkWorkflow,
		protocol.OpRewindWorkflow:   handleRewindWorkflow,
		protocol.OpDeleteWorkflow:   handleDeleteWorkflows,
		protocol.OpUpdateAttributes: handleUpdateAttributes,
	}
}

// errRunEnded is why a wait made for a run stopped when the run ended here.
var errRunEnded = errors.New("the run ended")

// runContext is parent, ended early (with cause errRunEnded) when the
// caller's run ends on this agent: cancelled, fenced or finished. A wait
// made for a run that is over then answers at once instead of holding on
// until its deadline.
func (s *Session) runContext(parent context.Context, c sysdb.StepCaller) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	a := s.agent
	a.mu.Lock()
	r := a.runs[c.WorkflowID]
	a.mu.Unlock()
	if r != nil && r.ownerXID == c.OwnerXID {
		a.sup.goFn("run end watch", func() {
			select {
			case <-r.ended:
				cancel(errRunEnded)
			case <-ctx.Done():
			}
		})
	}
	return ctx, func() { cancel(nil) }
}

// waitError answers a wait for a run that failed: a run that ended while
// waiting is told why (cancelled, or no longer its owner).
func waitError(s *Session, ctx context.Context, op string, c sysdb.StepCaller, err error) *protocol.Error {
	if errors.Is(context.Cause(ctx), errRunEnded) {
		err = &sysdb.FencedError{WorkflowID: c.WorkflowID}
	}
	return runError(s, op, c.WorkflowID, c.OwnerXID, err)
}

// stepCaller checks a caller and turns it into the database's form.
func (s *Session) stepCaller(op string, c protocol.Caller) (sysdb.StepCaller, *protocol.Error) {
	if perr := required(op, "caller.workflow_id", c.WorkflowID, "caller.owner_xid", c.OwnerXID); perr != nil {
		return sysdb.StepCaller{}, perr
	}
	if c.FunctionID < 1 {
		return sysdb.StepCaller{}, protocol.Errorf(protocol.CodeInvalidArgument, "%s: caller.function_id must be at least 1", op)
	}
	_, group := s.handshaken()
	return sysdb.StepCaller{
		WorkflowID:      c.WorkflowID,
		OwnerXID:        c.OwnerXID,
		FunctionID:      c.FunctionID,
		InStep:          c.InStep,
		ApplicationName: optional(group.app),
	}, nil
}

// runError answers a write made on behalf of a run that failed. A fenced
// write ends the run here; when the fence was a cancellation the run is told
// so, to stop as cancelled rather than as a zombie.
func runError(s *Session, op, workflowID, ownerXID string, err error) *protocol.Error {
	var fenced *sysdb.FencedError
	if errors.As(err, &fenced) {
		a := s.agent
		a.endRun(workflowID, ownerXID)
		if wf, gerr := a.db.WorkflowGet(s.ctx, workflowID); gerr == nil && wf.Status == sysdb.StatusCancelled {
			return protocol.Errorf(protocol.CodeWorkflowCancelled, "workflow %s was cancelled", workflowID)
		}
	}
	return protocolError(s, op, err)
}

func handleSend(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.Send
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if len(m.Messages) == 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: messages is empty", env.Op)
	}
	if len(m.Messages) > maxSendMessages {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: at most %d messages per send, got %d", env.Op, maxSendMessages, len(m.Messages))
	}
	keys := make(map[string]bool)
	p := sysdb.MessageSendParams{StepName: m.StepName, SendToForks: m.SendToForks, Messages: make([]sysdb.OutgoingMessage, len(m.Messages))}
	for i, msg := range m.Messages {
		if msg.DestinationID == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: messages[%d].destination_id is required", env.Op, i)
		}
		if msg.IdempotencyKey != "" {
			if keys[msg.IdempotencyKey] {
				return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: idempotency key %q appears twice", env.Op, msg.IdempotencyKey)
			}
			keys[msg.IdempotencyKey] = true
		}
		p.Messages[i] = sysdb.OutgoingMessage{
			DestinationID:  msg.DestinationID,
			Topic:          msg.Topic,
			Message:        msg.Message,
			Serialization:  optional(msg.Serialization),
			IdempotencyKey: msg.IdempotencyKey,
		}
	}
	switch p.StepName {
	case "":
		p.StepName = protocol.StepSend
	case protocol.StepSend, protocol.StepSendBulk:
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: step_name must be %q or %q", env.Op, protocol.StepSend, protocol.StepSendBulk)
	}
	if m.Caller != nil {
		caller, perr := s.stepCaller(env.Op, *m.Caller)
		if perr != nil {
			return nil, perr
		}
		p.Caller = &caller
	}
	if _, err := a.db.MessageSend(s.ctx, p); err != nil {
		if p.Caller != nil {
			return nil, runError(s, env.Op, p.Caller.WorkflowID, p.Caller.OwnerXID, err)
		}
		return nil, protocolError(s, env.Op, err)
	}
	for _, msg := range p.Messages {
		a.signals.wake(messageKey(msg.DestinationID, topicOrNull(msg.Topic)))
	}
	return protocol.Empty{}, nil
}

func topicOrNull(topic *string) string {
	if topic == nil {
		return sysdb.NullTopic
	}
	return *topic
}

// deadlineAfter is when a wait of ms milliseconds from now ends.
func deadlineAfter(ms int64) time.Time {
	return time.Now().Add(time.Duration(ms) * time.Millisecond)
}

// recordedStep returns the step a replayed call already recorded at the
// caller's id, or nil. Another operation recorded there is an unexpected
// step.
func recordedStep(s *Session, caller sysdb.StepCaller, name string) (*sysdb.Step, error) {
	st, err := s.agent.db.StepGet(s.ctx, caller.WorkflowID, caller.FunctionID)
	if err != nil || st == nil {
		return nil, err
	}
	if st.Name != name {
		return nil, &sysdb.UnexpectedStepError{WorkflowID: caller.WorkflowID, FunctionID: caller.FunctionID, Recorded: st.Name, Attempted: name}
	}
	return st, nil
}

func checkTimeoutFunctionID(op string, caller sysdb.StepCaller, timeoutFunctionID int) *protocol.Error {
	if timeoutFunctionID < 1 || timeoutFunctionID == caller.FunctionID {
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s: timeout_function_id must be at least 1 and differ from caller.function_id", op)
	}
	return nil
}

// timeoutDeadline records (or reads back) the durable deadline of a wait as
// the step DBOS.sleep at timeoutFunctionID, an instant (the wait may end
// before it), and returns it on this agent's clock with the database clock
// at the registration, which the wait records as its start.
func timeoutDeadline(s *Session, op string, caller sysdb.StepCaller, timeoutFunctionID int, timeoutMS int64) (time.Time, int64, *protocol.Error) {
	if perr := checkTimeoutFunctionID(op, caller, timeoutFunctionID); perr != nil {
		return time.Time{}, 0, perr
	}
	sleepCaller := caller
	sleepCaller.FunctionID = timeoutFunctionID
	times, err := s.agent.db.SleepRecord(s.ctx, sysdb.SleepParams{Caller: sleepCaller, DurationMS: timeoutMS})
	if err != nil {
		return time.Time{}, 0, runError(s, op, caller.WorkflowID, caller.OwnerXID, err)
	}
	return deadlineAfter(times.RemainingMS), times.NowMS, nil
}

func handleRecv(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.Recv
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	caller, perr := s.stepCaller(env.Op, m.Caller)
	if perr != nil {
		return nil, perr
	}
	if caller.InStep {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s cannot be called from inside a step", env.Op)
	}
	if m.TimeoutMS < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: timeout_ms must not be negative", env.Op)
	}
	if perr := checkTimeoutFunctionID(env.Op, caller, m.TimeoutFunctionID); perr != nil {
		return nil, perr
	}
	wake, release := a.signals.subscribe(messageKey(caller.WorkflowID, topicOrNull(m.Topic)))
	defer release()

	// Taking a waiting message is also the check for one. The deadline is
	// recorded first, as DBOS Python lays a recv out (N, then its DBOS.sleep
	// at N+1), even when the message is there already.
	consume := sysdb.MessageConsumeParams{
		Caller:             caller,
		Topic:              m.Topic,
		RequireMessage:     true,
		EmptyOutput:        m.TimeoutOutput,
		EmptySerialization: optional(m.TimeoutSerialization),
	}
	var got sysdb.Received
	take := func(ctx context.Context) (bool, error) {
		var err error
		got, err = a.db.MessageConsume(ctx, consume)
		return err == nil && (got.Received || got.Replayed), err
	}
	// A recv recorded already (a retried request) needs no probe of its own:
	// its deadline is recorded too, so the first take below finds the
	// record and answers it.
	deadline, startedAt, perr := timeoutDeadline(s, env.Op, caller, m.TimeoutFunctionID, m.TimeoutMS)
	if perr != nil {
		return nil, perr
	}
	consume.StartedAtMS = &startedAt
	ctx, stop := s.runContext(s.requestContext(env.ID), caller)
	defer stop()
	done, err := awaitCondition(ctx, deadline, take, wake)
	if err != nil {
		return nil, waitError(s, ctx, env.Op, caller, err)
	}
	if !done {
		// The deadline passed: record that nothing came (or take what came
		// at the last moment).
		consume.RequireMessage = false
		if got, err = a.db.MessageConsume(s.ctx, consume); err != nil {
			return nil, runError(s, env.Op, caller.WorkflowID, caller.OwnerXID, err)
		}
	}
	reply := &protocol.RecvReply{Received: got.Received, Message: got.Message, Serialization: deref(got.Serialization)}
	if !got.Received {
		reply.Message, reply.Serialization = m.TimeoutOutput, m.TimeoutSerialization
	}
	return reply, nil
}

func handleSleep(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.Sleep
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	caller, perr := s.stepCaller(env.Op, m.Caller)
	if perr != nil {
		return nil, perr
	}
	if m.DurationMS < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: duration_ms must not be negative", env.Op)
	}
	times, err := s.agent.db.SleepRecord(s.ctx, sysdb.SleepParams{Caller: caller, DurationMS: m.DurationMS, ProjectCompletion: true})
	if err != nil {
		return nil, runError(s, env.Op, caller.WorkflowID, caller.OwnerXID, err)
	}
	return &protocol.SleepReply{WakeAtEpochMS: times.WakeAtMS, RemainingMS: times.RemainingMS}, nil
}

func handleSetEvent(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.SetEvent
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	caller, perr := s.stepCaller(env.Op, m.Caller)
	if perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "key", m.Key); perr != nil {
		return nil, perr
	}
	err := a.db.EventSet(s.ctx, sysdb.EventSetParams{Caller: caller, Key: m.Key, Value: m.Value, Serialization: optional(m.Serialization)})
	if err != nil {
		return nil, runError(s, env.Op, caller.WorkflowID, caller.OwnerXID, err)
	}
	a.signals.wake(eventKey(caller.WorkflowID, m.Key))
	return protocol.Empty{}, nil
}

func handleGetEvent(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.GetEvent
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID, "key", m.Key); perr != nil {
		return nil, perr
	}
	if m.TimeoutMS < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: timeout_ms must not be negative", env.Op)
	}
	wake, release := a.signals.subscribe(eventKey(m.WorkflowID, m.Key))
	defer release()

	var caller *sysdb.StepCaller
	// The step spans the wait, both ends on this agent's clock.
	startedAt := time.Now().UnixMilli()
	deadline := deadlineAfter(m.TimeoutMS)
	if m.Caller != nil {
		c, perr := s.stepCaller(env.Op, *m.Caller)
		if perr != nil {
			return nil, perr
		}
		if c.InStep {
			return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: a caller inside a step reads events without a caller", env.Op)
		}
		caller = &c
		st, err := recordedStep(s, c, protocol.StepGetEvent)
		if err != nil {
			return nil, protocolError(s, env.Op, err)
		}
		if st != nil {
			return &protocol.GetEventReply{Found: st.Output != nil, Value: st.Output, Serialization: deref(st.Serialization)}, nil
		}
		if deadline, _, perr = timeoutDeadline(s, env.Op, c, m.TimeoutFunctionID, m.TimeoutMS); perr != nil {
			return nil, perr
		}
	}
	var value *sysdb.Payload
	ctx := s.requestContext(env.ID)
	if caller != nil {
		var stop context.CancelFunc
		ctx, stop = s.runContext(ctx, *caller)
		defer stop()
	}
	if _, err := awaitCondition(ctx, deadline, func(ctx context.Context) (bool, error) {
		v, err := a.db.EventGet(ctx, m.WorkflowID, m.Key)
		value = v
		return v != nil, err
	}, wake); err != nil {
		if caller != nil {
			return nil, waitError(s, ctx, env.Op, *caller, err)
		}
		return nil, protocolError(s, env.Op, err)
	}
	reply := &protocol.GetEventReply{Found: value != nil}
	if value != nil {
		reply.Value, reply.Serialization = &value.Value, deref(value.Serialization)
	}
	if caller != nil {
		output, serialization := m.TimeoutOutput, optional(m.TimeoutSerialization)
		if value != nil {
			output, serialization = &value.Value, value.Serialization
		}
		now := time.Now().UnixMilli()
		err := a.steps.record(s.ctx, sysdb.StepRecordParams{
			WorkflowID:      caller.WorkflowID,
			OwnerXID:        caller.OwnerXID,
			FunctionID:      caller.FunctionID,
			Name:            protocol.StepGetEvent,
			Output:          output,
			Serialization:   serialization,
			StartedAt:       &startedAt,
			CompletedAt:     &now,
			ApplicationName: caller.ApplicationName,
		})
		if err != nil {
			return nil, runError(s, env.Op, caller.WorkflowID, caller.OwnerXID, err)
		}
		if value == nil {
			reply.Value, reply.Serialization = output, deref(serialization)
		}
	}
	return reply, nil
}

func handleGetAllEvents(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	m, perr := decodeRef(env)
	if perr != nil {
		return nil, perr
	}
	events, err := s.agent.db.EventList(s.ctx, m.WorkflowID)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	reply := &protocol.GetAllEventsReply{Events: make([]protocol.Event, len(events))}
	for i, e := range events {
		reply.Events[i] = protocol.Event{Key: e.Key, Value: e.Value, Serialization: deref(e.Serialization)}
	}
	return reply, nil
}

func handleWriteStream(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.WriteStream
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	caller, perr := s.stepCaller(env.Op, m.Caller)
	if perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "key", m.Key); perr != nil {
		return nil, perr
	}
	err := a.db.StreamWrite(s.ctx, sysdb.StreamWriteParams{
		Caller:        caller,
		Key:           m.Key,
		Value:         m.Value,
		Serialization: optional(m.Serialization),
		Close:         m.Close,
	})
	if err != nil {
		return nil, runError(s, env.Op, caller.WorkflowID, caller.OwnerXID, err)
	}
	a.signals.wake(streamKey(caller.WorkflowID, m.Key))
	return protocol.Empty{}, nil
}

func handleReadStream(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.ReadStream
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID, "key", m.Key); perr != nil {
		return nil, perr
	}
	if m.Offset < 0 || m.Limit < 0 || m.TimeoutMS < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: offset, limit and timeout_ms must not be negative", env.Op)
	}
	limit := m.Limit
	if limit == 0 || limit > defaultStreamReadLimit {
		limit = defaultStreamReadLimit
	}
	written, release := a.signals.subscribe(streamKey(m.WorkflowID, m.Key))
	defer release()
	ended, releaseEnd := a.waiters.subscribe(m.WorkflowID)
	defer releaseEnd()

	var deadline time.Time
	if m.TimeoutMS > 0 {
		deadline = deadlineAfter(m.TimeoutMS)
	}
	reply := &protocol.ReadStreamReply{}
	budget := a.cfg.MaxFrameSize / 2 // leave room for the envelope
	if _, err := awaitCondition(s.requestContext(env.ID), deadline, func(ctx context.Context) (bool, error) {
		r, err := a.db.StreamRead(ctx, m.WorkflowID, m.Key, m.Offset, limit)
		if err != nil {
			return false, err
		}
		if r.WriterStatus == nil {
			return false, &sysdb.NotFoundError{WorkflowID: m.WorkflowID}
		}
		reply.Values = make([]protocol.StreamValue, 0, len(r.Values))
		size, complete := 0, len(r.Values) < limit || r.Closed
		for i, v := range r.Values {
			size += len(v.Value) + 32
			if i > 0 && size > budget {
				complete = false
				break
			}
			reply.Values = append(reply.Values, protocol.StreamValue{Offset: v.Offset, Value: v.Value, Serialization: deref(v.Serialization)})
		}
		// The marker, and the end of a writer that stopped, count only once
		// everything before them is in this answer; else the reader asks
		// again from where it got to.
		reply.Closed = r.Closed && complete
		reply.Ended = !reply.Closed && complete && !activeStatus(*r.WriterStatus)
		return len(reply.Values) > 0 || reply.Closed || reply.Ended, nil
	}, written, ended); err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	if reply.Values == nil {
		reply.Values = []protocol.StreamValue{}
	}
	return reply, nil
}

func activeStatus(status string) bool {
	return status == sysdb.StatusPending || status == sysdb.StatusEnqueued || status == sysdb.StatusDelayed
}

func handleForkWorkflow(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.ForkWorkflow
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID); perr != nil {
		return nil, perr
	}
	if m.StartStep < 0 || m.TimeoutMS < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: start_step and timeout_ms must not be negative", env.Op)
	}
	if m.NewWorkflowID == "" {
		m.NewWorkflowID = newUUID()
	}
	_, group := s.handshaken()
	p := sysdb.WorkflowForkParams{
		OriginalID:          m.WorkflowID,
		NewID:               m.NewWorkflowID,
		StartStep:           m.StartStep,
		ApplicationVersion:  optional(m.AppVersion),
		QueueName:           m.QueueName,
		QueuePartitionKey:   optional(m.PartitionKey),
		TimeoutMS:           optionalInt(m.TimeoutMS),
		ReplacementChildren: m.ReplacementChildren,
		ApplicationName:     optional(group.app),
	}
	if err := a.db.WorkflowFork(s.ctx, p); err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	a.wakeQueue(queueOrInternal(m.QueueName))
	return &protocol.WorkflowRef{WorkflowID: m.NewWorkflowID}, nil
}

func queueOrInternal(queue string) string {
	if queue == "" {
		return sysdb.InternalQueueName
	}
	return queue
}

func handleRewindWorkflow(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.RewindWorkflow
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID); perr != nil {
		return nil, perr
	}
	if m.StartStep < 1 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: start_step must be at least 1", env.Op)
	}
	err := a.db.WorkflowRewind(s.ctx, sysdb.WorkflowRewindParams{
		WorkflowID:         m.WorkflowID,
		StartStep:          m.StartStep,
		ApplicationVersion: optional(m.AppVersion),
		QueueName:          m.QueueName,
		QueuePartitionKey:  optional(m.PartitionKey),
	})
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	a.wakeQueue(queueOrInternal(m.QueueName))
	return protocol.Empty{}, nil
}

func handleDeleteWorkflows(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.DeleteWorkflows
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if len(m.WorkflowIDs) == 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: workflow_ids is empty", env.Op)
	}
	err := a.db.WorkflowDelete(s.ctx, sysdb.WorkflowDeleteParams{WorkflowIDs: m.WorkflowIDs, IncludeChildren: m.DeleteChildren})
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	for _, id := range m.WorkflowIDs {
		a.waiters.wake(id)
	}
	return protocol.Empty{}, nil
}

func handleUpdateAttributes(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.UpdateAttributes
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	// decode checked the id and the attributes (UpdateAttributes.Validate).
	if err := s.agent.db.WorkflowSetAttributes(s.ctx, m.WorkflowID, m.Attributes, m.Merge); err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	return protocol.Empty{}, nil
}

// checkAttributes accepts nil or the JSON text of an object, by the rule
// update_workflow_attributes applies.
func checkAttributes(op string, attributes *string) *protocol.Error {
	if err := protocol.CheckAttributes(op+".attributes", attributes); err != nil {
		return protocol.Errorf(protocol.CodeInvalidArgument, "%v", err)
	}
	return nil
}
