package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// The durable calls a workflow makes besides its steps, with the replay
// rules of PROTOCOL.md section 2.14: each takes the next function id (recv
// and get_event take two: the call's and its deadline's, a DBOS.sleep);
// when the run's history holds the call, a write is skipped, a read returns
// what is recorded and a child start returns the recorded child, with no
// request. Sleep alone is always asked again: the first wake time stands.
//
// Payloads are opaque strings in the workflow's serialization (Serialization).

// Serialization is the tag of the payloads this run writes: its inputs'
// tag, or portable_json.
func (wf *Workflow) Serialization() string {
	if wf.run.Serialization != "" {
		return wf.run.Serialization
	}
	return "portable_json"
}

// replay is the outcome of a recorded call: its recorded error, if any.
func replay(rec *protocol.Step, err error) error {
	if err == nil && rec.Error != nil {
		err = errors.New(*rec.Error)
	}
	return err
}

// write makes a durable write named name at the next function id, or skips
// it on replay.
func (wf *Workflow) write(name, op string, req func(caller protocol.Caller) any) (protocol.Caller, error) {
	caller := wf.NextCaller()
	if rec, err := wf.recorded(caller.FunctionID, name); err != nil || rec != nil {
		return caller, replay(rec, err)
	}
	return caller, wf.call(wf.ctx, op, req(caller), nil)
}

// Send delivers messages (all or none) as one step, DBOS.send. A message
// without a serialization gets the workflow's. A missing destination is
// recorded as the step's error, so that a replay fails the same way.
func (wf *Workflow) Send(messages ...protocol.Message) error {
	for i := range messages {
		if messages[i].Serialization == "" {
			messages[i].Serialization = wf.Serialization()
		}
	}
	caller, err := wf.write(protocol.StepSend, protocol.OpSend, func(caller protocol.Caller) any {
		return &protocol.Send{Caller: &caller, Messages: messages}
	})
	var perr *protocol.Error
	if errors.As(err, &perr) && perr.Code == protocol.CodeWorkflowNotFound {
		msg := perr.Error()
		rec := protocol.RecordStep{WorkflowID: caller.WorkflowID, OwnerXID: caller.OwnerXID, Step: protocol.Step{
			FunctionID: caller.FunctionID, Name: protocol.StepSend, Error: &msg, Serialization: wf.Serialization(),
		}}
		if recErr := wf.call(context.Background(), protocol.OpRecordStep, &rec, nil); recErr != nil {
			return recErr
		}
	}
	return err
}

// SetEvent publishes value under key.
func (wf *Workflow) SetEvent(key, value string) error {
	_, err := wf.write(protocol.StepSetEvent, protocol.OpSetEvent, func(caller protocol.Caller) any {
		return &protocol.SetEvent{Caller: caller, Key: key, Value: value, Serialization: wf.Serialization()}
	})
	return err
}

// WriteStream appends value to the stream key.
func (wf *Workflow) WriteStream(key, value string) error {
	_, err := wf.write(protocol.StepWriteStream, protocol.OpWriteStream, func(caller protocol.Caller) any {
		return &protocol.WriteStream{Caller: caller, Key: key, Value: value, Serialization: wf.Serialization()}
	})
	return err
}

// CloseStream closes the stream key: readers see it end, writes fail.
func (wf *Workflow) CloseStream(key string) error {
	_, err := wf.write(protocol.StepCloseStream, protocol.OpWriteStream, func(caller protocol.Caller) any {
		return &protocol.WriteStream{Caller: caller, Key: key, Close: true}
	})
	return err
}

// read makes a durable read named name at the next two function ids (the
// read's and its deadline's), or returns what the history holds.
func (wf *Workflow) read(name string, ask func(caller protocol.Caller, deadlineID int) (*string, string, error)) (out *string, serialization string, err error) {
	caller, deadlineID := wf.NextCaller(), wf.nextFunctionID()
	if rec, err := wf.recorded(caller.FunctionID, name); err != nil || rec != nil {
		if err = replay(rec, err); err != nil {
			return nil, "", err
		}
		return rec.Output, rec.Serialization, nil
	}
	return ask(caller, deadlineID)
}

// Recv waits up to timeout for a message on topic (nil: the default topic).
// A timed-out recv has Received false and records a nil message.
func (wf *Workflow) Recv(topic *string, timeout time.Duration) (protocol.RecvReply, error) {
	msg, ser, err := wf.read(protocol.StepRecv, func(caller protocol.Caller, deadlineID int) (*string, string, error) {
		req := protocol.Recv{Caller: caller, TimeoutFunctionID: deadlineID, Topic: topic, TimeoutMS: timeout.Milliseconds()}
		var reply protocol.RecvReply
		err := wf.call(wf.ctx, protocol.OpRecv, &req, &reply)
		return reply.Message, reply.Serialization, err
	})
	return protocol.RecvReply{Received: msg != nil, Message: msg, Serialization: ser}, err
}

// GetEvent waits up to timeout for another workflow's event.
func (wf *Workflow) GetEvent(workflowID, key string, timeout time.Duration) (protocol.GetEventReply, error) {
	value, ser, err := wf.read(protocol.StepGetEvent, func(caller protocol.Caller, deadlineID int) (*string, string, error) {
		req := protocol.GetEvent{WorkflowID: workflowID, Key: key, TimeoutMS: timeout.Milliseconds(), Caller: &caller, TimeoutFunctionID: deadlineID}
		var reply protocol.GetEventReply
		err := wf.call(wf.ctx, protocol.OpGetEvent, &req, &reply)
		return reply.Value, reply.Serialization, err
	})
	return protocol.GetEventReply{Found: value != nil, Value: value, Serialization: ser}, err
}

// Sleep sleeps durably: a recovered run sleeps only what is left of it.
func (wf *Workflow) Sleep(d time.Duration) error {
	var reply protocol.SleepReply
	if err := wf.call(wf.ctx, protocol.OpSleep, &protocol.Sleep{Caller: wf.NextCaller(), DurationMS: d.Milliseconds()}, &reply); err != nil {
		return err
	}
	timer := time.NewTimer(time.Duration(reply.RemainingMS) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-wf.ctx.Done():
		return wf.stop(ErrStopped)
	}
}

// StartChild starts a child workflow as the next step. Its id defaults to
// "<parent id>-<function id>", as DBOS names children; without a queue, a
// child this worker registered runs here. On replay it returns the
// recorded child's id only.
func (wf *Workflow) StartChild(req protocol.StartWorkflow) (protocol.StartWorkflowReply, error) {
	caller := wf.NextCaller()
	if rec, err := wf.recorded(caller.FunctionID, req.Name); err != nil || rec != nil {
		if err != nil {
			return protocol.StartWorkflowReply{}, err
		}
		return protocol.StartWorkflowReply{WorkflowID: rec.ChildWorkflowID}, nil
	}
	req.Parent = &protocol.ParentStep{WorkflowID: caller.WorkflowID, OwnerXID: caller.OwnerXID, FunctionID: caller.FunctionID}
	if req.WorkflowID == "" {
		req.WorkflowID = fmt.Sprintf("%s-%d", caller.WorkflowID, caller.FunctionID)
	}
	if req.Serialization == "" {
		req.Serialization = wf.Serialization()
	}
	reply, err := wf.worker.Start(wf.ctx, req)
	return reply, wf.stopOn(err)
}

// debounceStep is DBOS's DebounceResult, recorded as the step of a debounce
// from workflow code.
type debounceStep struct {
	BouncedWorkflowID *string `json:"bounced_workflow_id"`
	HolderWorkflowID  *string `json:"holder_workflow_id"`
}

// Debounce debounces a workflow as the next step (and, when it creates the
// workflow, the step after: its child). On replay it answers from the
// history: the bounced workflow, the recorded child, or the holder's
// deduplicated error again.
func (wf *Workflow) Debounce(req protocol.DebounceWorkflow) (protocol.DebounceWorkflowReply, error) {
	caller := wf.NextCaller()
	rec, err := wf.recorded(caller.FunctionID, protocol.StepDebounce)
	if err != nil {
		return protocol.DebounceWorkflowReply{}, err
	}
	if rec != nil {
		var out debounceStep
		if rec.Output == nil || json.Unmarshal([]byte(*rec.Output), &out) != nil {
			return protocol.DebounceWorkflowReply{}, fmt.Errorf("step %d: the recorded %s is not a debounce result", caller.FunctionID, protocol.StepDebounce)
		}
		switch {
		case out.BouncedWorkflowID != nil:
			return protocol.DebounceWorkflowReply{WorkflowID: *out.BouncedWorkflowID, Bounced: true}, nil
		case out.HolderWorkflowID != nil:
			return protocol.DebounceWorkflowReply{}, protocol.Errorf(protocol.CodeDeduplicated,
				"debounce key %q of %s is held by workflow %s", req.Key, req.Name, *out.HolderWorkflowID)
		}
		child, err := wf.recorded(wf.nextFunctionID(), req.Name)
		if err != nil || child == nil || child.ChildWorkflowID == "" {
			return protocol.DebounceWorkflowReply{}, fmt.Errorf("step %d: the debounce created a workflow but the next step records no child (%v)", caller.FunctionID, err)
		}
		return protocol.DebounceWorkflowReply{WorkflowID: child.ChildWorkflowID}, nil
	}
	req.Caller = &caller
	if req.Serialization == "" {
		req.Serialization = wf.Serialization()
	}
	var reply protocol.DebounceWorkflowReply
	if err := wf.call(wf.ctx, protocol.OpDebounceWorkflow, &req, &reply); err != nil {
		return reply, err
	}
	if !reply.Bounced {
		wf.nextFunctionID() // the created child took the next id
	}
	return reply, nil
}
