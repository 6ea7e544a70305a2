package agent

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The engine's communication operations: messages, sleeps, events and
// streams, and the listings of what a workflow exchanged.

// maxSendMessages bounds one send, as the DBOS SDKs bound send_bulk.
const maxSendMessages = 10_000

// defaultStreamReadLimit is how many values one read_stream answer holds at
// most when the request names no limit.
const defaultStreamReadLimit = 1000

// errRunEnded is why a wait made for a run stopped when the run ended here.
var errRunEnded = errors.New("the run ended")

// runContext is parent, ended early (with cause errRunEnded) when the
// caller's run ends on this agent: cancelled, fenced or finished. A wait
// made for a run that is over then answers at once instead of holding on
// until its deadline.
func (a *Agent) runContext(parent context.Context, c sysdb.StepCaller) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
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

// waitFailed answers a wait for a run that failed: a run that ended while
// waiting is told why (cancelled, or no longer its owner).
func (a *Agent) waitFailed(ctx, write context.Context, c sysdb.StepCaller, err error) error {
	if errors.Is(context.Cause(ctx), errRunEnded) {
		err = &sysdb.FencedError{WorkflowID: c.WorkflowID}
	}
	return a.runFailed(write, c.WorkflowID, c.OwnerXID, err)
}

// OutgoingMessage is one message to send.
type OutgoingMessage struct {
	DestinationID string
	// Topic nil is the default topic.
	Topic         *string
	Message       string
	Serialization string
	// IdempotencyKey makes a retried send insert at most once per
	// destination.
	IdempotencyKey string
}

// SendParams is messages to send, from a workflow (Caller set: recorded as
// its step) or from outside one.
type SendParams struct {
	Caller *StepRef
	// StepName is protocol.StepSend (default) or protocol.StepSendBulk.
	StepName    string
	Messages    []OutgoingMessage
	SendToForks bool
}

// Send sends messages and wakes their receivers.
func (a *Agent) Send(ctx context.Context, c Caller, p SendParams) error {
	const op = protocol.OpSend
	if len(p.Messages) == 0 {
		return invalidf("%s: messages is empty", op)
	}
	if len(p.Messages) > maxSendMessages {
		return invalidf("%s: at most %d messages per send, got %d", op, maxSendMessages, len(p.Messages))
	}
	keys := make(map[string]bool)
	send := sysdb.MessageSendParams{StepName: p.StepName, SendToForks: p.SendToForks, Messages: make([]sysdb.OutgoingMessage, len(p.Messages))}
	for i, msg := range p.Messages {
		if msg.DestinationID == "" {
			return invalidf("%s: messages[%d].destination_id is required", op, i)
		}
		path := "messages[" + strconv.Itoa(i) + "]."
		if err := checkKeys(op, path+"topic", deref(msg.Topic), path+"idempotency_key", msg.IdempotencyKey); err != nil {
			return err
		}
		if msg.IdempotencyKey != "" {
			if keys[msg.IdempotencyKey] {
				return invalidf("%s: idempotency key %q appears twice", op, msg.IdempotencyKey)
			}
			keys[msg.IdempotencyKey] = true
		}
		send.Messages[i] = sysdb.OutgoingMessage{
			DestinationID:  msg.DestinationID,
			Topic:          msg.Topic,
			Message:        msg.Message,
			Serialization:  optional(msg.Serialization),
			IdempotencyKey: msg.IdempotencyKey,
		}
	}
	switch send.StepName {
	case "":
		send.StepName = protocol.StepSend
	case protocol.StepSend, protocol.StepSendBulk:
	default:
		return invalidf("%s: step_name must be %q or %q", op, protocol.StepSend, protocol.StepSendBulk)
	}
	if p.Caller != nil {
		sc, err := stepCaller(op, c, *p.Caller)
		if err != nil {
			return err
		}
		send.Caller = &sc
	}
	if _, err := a.db.MessageSend(ctx, send); err != nil {
		if send.Caller != nil {
			return a.runFailed(ctx, send.Caller.WorkflowID, send.Caller.OwnerXID, err)
		}
		return err
	}
	for _, msg := range send.Messages {
		a.signals.wake(messageKey(msg.DestinationID, topicOrNull(msg.Topic)))
	}
	return nil
}

func topicOrNull(topic *string) string {
	if topic == nil {
		return sysdb.NullTopic
	}
	return *topic
}

// deadlineAfter is when a wait of d from now ends.
func deadlineAfter(d time.Duration) time.Time {
	return time.Now().Add(d)
}

// recordedStep returns the step a replayed call already recorded at the
// caller's id, or nil. Another operation recorded there is an unexpected
// step.
func (a *Agent) recordedStep(ctx context.Context, caller sysdb.StepCaller, name string) (*sysdb.Step, error) {
	st, err := a.db.StepGet(ctx, caller.WorkflowID, caller.FunctionID)
	if err != nil || st == nil {
		return nil, err
	}
	if st.Name != name {
		return nil, &sysdb.UnexpectedStepError{WorkflowID: caller.WorkflowID, FunctionID: caller.FunctionID, Recorded: st.Name, Attempted: name}
	}
	return st, nil
}

func checkTimeoutFunctionID(op string, caller sysdb.StepCaller, timeoutFunctionID int) error {
	// Both SDKs reserve it right after the wait's own id (N+1), so it is
	// never 0; 0 is also how an absent get_event field reads.
	if timeoutFunctionID < 1 || timeoutFunctionID > math.MaxInt32 || timeoutFunctionID == caller.FunctionID {
		return invalidf("%s: timeout_function_id must be from 1 to 2^31-1 and differ from caller.function_id", op)
	}
	return nil
}

// timeoutDeadline records (or reads back) the durable deadline of a wait as
// the step DBOS.sleep at timeoutFunctionID, an instant (the wait may end
// before it), and returns it on this agent's clock with the database clock
// at the registration, which the wait records as its start.
func (a *Agent) timeoutDeadline(ctx context.Context, op string, caller sysdb.StepCaller, format sysdb.WakeTimeFormat, timeoutFunctionID int, timeout time.Duration) (time.Time, int64, error) {
	if err := checkTimeoutFunctionID(op, caller, timeoutFunctionID); err != nil {
		return time.Time{}, 0, err
	}
	sleepCaller := caller
	sleepCaller.FunctionID = timeoutFunctionID
	times, err := a.db.SleepRecord(ctx, sysdb.SleepParams{Caller: sleepCaller, DurationMS: timeout.Milliseconds(), Format: format})
	if err != nil {
		return time.Time{}, 0, a.runFailed(ctx, caller.WorkflowID, caller.OwnerXID, err)
	}
	return deadlineAfter(millis(times.RemainingMS)), times.NowMS, nil
}

// RecvParams is a workflow's wait for a message.
type RecvParams struct {
	Caller StepRef
	// TimeoutFunctionID is the step that records the wait's deadline.
	TimeoutFunctionID int
	// Topic nil is the default topic.
	Topic   *string
	Timeout time.Duration
	// TimeoutOutput (with TimeoutSerialization) is what the step records
	// and answers when nothing comes.
	TimeoutOutput        *string
	TimeoutSerialization string
}

// RecvResult is the message received, or the timeout's output.
type RecvResult struct {
	Received      bool
	Message       *string
	Serialization string
}

// Recv waits up to Timeout for a message to the calling workflow and takes
// it, recorded as the caller's step; wait (the request's context, which a
// peer may cancel) bounds the wait, ctx the writes.
func (a *Agent) Recv(ctx, wait context.Context, c Caller, p RecvParams) (RecvResult, error) {
	const op = protocol.OpRecv
	caller, err := stepCaller(op, c, p.Caller)
	if err != nil {
		return RecvResult{}, err
	}
	if caller.InStep {
		return RecvResult{}, invalidf("%s cannot be called from inside a step", op)
	}
	if p.Timeout < 0 {
		return RecvResult{}, invalidf("%s: timeout_ms must not be negative", op)
	}
	if err := checkTimeoutFunctionID(op, caller, p.TimeoutFunctionID); err != nil {
		return RecvResult{}, err
	}
	wake, release := a.signals.subscribe(messageKey(caller.WorkflowID, topicOrNull(p.Topic)))
	defer release()

	// Taking a waiting message is also the check for one. The deadline is
	// recorded first, as DBOS Python lays a recv out (N, then its DBOS.sleep
	// at N+1), even when the message is there already.
	consume := sysdb.MessageConsumeParams{
		Caller:             caller,
		Topic:              p.Topic,
		RequireMessage:     true,
		EmptyOutput:        p.TimeoutOutput,
		EmptySerialization: optional(p.TimeoutSerialization),
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
	deadline, startedAt, err := a.timeoutDeadline(ctx, op, caller, c.WakeTimeFormat, p.TimeoutFunctionID, p.Timeout)
	if err != nil {
		return RecvResult{}, err
	}
	consume.StartedAtMS = &startedAt
	waitCtx, stop := a.runContext(wait, caller)
	defer stop()
	done, err := awaitCondition(waitCtx, deadline, take, wake)
	if err != nil {
		return RecvResult{}, a.waitFailed(waitCtx, ctx, caller, err)
	}
	if !done {
		// The deadline passed: record that nothing came (or take what came
		// at the last moment).
		consume.RequireMessage = false
		if got, err = a.db.MessageConsume(ctx, consume); err != nil {
			return RecvResult{}, a.runFailed(ctx, caller.WorkflowID, caller.OwnerXID, err)
		}
	}
	if !got.Received {
		return RecvResult{Message: p.TimeoutOutput, Serialization: p.TimeoutSerialization}, nil
	}
	return RecvResult{Received: true, Message: got.Message, Serialization: deref(got.Serialization)}, nil
}

// SleepParams is a durable sleep of the calling workflow.
type SleepParams struct {
	Caller   StepRef
	Duration time.Duration
}

// SleepResult says when the sleep ends (a replayed sleep keeps its first
// end).
type SleepResult struct {
	WakeAt    time.Time
	Remaining time.Duration
}

// Sleep records a durable sleep as the caller's step; the caller waits out
// Remaining itself.
func (a *Agent) Sleep(ctx context.Context, c Caller, p SleepParams) (SleepResult, error) {
	const op = protocol.OpSleep
	caller, err := stepCaller(op, c, p.Caller)
	if err != nil {
		return SleepResult{}, err
	}
	if p.Duration < 0 {
		return SleepResult{}, invalidf("%s: duration_ms must not be negative", op)
	}
	times, err := a.db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller, DurationMS: p.Duration.Milliseconds(), ProjectCompletion: true, Format: c.WakeTimeFormat})
	if err != nil {
		return SleepResult{}, a.runFailed(ctx, caller.WorkflowID, caller.OwnerXID, err)
	}
	return SleepResult{WakeAt: time.UnixMilli(times.WakeAtMS), Remaining: millis(times.RemainingMS)}, nil
}

// SetEventParams publishes an event of the calling workflow.
type SetEventParams struct {
	Caller        StepRef
	Key           string
	Value         string
	Serialization string
}

// SetEvent publishes an event, recorded as the caller's step, and wakes its
// readers.
func (a *Agent) SetEvent(ctx context.Context, c Caller, p SetEventParams) error {
	const op = protocol.OpSetEvent
	caller, err := stepCaller(op, c, p.Caller)
	if err != nil {
		return err
	}
	if err := required(op, "key", p.Key); err != nil {
		return err
	}
	if err := checkKeys(op, "key", p.Key); err != nil {
		return err
	}
	err = a.db.EventSet(ctx, sysdb.EventSetParams{Caller: caller, Key: p.Key, Value: p.Value, Serialization: optional(p.Serialization)})
	if err != nil {
		return a.runFailed(ctx, caller.WorkflowID, caller.OwnerXID, err)
	}
	a.signals.wake(eventKey(caller.WorkflowID, p.Key))
	return nil
}

// GetEventParams is a wait for a workflow's event, from a workflow (Caller
// set: recorded as its step, with a durable deadline) or from outside one.
type GetEventParams struct {
	WorkflowID string
	Key        string
	Timeout    time.Duration
	Caller     *StepRef
	// TimeoutFunctionID is the caller's step that records the deadline.
	TimeoutFunctionID int
	// TimeoutOutput (with TimeoutSerialization) is what a caller's step
	// records and answers when no value comes.
	TimeoutOutput        *string
	TimeoutSerialization string
}

// GetEventResult is the event's value, or (for a caller) the timeout's
// output.
type GetEventResult struct {
	Found         bool
	Value         *string
	Serialization string
}

// GetEvent waits up to Timeout for a workflow's event; wait bounds the
// wait, ctx the writes.
func (a *Agent) GetEvent(ctx, wait context.Context, c Caller, p GetEventParams) (GetEventResult, error) {
	const op = protocol.OpGetEvent
	if err := required(op, "workflow_id", p.WorkflowID, "key", p.Key); err != nil {
		return GetEventResult{}, err
	}
	if p.Timeout < 0 {
		return GetEventResult{}, invalidf("%s: timeout_ms must not be negative", op)
	}
	wake, release := a.signals.subscribe(eventKey(p.WorkflowID, p.Key))
	defer release()

	var caller *sysdb.StepCaller
	// The step spans the wait, both ends on this agent's clock.
	startedAt := time.Now().UnixMilli()
	deadline := deadlineAfter(p.Timeout)
	if p.Caller != nil {
		sc, err := stepCaller(op, c, *p.Caller)
		if err != nil {
			return GetEventResult{}, err
		}
		if sc.InStep {
			return GetEventResult{}, invalidf("%s: a caller inside a step reads events without a caller", op)
		}
		caller = &sc
		st, err := a.recordedStep(ctx, sc, protocol.StepGetEvent)
		if err != nil {
			return GetEventResult{}, err
		}
		if st != nil {
			return GetEventResult{Found: st.Output != nil, Value: st.Output, Serialization: deref(st.Serialization)}, nil
		}
		if deadline, _, err = a.timeoutDeadline(ctx, op, sc, c.WakeTimeFormat, p.TimeoutFunctionID, p.Timeout); err != nil {
			return GetEventResult{}, err
		}
	}
	var value *sysdb.Payload
	waitCtx := wait
	if caller != nil {
		var stop context.CancelFunc
		waitCtx, stop = a.runContext(wait, *caller)
		defer stop()
	}
	if _, err := awaitCondition(waitCtx, deadline, func(ctx context.Context) (bool, error) {
		v, err := a.db.EventGet(ctx, p.WorkflowID, p.Key)
		value = v
		return v != nil, err
	}, wake); err != nil {
		if caller != nil {
			return GetEventResult{}, a.waitFailed(waitCtx, ctx, *caller, err)
		}
		return GetEventResult{}, err
	}
	result := GetEventResult{Found: value != nil}
	if value != nil {
		result.Value, result.Serialization = &value.Value, deref(value.Serialization)
	}
	if caller != nil {
		output, serialization := p.TimeoutOutput, optional(p.TimeoutSerialization)
		if value != nil {
			output, serialization = &value.Value, value.Serialization
		}
		now := time.Now().UnixMilli()
		err := a.recordStep(ctx, sysdb.StepRecordParams{
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
			return GetEventResult{}, a.runFailed(ctx, caller.WorkflowID, caller.OwnerXID, err)
		}
		if value == nil {
			result.Value, result.Serialization = output, deref(serialization)
		}
	}
	return result, nil
}

// ListEvents returns a workflow's current events by key.
func (a *Agent) ListEvents(ctx context.Context, workflowID string) ([]sysdb.Event, error) {
	if err := required(protocol.OpGetAllEvents, "workflow_id", workflowID); err != nil {
		return nil, err
	}
	return a.db.EventList(ctx, workflowID)
}

// EventHistory returns every value a workflow published, by the step that
// published it.
func (a *Agent) EventHistory(ctx context.Context, workflowID string) ([]sysdb.EventHistoryEntry, error) {
	return a.db.EventHistory(ctx, workflowID)
}

// ListMessages lists the messages sent to a workflow, oldest first.
func (a *Agent) ListMessages(ctx context.Context, workflowID string) ([]sysdb.Notification, error) {
	return a.db.MessageList(ctx, workflowID)
}

// ListStreams returns every value of every stream of a workflow, by key and
// offset (a closed stream's marker included).
func (a *Agent) ListStreams(ctx context.Context, workflowID string) ([]sysdb.StreamEntry, error) {
	return a.db.StreamList(ctx, workflowID)
}

// WriteStreamParams appends to (or closes) a stream of the calling
// workflow.
type WriteStreamParams struct {
	Caller        StepRef
	Key           string
	Value         string
	Serialization string
	Close         bool
}

// WriteStream appends a value, or the closing marker, and wakes the
// stream's readers.
func (a *Agent) WriteStream(ctx context.Context, c Caller, p WriteStreamParams) error {
	const op = protocol.OpWriteStream
	caller, err := stepCaller(op, c, p.Caller)
	if err != nil {
		return err
	}
	if err := required(op, "key", p.Key); err != nil {
		return err
	}
	if err := checkKeys(op, "key", p.Key); err != nil {
		return err
	}
	err = a.db.StreamWrite(ctx, sysdb.StreamWriteParams{
		Caller:        caller,
		Key:           p.Key,
		Value:         p.Value,
		Serialization: optional(p.Serialization),
		Close:         p.Close,
	})
	if err != nil {
		return a.runFailed(ctx, caller.WorkflowID, caller.OwnerXID, err)
	}
	a.signals.wake(streamKey(caller.WorkflowID, p.Key))
	return nil
}

// ReadStreamParams reads a stream from an offset.
type ReadStreamParams struct {
	WorkflowID string
	Key        string
	Offset     int
	// Limit caps the values (0 or past the default: the default, 1000).
	Limit int
	// Timeout bounds the wait for a first value (0: until ctx ends).
	Timeout time.Duration
}

// ReadStreamResult is the values read, in order, and whether the stream
// ended after them: Closed by its marker, or Ended because its writer is
// no longer running.
type ReadStreamResult struct {
	Values []protocol.StreamValue
	Closed bool
	Ended  bool
}

// ReadStream answers as soon as there is at least one value from Offset,
// or the stream closed or its writer ended; the values fit half a frame.
func (a *Agent) ReadStream(ctx context.Context, p ReadStreamParams) (ReadStreamResult, error) {
	const op = protocol.OpReadStream
	if err := required(op, "workflow_id", p.WorkflowID, "key", p.Key); err != nil {
		return ReadStreamResult{}, err
	}
	if p.Offset < 0 || p.Limit < 0 || p.Timeout < 0 {
		return ReadStreamResult{}, invalidf("%s: offset, limit and timeout_ms must not be negative", op)
	}
	limit := p.Limit
	if limit == 0 || limit > defaultStreamReadLimit {
		limit = defaultStreamReadLimit
	}
	written, release := a.signals.subscribe(streamKey(p.WorkflowID, p.Key))
	defer release()
	ended, releaseEnd := a.waiters.subscribe(p.WorkflowID)
	defer releaseEnd()

	var deadline time.Time
	if p.Timeout > 0 {
		deadline = deadlineAfter(p.Timeout)
	}
	var result ReadStreamResult
	budget := a.cfg.MaxFrameSize / 2 // leave room for the envelope
	if _, err := awaitCondition(ctx, deadline, func(ctx context.Context) (bool, error) {
		r, err := a.db.StreamRead(ctx, p.WorkflowID, p.Key, p.Offset, limit)
		if err != nil {
			return false, err
		}
		if r.WriterStatus == nil {
			return false, &sysdb.NotFoundError{WorkflowID: p.WorkflowID}
		}
		result.Values = make([]protocol.StreamValue, 0, len(r.Values))
		size, complete := 0, len(r.Values) < limit || r.Closed
		for i, v := range r.Values {
			size += len(v.Value) + 32
			if i > 0 && size > budget {
				complete = false
				break
			}
			result.Values = append(result.Values, protocol.StreamValue{Offset: v.Offset, Value: v.Value, Serialization: deref(v.Serialization)})
		}
		// The marker, and the end of a writer that stopped, count only once
		// everything before them is in this answer; else the reader asks
		// again from where it got to.
		result.Closed = r.Closed && complete
		result.Ended = !result.Closed && complete && !activeStatus(*r.WriterStatus)
		return len(result.Values) > 0 || result.Closed || result.Ended, nil
	}, written, ended); err != nil {
		return ReadStreamResult{}, err
	}
	if result.Values == nil {
		result.Values = []protocol.StreamValue{}
	}
	return result, nil
}

func activeStatus(status string) bool {
	return status == sysdb.StatusPending || status == sysdb.StatusEnqueued || status == sysdb.StatusDelayed
}
