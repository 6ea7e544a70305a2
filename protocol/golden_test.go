package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// update rewrites the generated files in testdata/ from the code:
//
//	go test ./protocol -run 'TestGoldenVectors|TestErrorCatalogFile|TestProtocolDoc' -update
var update = flag.Bool("update", false, "rewrite testdata/*.json from the code")

const vectorsFile = "testdata/vectors.json"

// vector is one entry of testdata/vectors.json. The file is read by the Go,
// Python and Node tests alike, so everything in it is plain JSON: msgpack
// maps are JSON objects with their keys in wire order, msgpack nil is null,
// integers are JSON integers and floats always carry a decimal point.
type vector struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Kind        Kind   `json:"kind"`
	ID          uint64 `json:"id"`
	// Op is the envelope's op (requests and pushes).
	Op string `json:"op,omitempty"`
	// ReplyTo is, for a response, the op of the request it answers (not on
	// the wire: it says how to read the body).
	ReplyTo string `json:"reply_to,omitempty"`
	// Message names the body's message in PROTOCOL.md.
	Message string `json:"message,omitempty"`
	// Hex is the whole frame, length prefix included.
	Hex   string          `json:"hex"`
	Body  json.RawMessage `json:"body,omitempty"`
	Error json.RawMessage `json:"error,omitempty"`
	// DecodeOnly marks a frame the agent accepts but does not write (unknown
	// fields, nil for absent, wide integers): decoding it and encoding the
	// message again gives CanonicalHex.
	DecodeOnly   bool   `json:"decode_only,omitempty"`
	CanonicalHex string `json:"canonical_hex,omitempty"`
}

// vectorDef is how the code defines a vector; the file is generated from
// these.
type vectorDef struct {
	name, description string
	kind              Kind
	id                uint64
	op, replyTo       string
	message           string
	body              any
	err               *Error
	// raw, for a decode-only vector, is the frame body as an ordered value.
	raw omap
}

// messageTypes makes an empty message of each name vectors use.
var messageTypes = map[string]func() any{
	"Hello":              func() any { return new(Hello) },
	"HelloReply":         func() any { return new(HelloReply) },
	"Empty":              func() any { return new(Empty) },
	"Stats":              func() any { return new(Stats) },
	"StatsReply":         func() any { return new(StatsReply) },
	"StartWorkflow":      func() any { return new(StartWorkflow) },
	"StartWorkflowReply": func() any { return new(StartWorkflowReply) },
	"RecordStep":         func() any { return new(RecordStep) },
	"Finish":             func() any { return new(Finish) },
	"FinishReply":        func() any { return new(FinishReply) },
	"GetResult":          func() any { return new(GetResult) },
	"WorkflowResult":     func() any { return new(WorkflowResult) },
	"GetWorkflow":        func() any { return new(GetWorkflow) },
	"WorkflowInfo":       func() any { return new(WorkflowInfo) },
	"ListWorkflows":      func() any { return new(ListWorkflows) },
	"ListWorkflowsReply": func() any { return new(ListWorkflowsReply) },
	"WorkflowRef":        func() any { return new(WorkflowRef) },
	"ListStepsReply":     func() any { return new(ListStepsReply) },
	"ResumeWorkflow":     func() any { return new(ResumeWorkflow) },
	"Run":                func() any { return new(Run) },
	"CancelPush":         func() any { return new(CancelPush) },

	"Register":                 func() any { return new(Register) },
	"RegisterQueues":           func() any { return new(RegisterQueues) },
	"DebounceWorkflow":         func() any { return new(DebounceWorkflow) },
	"DebounceWorkflowReply":    func() any { return new(DebounceWorkflowReply) },
	"SetWorkflowDelay":         func() any { return new(SetWorkflowDelay) },
	"SetWorkflowPriority":      func() any { return new(SetWorkflowPriority) },
	"SetWorkflowPriorityReply": func() any { return new(SetWorkflowPriorityReply) },
	"QueueRef":                 func() any { return new(QueueRef) },
	"QueueInfo":                func() any { return new(QueueInfo) },
	"ListQueuesReply":          func() any { return new(ListQueuesReply) },
	"Schedule":                 func() any { return new(Schedule) },
	"ScheduleRef":              func() any { return new(ScheduleRef) },
	"ListSchedules":            func() any { return new(ListSchedules) },
	"ListSchedulesReply":       func() any { return new(ListSchedulesReply) },
	"BackfillSchedule":         func() any { return new(BackfillSchedule) },
	"WorkflowIDs":              func() any { return new(WorkflowIDs) },
	"ListVersionsReply":        func() any { return new(ListVersionsReply) },
	"VersionRef":               func() any { return new(VersionRef) },
	"ListQueues":               func() any { return new(ListQueues) },
	"RenameApplication":        func() any { return new(RenameApplication) },
	"RenameApplicationReply":   func() any { return new(RenameApplicationReply) },

	"CancelWorkflow":    func() any { return new(CancelWorkflow) },
	"Send":              func() any { return new(Send) },
	"Recv":              func() any { return new(Recv) },
	"RecvReply":         func() any { return new(RecvReply) },
	"Sleep":             func() any { return new(Sleep) },
	"SleepReply":        func() any { return new(SleepReply) },
	"SetEvent":          func() any { return new(SetEvent) },
	"GetEvent":          func() any { return new(GetEvent) },
	"GetEventReply":     func() any { return new(GetEventReply) },
	"GetAllEventsReply": func() any { return new(GetAllEventsReply) },
	"WriteStream":       func() any { return new(WriteStream) },
	"ReadStream":        func() any { return new(ReadStream) },
	"ReadStreamReply":   func() any { return new(ReadStreamReply) },
	"ForkWorkflow":      func() any { return new(ForkWorkflow) },
	"RewindWorkflow":    func() any { return new(RewindWorkflow) },
	"DeleteWorkflows":   func() any { return new(DeleteWorkflows) },
	"UpdateAttributes":  func() any { return new(UpdateAttributes) },
	"CancelRequest":     func() any { return new(CancelRequest) },
}

func strp(s string) *string     { return &s }
func intp(n int) *int           { return &n }
func floatp(f float64) *float64 { return &f }
func boolp(b bool) *bool        { return &b }

const (
	exampleOwner   = "5f0c2e7a9b1d4c3e8f6a0b2d4e6f8a1c"
	exampleSession = "c3a1f09e7d5b42a68e0f1d2c3b4a5968"
	exampleT0      = 1767225600000 // 2026-01-01T00:00:00Z in epoch ms
)

var exampleInputs = `{"positionalArgs":[1001],"namedArgs":{"express":true}}`

// vectorDefs is every golden vector. Keep names stable: the bindings'
// tests look some up by name.
func vectorDefs() []vectorDef {
	wc := 4
	runGrant := &Run{
		WorkflowID:       "order-1002",
		Name:             "checkout",
		Inputs:           strp(exampleInputs),
		Serialization:    "portable_json",
		OwnerXID:         exampleOwner,
		RecoveryAttempts: 1,
		History:          []Step{},
	}
	history := []Step{
		{FunctionID: 1, Name: "reserve_stock", Output: strp(`{"reserved":true}`), Serialization: "portable_json",
			StartedAtMS: exampleT0 + 1000, CompletedAtMS: exampleT0 + 1012},
		{FunctionID: 2, Name: "charge_card", Error: strp(`{"name":"CardDeclined","message":"insufficient funds","code":null}`),
			Serialization: "portable_json", StartedAtMS: exampleT0 + 1013, CompletedAtMS: exampleT0 + 1250},
		{FunctionID: 3, Name: "DBOS.startWorkflow", Output: strp(`"refund-77"`), Serialization: "portable_json",
			ChildWorkflowID: "refund-77", StartedAtMS: exampleT0 + 1251, CompletedAtMS: exampleT0 + 1260},
	}
	info := WorkflowInfo{
		WorkflowID:       "order-1001",
		Status:           "SUCCESS",
		Name:             "checkout",
		QueueName:        "orders",
		ExecutorID:       "local",
		AppVersion:       "v1",
		AppName:          "shop",
		CreatedAtMS:      exampleT0,
		UpdatedAtMS:      exampleT0 + 2500,
		StartedAtMS:      exampleT0 + 900,
		CompletedAtMS:    exampleT0 + 2500,
		RecoveryAttempts: 1,
		TimeoutMS:        60000,
		DeadlineEpochMS:  exampleT0 + 60900,
		Priority:         5,
		DeduplicationID:  "cart-77",
		Serialization:    "portable_json",
		Inputs:           strp(exampleInputs),
		Output:           strp(`{"order":1001,"status":"shipped"}`),
	}
	// DBOS's identity columns, on a status and a run.
	info.AuthenticatedUser, info.AssumedRole, info.AuthenticatedRoles = "alice", "admin", []string{"user", "admin"}
	info.AppID = strp("") // started by DBOS with no DBOS__APPID
	return append([]vectorDef{
		// Handshake.
		{name: "hello_worker", description: "A worker opens its connection: it registers two workflow functions and serves the queue \"orders\".",
			kind: KindRequest, id: 1, op: OpHello, message: "Hello", body: &Hello{
				MinVersion: 1, MaxVersion: 1, Role: RoleWorker, AppName: "shop", AppVersion: "v1",
				Language: "python", BindingVersion: "0.1.0", PID: 4242,
				Workflows: []WorkflowRegistration{{Name: "checkout", MaxRecoveryAttempts: 10}, {Name: "refund", ClassName: "Payments"}},
				Queues: []QueueRegistration{{Name: "orders", WorkerConcurrency: &wc, Concurrency: intp(10), RateLimitMax: intp(100),
					RateLimitPeriodSec: floatp(1.5), PriorityEnabled: true}},
				MaxConcurrency: 16,
			}},
		{name: "hello_worker_epoch_ms", description: "A worker whose SDK reads a recorded sleep's wake time as DBOS TypeScript does (integer epoch milliseconds) asks for its sleeps and deadlines to be recorded so.",
			kind: KindRequest, id: 1, op: OpHello, message: "Hello", body: &Hello{
				MinVersion: 1, MaxVersion: 1, Role: RoleWorker, AppName: "shop", AppVersion: "v1",
				Language: "node", BindingVersion: "0.1.0", PID: 4242,
				Workflows:      []WorkflowRegistration{{Name: "checkout"}},
				WakeTimeFormat: WakeTimeEpochMS,
			}},
		{name: "hello_client", description: "A client (no workflow code) opens its connection with the fewest fields.",
			kind: KindRequest, id: 1, op: OpHello, message: "Hello", body: &Hello{MinVersion: 1, MaxVersion: 1, Role: RoleClient, AppName: "shop"}},
		{name: "hello_reply", description: "The agent accepts the connection: version 1, its frame cap, the session and executor ids, and how many requests it handles at once.",
			kind: KindResponse, id: 1, replyTo: OpHello, message: "HelloReply", body: &HelloReply{
				Version: 1, AgentVersion: "0.1.0", MaxFrameSize: DefaultMaxFrameSize, SessionID: exampleSession,
				ExecutorID: "local", AppVersion: "v1", MaxInFlight: 1024,
			}},
		{name: "ping", description: "A liveness check; the body is an empty map.",
			kind: KindRequest, id: 2, op: OpPing, message: "Empty", body: Empty{}},
		{name: "ping_reply", description: "The answer to ping: an empty map.",
			kind: KindResponse, id: 2, replyTo: OpPing, message: "Empty", body: Empty{}},
		{name: "stats", description: "Ask for the agent's runtime figures after a collection.",
			kind: KindRequest, id: 2, op: OpStats, message: "Stats", body: &Stats{FreeMemory: true}},
		{name: "stats_reply", description: "The agent's goroutines, sessions and memory; this request ran the collection.",
			kind: KindResponse, id: 2, replyTo: OpStats, message: "StatsReply", body: &StatsReply{
				Goroutines: 42, EngineGoroutines: 17, Sessions: 3, HeapAllocBytes: 4 << 20, HeapSysBytes: 12 << 20, HeapReleasedBytes: 6 << 20,
				SysBytes: 24 << 20, NumGC: 17, MemoryFreed: true,
			}},

		// Starting workflows.
		{name: "start_workflow_queued", description: "Enqueue \"checkout\" on the queue \"orders\" with a priority, a deduplication id and a timeout.",
			kind: KindRequest, id: 3, op: OpStartWorkflow, message: "StartWorkflow", body: &StartWorkflow{
				WorkflowID: "order-1001", Name: "checkout", Inputs: strp(exampleInputs), Serialization: "portable_json",
				QueueName: "orders", Priority: 5, DeduplicationID: "cart-77", TimeoutMS: 60000,
			}},
		{name: "start_workflow_queued_reply", description: "The workflow was created and waits on its queue.",
			kind: KindResponse, id: 3, replyTo: OpStartWorkflow, message: "StartWorkflowReply", body: &StartWorkflowReply{
				WorkflowID: "order-1001", Status: "ENQUEUED", Created: true,
			}},
		{name: "start_workflow_run_here", description: "A worker that registered \"checkout\" starts it directly and asks to run it itself.",
			kind: KindRequest, id: 4, op: OpStartWorkflow, message: "StartWorkflow", body: &StartWorkflow{
				WorkflowID: "order-1002", Name: "checkout", Inputs: strp(exampleInputs), Serialization: "portable_json", RunHere: true,
				AuthenticatedUser: "alice", AssumedRole: "admin", AuthenticatedRoles: []string{"user", "admin"}, AppID: strp(""),
			}},
		{name: "start_workflow_run_here_reply", description: "The reply carries the run grant: the caller runs the workflow now with this owner token (history is empty: a new workflow).",
			kind: KindResponse, id: 4, replyTo: OpStartWorkflow, message: "StartWorkflowReply", body: &StartWorkflowReply{
				WorkflowID: "order-1002", Status: "PENDING", Created: true, Run: runGrant,
			}},
		{name: "start_workflow_existing_reply", description: "Starting an id that exists is idempotent: created is false and status is the stored one.",
			kind: KindResponse, id: 5, replyTo: OpStartWorkflow, message: "StartWorkflowReply", body: &StartWorkflowReply{
				WorkflowID: "order-1001", Status: "SUCCESS", Created: false,
			}},

		// Running a workflow.
		{name: "record_step", description: "Checkpoint step 1, which returned a value.",
			kind: KindRequest, id: 6, op: OpRecordStep, message: "RecordStep", body: &RecordStep{
				WorkflowID: "order-1002", OwnerXID: exampleOwner, Step: Step{
					FunctionID: 1, Name: "reserve_stock", Output: strp(`{"reserved":true}`), Serialization: "portable_json",
					StartedAtMS: exampleT0 + 1000, CompletedAtMS: exampleT0 + 1012,
				}}},
		{name: "record_step_reply", description: "The step is durable: an empty map.",
			kind: KindResponse, id: 6, replyTo: OpRecordStep, message: "Empty", body: Empty{}},
		{name: "record_step_error", description: "Checkpoint step 2, which raised: output is nil and error holds the exception, here a base64 pickle (serialization py_pickle).",
			kind: KindRequest, id: 7, op: OpRecordStep, message: "RecordStep", body: &RecordStep{
				WorkflowID: "order-1002", OwnerXID: exampleOwner, Step: Step{
					FunctionID: 2, Name: "charge_card", Error: strp("gASVJQAAAAAAAACMCGJ1aWx0aW5zlIwKVmFsdWVFcnJvcpSTlIwIZGVjbGluZWSUhZRSlC4="),
					Serialization: "py_pickle", StartedAtMS: exampleT0 + 1013, CompletedAtMS: exampleT0 + 1250,
				}}},
		{name: "finish", description: "The run ends in success; the owner token proves it still owns the workflow.",
			kind: KindRequest, id: 8, op: OpFinish, message: "Finish", body: &Finish{
				WorkflowID: "order-1002", OwnerXID: exampleOwner, Status: "SUCCESS",
				Output: strp(`{"order":1002,"status":"shipped"}`), Serialization: "portable_json",
			}},
		{name: "finish_reply", description: "The outcome was stored (applied) and stands as result.",
			kind: KindResponse, id: 8, replyTo: OpFinish, message: "FinishReply", body: &FinishReply{
				Applied: true, Result: WorkflowResult{WorkflowID: "order-1002", Status: "SUCCESS",
					Output: strp(`{"order":1002,"status":"shipped"}`), Serialization: "portable_json"},
			}},
		{name: "finish_reply_not_applied", description: "The run had lost the workflow (it was cancelled, or recovered and finished elsewhere): nothing was written and result is what stands.",
			kind: KindResponse, id: 9, replyTo: OpFinish, message: "FinishReply", body: &FinishReply{
				Applied: false, Result: WorkflowResult{WorkflowID: "order-1002", Status: "CANCELLED"},
			}},

		// Awaiting and inspecting.
		{name: "get_result", description: "Wait up to 30 s for the workflow to end.",
			kind: KindRequest, id: 10, op: OpGetResult, message: "GetResult", body: &GetResult{WorkflowID: "order-1003", TimeoutMS: 30000}},
		{name: "get_result_reply", description: "The workflow ended in an error; error holds the portable_json exception.",
			kind: KindResponse, id: 10, replyTo: OpGetResult, message: "WorkflowResult", body: &WorkflowResult{
				WorkflowID: "order-1003", Status: "ERROR",
				Error:         strp(`{"name":"CardDeclined","message":"insufficient funds","code":null}`),
				Serialization: "portable_json",
			}},
		{name: "get_workflow", description: "Ask for one workflow's status with its inputs and outcome.",
			kind: KindRequest, id: 11, op: OpGetWorkflow, message: "GetWorkflow", body: &GetWorkflow{WorkflowID: "order-1001", LoadPayloads: true}},
		{name: "get_workflow_reply", description: "A finished workflow's status, payloads included.",
			kind: KindResponse, id: 11, replyTo: OpGetWorkflow, message: "WorkflowInfo", body: &info},
		{name: "list_workflows", description: "The 50 newest pending or enqueued top-level \"checkout\" workflows that alice started, whose attributes contain {\"region\": \"eu\"}.",
			kind: KindRequest, id: 12, op: OpListWorkflows, message: "ListWorkflows", body: &ListWorkflows{
				Statuses: []string{"PENDING", "ENQUEUED"}, Names: []string{"checkout"}, Limit: 50, SortDesc: true,
				Users: []string{"alice"}, Attributes: strp(`{"region":"eu"}`), HasParent: new(bool),
			}},
		{name: "list_workflows_reply", description: "Two workflows, without payloads.",
			kind: KindResponse, id: 12, replyTo: OpListWorkflows, message: "ListWorkflowsReply", body: &ListWorkflowsReply{Workflows: []WorkflowInfo{
				{WorkflowID: "order-1004", Status: "ENQUEUED", Name: "checkout", QueueName: "orders", ExecutorID: "local",
					AppVersion: "v1", AppName: "shop", CreatedAtMS: exampleT0 + 5000, UpdatedAtMS: exampleT0 + 5000,
					Priority: 5, Serialization: "portable_json"},
				{WorkflowID: "order-1002", Status: "PENDING", Name: "checkout", ExecutorID: "local", AppVersion: "v1", AppName: "shop",
					CreatedAtMS: exampleT0 + 900, UpdatedAtMS: exampleT0 + 900, StartedAtMS: exampleT0 + 900, RecoveryAttempts: 1,
					Serialization: "portable_json"},
			}}},
		{name: "list_steps", description: "Ask for a workflow's recorded steps.",
			kind: KindRequest, id: 13, op: OpListSteps, message: "WorkflowRef", body: &WorkflowRef{WorkflowID: "order-1002"}},
		{name: "list_steps_reply", description: "Three steps by function id: an output, an error, and a child workflow start.",
			kind: KindResponse, id: 13, replyTo: OpListSteps, message: "ListStepsReply", body: &ListStepsReply{Steps: history}},

		// Managing.
		{name: "cancel_workflow", description: "Cancel a workflow (its run stops at its next step).",
			kind: KindRequest, id: 14, op: OpCancel, message: "WorkflowRef", body: &WorkflowRef{WorkflowID: "order-1002"}},
		{name: "cancel_workflow_reply", description: "Cancelled: an empty map.",
			kind: KindResponse, id: 14, replyTo: OpCancel, message: "Empty", body: Empty{}},
		{name: "resume_workflow", description: "Resume a cancelled workflow on the queue \"orders\".",
			kind: KindRequest, id: 15, op: OpResume, message: "ResumeWorkflow", body: &ResumeWorkflow{WorkflowID: "order-1002", QueueName: "orders"}},
		{name: "resume_workflow_reply", description: "Resumed: an empty map.",
			kind: KindResponse, id: 15, replyTo: OpResume, message: "Empty", body: Empty{}},
		{name: "resume_workflows", description: "Resume several workflows at once, all or none (DBOS.resume_workflows).",
			kind: KindRequest, id: 73, op: OpResume, message: "ResumeWorkflow", body: &ResumeWorkflow{WorkflowIDs: []string{"order-1002", "order-1003"}}},
		{name: "resume_workflows_not_found", description: "One of them does not exist: none was resumed.",
			kind: KindResponse, id: 73, replyTo: OpResume, err: &Error{Code: CodeWorkflowNotFound, Message: "workflow order-1003 does not exist", Data: map[string]any{"workflow_id": "order-1003"}}},

		// Pushes.
		{name: "push_run", description: "The agent hands a recovered workflow to this worker with its three recorded steps: the worker replays them and runs step 4 on.",
			kind: KindPush, op: PushRun, message: "Run", body: &Run{
				WorkflowID: "order-1002", Name: "checkout", Inputs: strp(exampleInputs), Serialization: "portable_json",
				OwnerXID: "9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a", QueueName: "_dbos_internal_queue",
				DeadlineEpochMS: exampleT0 + 60900, RecoveryAttempts: 2, AuthenticatedUser: "alice", History: history,
				AssumedRole: "admin", AuthenticatedRoles: []string{"user", "admin"},
				Attributes: strp(`{"dbos.otelContext":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`),
			}},
		{name: "push_cancel", description: "A workflow this worker runs was cancelled: stop it without finishing it.",
			kind: KindPush, op: PushCancel, message: "CancelPush", body: &CancelPush{WorkflowID: "order-1002"}},

		// Errors.
		{name: "error_malformed_frame", description: "A frame the agent could not read as an envelope (here an empty map: no kind, no id). id 0: the error is about the connection; it stays open.",
			kind: KindResponse, err: &Error{Code: CodeMalformedFrame, Message: "malformed message: envelope needs kind and id"}},
		{name: "error_malformed_request", description: "A request the agent could not read past its id (here {kind: 1, id: 41, op: \"ping\", body: <a str announcing 4 GB>}): answered with that id, so that the request fails at once rather than at its caller's timeout.",
			kind: KindResponse, id: 41, err: &Error{Code: CodeMalformedFrame, Message: "malformed message: the frame ends inside a value"}},
		{name: "error_reserved_kind", description: "A binding sent a response (or a push): those are the agent's to send. Refused on the connection (id 0), which stays open.",
			kind: KindResponse, err: &Error{Code: CodeMalformedFrame, Message: "a peer sends only requests (kind 1); kind 2 is the agent's to send in protocol version 1"}},
		{name: "error_frame_too_large", description: "The peer announced a frame over the cap; the agent sends this with id 0, then closes the connection.",
			kind: KindResponse, err: &Error{Code: CodeFrameTooLarge, Message: "frame larger than the agreed maximum: 16777217 bytes announced, limit 16777216"}},
		{name: "error_version_mismatch", description: "hello with no version in common; the connection closes after it.",
			kind: KindResponse, id: 1, replyTo: OpHello, err: &Error{Code: CodeVersionMismatch, Message: "the agent speaks protocol versions 1 to 1, the peer 7 to 9"}},
		{name: "error_hello_invalid_argument", description: "A hello with a registration that breaks a rule: the message names the field's path; nothing was written, the connection stays open and hello may be sent again.",
			kind: KindResponse, id: 1, replyTo: OpHello, err: &Error{Code: CodeInvalidArgument, Message: "hello.queues[0].concurrency: must be >= 1 (omit it for no limit)"}},
		{name: "error_hello_wake_time_format", description: "A hello asking for a wake time format the agent does not know; the connection stays open and hello may be sent again.",
			kind: KindResponse, id: 1, replyTo: OpHello, err: &Error{Code: CodeInvalidArgument,
				Message: `hello.wake_time_format: unknown wake time format: must be "epoch_seconds" (DBOS Python's, the default) or "epoch_ms" (DBOS TypeScript's)`}},
		{name: "error_handshake_needed", description: "A request before hello.",
			kind: KindResponse, id: 1, replyTo: OpPing, err: &Error{Code: CodeHandshakeNeeded, Message: "the first request must be hello"}},
		{name: "error_unknown_op", description: "An op this agent does not know; the connection stays open.",
			kind: KindResponse, id: 16, replyTo: "launch_missiles", err: &Error{Code: CodeUnknownOp, Message: `unknown op "launch_missiles"`}},
		{name: "error_invalid_argument", description: "A field of the wrong type or value.",
			kind: KindResponse, id: 17, replyTo: OpFinish, err: &Error{Code: CodeInvalidArgument, Message: "finish: status must be SUCCESS or ERROR"}},
		{name: "error_workflow_not_found", description: "No workflow with that id.",
			kind: KindResponse, id: 18, replyTo: OpGetResult, err: &Error{Code: CodeWorkflowNotFound, Message: "workflow order-9999 does not exist"}},
		{name: "error_workflow_cancelled", description: "record_step of a workflow that was cancelled: the run must stop here, without finish.",
			kind: KindResponse, id: 19, replyTo: OpRecordStep, err: &Error{Code: CodeWorkflowCancelled, Message: "workflow order-1002 was cancelled"}},
		{name: "error_fenced", description: "record_step with an owner token that no longer owns the workflow (it was recovered elsewhere): the run is a zombie and must stop.",
			kind: KindResponse, id: 20, replyTo: OpRecordStep, err: &Error{Code: CodeFenced, Message: "workflow order-1002 is no longer owned by this run"}},
		{name: "error_timeout", description: "get_result whose timeout_ms passed before the workflow ended.",
			kind: KindResponse, id: 21, replyTo: OpGetResult, err: &Error{Code: CodeTimeout, Message: "get_result timed out"}},
		{name: "error_deduplicated", description: "An enqueue whose deduplication id is taken; data names the queue and the id (map keys sorted).",
			kind: KindResponse, id: 22, replyTo: OpStartWorkflow, err: &Error{Code: CodeDeduplicated,
				Message: "workflow order-1005: queue orders already has an active workflow with deduplication id cart-77",
				Data:    map[string]any{"queue_name": "orders", "deduplication_id": "cart-77"}}},
		{name: "error_workflow_id_in_use", description: "A start with workflow_id_reuse_policy \"reject\" whose id names an existing workflow; data names it.",
			kind: KindResponse, id: 22, replyTo: OpStartWorkflow, err: &Error{Code: CodeWorkflowIDInUse,
				Message: "workflow id order-1001 is already in use by workflow checkout with status SUCCESS",
				Data:    map[string]any{"workflow_id": "order-1001", "status": "SUCCESS", "name": "checkout"}}},
		{name: "error_unexpected_step", description: "record_step at a function id that holds a step of another name: the workflow is not deterministic.",
			kind: KindResponse, id: 23, replyTo: OpRecordStep, err: &Error{Code: CodeUnexpectedStep,
				Message: `workflow order-1002 step 2: recorded step is "charge_card" but this run attempted "send_email" (non-deterministic workflow)`,
				Data:    map[string]any{"recorded": "charge_card", "attempted": "send_email"}}},

		// Frames a peer may send that the Encoder does not write.
		{name: "forward_compat_unknown_fields", description: "A newer peer's record_step: an unknown envelope field (trace_id) and an unknown body field (attempt) are skipped.",
			kind: KindRequest, id: 24, op: OpRecordStep, message: "RecordStep", raw: omap{
				{"kind", int64(1)}, {"id", int64(24)}, {"op", "record_step"}, {"trace_id", "4bf92f3577b34da6"},
				{"body", omap{
					{"workflow_id", "order-1002"}, {"owner_xid", exampleOwner}, {"function_id", int64(3)},
					{"name", "ship"}, {"output", `"ok"`}, {"error", nil}, {"attempt", int64(2)},
				}},
			}},
		{name: "nil_for_absent", description: "Optional fields written as nil (as some encoders do for undefined), and an envelope error of nil: all read as absent.",
			kind: KindResponse, id: 25, replyTo: OpStartWorkflow, message: "StartWorkflowReply", raw: omap{
				{"kind", int64(2)}, {"id", int64(25)}, {"error", nil},
				{"body", omap{{"workflow_id", "order-1006"}, {"status", "ENQUEUED"}, {"created", true}, {"run", nil}}},
			}},
		{name: "wide_integers", description: "Integers in wider encodings than needed (kind as int8, id as uint32, function_id as int64) are read by value.",
			kind: KindRequest, id: 26, op: OpRecordStep, message: "RecordStep", raw: omap{
				{"kind", wideInt{0xd0, 1}}, {"id", wideInt{0xce, 26}}, {"op", "record_step"},
				{"body", omap{
					{"workflow_id", "order-1002"}, {"owner_xid", exampleOwner},
					{"function_id", wideInt{0xd3, 4}}, {"name", "notify"}, {"output", nil}, {"error", nil},
				}},
			}},

		{name: "js_floats_start_workflow", description: "A start_workflow from a JavaScript encoder that writes numbers as float64: timeout_ms, deadline_epoch_ms and priority are floats holding integers, read as those integers (section 5).",
			kind: KindRequest, id: 79, op: OpStartWorkflow, message: "StartWorkflow", raw: omap{
				{"kind", int64(1)}, {"id", int64(79)}, {"op", "start_workflow"},
				{"body", omap{
					{"workflow_id", "order-1010"}, {"name", "checkout"}, {"inputs", `[{"order":1010}]`}, {"serialization", "portable_json"},
					{"queue_name", "orders"}, {"priority", 5.0}, {"timeout_ms", 60000.0}, {"deadline_epoch_ms", 1767225600000.0},
				}},
			}},
		{name: "js_floats_record_step", description: "A record_step whose every number is a float64, the envelope's kind and id included (as @msgpack/msgpack writes with forceIntegerToFloat): read as integers.",
			kind: KindRequest, id: 80, op: OpRecordStep, message: "RecordStep", raw: omap{
				{"kind", 1.0}, {"id", 80.0}, {"op", "record_step"},
				{"body", omap{
					{"workflow_id", "order-1002"}, {"owner_xid", exampleOwner},
					{"function_id", 5.0}, {"name", "notify"}, {"output", nil}, {"error", nil}, {"started_at_epoch_ms", 1767225600000.0},
				}},
			}},

		// Queues: registration after hello, delays, deduplication policies,
		// debounce, inspection.
		{name: "register_queues", description: "A worker declares a partitioned queue after its hello: at most 20 running in the whole queue, 2 per partition (1 in this process), 10 starts per partition per minute, polled every 0.5 s.",
			kind: KindRequest, id: 27, op: OpRegisterQueues, message: "RegisterQueues", body: &RegisterQueues{Queues: []QueueRegistration{{
				Name: "emails", Concurrency: intp(20), PartitionQueue: true, PartitionConcurrency: intp(2), PartitionWorkerConcurrency: intp(1),
				PartitionRateLimitMax: intp(10), PartitionRateLimitPeriodSec: floatp(60), PollingIntervalSec: 0.5,
			}}}},
		{name: "register_queues_reply", description: "Registered (the stored row updated) and served by this worker: an empty map.",
			kind: KindResponse, id: 27, replyTo: OpRegisterQueues, message: "Empty", body: Empty{}},
		{name: "register_queues_from_client", description: "A client (DBOSClient.register_queue) stores the configuration of application billing's queue invoices: written, served by no one here.",
			kind: KindRequest, id: 75, op: OpRegisterQueues, message: "RegisterQueues", body: &RegisterQueues{
				Queues: []QueueRegistration{{Name: "invoices", WorkerConcurrency: intp(2), PollingIntervalSec: 1}}, ApplicationName: "billing",
			}},
		{name: "register", description: "A worker declares a workflow function after its hello (a method of class Billing, dead-lettered after 5 recovery attempts) and the queue it is enqueued on, which this worker serves with a worker concurrency of 4.",
			kind: KindRequest, id: 73, op: OpRegister, message: "Register", body: &Register{
				Workflows: []WorkflowRegistration{{Name: "Billing.refund", ClassName: "Billing", MaxRecoveryAttempts: 5}},
				Queues:    []QueueRegistration{{Name: "refunds", WorkerConcurrency: intp(4)}},
			}},
		{name: "register_configure_only", description: "A worker that listens to some queues only (DBOS.listen_queues) declares another one: its row is written (paused with a worker concurrency of 0 for every worker that sets none), but this worker does not serve it.",
			kind: KindRequest, id: 76, op: OpRegister, message: "Register", body: &Register{
				Queues: []QueueRegistration{{Name: "exports", WorkerConcurrency: intp(0), ConfigureOnly: true}},
			}},
		{name: "register_reply", description: "Registered: from now on the agent dispatches runs of Billing.refund and of the queue refunds to this worker, as if its hello had announced them. An empty map.",
			kind: KindResponse, id: 73, replyTo: OpRegister, message: "Empty", body: Empty{}},
		{name: "start_workflow_delayed", description: "Enqueue on partition \"alice@example.com\" of \"emails\", DELAYED for 30 s; a duplicate deduplication id returns the workflow that holds it.",
			kind: KindRequest, id: 28, op: OpStartWorkflow, message: "StartWorkflow", body: &StartWorkflow{
				WorkflowID: "email-51", Name: "send_digest", Inputs: strp(`{"positionalArgs":["alice@example.com"],"namedArgs":{}}`),
				Serialization: "portable_json", QueueName: "emails", DeduplicationID: "digest-alice", PartitionKey: "alice@example.com",
				DelayMS: 30000, DeduplicationPolicy: DedupReturnExisting,
			}},
		{name: "start_workflow_delayed_reply", description: "Created and DELAYED until its time comes; then it is ENQUEUED.",
			kind: KindResponse, id: 28, replyTo: OpStartWorkflow, message: "StartWorkflowReply", body: &StartWorkflowReply{
				WorkflowID: "email-51", Status: "DELAYED", Created: true,
			}},
		{name: "start_workflow_return_existing_reply", description: "With deduplication_policy return_existing, a taken deduplication id names the workflow holding it (created false) instead of the error deduplicated.",
			kind: KindResponse, id: 29, replyTo: OpStartWorkflow, message: "StartWorkflowReply", body: &StartWorkflowReply{
				WorkflowID: "email-50", Status: "ENQUEUED", Created: false,
			}},
		{name: "debounce_workflow", description: "Start \"reindex\" once key \"doc-7\" has been quiet for 5 s, but no later than 60 s after the first call; each call replaces the inputs (the attributes are the first call's).",
			kind: KindRequest, id: 30, op: OpDebounceWorkflow, message: "DebounceWorkflow", body: &DebounceWorkflow{
				Key: "doc-7", Name: "reindex", QueueName: "indexing", DelayMS: 5000, TimeoutMS: 60000,
				Inputs: strp(`{"positionalArgs":["doc-7",3],"namedArgs":{}}`), Serialization: "portable_json", WorkflowID: "reindex-doc-7-a",
				AuthenticatedUser: "alice", AuthenticatedRoles: []string{"editor"}, Attributes: strp(`{"source":"editor"}`),
			}},
		{name: "debounce_workflow_typescript", description: "A Node binding debounces from workflow code as DBOS TypeScript does: its step name and its form of the key's deduplication id (here for a function of no class).",
			kind: KindRequest, id: 82, op: OpDebounceWorkflow, message: "DebounceWorkflow", body: &DebounceWorkflow{
				Key: "user-9", Name: "notify", DelayMS: 2000, Inputs: strp(`{"json":["user-9"],"__dbos_serializer":"superjson"}`), Serialization: "js_superjson",
				Caller:          &Caller{WorkflowID: "signup-4", OwnerXID: exampleOwner, FunctionID: 0},
				DeduplicationID: ".notify-user-9", StepName: "DBOS.debounceDelayedWorkflow",
			}},
		{name: "debounce_workflow_reply", description: "An earlier call's workflow was pushed back (bounced); its id is the one to await.",
			kind: KindResponse, id: 30, replyTo: OpDebounceWorkflow, message: "DebounceWorkflowReply", body: &DebounceWorkflowReply{
				WorkflowID: "reindex-doc-7-0", Bounced: true,
			}},
		{name: "set_workflow_delay", description: "Release a DELAYED workflow at another time (here at once: a time in the past).",
			kind: KindRequest, id: 31, op: OpSetWorkflowDelay, message: "SetWorkflowDelay", body: &SetWorkflowDelay{
				WorkflowID: "email-51", DelayUntilEpochMS: exampleT0,
			}},
		{name: "set_workflow_delay_reply", description: "The release time moved: an empty map.",
			kind: KindResponse, id: 31, replyTo: OpSetWorkflowDelay, message: "Empty", body: Empty{}},
		{name: "set_workflow_priority", description: "Move a waiting workflow to the front of its queue (priority 1 runs before 5; 0, the default, is the same as no priority).",
			kind: KindRequest, id: 81, op: OpSetWorkflowPriority, message: "SetWorkflowPriority", body: &SetWorkflowPriority{
				WorkflowID: "email-51", Priority: 1,
			}},
		{name: "set_workflow_priority_reply", description: "The workflow was still waiting: its priority changed.",
			kind: KindResponse, id: 81, replyTo: OpSetWorkflowPriority, message: "SetWorkflowPriorityReply", body: &SetWorkflowPriorityReply{Applied: true}},
		{name: "get_queue", description: "Ask for one queue's configuration and load.",
			kind: KindRequest, id: 32, op: OpGetQueue, message: "QueueRef", body: &QueueRef{Name: "emails"}},
		{name: "get_queue_reply", description: "A registered partitioned queue with its queue-wide and partition limits, its polling interval and owner, and how many workflows wait, run and are delayed.",
			kind: KindResponse, id: 32, replyTo: OpGetQueue, message: "QueueInfo", body: &QueueInfo{
				Name: "emails", Registered: true, Concurrency: intp(20), PartitionQueue: true,
				PartitionConcurrency: intp(2), PartitionWorkerConcurrency: intp(1), PartitionRateLimitMax: intp(10),
				PartitionRateLimitPeriodSec: floatp(60), PollingIntervalSec: 1, ApplicationName: "mailer",
				Enqueued: 12, Pending: 4, Delayed: 1,
			}},
		{name: "delete_queue", description: "Delete a queue's registration (DBOS.delete_queue): its workflows stay.",
			kind: KindRequest, id: 74, op: OpDeleteQueue, message: "QueueRef", body: &QueueRef{Name: "emails"}},
		{name: "delete_queue_reply", description: "Deleted (or there was no row): an empty map.",
			kind: KindResponse, id: 74, replyTo: OpDeleteQueue, message: "Empty", body: Empty{}},
		{name: "list_queues", description: "List every queue: registered ones and those with active workflows.",
			kind: KindRequest, id: 33, op: OpListQueues, message: "ListQueues", body: &ListQueues{}},
		{name: "list_queues_reply", description: "Two queues: one registered with limits (partition limits are only in get_queue), one an SDK enqueued on without registering it.",
			kind: KindResponse, id: 33, replyTo: OpListQueues, message: "ListQueuesReply", body: &ListQueuesReply{Queues: []QueueInfo{
				{Name: "orders", Registered: true, Concurrency: intp(10), WorkerConcurrency: &wc, RateLimitMax: intp(100),
					RateLimitPeriodSec: floatp(1.5), PriorityEnabled: true, Enqueued: 3, Pending: 4},
				{Name: "sdk-queue", Enqueued: 1},
			}}},
		{name: "list_queues_of_application", description: "DBOS's list_queues(application_name=\"billing\"): billing's queues and the unclaimed ones.",
			kind: KindRequest, id: 76, op: OpListQueues, message: "ListQueues", body: &ListQueues{ApplicationNames: []string{"billing"}}},
		{name: "list_queues_of_application_reply", description: "Billing's queue, with its owner, and an unclaimed one.",
			kind: KindResponse, id: 76, replyTo: OpListQueues, message: "ListQueuesReply", body: &ListQueuesReply{Queues: []QueueInfo{
				{Name: "invoices", Registered: true, WorkerConcurrency: intp(2), ApplicationName: "billing"},
				{Name: "legacy", Registered: true},
			}}},

		// Schedules.
		{name: "create_schedule", description: "Run \"nightly_report\" at 03:00 New York time on the queue \"reports\", with a context, backfilling missed ticks.",
			kind: KindRequest, id: 34, op: OpCreateSchedule, message: "Schedule", body: &Schedule{
				ScheduleName: "nightly", WorkflowName: "nightly_report", Cron: "0 3 * * *", Context: `{"region":"eu"}`,
				AutomaticBackfill: true, CronTimezone: "America/New_York", QueueName: "reports",
			}},
		{name: "create_schedule_reply", description: "Created (ACTIVE): an empty map.",
			kind: KindResponse, id: 34, replyTo: OpCreateSchedule, message: "Empty", body: Empty{}},
		{name: "create_schedule_serialized_context", description: "A schedule whose context JSON cannot hold, stored as the binding's serializer wrote it (DBOS Python's pickle, base64): ticks get that text as a string.",
			kind: KindRequest, id: 34, op: OpCreateSchedule, message: "Schedule", body: &Schedule{
				ScheduleName: "regional", WorkflowName: "regional_report", Cron: "0 3 * * *", Context: "gAWVKAAAAAAAAACMCF9fbWFpbl9flIwGUmVnaW9ulJOUKYGUfZSMBG5hbWWUjAJ1c5RzYi4=",
			}},
		{name: "create_schedule_keeping_its_id", description: "Re-create a schedule whose definition changed under the id and the last tick it had (DBOS updates a schedule in place, keeping its last_fired_at).",
			kind: KindRequest, id: 34, op: OpCreateSchedule, message: "Schedule", body: &Schedule{
				ScheduleName: "nightly", WorkflowName: "nightly_report", Cron: "0 4 * * *",
				LastFiredAt: "2026-01-01T03:00:00-05:00",
				ScheduleID:  "0b1f6a52-3c7e-4d8a-9f21-5e6c7d8e9f00",
			}},
		{name: "get_schedule", description: "Ask for one schedule.",
			kind: KindRequest, id: 35, op: OpGetSchedule, message: "ScheduleRef", body: &ScheduleRef{ScheduleName: "nightly"}},
		{name: "get_schedule_reply", description: "The schedule with its status and the last tick fired (ISO 8601 in the schedule's time zone, as the SDKs store it).",
			kind: KindResponse, id: 35, replyTo: OpGetSchedule, message: "Schedule", body: &Schedule{
				ScheduleName: "nightly", WorkflowName: "nightly_report", Cron: "0 3 * * *", Context: `{"region":"eu"}`,
				Status: "ACTIVE", AutomaticBackfill: true, CronTimezone: "America/New_York", QueueName: "reports",
				LastFiredAt: "2026-01-01T03:00:00-05:00",
			}},
		{name: "list_schedules", description: "The paused schedules of \"nightly_report\" whose names start with \"night\".",
			kind: KindRequest, id: 36, op: OpListSchedules, message: "ListSchedules", body: &ListSchedules{
				Statuses: []string{"PAUSED"}, WorkflowNames: []string{"nightly_report"}, NamePrefix: "night",
			}},
		{name: "list_schedules_reply", description: "One schedule, by name (a six-field cron: seconds first).",
			kind: KindResponse, id: 36, replyTo: OpListSchedules, message: "ListSchedulesReply", body: &ListSchedulesReply{Schedules: []Schedule{
				{ScheduleName: "nightly-eu", WorkflowName: "nightly_report", WorkflowClassName: "Reports", Cron: "30 0 2 * * *",
					Context: "null", Status: "PAUSED", ApplicationName: "shop", ScheduleID: "3b1f6c0e-5d2a-4e8b-9f7c-2a6d1e0b4c3f"},
			}}},
		{name: "pause_schedule", description: "Stop a schedule firing.",
			kind: KindRequest, id: 37, op: OpPauseSchedule, message: "ScheduleRef", body: &ScheduleRef{ScheduleName: "nightly"}},
		{name: "pause_schedule_reply", description: "Paused: an empty map.",
			kind: KindResponse, id: 37, replyTo: OpPauseSchedule, message: "Empty", body: Empty{}},
		{name: "resume_schedule", description: "Make a paused schedule fire again.",
			kind: KindRequest, id: 38, op: OpResumeSchedule, message: "ScheduleRef", body: &ScheduleRef{ScheduleName: "nightly"}},
		{name: "resume_schedule_reply", description: "Active again: an empty map.",
			kind: KindResponse, id: 38, replyTo: OpResumeSchedule, message: "Empty", body: Empty{}},
		{name: "delete_schedule", description: "Delete a schedule (the workflows it enqueued stay).",
			kind: KindRequest, id: 39, op: OpDeleteSchedule, message: "ScheduleRef", body: &ScheduleRef{ScheduleName: "nightly"}},
		{name: "delete_schedule_reply", description: "Deleted: an empty map.",
			kind: KindResponse, id: 39, replyTo: OpDeleteSchedule, message: "Empty", body: Empty{}},
		{name: "backfill_schedule", description: "Enqueue the ticks of 2026-01-01 and 2026-01-02 (UTC) that were not enqueued.",
			kind: KindRequest, id: 40, op: OpBackfillSchedule, message: "BackfillSchedule", body: &BackfillSchedule{
				ScheduleName: "nightly", StartEpochMS: exampleT0, EndEpochMS: exampleT0 + 2*86400000,
			}},
		{name: "backfill_schedule_reply", description: "The ids of every tick in the range, in order, whether this call or an earlier firer enqueued it (the time is the tick in the schedule's time zone).",
			kind: KindResponse, id: 40, replyTo: OpBackfillSchedule, message: "WorkflowIDs", body: &WorkflowIDs{WorkflowIDs: []string{
				"sched-nightly-2026-01-01T03:00:00-05:00", "sched-nightly-2026-01-02T03:00:00-05:00",
			}}},
		{name: "trigger_schedule", description: "Enqueue one run of the schedule's workflow now.",
			kind: KindRequest, id: 41, op: OpTriggerSchedule, message: "ScheduleRef", body: &ScheduleRef{ScheduleName: "nightly"}},
		{name: "trigger_schedule_reply", description: "The triggered run's id: sched-<name>-trigger-<now, UTC, Python isoformat>.",
			kind: KindResponse, id: 41, replyTo: OpTriggerSchedule, message: "WorkflowRef", body: &WorkflowRef{
				WorkflowID: "sched-nightly-trigger-2026-01-01T12:00:00.250000+00:00",
			}},
		{name: "push_run_scheduled_tick", description: "A tick of the schedule handed to a worker: portable_json inputs [the scheduled time (ISO 8601 with offset), the schedule's context].",
			kind: KindPush, op: PushRun, message: "Run", body: &Run{
				WorkflowID: "sched-nightly-2026-01-01T03:00:00-05:00", Name: "nightly_report",
				Inputs:        strp(`{"namedArgs":{},"positionalArgs":["2026-01-01T03:00:00-05:00",{"region":"eu"}]}`),
				Serialization: "portable_json", OwnerXID: "0a1b2c3d4e5f60718293a4b5c6d7e8f9", QueueName: "reports",
				RecoveryAttempts: 1, History: []Step{},
			}},

		// Application versions.
		{name: "list_versions", description: "List the application's versions.",
			kind: KindRequest, id: 42, op: OpListVersions, message: "Empty", body: Empty{}},
		{name: "list_versions_reply", description: "Two versions, the latest first (epoch ms timestamps); the latest takes unversioned work.",
			kind: KindResponse, id: 42, replyTo: OpListVersions, message: "ListVersionsReply", body: &ListVersionsReply{Versions: []VersionInfo{
				{VersionID: "6f1d3c2a-8b4e-4f5a-9c7d-0e1f2a3b4c5d", VersionName: "v2", TimestampMS: exampleT0 + 7200000, CreatedAtMS: exampleT0 + 7200000, ApplicationName: "shop"},
				{VersionID: "0c9b8a7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d", VersionName: "v1", TimestampMS: exampleT0, CreatedAtMS: exampleT0},
			}}},
		{name: "promote_version", description: "Roll back: make v1 the latest again.",
			kind: KindRequest, id: 43, op: OpPromoteVersion, message: "VersionRef", body: &VersionRef{VersionName: "v1"}},
		{name: "promote_version_reply", description: "v1 is the latest: an empty map.",
			kind: KindResponse, id: 43, replyTo: OpPromoteVersion, message: "Empty", body: Empty{}},
		{name: "promote_version_for_application", description: "A client makes billing's version v7 billing's latest (DBOS's set_latest_application_version(application_name=\"billing\")).",
			kind: KindRequest, id: 77, op: OpPromoteVersion, message: "VersionRef", body: &VersionRef{VersionName: "v7", ApplicationName: "billing"}},

		// Ownership.
		{name: "rename_application", description: "Give application billing-v2 the rows billing owns and the unclaimed ones, terminal workflows 10,000 at a time (DBOSClient.rename_application).",
			kind: KindRequest, id: 78, op: OpRenameApplication, message: "RenameApplication", body: &RenameApplication{
				OldName: "billing", NewName: "billing-v2", BatchSize: 10000, AdoptUnclaimedRows: true,
			}},
		{name: "rename_application_reply", description: "The rows moved, by table.",
			kind: KindResponse, id: 78, replyTo: OpRenameApplication, message: "RenameApplicationReply", body: &RenameApplicationReply{
				Queues: 2, Schedules: 1, Versions: 3, Workflows: 1250, Steps: 4800,
			}},
		{name: "error_schedule_not_found", description: "A schedule op naming no schedule: invalid_argument.",
			kind: KindResponse, id: 44, replyTo: OpGetSchedule, err: &Error{Code: CodeInvalidArgument, Message: "schedule nightly does not exist"}},
	}, communicationVectorDefs()...)
}

// communicationVectorDefs are the vectors of messages, events, streams,
// durable sleep, children, fork, rewind, delete and attributes. The story:
// order-1002 (run by exampleOwner) starts the child order-1002-4, awaits it,
// pays order-1003 a message; order-1003 (run by otherOwner) receives it,
// sleeps, publishes events and a stream.
func communicationVectorDefs() []vectorDef {
	const otherOwner = "7c6b5a4938271605f4e3d2c1b0a99887"
	payment := `{"paid":true,"amount":42}`
	inCheckout := func(functionID int) *Caller {
		return &Caller{WorkflowID: "order-1002", OwnerXID: exampleOwner, FunctionID: functionID}
	}
	inShipping := func(functionID int) Caller {
		return Caller{WorkflowID: "order-1003", OwnerXID: otherOwner, FunctionID: functionID}
	}
	return []vectorDef{
		// Children and the steps a binding records itself.
		{name: "start_workflow_child", description: "order-1002 starts \"refund\" as its child at step 4: the binding chose the id <parent>-<function_id>; the agent records the parent's step 4 (named refund, child_workflow_id order-1002-4) with the child's row. The child carries attributes.",
			kind: KindRequest, id: 45, op: OpStartWorkflow, message: "StartWorkflow", body: &StartWorkflow{
				WorkflowID: "order-1002-4", Name: "refund", Inputs: strp(`{"positionalArgs":[42],"namedArgs":{}}`), Serialization: "portable_json",
				QueueName: "refunds", Parent: &ParentStep{WorkflowID: "order-1002", OwnerXID: exampleOwner, FunctionID: 4},
				Attributes: strp(`{"team":"payments"}`),
			}},
		{name: "start_workflow_child_reply", description: "The child was created on its queue (the parent's step 4 was recorded in the same transaction).",
			kind: KindResponse, id: 45, replyTo: OpStartWorkflow, message: "StartWorkflowReply", body: &StartWorkflowReply{
				WorkflowID: "order-1002-4", Status: "ENQUEUED", Created: true,
			}},
		{name: "debounce_workflow_from_workflow", description: "order-1002 debounces \"reindex\" at step 5 inside SetWorkflowTimeout(30 s): the agent records step 5 (DBOS.debounce_delayed_workflow, DBOS's DebounceResult in portable_json) with the bounce; a first call also creates the workflow as the child order-1002-6, recorded at step 6, with a 30 s timeout that starts when it is dequeued.",
			kind: KindRequest, id: 75, op: OpDebounceWorkflow, message: "DebounceWorkflow", body: &DebounceWorkflow{
				Key: "doc-7", Name: "reindex", DelayMS: 5000,
				Inputs: strp(`{"positionalArgs":["doc-7",4],"namedArgs":{}}`), Serialization: "portable_json",
				WorkflowTimeoutMS: 30000, Caller: inCheckout(5),
			}},
		{name: "debounce_workflow_from_workflow_reply", description: "The key was free: the workflow was created as order-1002-6 (steps 5 and 6 were recorded in the same transaction).",
			kind: KindResponse, id: 75, replyTo: OpDebounceWorkflow, message: "DebounceWorkflowReply", body: &DebounceWorkflowReply{
				WorkflowID: "order-1002-6", Bounced: false,
			}},
		{name: "record_step_get_result", description: "After get_result on its child, the parent records the awaited outcome as step 5, named DBOS.getResult and pointing at the child: a replay returns it without waiting.",
			kind: KindRequest, id: 46, op: OpRecordStep, message: "RecordStep", body: &RecordStep{
				WorkflowID: "order-1002", OwnerXID: exampleOwner, Step: Step{
					FunctionID: 5, Name: StepGetResult, Output: strp(`{"refunded":42}`), Serialization: "portable_json",
					ChildWorkflowID: "order-1002-4", StartedAtMS: exampleT0 + 1300, CompletedAtMS: exampleT0 + 4100,
				}}},
		{name: "record_step_patch", description: "A patch marker: the first run to reach patch \"new-pricing\" at step 6 records it as an ordinary step named DBOS.patch-new-pricing with no output.",
			kind: KindRequest, id: 47, op: OpRecordStep, message: "RecordStep", body: &RecordStep{
				WorkflowID: "order-1002", OwnerXID: exampleOwner, Step: Step{FunctionID: 6, Name: "DBOS.patch-new-pricing"}}},
		{name: "cancel_workflow_children", description: "Cancel a workflow and every workflow it started, recursively.",
			kind: KindRequest, id: 48, op: OpCancel, message: "CancelWorkflow", body: &CancelWorkflow{WorkflowID: "order-1002", CancelChildren: true}},

		// Messages.
		{name: "send", description: "order-1002 sends order-1003 a message on the topic \"payments\", as its step 7 (DBOS.send).",
			kind: KindRequest, id: 49, op: OpSend, message: "Send", body: &Send{
				Caller:   inCheckout(7),
				Messages: []Message{{DestinationID: "order-1003", Topic: strp("payments"), Message: payment, Serialization: "portable_json"}},
			}},
		{name: "send_reply", description: "Delivered (or, for a send already recorded at that step, nothing sent again): an empty map.",
			kind: KindResponse, id: 49, replyTo: OpSend, message: "Empty", body: Empty{}},
		{name: "send_from_client", description: "A client sends two messages in one transaction on the default topic (nil), with an idempotency key, also to every fork of each destination; caller absent: nothing is recorded.",
			kind: KindRequest, id: 50, op: OpSend, message: "Send", body: &Send{
				Messages: []Message{
					{DestinationID: "order-1003", Message: `"expedite"`, Serialization: "portable_json", IdempotencyKey: "ops-ticket-12"},
					{DestinationID: "order-1004", Message: "gASVDAAAAAAAAACMCGV4cGVkaXRllC4=", Serialization: "py_pickle", IdempotencyKey: "ops-ticket-12"},
				},
				SendToForks: true,
			}},
		{name: "error_send_destination_missing", description: "A send to a workflow that does not exist: nothing is sent. From a workflow, the binding records the error as the send's step itself.",
			kind: KindResponse, id: 51, replyTo: OpSend, err: &Error{Code: CodeWorkflowNotFound, Message: "workflow order-9999 does not exist"}},
		{name: "recv", description: "order-1003 waits up to 60 s for a message on \"payments\" as its step 2 (DBOS.recv); its deadline is step 3 (DBOS.sleep). On timeout the agent records null (portable_json), the binding's \"nothing\".",
			kind: KindRequest, id: 52, op: OpRecv, message: "Recv", body: &Recv{
				Caller: inShipping(2), TimeoutFunctionID: 3, Topic: strp("payments"), TimeoutMS: 60000,
				TimeoutOutput: strp("null"), TimeoutSerialization: "portable_json",
			}},
		{name: "recv_reply", description: "A message arrived: it is consumed and recorded as step 2.",
			kind: KindResponse, id: 52, replyTo: OpRecv, message: "RecvReply", body: &RecvReply{
				Received: true, Message: strp(payment), Serialization: "portable_json",
			}},
		{name: "recv_timeout_reply", description: "The deadline passed with no message: the timeout output was recorded as step 2; the binding returns its \"nothing\".",
			kind: KindResponse, id: 53, replyTo: OpRecv, message: "RecvReply", body: &RecvReply{Received: false}},

		// Durable sleep.
		{name: "sleep", description: "order-1003 sleeps one hour as its step 4 (DBOS.sleep).",
			kind: KindRequest, id: 54, op: OpSleep, message: "Sleep", body: &Sleep{Caller: inShipping(4), DurationMS: 3600000}},
		{name: "sleep_reply", description: "The wake time (database clock) and what remains of it: the binding sleeps remaining_ms. Recovered after 20 minutes, the same request answers the same wake time with 40 minutes left.",
			kind: KindResponse, id: 54, replyTo: OpSleep, message: "SleepReply", body: &SleepReply{
				WakeAtEpochMS: exampleT0 + 3605000, RemainingMS: 3600000,
			}},

		// Events.
		{name: "set_event", description: "order-1003 publishes \"status\" as its step 5 (DBOS.setEvent).",
			kind: KindRequest, id: 55, op: OpSetEvent, message: "SetEvent", body: &SetEvent{
				Caller: inShipping(5), Key: "status", Value: `"shipped"`, Serialization: "portable_json",
			}},
		{name: "set_event_reply", description: "Published and readers notified: an empty map.",
			kind: KindResponse, id: 55, replyTo: OpSetEvent, message: "Empty", body: Empty{}},
		{name: "get_event", description: "A client waits up to 30 s for order-1003's \"status\" (no caller: nothing is recorded).",
			kind: KindRequest, id: 56, op: OpGetEvent, message: "GetEvent", body: &GetEvent{
				WorkflowID: "order-1003", Key: "status", TimeoutMS: 30000,
			}},
		{name: "get_event_in_workflow", description: "order-1002 reads order-1003's \"status\" as its step 8 (DBOS.getEvent), its deadline step 9 (DBOS.sleep); a timeout records null.",
			kind: KindRequest, id: 57, op: OpGetEvent, message: "GetEvent", body: &GetEvent{
				WorkflowID: "order-1003", Key: "status", TimeoutMS: 30000, Caller: inCheckout(8),
				TimeoutFunctionID: 9, TimeoutOutput: strp("null"), TimeoutSerialization: "portable_json",
			}},
		{name: "get_event_reply", description: "The event is set.",
			kind: KindResponse, id: 56, replyTo: OpGetEvent, message: "GetEventReply", body: &GetEventReply{
				Found: true, Value: strp(`"shipped"`), Serialization: "portable_json",
			}},
		{name: "get_event_not_found_reply", description: "The wait ended and the event is not set.",
			kind: KindResponse, id: 57, replyTo: OpGetEvent, message: "GetEventReply", body: &GetEventReply{Found: false}},
		{name: "get_all_events", description: "A workflow's current events.",
			kind: KindRequest, id: 58, op: OpGetAllEvents, message: "WorkflowRef", body: &WorkflowRef{WorkflowID: "order-1003"}},
		{name: "get_all_events_reply", description: "Every key with its latest value, by key.",
			kind: KindResponse, id: 58, replyTo: OpGetAllEvents, message: "GetAllEventsReply", body: &GetAllEventsReply{Events: []Event{
				{Key: "carrier", Value: "gASVBwAAAAAAAACMA1VQU5Qu", Serialization: "py_pickle"},
				{Key: "status", Value: `"shipped"`, Serialization: "portable_json"},
			}}},

		// Streams.
		{name: "write_stream", description: "order-1003 appends to its stream \"progress\" as its step 6 (DBOS.writeStream).",
			kind: KindRequest, id: 59, op: OpWriteStream, message: "WriteStream", body: &WriteStream{
				Caller: inShipping(6), Key: "progress", Value: `{"pct":50}`, Serialization: "portable_json",
			}},
		{name: "write_stream_reply", description: "Appended and readers notified: an empty map.",
			kind: KindResponse, id: 59, replyTo: OpWriteStream, message: "Empty", body: Empty{}},
		{name: "write_stream_in_step", description: "The same write from inside step 7 (in_step): no step of its own is recorded; function_id is the enclosing step's.",
			kind: KindRequest, id: 60, op: OpWriteStream, message: "WriteStream", body: &WriteStream{
				Caller: Caller{WorkflowID: "order-1003", OwnerXID: otherOwner, FunctionID: 7, InStep: true},
				Key:    "progress", Value: `{"pct":90}`, Serialization: "portable_json",
			}},
		{name: "close_stream", description: "order-1003 closes \"progress\" as its step 8 (DBOS.closeStream); value and serialization are ignored.",
			kind: KindRequest, id: 61, op: OpWriteStream, message: "WriteStream", body: &WriteStream{
				Caller: inShipping(8), Key: "progress", Close: true,
			}},
		{name: "write_stream_after_close", description: "order-1003 writes to \"progress\" after closing it, as its step 9: accepted (as DBOS Python 3.4 accepts it) and never read, since readers stop at the close.",
			kind: KindRequest, id: 62, op: OpWriteStream, message: "WriteStream", body: &WriteStream{
				Caller: inShipping(9), Key: "progress", Value: `"late"`, Serialization: "portable_json",
			}},
		{name: "write_stream_after_close_reply", description: "Written: an empty map.",
			kind: KindResponse, id: 62, replyTo: OpWriteStream, message: "Empty", body: Empty{}},
		{name: "read_stream", description: "Read \"progress\" from offset 0, waiting up to 30 s for a value.",
			kind: KindRequest, id: 63, op: OpReadStream, message: "ReadStream", body: &ReadStream{
				WorkflowID: "order-1003", Key: "progress", Offset: 0, TimeoutMS: 30000,
			}},
		{name: "read_stream_reply", description: "Two values, then the closing marker: the stream is complete.",
			kind: KindResponse, id: 63, replyTo: OpReadStream, message: "ReadStreamReply", body: &ReadStreamReply{
				Values: []StreamValue{
					{Offset: 0, Value: `{"pct":50}`, Serialization: "portable_json"},
					{Offset: 1, Value: `{"pct":90}`, Serialization: "portable_json"},
				},
				Closed: true,
			}},
		{name: "read_stream_ended_reply", description: "Nothing past the offset and the writer ended without closing the stream: it will not grow.",
			kind: KindResponse, id: 64, replyTo: OpReadStream, message: "ReadStreamReply", body: &ReadStreamReply{Values: []StreamValue{}, Ended: true}},

		// Steering: fork, rewind, delete, attributes.
		{name: "fork_workflow", description: "Fork order-1001 from step 3 under a chosen id, on the queue \"orders\", for version v2, with a timeout: steps 1 and 2 are copied, step 3 on runs anew.",
			kind: KindRequest, id: 65, op: OpForkWorkflow, message: "ForkWorkflow", body: &ForkWorkflow{
				WorkflowID: "order-1001", StartStep: 3, NewWorkflowID: "order-1001-retry", AppVersion: "v2", QueueName: "orders", TimeoutMS: 60000,
			}},
		{name: "fork_workflow_reply", description: "The new workflow's id (a UUID when new_workflow_id was absent); it is ENQUEUED.",
			kind: KindResponse, id: 65, replyTo: OpForkWorkflow, message: "WorkflowRef", body: &WorkflowRef{WorkflowID: "order-1001-retry"}},
		{name: "get_workflow_forked_reply", description: "The fork, as get_workflow shows it: forked_from names the original; it carries attributes.",
			kind: KindResponse, id: 66, replyTo: OpGetWorkflow, message: "WorkflowInfo", body: &WorkflowInfo{
				WorkflowID: "order-1001-retry", Status: "ENQUEUED", Name: "checkout", QueueName: "orders", ExecutorID: "local",
				AppVersion: "v2", AppName: "shop", CreatedAtMS: exampleT0 + 9000, UpdatedAtMS: exampleT0 + 9000, TimeoutMS: 60000,
				ForkedFrom: "order-1001", Serialization: "portable_json", Attributes: strp(`{"team":"payments"}`),
			}},
		{name: "get_workflow_check_owner", description: "Whether a run's owner token still owns order-1003 (a data source's fencing check), its payloads left out.",
			kind: KindRequest, id: 73, op: OpGetWorkflow, message: "GetWorkflow", body: &GetWorkflow{
				WorkflowID: "order-1003", CheckOwnerXID: "9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a",
			}},
		{name: "get_workflow_check_owner_reply", description: "Still PENDING, and owned by another token now: owner_matches is false.",
			kind: KindResponse, id: 73, replyTo: OpGetWorkflow, message: "WorkflowInfo", body: &WorkflowInfo{
				WorkflowID: "order-1003", Status: "PENDING", Name: "checkout", QueueName: "orders", ExecutorID: "local",
				AppVersion: "v2", AppName: "shop", CreatedAtMS: exampleT0, UpdatedAtMS: exampleT0 + 4000, RecoveryAttempts: 2,
				Serialization: "portable_json", OwnerMatches: boolp(false),
			}},
		{name: "rewind_workflow", description: "Cut order-1003's history at step 2 and run it again under the same id, on the queue \"orders\".",
			kind: KindRequest, id: 67, op: OpRewindWorkflow, message: "RewindWorkflow", body: &RewindWorkflow{
				WorkflowID: "order-1003", StartStep: 2, QueueName: "orders",
			}},
		{name: "rewind_workflow_reply", description: "Rewound and ENQUEUED: an empty map.",
			kind: KindResponse, id: 67, replyTo: OpRewindWorkflow, message: "Empty", body: Empty{}},
		{name: "error_workflow_active", description: "A rewind of a workflow that is still running: cancel it first.",
			kind: KindResponse, id: 68, replyTo: OpRewindWorkflow, err: &Error{Code: CodeWorkflowActive,
				Message: "workflow order-1003 is PENDING: only an ended workflow can be rewound (cancel it first)"}},
		{name: "delete_workflows", description: "Delete two workflows, their children (recursively) and everything stored under them.",
			kind: KindRequest, id: 69, op: OpDeleteWorkflow, message: "DeleteWorkflows", body: &DeleteWorkflows{
				WorkflowIDs: []string{"order-1001", "order-1002"}, DeleteChildren: true,
			}},
		{name: "delete_workflows_reply", description: "Deleted (ids that named nothing are skipped): an empty map.",
			kind: KindResponse, id: 69, replyTo: OpDeleteWorkflow, message: "Empty", body: Empty{}},
		{name: "update_workflow_attributes", description: "Add a key to order-1002's attributes, keeping the others.",
			kind: KindRequest, id: 70, op: OpUpdateAttributes, message: "UpdateAttributes", body: &UpdateAttributes{
				WorkflowID: "order-1002", Attributes: strp(`{"vip":true}`), Merge: true,
			}},
		{name: "update_workflow_attributes_reply", description: "Updated: an empty map.",
			kind: KindResponse, id: 70, replyTo: OpUpdateAttributes, message: "Empty", body: Empty{}},
		{name: "clear_workflow_attributes", description: "Clear order-1002's attributes (attributes nil, no merge).",
			kind: KindRequest, id: 71, op: OpUpdateAttributes, message: "UpdateAttributes", body: &UpdateAttributes{WorkflowID: "order-1002"}},
		{name: "cancel_request", description: "Abandon request 40 (a wait the binding no longer needs).",
			kind: KindRequest, id: 72, op: OpCancelRequest, message: "CancelRequest", body: &CancelRequest{RequestID: 40}},
		{name: "cancel_request_reply", description: "Noted: an empty map (also for an id no longer in flight).",
			kind: KindResponse, id: 72, replyTo: OpCancelRequest, message: "Empty", body: Empty{}},
		{name: "request_cancelled_error", description: "The abandoned wait answers request_cancelled.",
			kind: KindResponse, id: 40, replyTo: OpGetResult, err: &Error{Code: CodeRequestCancelled, Message: "get_result was cancelled by the peer"}},
	}
}

// encodeDef builds a definition's frame.
func encodeDef(t testing.TB, d vectorDef) []byte {
	t.Helper()
	if d.raw != nil {
		return AppendFrame(nil, appendValue(nil, d.raw))
	}
	enc := NewEncoder()
	var frame []byte
	var err error
	switch {
	case d.err != nil:
		frame, err = enc.ErrorResponse(d.id, d.err)
	case d.kind == KindRequest:
		frame, err = enc.Request(d.id, d.op, d.body)
	case d.kind == KindResponse:
		frame, err = enc.Response(d.id, d.body)
	case d.kind == KindPush:
		frame, err = enc.Push(d.op, d.body)
	}
	require.NoError(t, err, d.name)
	return append([]byte(nil), frame...)
}

// reencode encodes an envelope and its decoded message again with the
// Encoder.
func reencode(t testing.TB, env Envelope, msg any) []byte {
	t.Helper()
	enc := NewEncoder()
	var frame []byte
	var err error
	switch {
	case env.Error != nil:
		frame, err = enc.ErrorResponse(env.ID, env.Error)
	case env.Kind == KindRequest:
		frame, err = enc.Request(env.ID, env.Op, msg)
	case env.Kind == KindResponse:
		frame, err = enc.Response(env.ID, msg)
	default:
		frame, err = enc.Push(env.Op, msg)
	}
	require.NoError(t, err)
	return append([]byte(nil), frame...)
}

// buildVectors turns the definitions into file entries.
func buildVectors(t *testing.T) []vector {
	t.Helper()
	var out []vector
	for _, d := range vectorDefs() {
		frame := encodeDef(t, d)
		env, err := DecodeEnvelope(frame[4:])
		require.NoError(t, err, d.name)
		v := vector{
			Name: d.name, Description: d.description, Kind: d.kind, ID: d.id, Op: d.op, ReplyTo: d.replyTo,
			Message: d.message, Hex: hex.EncodeToString(frame),
		}
		if env.Body != nil {
			val, err := readValue(env.Body)
			require.NoError(t, err, d.name)
			v.Body = renderJSON(val)
		}
		if env.Error != nil {
			// Rendered from the wire, so its keys are in wire order.
			whole, err := readValue(frame[4:])
			require.NoError(t, err)
			v.Error = renderJSON(whole.(omap).get("error"))
		}
		if d.raw != nil {
			v.DecodeOnly = true
			msg := messageTypes[d.message]()
			require.NoError(t, DecodeBody(env.Body, msg), d.name)
			v.CanonicalHex = hex.EncodeToString(reencode(t, env, msg))
		}
		out = append(out, v)
	}
	return out
}

func marshalFile(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(v))
	return buf.Bytes()
}

// TestGoldenVectors checks testdata/vectors.json against the code, then
// reads every vector as a binding in another language would: frame, then
// envelope, then body, each compared with the JSON; and encodes it back.
func TestGoldenVectors(t *testing.T) {
	generated := marshalFile(t, buildVectors(t))
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(vectorsFile), 0o755))
		require.NoError(t, os.WriteFile(vectorsFile, generated, 0o644))
	}
	onDisk, err := os.ReadFile(vectorsFile)
	require.NoError(t, err)
	require.Equal(t, string(generated), string(onDisk),
		"%s differs from the code; run: go test ./protocol -run TestGoldenVectors -update", vectorsFile)

	var vectors []vector
	require.NoError(t, json.Unmarshal(onDisk, &vectors))
	names := map[string]bool{}
	for _, v := range vectors {
		require.False(t, names[v.Name], "duplicate vector %s", v.Name)
		names[v.Name] = true
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			checkVector(t, v)
		})
	}
}

func checkVector(t *testing.T, v vector) {
	raw, err := hex.DecodeString(v.Hex)
	require.NoError(t, err)

	// The frame: one, exactly.
	fr := NewFrameReader(bytes.NewReader(raw), DefaultMaxFrameSize)
	body, err := fr.Next()
	require.NoError(t, err)
	require.Len(t, body, len(raw)-4)
	_, err = fr.Next()
	require.ErrorIs(t, err, io.EOF)

	// The envelope.
	env, err := DecodeEnvelope(body)
	require.NoError(t, err)
	require.Equal(t, v.Kind, env.Kind)
	require.Equal(t, v.ID, env.ID)
	require.Equal(t, v.Op, env.Op)
	if v.Kind == KindResponse {
		require.NotEmpty(t, v.ReplyTo+v.Message+string(v.Error), "a response vector says what it answers")
	}

	// The body, as plain values: same content, same key order.
	if v.Body == nil {
		require.Nil(t, env.Body)
	} else {
		wire, err := readValue(env.Body)
		require.NoError(t, err)
		want, err := parseJSON(v.Body)
		require.NoError(t, err)
		require.Equal(t, want, wire)
		// Encoding the JSON value with insertion-ordered maps, the smallest
		// integer encodings, float64 floats and str strings gives the
		// body's bytes: what a binding in any language can do.
		if !v.DecodeOnly {
			require.Equal(t, hex.EncodeToString(env.Body), hex.EncodeToString(appendValue(nil, want)))
		}
	}

	// The error.
	if v.Error == nil {
		require.Nil(t, env.Error)
	} else {
		require.NotNil(t, env.Error)
		want, err := parseJSON(v.Error)
		require.NoError(t, err)
		var fromJSON Error
		require.NoError(t, DecodeBody(appendValue(nil, want), &fromJSON))
		require.Equal(t, &fromJSON, env.Error)
		info, ok := env.Error.Code.Info()
		require.True(t, ok, "code %d is in the catalog", env.Error.Code)
		require.Equal(t, info.Name, env.Error.Name)
	}

	// The message struct, decoded from the wire and from the JSON, then
	// encoded again.
	var msg any
	if v.Message != "" {
		newMsg, ok := messageTypes[v.Message]
		require.True(t, ok, "unknown message %s", v.Message)
		msg = newMsg()
		require.NoError(t, DecodeBody(env.Body, msg))
		want, err := parseJSON(v.Body)
		require.NoError(t, err)
		fromJSON := newMsg()
		require.NoError(t, DecodeBody(appendValue(nil, want), fromJSON))
		require.Equal(t, fromJSON, msg)
	}
	again := reencode(t, env, msg)
	if v.DecodeOnly {
		require.NotEqual(t, v.Hex, v.CanonicalHex)
		require.Equal(t, v.CanonicalHex, hex.EncodeToString(again))
	} else {
		require.Empty(t, v.CanonicalHex)
		require.Equal(t, v.Hex, hex.EncodeToString(again), "the Encoder writes the vector's bytes")
		// The whole envelope from the JSON fields, too.
		envelope := omap{{"kind", int64(v.Kind)}, {"id", int64(v.ID)}}
		if v.Op != "" {
			envelope = append(envelope, kv{"op", v.Op})
		}
		if v.Body != nil {
			b, _ := parseJSON(v.Body)
			envelope = append(envelope, kv{"body", b})
		}
		if v.Error != nil {
			e, _ := parseJSON(v.Error)
			envelope = append(envelope, kv{"error", e})
		}
		require.Equal(t, v.Hex, hex.EncodeToString(AppendFrame(nil, appendValue(nil, envelope))))
	}
}

// TestGoldenVectorsCoverEveryOpAndPush keeps the vectors complete as ops
// are added.
func TestGoldenVectorsCoverEveryOpAndPush(t *testing.T) {
	t.Parallel()
	requests, replies, pushes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, d := range vectorDefs() {
		switch {
		case d.kind == KindRequest:
			requests[d.op] = true
		case d.kind == KindPush:
			pushes[d.op] = true
		case d.err == nil:
			replies[d.replyTo] = true
		}
	}
	for _, op := range []string{OpHello, OpPing, OpStats, OpStartWorkflow, OpRecordStep, OpFinish, OpGetResult,
		OpGetWorkflow, OpListWorkflows, OpListSteps, OpCancel, OpResume,
		OpRegister, OpRegisterQueues, OpDebounceWorkflow, OpSetWorkflowDelay, OpSetWorkflowPriority, OpGetQueue, OpListQueues, OpDeleteQueue,
		OpCreateSchedule, OpGetSchedule, OpListSchedules, OpPauseSchedule, OpResumeSchedule, OpDeleteSchedule,
		OpBackfillSchedule, OpTriggerSchedule, OpListVersions, OpPromoteVersion, OpRenameApplication,
		OpSend, OpRecv, OpSleep, OpSetEvent, OpGetEvent, OpGetAllEvents, OpWriteStream, OpReadStream,
		OpForkWorkflow, OpRewindWorkflow, OpDeleteWorkflow, OpUpdateAttributes, OpCancelRequest} {
		require.True(t, requests[op], "no request vector for %s", op)
		require.True(t, replies[op], "no reply vector for %s", op)
	}
	require.True(t, pushes[PushRun])
	require.True(t, pushes[PushCancel])
}
