package protocol

import "fmt"

// Code is a stable numeric error code. Codes are never renumbered or reused;
// bindings map them to their language's exceptions (DBOS names in DBOSName).
type Code uint16

// The error catalog. testdata/error_codes.json is generated from it (see
// TestErrorCatalogFile) and the Python and Node bindings check their copies
// against that file, so the three cannot drift.
const (
	// Transport and request errors (1xx): the request was not understood.
	CodeInternal          Code = 100 // the agent failed; the request may be retried
	CodeMalformedFrame    Code = 101 // not valid msgpack or not a protocol envelope
	CodeFrameTooLarge     Code = 102 // frame larger than the agreed maximum; the connection closes
	CodeUnknownOp         Code = 103 // op not known to this protocol version
	CodeInvalidArgument   Code = 104 // a field is missing, of the wrong type or out of range
	CodeVersionMismatch   Code = 105 // no protocol version in common; the connection closes
	CodeHandshakeNeeded   Code = 106 // a request came before hello, or hello came twice
	CodeShuttingDown      Code = 107 // the agent is draining and takes no new work
	CodeDatabaseDown      Code = 108 // the system database is unreachable; retry later
	CodeNotRegistered     Code = 109 // no connected worker of the application can run that workflow
	CodePermissionDenied  Code = 110 // the peer may not use this agent
	CodeRequestCancelled  Code = 111 // the peer cancelled the request (cancel_request)
	CodeResourceExhausted Code = 112 // a limit of the agent was reached (connections); retry later

	// Workflow errors (2xx): the request was understood and refused.
	CodeWorkflowNotFound   Code = 200 // no workflow with that id
	CodeWorkflowConflict   Code = 201 // the id is taken by a workflow of another name, class, config or queue
	CodeDeduplicated       Code = 202 // the queue already has an active workflow with that deduplication id
	CodeFenced             Code = 203 // this run no longer owns the workflow (recovered elsewhere or finished)
	CodeWorkflowCancelled  Code = 204 // the workflow was cancelled; stop at this step
	CodeUnexpectedStep     Code = 205 // a different step is recorded at this id: non-deterministic workflow
	CodeStepConflict       Code = 206 // this step id was recorded with a different outcome
	CodeTimeout            Code = 207 // the wait ended before the condition held
	CodeMaxRecoveryAttempt Code = 208 // the workflow passed its maximum recovery attempts
	CodeStreamClosed       Code = 209 // reserved: no longer answered (a write after a stream's close is accepted, as DBOS Python 3.4 accepts it)
	CodeWorkflowActive     Code = 210 // the operation needs a workflow that has ended (cancel it first)
	CodeWorkflowIDInUse    Code = 211 // workflow_id_reuse_policy "reject": the id names an existing workflow
)

// CodeInfo describes one code for the catalog.
type CodeInfo struct {
	Code Code `json:"code"`
	// Name is the protocol's snake_case name of the error.
	Name string `json:"name"`
	// DBOSName is the exception DBOS SDKs raise for it, which bindings
	// mirror ("" where DBOS has none).
	DBOSName string `json:"dbos_name"`
	// Retryable says the same request may succeed later.
	Retryable bool `json:"retryable"`
	// CloseConnection says the agent closes the connection after sending it.
	CloseConnection bool   `json:"close_connection"`
	Doc             string `json:"doc"`
}

// Catalog lists every code in numeric order.
var Catalog = []CodeInfo{
	{CodeInternal, "internal", "DBOSException", true, false, "the agent failed; the request may be retried"},
	{CodeMalformedFrame, "malformed_frame", "", false, false, "not valid msgpack or not a protocol envelope"},
	{CodeFrameTooLarge, "frame_too_large", "", false, true, "frame larger than the agreed maximum"},
	{CodeUnknownOp, "unknown_op", "", false, false, "op not known to this protocol version"},
	{CodeInvalidArgument, "invalid_argument", "DBOSException", false, false, "a field is missing, of the wrong type or out of range"},
	{CodeVersionMismatch, "version_mismatch", "", false, true, "no protocol version in common"},
	{CodeHandshakeNeeded, "handshake_needed", "", false, false, "a request came before hello, or hello came twice"},
	{CodeShuttingDown, "shutting_down", "", true, false, "the agent is draining and takes no new work"},
	{CodeDatabaseDown, "database_unavailable", "DBOSException", true, false, "the system database is unreachable"},
	{CodeNotRegistered, "not_registered", "DBOSWorkflowFunctionNotFoundError", false, false, "no connected worker of the application can run that workflow"},
	{CodePermissionDenied, "permission_denied", "", false, true, "the peer may not use this agent"},
	{CodeRequestCancelled, "request_cancelled", "", false, false, "the peer cancelled the request"},
	{CodeResourceExhausted, "resource_exhausted", "", true, true, "a limit of the agent was reached (its connections, or one user's); retry later"},
	{CodeWorkflowNotFound, "workflow_not_found", "DBOSNonExistentWorkflowError", false, false, "no workflow with that id"},
	{CodeWorkflowConflict, "workflow_conflict", "DBOSConflictingWorkflowError", false, false, "the id is taken by a workflow of another name, class, config or queue"},
	{CodeDeduplicated, "deduplicated", "DBOSQueueDeduplicatedError", false, false, "the queue already has an active workflow with that deduplication id"},
	{CodeFenced, "fenced", "DBOSWorkflowConflictIDError", false, false, "this run no longer owns the workflow"},
	{CodeWorkflowCancelled, "workflow_cancelled", "DBOSWorkflowCancelledError", false, false, "the workflow was cancelled"},
	{CodeUnexpectedStep, "unexpected_step", "DBOSUnexpectedStepError", false, false, "a different step is recorded at this id"},
	{CodeStepConflict, "step_conflict", "DBOSStepNondeterminismError", false, false, "this step id was recorded with a different outcome"},
	{CodeTimeout, "timeout", "", true, false, "the wait ended before the condition held"},
	{CodeMaxRecoveryAttempt, "max_recovery_attempts_exceeded", "MaxRecoveryAttemptsExceededError", false, false, "the workflow passed its maximum recovery attempts"},
	{CodeStreamClosed, "stream_closed", "DBOSException", false, false, "reserved: no longer answered; a write after a stream's close is accepted and never read"},
	{CodeWorkflowActive, "workflow_active", "DBOSException", false, false, "the operation needs a workflow that has ended"},
	{CodeWorkflowIDInUse, "workflow_id_in_use", "DBOSWorkflowIDInUseError", false, false, "the id names an existing workflow (workflow_id_reuse_policy reject)"},
}

var catalogByCode = func() map[Code]CodeInfo {
	m := make(map[Code]CodeInfo, len(Catalog))
	for _, c := range Catalog {
		m[c.Code] = c
	}
	return m
}()

// Info returns the catalog entry of c.
func (c Code) Info() (CodeInfo, bool) {
	info, ok := catalogByCode[c]
	return info, ok
}

// String is the code's snake_case name.
func (c Code) String() string {
	if info, ok := catalogByCode[c]; ok {
		return info.Name
	}
	return fmt.Sprintf("code_%d", uint16(c))
}

// Error is the error part of a response: a catalog code, its name and a
// human-readable message.
type Error struct {
	Code    Code   `msgpack:"code"`
	Name    string `msgpack:"name"`
	Message string `msgpack:"message"`
	// Data carries code-specific details (for workflow_conflict the stored
	// name, for fenced the stored status, ...); may be empty.
	Data map[string]any `msgpack:"data,omitempty"`
}

// Errorf builds an Error of code c.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Name: c.String(), Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.Name + ": " + e.Message }
