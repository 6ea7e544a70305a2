package protocol

// Version is the protocol version this package speaks. The handshake picks
// the highest version both sides support.
const (
	Version    uint32 = 1
	MinVersion uint32 = 1
)

// Kind says what an envelope is.
type Kind uint8

// Envelope kinds.
const (
	KindRequest  Kind = 1 // from either side, expects a response with the same id
	KindResponse Kind = 2 // answers a request: body or error
	KindPush     Kind = 3 // from the agent, unsolicited, no response
)

// Ops. Requests go from a binding to the agent; pushes from the agent to a
// binding.
const (
	OpHello         = "hello"
	OpPing          = "ping"
	OpStats         = "stats"
	OpStartWorkflow = "start_workflow"
	OpRecordStep    = "record_step"
	OpFinish        = "finish"
	OpGetResult     = "get_result"
	OpGetWorkflow   = "get_workflow"
	OpListWorkflows = "list_workflows"
	OpListSteps     = "list_steps"
	OpCancel        = "cancel_workflow"
	OpResume        = "resume_workflow"

	// Late registration: workflow functions and queues a worker declares
	// after its hello.
	OpRegister = "register"

	// Queues, delays and debounce.
	OpRegisterQueues      = "register_queues"
	OpDebounceWorkflow    = "debounce_workflow"
	OpSetWorkflowDelay    = "set_workflow_delay"
	OpSetWorkflowPriority = "set_workflow_priority"
	OpGetQueue            = "get_queue"
	OpListQueues          = "list_queues"
	OpDeleteQueue         = "delete_queue"

	// Schedules.
	OpCreateSchedule   = "create_schedule"
	OpGetSchedule      = "get_schedule"
	OpListSchedules    = "list_schedules"
	OpPauseSchedule    = "pause_schedule"
	OpResumeSchedule   = "resume_schedule"
	OpDeleteSchedule   = "delete_schedule"
	OpBackfillSchedule = "backfill_schedule"
	OpTriggerSchedule  = "trigger_schedule"

	// Application versions.
	OpListVersions   = "list_versions"
	OpPromoteVersion = "promote_version"

	// Ownership: re-owning an application's rows.
	OpRenameApplication = "rename_application"

	PushRun    = "run"    // run this workflow now
	PushCancel = "cancel" // the workflow you run was cancelled
)

// Roles a connection can take.
const (
	RoleWorker = "worker" // runs workflows: registers functions and queues
	RoleClient = "client" // only starts, awaits and manages workflows
)

// Hello opens a connection.
type Hello struct {
	MinVersion uint32 `msgpack:"min_version"`
	MaxVersion uint32 `msgpack:"max_version"`
	Role       string `msgpack:"role"`
	// AppName and AppVersion say which application this process is; the
	// agent dispatches a workflow only to workers of its application and
	// version. An empty AppVersion takes the agent's default.
	AppName        string `msgpack:"app_name"`
	AppVersion     string `msgpack:"app_version"`
	Language       string `msgpack:"language,omitempty"`
	BindingVersion string `msgpack:"binding_version,omitempty"`
	PID            int64  `msgpack:"pid,omitempty"`
	// Workflows this worker can run.
	Workflows []WorkflowRegistration `msgpack:"workflows,omitempty"`
	// Queues this worker serves besides the internal queue.
	Queues []QueueRegistration `msgpack:"queues,omitempty"`
	// MaxConcurrency caps the runs this worker takes at once across queues
	// (0 = no cap).
	MaxConcurrency int `msgpack:"max_concurrency,omitempty"`
	// WakeTimeFormat is how the agent records the wake times of this
	// connection's durable sleeps (and its waits' deadlines): as the DBOS
	// SDK of its language reads them back on recovery. Empty is
	// WakeTimeEpochSeconds.
	WakeTimeFormat string `msgpack:"wake_time_format,omitempty"`
}

// Wake time formats a hello can ask for.
const (
	WakeTimeEpochSeconds = "epoch_seconds" // JSON epoch seconds, a float: DBOS Python
	WakeTimeEpochMS      = "epoch_ms"      // JSON epoch milliseconds, an integer: DBOS TypeScript
)

// WorkflowRegistration names one runnable workflow function.
type WorkflowRegistration struct {
	Name      string `msgpack:"name"`
	ClassName string `msgpack:"class_name,omitempty"`
	// MaxRecoveryAttempts before the workflow is dead-lettered (0 = the
	// DBOS default, 100).
	MaxRecoveryAttempts int `msgpack:"max_recovery_attempts,omitempty"`
}

// QueueRegistration is a queue a worker serves and its limits.
type QueueRegistration struct {
	Name string `msgpack:"name"`
	// WorkerConcurrency caps how many of the queue's workflows this worker
	// process runs at once.
	WorkerConcurrency *int `msgpack:"worker_concurrency,omitempty"`
	// Concurrency caps the queue's running workflows across all executors.
	Concurrency        *int     `msgpack:"concurrency,omitempty"`
	RateLimitMax       *int     `msgpack:"rate_limit_max,omitempty"`
	RateLimitPeriodSec *float64 `msgpack:"rate_limit_period_sec,omitempty"`
	PriorityEnabled    bool     `msgpack:"priority_enabled,omitempty"`
	PartitionQueue     bool     `msgpack:"partition_queue,omitempty"`
	// Partition limits apply within each partition key.
	PartitionConcurrency        *int     `msgpack:"partition_concurrency,omitempty"`
	PartitionWorkerConcurrency  *int     `msgpack:"partition_worker_concurrency,omitempty"`
	PartitionRateLimitMax       *int     `msgpack:"partition_rate_limit_max,omitempty"`
	PartitionRateLimitPeriodSec *float64 `msgpack:"partition_rate_limit_period_sec,omitempty"`
	PollingIntervalSec          float64  `msgpack:"polling_interval_sec,omitempty"`
	// ConfigureOnly writes the queue's row as the registration says but
	// leaves the queue unserved by this worker (DBOS's listen_queues names
	// the queues a process dequeues; the others it declares are stored
	// all the same).
	ConfigureOnly bool `msgpack:"configure_only,omitempty"`
}

// HelloReply accepts a connection.
type HelloReply struct {
	Version      uint32 `msgpack:"version"`
	AgentVersion string `msgpack:"agent_version"`
	MaxFrameSize uint32 `msgpack:"max_frame_size"`
	SessionID    string `msgpack:"session_id"`
	ExecutorID   string `msgpack:"executor_id"`
	AppVersion   string `msgpack:"app_version"`
	// MaxInFlight is how many requests the agent handles at once on this
	// connection; past it the agent stops reading the connection until one
	// is answered. A binding keeps at most this many unanswered requests
	// (cancel_request aside) and waits for a reply before sending more.
	MaxInFlight uint32 `msgpack:"max_in_flight"`
}

// StartWorkflow creates a workflow (idempotent on its id).
type StartWorkflow struct {
	WorkflowID    string  `msgpack:"workflow_id,omitempty"` // empty: the agent makes a UUID
	Name          string  `msgpack:"name"`
	ClassName     string  `msgpack:"class_name,omitempty"`
	ConfigName    string  `msgpack:"config_name,omitempty"`
	Inputs        *string `msgpack:"inputs"`
	Serialization string  `msgpack:"serialization"`
	// QueueName enqueues the workflow; without it the workflow starts now.
	QueueName       string `msgpack:"queue_name,omitempty"`
	Priority        int    `msgpack:"priority,omitempty"`
	DeduplicationID string `msgpack:"deduplication_id,omitempty"`
	PartitionKey    string `msgpack:"partition_key,omitempty"`
	TimeoutMS       int64  `msgpack:"timeout_ms,omitempty"`
	DeadlineEpochMS int64  `msgpack:"deadline_epoch_ms,omitempty"`
	AppVersion      string `msgpack:"app_version,omitempty"` // default: the caller's
	// RunHere asks, for a direct start by a worker that registered the
	// function, to run it in the calling process: the reply then carries
	// the run grant instead of a push.
	RunHere           bool   `msgpack:"run_here,omitempty"`
	AuthenticatedUser string `msgpack:"authenticated_user,omitempty"`
	AssumedRole       string `msgpack:"assumed_role,omitempty"`
	// AuthenticatedRoles are the roles the authenticated user was granted
	// (DBOS's authenticated_roles); stored as a JSON list, none when empty.
	AuthenticatedRoles []string `msgpack:"authenticated_roles,omitempty"`
	// DelayMS keeps an enqueued workflow DELAYED that long before it can
	// be dequeued (needs QueueName).
	DelayMS int64 `msgpack:"delay_ms,omitempty"`
	// DeduplicationPolicy says what a duplicate DeduplicationID does:
	// "reject" (default: error deduplicated) or "return_existing" (the
	// reply names the workflow holding the id, Created false).
	DeduplicationPolicy string `msgpack:"deduplication_policy,omitempty"`
	// WorkflowIDReusePolicy says what an id already taken by another
	// request's workflow gets: "return-existing" (default: that workflow,
	// Created false) or "reject" (error workflow_id_in_use), DBOS's
	// workflow_id_reuse_policy.
	WorkflowIDReusePolicy string `msgpack:"workflow_id_reuse_policy,omitempty"`
	// Parent, for a workflow started from workflow code, makes it that
	// workflow's child (see ParentStep).
	Parent *ParentStep `msgpack:"parent,omitempty"`
	// Attributes are the workflow's attributes, a JSON object as text.
	Attributes *string `msgpack:"attributes,omitempty"`
	// ApplicationName owns the workflow when it names another application
	// than the caller's (DBOS's EnqueueOptions application_name); then
	// AppVersion defaults to none and the workflow is not run here.
	ApplicationName string `msgpack:"application_name,omitempty"`
	// AppID is DBOS's application id (workflow_status.application_id),
	// stored as given: DBOS writes its DBOS__APPID, or "", for the
	// workflows it starts, and nothing for a client's. Nil: none.
	AppID *string `msgpack:"app_id,omitempty"`
}

// Deduplication policies.
const (
	DedupReject         = "reject"
	DedupReturnExisting = "return_existing"
)

// Workflow id reuse policies, spelled as DBOS spells them.
const (
	ReuseReturnExisting = "return-existing"
	ReuseReject         = "reject"
)

// StartWorkflowReply identifies the started (or existing) workflow.
type StartWorkflowReply struct {
	WorkflowID string `msgpack:"workflow_id"`
	Status     string `msgpack:"status"`
	// Created is false when the id already named a workflow.
	Created bool `msgpack:"created"`
	// Run is set when the caller must run the workflow itself now.
	Run *Run `msgpack:"run,omitempty"`
}

// Run hands a workflow to a worker: everything needed to run or replay it.
type Run struct {
	WorkflowID        string  `msgpack:"workflow_id"`
	Name              string  `msgpack:"name"`
	ClassName         string  `msgpack:"class_name,omitempty"`
	ConfigName        string  `msgpack:"config_name,omitempty"`
	Inputs            *string `msgpack:"inputs"`
	Serialization     string  `msgpack:"serialization"`
	OwnerXID          string  `msgpack:"owner_xid"`
	QueueName         string  `msgpack:"queue_name,omitempty"`
	DeadlineEpochMS   int64   `msgpack:"deadline_epoch_ms,omitempty"`
	RecoveryAttempts  int64   `msgpack:"recovery_attempts"`
	AuthenticatedUser string  `msgpack:"authenticated_user,omitempty"`
	// AssumedRole and AuthenticatedRoles are the identity recorded at
	// start: a binding checks a workflow's required roles against them
	// when it runs it (recovery included).
	AssumedRole        string   `msgpack:"assumed_role,omitempty"`
	AuthenticatedRoles []string `msgpack:"authenticated_roles,omitempty"`
	// Attributes are the workflow's attributes (a JSON object as text),
	// where DBOS keeps a propagated trace context (dbos.otelContext).
	Attributes *string `msgpack:"attributes,omitempty"`
	// History is every step recorded so far, by function id: the worker
	// replays from it without asking.
	History []Step `msgpack:"history"`
}

// Step is one recorded step of a workflow.
type Step struct {
	FunctionID      int     `msgpack:"function_id"`
	Name            string  `msgpack:"name"`
	Output          *string `msgpack:"output"`
	Error           *string `msgpack:"error"`
	Serialization   string  `msgpack:"serialization,omitempty"`
	ChildWorkflowID string  `msgpack:"child_workflow_id,omitempty"`
	StartedAtMS     int64   `msgpack:"started_at_epoch_ms,omitempty"`
	CompletedAtMS   int64   `msgpack:"completed_at_epoch_ms,omitempty"`
}

// RecordStep checkpoints a step the worker just ran. The reply is empty;
// errors: fenced, workflow_cancelled, unexpected_step, step_conflict.
type RecordStep struct {
	WorkflowID string `msgpack:"workflow_id"`
	OwnerXID   string `msgpack:"owner_xid"`
	Step
}

// Finish records a run's outcome.
type Finish struct {
	WorkflowID    string  `msgpack:"workflow_id"`
	OwnerXID      string  `msgpack:"owner_xid"`
	Status        string  `msgpack:"status"` // SUCCESS or ERROR
	Output        *string `msgpack:"output"`
	Error         *string `msgpack:"error"`
	Serialization string  `msgpack:"serialization,omitempty"`
}

// FinishReply says whether the outcome was stored; when not, Result is the
// outcome that stands.
type FinishReply struct {
	Applied bool           `msgpack:"applied"`
	Result  WorkflowResult `msgpack:"result"`
}

// GetResult waits for a workflow to end.
type GetResult struct {
	WorkflowID string `msgpack:"workflow_id"`
	// TimeoutMS bounds the wait (0 = until it ends). Past it: error timeout.
	TimeoutMS int64 `msgpack:"timeout_ms,omitempty"`
	// WaitForCreation waits for a workflow that does not exist yet instead
	// of answering workflow_not_found (a handle taken before the enqueue
	// commits).
	WaitForCreation bool `msgpack:"wait_for_creation,omitempty"`
}

// WorkflowResult is a workflow's outcome.
type WorkflowResult struct {
	WorkflowID    string  `msgpack:"workflow_id"`
	Status        string  `msgpack:"status"`
	Output        *string `msgpack:"output"`
	Error         *string `msgpack:"error"`
	Serialization string  `msgpack:"serialization,omitempty"`
}

// WorkflowRef names one workflow.
type WorkflowRef struct {
	WorkflowID string `msgpack:"workflow_id"`
}

// ResumeWorkflow resumes a workflow, or several at once (all or none),
// optionally onto a queue.
type ResumeWorkflow struct {
	WorkflowID  string   `msgpack:"workflow_id,omitempty"`
	WorkflowIDs []string `msgpack:"workflow_ids,omitempty"`
	QueueName   string   `msgpack:"queue_name,omitempty"`
}

// GetWorkflow asks for one workflow's status.
type GetWorkflow struct {
	WorkflowID   string `msgpack:"workflow_id"`
	LoadPayloads bool   `msgpack:"load_payloads,omitempty"`
	// CheckOwnerXID asks whether this owner token still owns the workflow
	// (the reply's OwnerMatches), without revealing the owner: a data
	// source's fencing check (DBOS TypeScript's assertStillOwnsWorkflow).
	CheckOwnerXID string `msgpack:"check_owner_xid,omitempty"`
}

// WorkflowInfo is a workflow's status as DBOS lists it.
type WorkflowInfo struct {
	WorkflowID        string  `msgpack:"workflow_id"`
	Status            string  `msgpack:"status"`
	Name              string  `msgpack:"name"`
	ClassName         string  `msgpack:"class_name,omitempty"`
	ConfigName        string  `msgpack:"config_name,omitempty"`
	QueueName         string  `msgpack:"queue_name,omitempty"`
	ExecutorID        string  `msgpack:"executor_id,omitempty"`
	AppVersion        string  `msgpack:"app_version,omitempty"`
	AppName           string  `msgpack:"app_name,omitempty"`
	AuthenticatedUser string  `msgpack:"authenticated_user,omitempty"`
	CreatedAtMS       int64   `msgpack:"created_at_epoch_ms"`
	UpdatedAtMS       int64   `msgpack:"updated_at_epoch_ms"`
	StartedAtMS       int64   `msgpack:"started_at_epoch_ms,omitempty"`
	CompletedAtMS     int64   `msgpack:"completed_at_epoch_ms,omitempty"`
	RecoveryAttempts  int64   `msgpack:"recovery_attempts"`
	TimeoutMS         int64   `msgpack:"timeout_ms,omitempty"`
	DeadlineEpochMS   int64   `msgpack:"deadline_epoch_ms,omitempty"`
	Priority          int     `msgpack:"priority,omitempty"`
	DeduplicationID   string  `msgpack:"deduplication_id,omitempty"`
	PartitionKey      string  `msgpack:"partition_key,omitempty"`
	ParentWorkflowID  string  `msgpack:"parent_workflow_id,omitempty"`
	ForkedFrom        string  `msgpack:"forked_from,omitempty"`
	WasForkedFrom     bool    `msgpack:"was_forked_from,omitempty"` // a fork was made of it
	Serialization     string  `msgpack:"serialization,omitempty"`
	Inputs            *string `msgpack:"inputs,omitempty"`
	Output            *string `msgpack:"output,omitempty"`
	Error             *string `msgpack:"error,omitempty"`
	Attributes        *string `msgpack:"attributes,omitempty"` // JSON object text
	DelayUntilEpochMS int64   `msgpack:"delay_until_epoch_ms,omitempty"`
	ScheduleName      string  `msgpack:"schedule_name,omitempty"`
	// AssumedRole and AuthenticatedRoles are DBOS's identity columns (the
	// roles stored as a JSON list).
	AssumedRole        string   `msgpack:"assumed_role,omitempty"`
	AuthenticatedRoles []string `msgpack:"authenticated_roles,omitempty"`
	// AppID is the stored application id; nil when none ("" is one).
	AppID *string `msgpack:"app_id,omitempty"`
	// OwnerMatches answers GetWorkflow.CheckOwnerXID: whether that token is
	// the workflow's owner now; nil when it was not asked.
	OwnerMatches *bool `msgpack:"owner_matches,omitempty"`
}

// ListWorkflows filters workflows; empty fields do not filter. Times are
// epoch milliseconds.
type ListWorkflows struct {
	WorkflowIDs []string `msgpack:"workflow_ids,omitempty"`
	IDPrefix    string   `msgpack:"workflow_id_prefix,omitempty"`
	Statuses    []string `msgpack:"status,omitempty"`
	Names       []string `msgpack:"name,omitempty"`
	QueueNames  []string `msgpack:"queue_name,omitempty"`
	QueuesOnly  bool     `msgpack:"queues_only,omitempty"`
	ExecutorIDs []string `msgpack:"executor_id,omitempty"`
	AppVersions []string `msgpack:"app_version,omitempty"`
	ParentIDs   []string `msgpack:"parent_workflow_id,omitempty"`
	// Users filters by DBOS's authenticated_user (list_workflows(user=)).
	Users       []string `msgpack:"user,omitempty"`
	StartTimeMS int64    `msgpack:"start_time,omitempty"`
	EndTimeMS   int64    `msgpack:"end_time,omitempty"`
	// IDPrefixes are more prefixes, any of which (or IDPrefix) matches
	// (DBOS takes a list of them).
	IDPrefixes    []string `msgpack:"workflow_id_prefixes,omitempty"`
	ForkedFrom    []string `msgpack:"forked_from,omitempty"`
	ScheduleNames []string `msgpack:"schedule_name,omitempty"`
	// ApplicationNames matches the rows these applications own and the
	// unclaimed ones (as DBOS's application_name filter).
	ApplicationNames []string `msgpack:"application_name,omitempty"`
	// Attributes is JSON object text: workflows whose attributes contain
	// it (jsonb containment, as DBOS queries them).
	Attributes *string `msgpack:"attributes,omitempty"`
	// WasForkedFrom, IsFork and HasParent filter when set: workflows a
	// fork was made from, forks themselves, children.
	WasForkedFrom *bool `msgpack:"was_forked_from,omitempty"`
	IsFork        *bool `msgpack:"is_fork,omitempty"`
	HasParent     *bool `msgpack:"has_parent,omitempty"`
	// CompletedAfterMS .. DequeuedBeforeMS bound completed_at and the
	// dequeue (start) instant, inclusive, epoch ms.
	CompletedAfterMS  int64 `msgpack:"completed_after,omitempty"`
	CompletedBeforeMS int64 `msgpack:"completed_before,omitempty"`
	DequeuedAfterMS   int64 `msgpack:"dequeued_after,omitempty"`
	DequeuedBeforeMS  int64 `msgpack:"dequeued_before,omitempty"`
	Limit             int   `msgpack:"limit,omitempty"`
	Offset            int   `msgpack:"offset,omitempty"`
	SortDesc          bool  `msgpack:"sort_desc,omitempty"`
	LoadInputs        bool  `msgpack:"load_input,omitempty"`
	LoadOutputs       bool  `msgpack:"load_output,omitempty"`
}

// ListWorkflowsReply lists workflows.
type ListWorkflowsReply struct {
	Workflows []WorkflowInfo `msgpack:"workflows"`
}

// ListStepsReply lists a workflow's steps.
type ListStepsReply struct {
	Steps []Step `msgpack:"steps"`
}

// CancelPush tells a worker a workflow it runs was cancelled.
type CancelPush struct {
	WorkflowID string `msgpack:"workflow_id"`
}

// Empty is the body of replies that carry nothing.
type Empty struct{}

// Stats asks for the agent's runtime figures (debugging, and the tests that
// check that what a connection held is released when it closes).
type Stats struct {
	// FreeMemory collects garbage (twice, so that pooled buffers go too)
	// and returns freed memory to the operating system first (at most once
	// a second; MemoryFreed says whether it ran).
	FreeMemory bool `msgpack:"free_memory,omitempty"`
}

// StatsReply is the agent's runtime figures.
type StatsReply struct {
	// Goroutines is the agent process's goroutine count; EngineGoroutines
	// those its engine started (request handlers, services, hand-backs:
	// the ones a client can make it hold), without the database driver's
	// and the transport's.
	Goroutines       int `msgpack:"goroutines"`
	EngineGoroutines int `msgpack:"engine_goroutines"`
	// Sessions is the connections with a session, this one included.
	Sessions int `msgpack:"sessions"`
	// HeapAllocBytes is the bytes of live (and not yet collected) heap
	// objects; HeapSysBytes the heap memory obtained from the system, of
	// which HeapReleasedBytes has been returned to it; SysBytes all memory
	// obtained from the system (Go's runtime.MemStats).
	HeapAllocBytes    uint64 `msgpack:"heap_alloc_bytes"`
	HeapSysBytes      uint64 `msgpack:"heap_sys_bytes"`
	HeapReleasedBytes uint64 `msgpack:"heap_released_bytes"`
	SysBytes          uint64 `msgpack:"sys_bytes"`
	NumGC             uint32 `msgpack:"num_gc"`
	MemoryFreed       bool   `msgpack:"memory_freed"`
}

// RegisterQueues adds queues a worker serves after its hello (DBOS Python
// declares queues after launch). It is Register with queues only, kept for
// the bindings that send it.
type RegisterQueues struct {
	Queues []QueueRegistration `msgpack:"queues"`
	// ApplicationName, from a client only, owns the queues instead of the
	// client's application (DBOS's DBOSClient.register_queue
	// application_name).
	ApplicationName string `msgpack:"application_name,omitempty"`
}

// Register adds workflow functions and queues to a worker after its hello
// (DBOS Python declares workflows, queues and scheduled workflows at any
// time, after launch too): from then on the agent dispatches to them as if
// the hello had announced them. A new op rather than a field of
// register_queues: an agent that does not know it answers unknown_op,
// where it would ignore an unknown field and leave the workflows
// unregistered without a word.
type Register struct {
	Workflows []WorkflowRegistration `msgpack:"workflows,omitempty"`
	Queues    []QueueRegistration    `msgpack:"queues,omitempty"`
}

// DebounceWorkflow starts a workflow after DelayMS of quiet: repeated calls
// with the same Key push the start back and replace its inputs, until
// TimeoutMS after the first call.
type DebounceWorkflow struct {
	Key           string  `msgpack:"key"`
	Name          string  `msgpack:"name"`
	ClassName     string  `msgpack:"class_name,omitempty"`
	QueueName     string  `msgpack:"queue_name,omitempty"` // default the internal queue
	DelayMS       int64   `msgpack:"delay_ms"`
	TimeoutMS     int64   `msgpack:"timeout_ms,omitempty"` // 0 = no cap
	Inputs        *string `msgpack:"inputs"`
	Serialization string  `msgpack:"serialization"`
	// WorkflowID names the workflow a first call creates (default a UUID).
	WorkflowID   string `msgpack:"workflow_id,omitempty"`
	AppVersion   string `msgpack:"app_version,omitempty"`
	Priority     int    `msgpack:"priority,omitempty"`
	PartitionKey string `msgpack:"partition_key,omitempty"`
	// The identity a first call records with the workflow, as
	// start_workflow records it (a bounce keeps the stored one).
	AuthenticatedUser  string   `msgpack:"authenticated_user,omitempty"`
	AssumedRole        string   `msgpack:"assumed_role,omitempty"`
	AuthenticatedRoles []string `msgpack:"authenticated_roles,omitempty"`
	// WorkflowTimeoutMS is the created workflow's own timeout (its
	// deadline starts when it is dequeued). First call only. A debounced
	// workflow never inherits its caller's deadline (DBOS's rule: it would
	// be cancelled before its delay ends).
	WorkflowTimeoutMS int64 `msgpack:"workflow_timeout_ms,omitempty"`
	// Caller, from workflow code, makes the debounce the caller's step
	// (and a created workflow its child, at the next step).
	Caller *Caller `msgpack:"caller,omitempty"`
	// Attributes (JSON object text) are recorded with the workflow a first
	// call creates, as DBOS's enqueue records them; a bounce keeps the
	// stored ones.
	Attributes *string `msgpack:"attributes,omitempty"`
	// ApplicationName owns the workflow a first call creates, and scopes
	// the key's bounce, when it names another application than the
	// caller's (DBOS's Debouncer application_name); app_version then
	// defaults to none.
	ApplicationName string `msgpack:"application_name,omitempty"`
	// DeduplicationID is the key's deduplication id as the SDK the binding
	// mirrors forms it, so a bounce meets that SDK's pending workflow
	// (default "<name>-<key>", DBOS Python's; DBOS TypeScript's is
	// "<class_name>.<name>-<key>").
	DeduplicationID string `msgpack:"deduplication_id,omitempty"`
	// StepName is the caller's step name (default
	// "DBOS.debounce_delayed_workflow", DBOS Python's; DBOS TypeScript's
	// is "DBOS.debounceDelayedWorkflow").
	StepName string `msgpack:"step_name,omitempty"`
}

// DebounceWorkflowReply names the debounced workflow.
type DebounceWorkflowReply struct {
	WorkflowID string `msgpack:"workflow_id"`
	// Bounced is true when an existing workflow was pushed back, false
	// when this call created it.
	Bounced bool `msgpack:"bounced"`
}

// SetWorkflowDelay moves a DELAYED workflow's release time.
type SetWorkflowDelay struct {
	WorkflowID        string `msgpack:"workflow_id"`
	DelayUntilEpochMS int64  `msgpack:"delay_until_epoch_ms"`
}

// SetWorkflowPriority changes the priority of a workflow still waiting on
// its queue (ENQUEUED or DELAYED), as DBOS TypeScript's setWorkflowPriority.
type SetWorkflowPriority struct {
	WorkflowID string `msgpack:"workflow_id"`
	Priority   int    `msgpack:"priority"`
}

// SetWorkflowPriorityReply says whether the priority changed: false when the
// workflow does not exist or no longer waits (DBOS leaves those alone).
type SetWorkflowPriorityReply struct {
	Applied bool `msgpack:"applied"`
}

// QueueRef names a queue.
type QueueRef struct {
	Name string `msgpack:"name"`
}

// QueueInfo is a queue's registration and load.
type QueueInfo struct {
	Name                        string   `msgpack:"name"`
	Registered                  bool     `msgpack:"registered"`
	Concurrency                 *int     `msgpack:"concurrency,omitempty"`
	WorkerConcurrency           *int     `msgpack:"worker_concurrency,omitempty"`
	RateLimitMax                *int     `msgpack:"rate_limit_max,omitempty"`
	RateLimitPeriodSec          *float64 `msgpack:"rate_limit_period_sec,omitempty"`
	PriorityEnabled             bool     `msgpack:"priority_enabled,omitempty"`
	PartitionQueue              bool     `msgpack:"partition_queue,omitempty"`
	PartitionConcurrency        *int     `msgpack:"partition_concurrency,omitempty"`
	PartitionWorkerConcurrency  *int     `msgpack:"partition_worker_concurrency,omitempty"`
	PartitionRateLimitMax       *int     `msgpack:"partition_rate_limit_max,omitempty"`
	PartitionRateLimitPeriodSec *float64 `msgpack:"partition_rate_limit_period_sec,omitempty"`
	// PollingIntervalSec is the row's polling interval (for the SDKs'
	// pollers).
	PollingIntervalSec float64 `msgpack:"polling_interval_sec,omitempty"`
	Enqueued           int64   `msgpack:"enqueued"`
	Pending            int64   `msgpack:"pending"`
	Delayed            int64   `msgpack:"delayed"`
	// ApplicationName is the application that registered the queue (none:
	// unclaimed, or not registered).
	ApplicationName string `msgpack:"application_name,omitempty"`
}

// ListQueues filters list_queues.
type ListQueues struct {
	// ApplicationNames lists the queues these applications own and the
	// unclaimed ones (DBOS's application_name filter); absent: every queue.
	ApplicationNames []string `msgpack:"application_name,omitempty"`
}

// ListQueuesReply lists queues.
type ListQueuesReply struct {
	Queues []QueueInfo `msgpack:"queues"`
}

// Schedule is a cron schedule of a workflow.
type Schedule struct {
	ScheduleName      string `msgpack:"schedule_name"`
	WorkflowName      string `msgpack:"workflow_name"`
	WorkflowClassName string `msgpack:"workflow_class_name,omitempty"`
	// Cron has 5 fields, or 6 with seconds first.
	Cron string `msgpack:"schedule"`
	// Context is handed to every run (JSON text; the binding's own
	// serialization is kept as is).
	Context           string `msgpack:"context,omitempty"`
	Status            string `msgpack:"status,omitempty"` // ACTIVE or PAUSED
	AutomaticBackfill bool   `msgpack:"automatic_backfill,omitempty"`
	CronTimezone      string `msgpack:"cron_timezone,omitempty"`
	QueueName         string `msgpack:"queue_name,omitempty"`
	// LastFiredAt is ISO 8601: the latest tick fired. create_schedule
	// keeps a given one (a binding re-creating a schedule whose definition
	// changed keeps its latest tick, as DBOS's update does).
	LastFiredAt string `msgpack:"last_fired_at,omitempty"`
	// ApplicationName owns the schedule: in create_schedule, from a client
	// only, another application than the caller's (DBOSClient's
	// application_name); in replies, the stored owner (none: unclaimed).
	ApplicationName string `msgpack:"application_name,omitempty"`
	// ScheduleID is the row's id; create_schedule gives the row a given
	// one (else a fresh uuid).
	ScheduleID string `msgpack:"schedule_id,omitempty"`
}

// ScheduleRef names a schedule.
type ScheduleRef struct {
	ScheduleName string `msgpack:"schedule_name"`
}

// ListSchedules filters schedules.
type ListSchedules struct {
	Statuses      []string `msgpack:"status,omitempty"`
	WorkflowNames []string `msgpack:"workflow_name,omitempty"`
	NamePrefix    string   `msgpack:"schedule_name_prefix,omitempty"`
	// ApplicationNames lists these applications' schedules and the
	// unclaimed ones instead of the caller's application's.
	ApplicationNames []string `msgpack:"application_name,omitempty"`
	// AllApplications lists every application's schedules (DBOS's
	// application_name=[]).
	AllApplications bool `msgpack:"all_applications,omitempty"`
}

// ListSchedulesReply lists schedules.
type ListSchedulesReply struct {
	Schedules []Schedule `msgpack:"schedules"`
}

// BackfillSchedule enqueues the ticks strictly after StartEpochMS and before
// EndEpochMS, as the DBOS SDKs backfill.
type BackfillSchedule struct {
	ScheduleName string `msgpack:"schedule_name"`
	StartEpochMS int64  `msgpack:"start_epoch_ms"`
	EndEpochMS   int64  `msgpack:"end_epoch_ms"`
}

// WorkflowIDs lists workflow ids.
type WorkflowIDs struct {
	WorkflowIDs []string `msgpack:"workflow_ids"`
}

// VersionInfo is one application version.
type VersionInfo struct {
	VersionID   string `msgpack:"version_id"`
	VersionName string `msgpack:"version_name"`
	TimestampMS int64  `msgpack:"version_timestamp"`
	CreatedAtMS int64  `msgpack:"created_at"`
	// ApplicationName registered the version (none: unclaimed).
	ApplicationName string `msgpack:"application_name,omitempty"`
}

// ListVersionsReply lists versions, the latest first.
type ListVersionsReply struct {
	Versions []VersionInfo `msgpack:"versions"`
}

// VersionRef names a version.
type VersionRef struct {
	VersionName string `msgpack:"version_name"`
	// ApplicationName, in promote_version, acts for that application
	// instead of the caller's (DBOS's set_latest_application_version
	// application_name).
	ApplicationName string `msgpack:"application_name,omitempty"`
}

// RenameApplication re-owns rows of the system database (DBOS's
// DBOSClient.rename_application).
type RenameApplication struct {
	// OldName is the application whose rows move (absent: none, only the
	// unclaimed ones, which needs AdoptUnclaimedRows).
	OldName string `msgpack:"old_name,omitempty"`
	NewName string `msgpack:"new_name"`
	// BatchSize bounds the terminal workflows one transaction moves; 0:
	// all in one.
	BatchSize          int  `msgpack:"batch_size,omitempty"`
	AdoptUnclaimedRows bool `msgpack:"adopt_unclaimed_rows,omitempty"`
}

// RenameApplicationReply counts the rows a rename moved, by table.
type RenameApplicationReply struct {
	Queues    int64 `msgpack:"queues"`
	Schedules int64 `msgpack:"schedules"`
	Versions  int64 `msgpack:"versions"`
	Workflows int64 `msgpack:"workflows"`
	Steps     int64 `msgpack:"steps"`
}
