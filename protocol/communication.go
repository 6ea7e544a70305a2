package protocol

// Ops for workflows talking to each other and being steered: messages,
// events, streams, durable sleep, fork, rewind, delete and attributes.
const (
	OpSend           = "send"
	OpRecv           = "recv"
	OpSleep          = "sleep"
	OpSetEvent       = "set_event"
	OpGetEvent       = "get_event"
	OpGetAllEvents   = "get_all_events"
	OpWriteStream    = "write_stream"
	OpReadStream     = "read_stream"
	OpForkWorkflow   = "fork_workflow"
	OpRewindWorkflow = "rewind_workflow"
	OpDeleteWorkflow = "delete_workflows"
	// OpUpdateAttributes replaces or merges a workflow's attributes.
	OpUpdateAttributes = "update_workflow_attributes"
	// OpCancelRequest abandons a request still in flight on this connection.
	OpCancelRequest = "cancel_request"
)

// Names DBOS records for its internal operations (operation_outputs.function_name).
const (
	StepSend        = "DBOS.send"
	StepSendBulk    = "DBOS.sendBulk"
	StepRecv        = "DBOS.recv"
	StepSleep       = "DBOS.sleep"
	StepSetEvent    = "DBOS.setEvent"
	StepGetEvent    = "DBOS.getEvent"
	StepWriteStream = "DBOS.writeStream"
	StepCloseStream = "DBOS.closeStream"
	StepGetResult   = "DBOS.getResult"
	StepDebounce    = "DBOS.debounce_delayed_workflow"
)

// Caller says which workflow makes a durable call and at which step id.
// From workflow code the call is recorded as the step FunctionID; from
// inside a step (InStep) nothing is recorded, but the write still lands only
// while OwnerXID owns the workflow, and FunctionID is the enclosing step's.
type Caller struct {
	WorkflowID string `msgpack:"workflow_id"`
	OwnerXID   string `msgpack:"owner_xid"`
	FunctionID int    `msgpack:"function_id"`
	InStep     bool   `msgpack:"in_step,omitempty"`
}

// Message is one message to send.
type Message struct {
	DestinationID string `msgpack:"destination_id"`
	// Topic nil is the default topic (stored as DBOS stores it).
	Topic         *string `msgpack:"topic"`
	Message       string  `msgpack:"message"`
	Serialization string  `msgpack:"serialization"`
	// IdempotencyKey makes a retried send insert at most once per
	// destination.
	IdempotencyKey string `msgpack:"idempotency_key,omitempty"`
}

// Send delivers messages in one transaction: all of them or none (a missing
// destination is workflow_not_found and nothing is sent). From a workflow the
// send is the step Caller.FunctionID, named StepName (DBOS.send by default,
// DBOS.sendBulk for a bulk send); a replay of a recorded send sends nothing.
// SendToForks also delivers each message to every workflow forked from its
// destination. The reply is Empty.
type Send struct {
	Caller      *Caller   `msgpack:"caller,omitempty"`
	StepName    string    `msgpack:"step_name,omitempty"`
	Messages    []Message `msgpack:"messages"`
	SendToForks bool      `msgpack:"send_to_forks,omitempty"`
}

// Recv waits for the oldest unconsumed message on a topic of the calling
// workflow, consumes it and records it as the step Caller.FunctionID
// (DBOS.recv), in one transaction. Its deadline is recorded first as a
// DBOS.sleep at TimeoutFunctionID on the database clock, so a recovered recv
// waits only what is left of the original timeout. When the deadline passes
// with no message, TimeoutOutput (the binding's encoding of "nothing") is
// recorded and the reply has Received false.
type Recv struct {
	Caller               Caller  `msgpack:"caller"`
	TimeoutFunctionID    int     `msgpack:"timeout_function_id"`
	Topic                *string `msgpack:"topic"`
	TimeoutMS            int64   `msgpack:"timeout_ms"`
	TimeoutOutput        *string `msgpack:"timeout_output"`
	TimeoutSerialization string  `msgpack:"timeout_serialization,omitempty"`
}

// RecvReply is the received (or recorded) message.
type RecvReply struct {
	Received      bool    `msgpack:"received"`
	Message       *string `msgpack:"message"`
	Serialization string  `msgpack:"serialization,omitempty"`
}

// Sleep records a durable sleep as the step Caller.FunctionID (DBOS.sleep):
// the wake time is computed once on the database clock and kept, so a
// recovered sleep waits only what is left. The agent answers at once; the
// binding sleeps RemainingMS itself.
type Sleep struct {
	Caller     Caller `msgpack:"caller"`
	DurationMS int64  `msgpack:"duration_ms"`
}

// SleepReply says when the sleep ends.
type SleepReply struct {
	WakeAtEpochMS int64 `msgpack:"wake_at_epoch_ms"`
	RemainingMS   int64 `msgpack:"remaining_ms"`
}

// SetEvent publishes a value under a key of the calling workflow: the value,
// its history row and (from workflow code) the step DBOS.setEvent are written
// in one transaction, then readers are notified. The reply is Empty.
type SetEvent struct {
	Caller        Caller `msgpack:"caller"`
	Key           string `msgpack:"key"`
	Value         string `msgpack:"value"`
	Serialization string `msgpack:"serialization"`
}

// GetEvent waits up to TimeoutMS for a workflow's event. From a workflow
// (Caller set) the read is the step Caller.FunctionID (DBOS.getEvent) with its
// deadline recorded at TimeoutFunctionID like Recv's; a timed-out read
// records TimeoutOutput.
type GetEvent struct {
	WorkflowID           string  `msgpack:"workflow_id"`
	Key                  string  `msgpack:"key"`
	TimeoutMS            int64   `msgpack:"timeout_ms"`
	Caller               *Caller `msgpack:"caller,omitempty"`
	TimeoutFunctionID    int     `msgpack:"timeout_function_id,omitempty"`
	TimeoutOutput        *string `msgpack:"timeout_output"`
	TimeoutSerialization string  `msgpack:"timeout_serialization,omitempty"`
}

// GetEventReply is the event's value when it was found.
type GetEventReply struct {
	Found         bool    `msgpack:"found"`
	Value         *string `msgpack:"value"`
	Serialization string  `msgpack:"serialization,omitempty"`
}

// Event is one key of a workflow's events.
type Event struct {
	Key           string `msgpack:"key"`
	Value         string `msgpack:"value"`
	Serialization string `msgpack:"serialization,omitempty"`
}

// GetAllEventsReply lists a workflow's current events.
type GetAllEventsReply struct {
	Events []Event `msgpack:"events"`
}

// WriteStream appends a value to a stream of the calling workflow (from
// workflow code, as the step DBOS.writeStream), then notifies readers. Close
// appends the closing marker instead (DBOS.closeStream); Value is then
// ignored. Writing to a closed stream is stream_closed. The reply is Empty.
type WriteStream struct {
	Caller        Caller `msgpack:"caller"`
	Key           string `msgpack:"key"`
	Value         string `msgpack:"value"`
	Serialization string `msgpack:"serialization"`
	Close         bool   `msgpack:"close,omitempty"`
}

// ReadStream reads a stream from Offset. It answers as soon as there is at
// least one value at Offset, the stream is closed, or its writer is no
// longer active; or, past TimeoutMS (0 = no limit), with nothing.
type ReadStream struct {
	WorkflowID string `msgpack:"workflow_id"`
	Key        string `msgpack:"key"`
	Offset     int    `msgpack:"offset"`
	Limit      int    `msgpack:"limit,omitempty"` // 0 = the agent's default
	TimeoutMS  int64  `msgpack:"timeout_ms,omitempty"`
}

// StreamValue is one value of a stream.
type StreamValue struct {
	Offset        int    `msgpack:"offset"`
	Value         string `msgpack:"value"`
	Serialization string `msgpack:"serialization,omitempty"`
}

// ReadStreamReply holds consecutive values from the requested offset.
// Closed: the stream's closing marker follows the values. Ended: the writer
// is no longer active and wrote nothing more, so the stream will not grow.
// A reply with no values and neither flag timed out. A workflow that does
// not exist is workflow_not_found.
type ReadStreamReply struct {
	Values []StreamValue `msgpack:"values"`
	Closed bool          `msgpack:"closed"`
	Ended  bool          `msgpack:"ended"`
}

// ForkWorkflow starts a new workflow (NewWorkflowID, or a UUID) that replays
// the original's steps, events and streams below StartStep and runs the rest
// anew, enqueued on QueueName (default the internal queue).
type ForkWorkflow struct {
	WorkflowID          string            `msgpack:"workflow_id"`
	StartStep           int               `msgpack:"start_step"`
	NewWorkflowID       string            `msgpack:"new_workflow_id,omitempty"`
	AppVersion          string            `msgpack:"app_version,omitempty"`
	QueueName           string            `msgpack:"queue_name,omitempty"`
	PartitionKey        string            `msgpack:"partition_key,omitempty"`
	TimeoutMS           int64             `msgpack:"timeout_ms,omitempty"`
	ReplacementChildren map[string]string `msgpack:"replacement_children,omitempty"`
}

// RewindWorkflow cuts an ended workflow's history at StartStep and enqueues it
// again under the same id (an active one is workflow_active).
type RewindWorkflow struct {
	WorkflowID   string `msgpack:"workflow_id"`
	StartStep    int    `msgpack:"start_step"`
	AppVersion   string `msgpack:"app_version,omitempty"`
	QueueName    string `msgpack:"queue_name,omitempty"`
	PartitionKey string `msgpack:"partition_key,omitempty"`
}

// DeleteWorkflows deletes workflows with everything stored under them, and
// with DeleteChildren every workflow they started, recursively.
type DeleteWorkflows struct {
	WorkflowIDs    []string `msgpack:"workflow_ids"`
	DeleteChildren bool     `msgpack:"delete_children,omitempty"`
}

// CancelWorkflow cancels a workflow, and with CancelChildren every workflow
// it started, recursively. (A WorkflowRef is a CancelWorkflow without
// children.)
type CancelWorkflow struct {
	WorkflowID     string `msgpack:"workflow_id"`
	CancelChildren bool   `msgpack:"cancel_children,omitempty"`
}

// UpdateAttributes sets a workflow's attributes (a JSON object as text; nil
// clears them), or with Merge adds the given top-level keys to them.
type UpdateAttributes struct {
	WorkflowID string  `msgpack:"workflow_id"`
	Attributes *string `msgpack:"attributes"`
	Merge      bool    `msgpack:"merge,omitempty"`
}

// ParentStep makes a started workflow the child of a running workflow: the
// child row and the parent's step FunctionID (named the child's workflow
// name, pointing at the child) are written in one transaction, while
// OwnerXID owns the parent.
type ParentStep struct {
	WorkflowID string `msgpack:"workflow_id"`
	OwnerXID   string `msgpack:"owner_xid"`
	FunctionID int    `msgpack:"function_id"`
}

// CancelRequest abandons a request this connection sent that is still in
// flight (a wait the binding no longer needs: the losers of a wait_first, the
// waits of a cancelled run). A wait it stops answers request_cancelled; a
// request that already finished, or finishes anyway, answers as it would
// have. Unknown ids are ignored. The reply is Empty.
type CancelRequest struct {
	RequestID uint64 `msgpack:"request_id"`
}
