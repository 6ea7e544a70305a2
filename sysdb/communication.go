package sysdb

import (
	"context"
	"fmt"
)

// NullTopic is how DBOS stores the default (NULL) message topic.
const NullTopic = "__null__topic__"

// StreamClosedValue is the value that closes a stream, tagged portable_json.
const StreamClosedValue = `"__DBOS_STREAM_CLOSED__"`

// PortableJSON is DBOS's cross-language serialization tag.
const PortableJSON = "portable_json"

// Names DBOS records for its internal operations.
const (
	StepNameSend        = "DBOS.send"
	StepNameRecv        = "DBOS.recv"
	StepNameSleep       = "DBOS.sleep"
	StepNameSetEvent    = "DBOS.setEvent"
	StepNameGetEvent    = "DBOS.getEvent"
	StepNameWriteStream = "DBOS.writeStream"
	StepNameCloseStream = "DBOS.closeStream"
)

// Communication is messages, events, streams, durable sleeps and the
// steering of workflows (fork, rewind, attributes). Every write made on
// behalf of a running workflow carries a StepCaller and lands only while its
// OwnerXID owns the workflow (else FencedError). Writes to events and
// streams notify their channels after commit.
type Communication interface {
	// MessageSend inserts messages in one transaction: all or none. A missing
	// destination is a NotFoundError naming it. With a Caller (not InStep)
	// the send is recorded as the step Caller.FunctionID named StepName; a
	// send whose step is already recorded under that name inserts nothing
	// (Replayed), another name there is an UnexpectedStepError. Each
	// destination's messages get strictly increasing CreatedAt, above every
	// message already there and in list order within a send, as every DBOS
	// SDK takes (and lists) the oldest message by created_at alone.
	MessageSend(ctx context.Context, p MessageSendParams) (replayed bool, err error)

	// MessageConsume consumes the oldest unconsumed message on the topic (if
	// any) and records it as the step Caller.FunctionID (DBOS.recv), in one
	// transaction. Without a message it records p.EmptyOutput. A recv step
	// already recorded is returned as it is (Replayed) and nothing is consumed.
	// A recv is never made from inside a step (Caller.InStep is refused).
	MessageConsume(ctx context.Context, p MessageConsumeParams) (Received, error)

	// MessageList lists the messages sent to a workflow, oldest first.
	MessageList(ctx context.Context, destinationID string) ([]Notification, error)

	// SleepRecord records a durable sleep's wake time (database clock now +
	// duration) as the step Caller.FunctionID named DBOS.sleep, unless one is
	// recorded already, and returns the wake time that stands with what is
	// left of it on the database clock. From inside a step nothing is
	// recorded: the wake time is now plus the duration. A replay leaves the
	// record (its times too) as it is.
	SleepRecord(ctx context.Context, p SleepParams) (SleepTimes, error)

	// EventSet upserts the event, appends its history row at
	// Caller.FunctionID and (not InStep) records the step DBOS.setEvent, in one
	// transaction. A replay of a recorded setEvent writes nothing.
	EventSet(ctx context.Context, p EventSetParams) error

	// EventGet returns one event's value, or nil when it is not set.
	EventGet(ctx context.Context, workflowID, key string) (*Payload, error)

	// EventList returns a workflow's current events by key.
	EventList(ctx context.Context, workflowID string) ([]Event, error)

	// EventHistory returns every value a workflow published, by function id.
	EventHistory(ctx context.Context, workflowID string) ([]EventHistoryEntry, error)

	// StreamWrite appends a value (or, with Close, the closing marker) at the
	// stream's next offset and (not InStep) records the step
	// DBOS.writeStream / DBOS.closeStream, in one transaction. Writing to a
	// closed stream is appended too (DBOS Python 3.4 accepts it) and never
	// read: readers stop at the first marker. A replay writes nothing.
	StreamWrite(ctx context.Context, p StreamWriteParams) error

	// StreamRead reads up to limit consecutive values from offset (limit 0:
	// all), stopping at the closing marker, with the writer's status from the
	// same snapshot (nil when the workflow does not exist). Closed is also
	// set when the marker is the offset right after the last value read.
	StreamRead(ctx context.Context, workflowID, key string, offset, limit int) (StreamRead, error)

	// StreamList returns every value of every stream of a workflow, by key
	// and offset, closing markers included.
	StreamList(ctx context.Context, workflowID string) ([]StreamEntry, error)

	// StepGet returns the step recorded at one function id, or nil.
	StepGet(ctx context.Context, workflowID string, functionID int) (*Step, error)

	// WorkflowFork creates p.NewID, ENQUEUED, as a copy of the original with
	// its steps, event history, events and streams below p.StartStep, marks
	// the original forked from. A missing original
	// is a NotFoundError. A fork already made under p.NewID from the same
	// original is taken as done (a retry); any other workflow there is a
	// ConflictingWorkflowError.
	WorkflowFork(ctx context.Context, p WorkflowForkParams) error

	// WorkflowRewind cuts an ended workflow's history at p.StartStep (steps,
	// events rolled back to their last earlier value, closing markers,
	// messages consumed at or after it or never consumed) and enqueues it
	// again under the same id. An active workflow is a WorkflowActiveError.
	WorkflowRewind(ctx context.Context, p WorkflowRewindParams) error

	// WorkflowSetAttributes replaces a workflow's attributes (JSON object
	// text, nil clears them) or with merge adds their top-level keys.
	WorkflowSetAttributes(ctx context.Context, workflowID string, attributes *string, merge bool) error
}

// StepCaller is the running workflow on whose behalf a write is made.
type StepCaller struct {
	WorkflowID string
	OwnerXID   string
	// FunctionID is the step id the operation records (or, InStep, the id
	// of the step it is made from).
	FunctionID int
	// InStep: made from inside a step, so no step of its own is recorded.
	InStep bool
	// ApplicationName stamps recorded steps.
	ApplicationName *string
}

// Payload is a serialized value with its serialization tag.
type Payload struct {
	Value         string
	Serialization *string
}

// OutgoingMessage is one message to insert.
type OutgoingMessage struct {
	DestinationID  string
	Topic          *string // nil: NullTopic
	Message        string
	Serialization  *string
	IdempotencyKey string // stored as message_uuid "<key>::<destination>"
}

// MessageSendParams is one send.
type MessageSendParams struct {
	Caller      *StepCaller
	StepName    string // default DBOS.send
	Messages    []OutgoingMessage
	SendToForks bool
}

// MessageConsumeParams is the consuming half of a recv.
type MessageConsumeParams struct {
	Caller StepCaller
	Topic  *string // nil: NullTopic
	// RequireMessage records nothing when no message is waiting (the
	// receiver waits on); otherwise EmptyOutput is recorded then.
	RequireMessage bool
	// EmptyOutput is recorded when no message is waiting.
	EmptyOutput        *string
	EmptySerialization *string
	// StartedAtMS is when the recv began (epoch ms), recorded as the step's
	// start: its span is the wait, as DBOS records DBOS.recv. Nil: now.
	StartedAtMS *int64
}

// Received is what a recv got.
type Received struct {
	Received bool
	// Message and Serialization are the message received (nil unless
	// Received; a replayed record equal to EmptyOutput is no message).
	Message       *string
	Serialization *string
	// Replayed: the step was already recorded; this is its record.
	Replayed bool
}

// Notification is one row of notifications.
type Notification struct {
	DestinationID        string
	Topic                *string // nil for the default topic
	Message              string
	Serialization        *string
	MessageID            string
	CreatedAt            int64
	Consumed             bool
	ConsumedByFunctionID *int
}

// WakeTimeFormat is how a DBOS.sleep step records its wake time: as the
// SDK that may recover the workflow reads it back. Reading takes either
// (by magnitude).
type WakeTimeFormat int

const (
	// WakeEpochSeconds is JSON epoch seconds, a float, as DBOS Python
	// writes and reads it.
	WakeEpochSeconds WakeTimeFormat = iota
	// WakeEpochMS is JSON epoch milliseconds, an integer, as DBOS
	// TypeScript writes and reads it.
	WakeEpochMS
)

// SleepParams is one durable sleep.
type SleepParams struct {
	Caller     StepCaller
	DurationMS int64
	// Format is how the wake time is recorded; a replay reads the recorded
	// one whatever its format.
	Format WakeTimeFormat
	// ProjectCompletion records the wake time as the step's completion, so
	// its span is the sleep, as DBOS records DBOS.sleep. Without it the step
	// spans an instant: the deadline of a recv or get_event, which their
	// wait may abandon early, is registered so.
	ProjectCompletion bool
}

// SleepTimes is a recorded sleep.
type SleepTimes struct {
	WakeAtMS    int64
	RemainingMS int64
	// NowMS is the database clock at the call, which a wait that registered
	// its deadline here takes as its own start.
	NowMS int64
}

// EventSetParams publishes one event.
type EventSetParams struct {
	Caller        StepCaller
	Key           string
	Value         string
	Serialization *string
}

// Event is one current event.
type Event struct {
	Key           string
	Value         string
	Serialization *string
}

// EventHistoryEntry is one published value.
type EventHistoryEntry struct {
	FunctionID    int
	Key           string
	Value         string
	Serialization *string
}

// StreamWriteParams appends to a stream.
type StreamWriteParams struct {
	Caller        StepCaller
	Key           string
	Value         string
	Serialization *string
	Close         bool
}

// StreamEntry is one value of a stream.
type StreamEntry struct {
	Key           string
	Offset        int
	Value         string
	Serialization *string
	FunctionID    int
}

// Closed reports whether the entry is a stream's closing marker, in either
// form the DBOS SDKs write it.
func (e StreamEntry) Closed() bool { return isStreamClosed(e.Value, e.Serialization) }

// StreamRead is a read of consecutive stream values.
type StreamRead struct {
	Values []StreamEntry
	// Closed: the closing marker follows Values.
	Closed bool
	// WriterStatus is the writing workflow's status (nil: no such workflow).
	WriterStatus *string
}

// WorkflowForkParams describes a fork.
type WorkflowForkParams struct {
	OriginalID         string
	NewID              string
	StartStep          int
	ApplicationVersion *string
	QueueName          string // empty = InternalQueueName
	QueuePartitionKey  *string
	TimeoutMS          *int64
	// ReplacementChildren rewrites copied steps' child ids (old -> new).
	ReplacementChildren map[string]string
	// ApplicationName owns the fork when the original has no owner.
	ApplicationName *string
}

// WorkflowRewindParams describes a rewind.
type WorkflowRewindParams struct {
	WorkflowID         string
	StartStep          int
	ApplicationVersion *string
	QueueName          string // empty = InternalQueueName
	QueuePartitionKey  *string
}

// WorkflowActiveError is an operation that needs an ended workflow.
type WorkflowActiveError struct{ WorkflowID, Status string }

func (e *WorkflowActiveError) Error() string {
	return fmt.Sprintf("workflow %s is %s: only an ended workflow can be rewound (cancel it first)", e.WorkflowID, e.Status)
}
