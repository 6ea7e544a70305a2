package client

import (
	"context"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// The typed calls below are thin: each sends one request and decodes its
// reply. From workflow code, use the Workflow methods instead, which fill in
// the caller and take function ids in order.

// call sends one request and decodes its reply into an R.
func call[R any](ctx context.Context, c *Client, op string, req any) (R, error) {
	var reply R
	err := c.Call(ctx, op, req, &reply)
	return reply, err
}

// StartWorkflow starts or enqueues a workflow; with req.Parent it is the
// child of a running workflow. A reply with Run set must be run by the
// caller (see Worker.Start, which does).
func (c *Client) StartWorkflow(ctx context.Context, req protocol.StartWorkflow) (protocol.StartWorkflowReply, error) {
	return call[protocol.StartWorkflowReply](ctx, c, protocol.OpStartWorkflow, &req)
}

// Send delivers messages, all or none. Without req.Caller it is a send from
// outside any workflow and records nothing.
func (c *Client) Send(ctx context.Context, req protocol.Send) error {
	return c.Call(ctx, protocol.OpSend, &req, nil)
}

// Recv waits for a message to the calling workflow (see protocol.Recv).
func (c *Client) Recv(ctx context.Context, req protocol.Recv) (protocol.RecvReply, error) {
	return call[protocol.RecvReply](ctx, c, protocol.OpRecv, &req)
}

// Sleep records a durable sleep and says how much of it is left; the caller
// does the sleeping.
func (c *Client) Sleep(ctx context.Context, req protocol.Sleep) (protocol.SleepReply, error) {
	return call[protocol.SleepReply](ctx, c, protocol.OpSleep, &req)
}

// SetEvent publishes an event of the calling workflow.
func (c *Client) SetEvent(ctx context.Context, req protocol.SetEvent) error {
	return c.Call(ctx, protocol.OpSetEvent, &req, nil)
}

// GetEvent waits up to req.TimeoutMS for a workflow's event.
func (c *Client) GetEvent(ctx context.Context, req protocol.GetEvent) (protocol.GetEventReply, error) {
	return call[protocol.GetEventReply](ctx, c, protocol.OpGetEvent, &req)
}

// GetAllEvents lists a workflow's current events.
func (c *Client) GetAllEvents(ctx context.Context, workflowID string) ([]protocol.Event, error) {
	reply, err := call[protocol.GetAllEventsReply](ctx, c, protocol.OpGetAllEvents, &protocol.WorkflowRef{WorkflowID: workflowID})
	return reply.Events, err
}

// WriteStream appends to a stream of the calling workflow (or closes it,
// with req.Close).
func (c *Client) WriteStream(ctx context.Context, req protocol.WriteStream) error {
	return c.Call(ctx, protocol.OpWriteStream, &req, nil)
}

// CloseStream closes a stream of the calling workflow.
func (c *Client) CloseStream(ctx context.Context, caller protocol.Caller, key string) error {
	return c.WriteStream(ctx, protocol.WriteStream{Caller: caller, Key: key, Close: true})
}

// ReadStream reads what a stream holds from req.Offset, waiting for at
// least one value unless it is closed or its writer ended.
func (c *Client) ReadStream(ctx context.Context, req protocol.ReadStream) (protocol.ReadStreamReply, error) {
	return call[protocol.ReadStreamReply](ctx, c, protocol.OpReadStream, &req)
}

// ReadStreamAll reads a stream from its start until it is closed (closed
// true) or its writer ended without closing it (closed false).
func (c *Client) ReadStreamAll(ctx context.Context, workflowID, key string) (values []protocol.StreamValue, closed bool, err error) {
	req := protocol.ReadStream{WorkflowID: workflowID, Key: key}
	for {
		reply, err := c.ReadStream(ctx, req)
		if err != nil {
			return values, false, err
		}
		values = append(values, reply.Values...)
		req.Offset += len(reply.Values)
		if reply.Closed || reply.Ended {
			return values, reply.Closed, nil
		}
	}
}

// ForkWorkflow starts a copy of a workflow that replays it below
// req.StartStep, and returns the copy's id.
func (c *Client) ForkWorkflow(ctx context.Context, req protocol.ForkWorkflow) (string, error) {
	reply, err := call[protocol.WorkflowRef](ctx, c, protocol.OpForkWorkflow, &req)
	return reply.WorkflowID, err
}

// RewindWorkflow cuts an ended workflow's history at req.StartStep and
// enqueues it again.
func (c *Client) RewindWorkflow(ctx context.Context, req protocol.RewindWorkflow) error {
	return c.Call(ctx, protocol.OpRewindWorkflow, &req, nil)
}

// DeleteWorkflows deletes workflows and what is stored under them.
func (c *Client) DeleteWorkflows(ctx context.Context, req protocol.DeleteWorkflows) error {
	return c.Call(ctx, protocol.OpDeleteWorkflow, &req, nil)
}

// CancelWorkflow cancels a workflow (and with req.CancelChildren, the
// workflows it started).
func (c *Client) CancelWorkflow(ctx context.Context, req protocol.CancelWorkflow) error {
	return c.Call(ctx, protocol.OpCancel, &req, nil)
}

// UpdateAttributes replaces or merges a workflow's attributes.
func (c *Client) UpdateAttributes(ctx context.Context, req protocol.UpdateAttributes) error {
	return c.Call(ctx, protocol.OpUpdateAttributes, &req, nil)
}
