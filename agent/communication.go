package agent

import (
	"github.com/dbos-agent/dbos-agent/protocol"
)

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

func handleSend(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.Send
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	p := SendParams{Caller: optionalStepRef(m.Caller), StepName: m.StepName, SendToForks: m.SendToForks,
		Messages: make([]OutgoingMessage, len(m.Messages))}
	for i, msg := range m.Messages {
		p.Messages[i] = OutgoingMessage{DestinationID: msg.DestinationID, Topic: msg.Topic, Message: msg.Message,
			Serialization: msg.Serialization, IdempotencyKey: msg.IdempotencyKey}
	}
	if err := s.agent.Send(s.ctx, s.caller(), p); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleRecv(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.Recv
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	got, err := s.agent.Recv(s.ctx, s.requestContext(env.ID), s.caller(), RecvParams{
		Caller: stepRef(m.Caller), TimeoutFunctionID: m.TimeoutFunctionID, Topic: m.Topic, Timeout: millis(m.TimeoutMS),
		TimeoutOutput: m.TimeoutOutput, TimeoutSerialization: m.TimeoutSerialization,
	})
	if err != nil {
		return nil, err
	}
	return &protocol.RecvReply{Received: got.Received, Message: got.Message, Serialization: got.Serialization}, nil
}

func handleSleep(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.Sleep
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	res, err := s.agent.Sleep(s.ctx, s.caller(), SleepParams{Caller: stepRef(m.Caller), Duration: millis(m.DurationMS)})
	if err != nil {
		return nil, err
	}
	return &protocol.SleepReply{WakeAtEpochMS: res.WakeAt.UnixMilli(), RemainingMS: res.Remaining.Milliseconds()}, nil
}

func handleSetEvent(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.SetEvent
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	err := s.agent.SetEvent(s.ctx, s.caller(), SetEventParams{Caller: stepRef(m.Caller), Key: m.Key, Value: m.Value, Serialization: m.Serialization})
	if err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleGetEvent(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.GetEvent
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	got, err := s.agent.GetEvent(s.ctx, s.requestContext(env.ID), s.caller(), GetEventParams{
		WorkflowID: m.WorkflowID, Key: m.Key, Timeout: millis(m.TimeoutMS), Caller: optionalStepRef(m.Caller),
		TimeoutFunctionID: m.TimeoutFunctionID, TimeoutOutput: m.TimeoutOutput, TimeoutSerialization: m.TimeoutSerialization,
	})
	if err != nil {
		return nil, err
	}
	return &protocol.GetEventReply{Found: got.Found, Value: got.Value, Serialization: got.Serialization}, nil
}

func handleGetAllEvents(s *Session, env protocol.Envelope) (any, error) {
	m, err := decodeRef(env)
	if err != nil {
		return nil, err
	}
	events, err := s.agent.ListEvents(s.ctx, m.WorkflowID)
	if err != nil {
		return nil, err
	}
	reply := &protocol.GetAllEventsReply{Events: make([]protocol.Event, len(events))}
	for i, e := range events {
		reply.Events[i] = protocol.Event{Key: e.Key, Value: e.Value, Serialization: deref(e.Serialization)}
	}
	return reply, nil
}

func handleWriteStream(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.WriteStream
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	err := s.agent.WriteStream(s.ctx, s.caller(), WriteStreamParams{
		Caller: stepRef(m.Caller), Key: m.Key, Value: m.Value, Serialization: m.Serialization, Close: m.Close,
	})
	if err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleReadStream(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.ReadStream
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	res, err := s.agent.ReadStream(s.requestContext(env.ID), ReadStreamParams{
		WorkflowID: m.WorkflowID, Key: m.Key, Offset: m.Offset, Limit: m.Limit, Timeout: millis(m.TimeoutMS),
	})
	if err != nil {
		return nil, err
	}
	return &protocol.ReadStreamReply{Values: res.Values, Closed: res.Closed, Ended: res.Ended}, nil
}

func handleForkWorkflow(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.ForkWorkflow
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	id, err := s.agent.Fork(s.ctx, s.caller(), ForkParams{
		WorkflowID: m.WorkflowID, StartStep: m.StartStep, NewWorkflowID: m.NewWorkflowID, AppVersion: m.AppVersion,
		QueueName: m.QueueName, PartitionKey: m.PartitionKey, Timeout: millis(m.TimeoutMS), ReplacementChildren: m.ReplacementChildren,
	})
	if err != nil {
		return nil, err
	}
	return &protocol.WorkflowRef{WorkflowID: id}, nil
}

func handleRewindWorkflow(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.RewindWorkflow
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	err := s.agent.Rewind(s.ctx, RewindParams{
		WorkflowID: m.WorkflowID, StartStep: m.StartStep, AppVersion: m.AppVersion, QueueName: m.QueueName, PartitionKey: m.PartitionKey,
	})
	if err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleDeleteWorkflows(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.DeleteWorkflows
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.Delete(s.ctx, DeleteParams{WorkflowIDs: m.WorkflowIDs, DeleteChildren: m.DeleteChildren}); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleUpdateAttributes(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.UpdateAttributes
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.UpdateAttributes(s.ctx, UpdateAttributesParams{WorkflowID: m.WorkflowID, Attributes: m.Attributes, Merge: m.Merge}); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}
