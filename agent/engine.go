package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The engine API: one typed method per operation (StartWorkflow,
// RecordStep, Finish, ...), params in, result and error out. The methods
// hold the policy: what a request means, what it decides, what it stores
// and whom it wakes. The socket's sessions (ops.go), the operator CLI and
// the C library all drive these same methods; none of them re-implements
// an operation against the database.
//
// Errors are the sysdb error types (not found, conflict, fenced, ...) and
// the engine's own below, so that a caller branches with errors.As; the
// session adapter maps every one of them to the protocol's catalog in one
// place (Session.protocolError).

// Caller is who makes a request: the application it acts for and, for a
// worker's session, the worker, so that a workflow the worker starts to run
// itself is claimed for it. The CLI and a library caller pass the
// application they act for (or none) and no worker.
type Caller struct {
	// App is the caller's application name ("" none): the default owner
	// of what it creates and the scope of what it lists.
	App string
	// Version is the caller's application version ("" none): the default
	// version of the workflows it starts.
	Version string
	// Worker says the caller is a worker process (it registered functions
	// and serves queues); a client's requests never run anything itself.
	Worker bool
	// WakeTimeFormat is how the caller's durable sleeps and its waits'
	// deadlines record their wake time: as its SDK reads one back.
	WakeTimeFormat sysdb.WakeTimeFormat
	// session is the worker's session, which a run the caller takes itself
	// is tracked under; nil outside a session.
	session *Session
}

func (c Caller) group() groupKey { return groupKey{app: c.App, version: c.Version} }

// StepRef is the place in a running workflow an operation is recorded at:
// the run (its workflow and the owner token of its claim) and the step's
// function id. InStep says the operation is made from inside a step.
type StepRef struct {
	WorkflowID string
	OwnerXID   string
	FunctionID int
	InStep     bool
}

// InvalidArgumentError is a request the engine refuses for what it says
// (a missing name, a negative timeout, a policy it does not know): the
// caller's to fix, never worth a retry.
type InvalidArgumentError struct{ Message string }

func (e *InvalidArgumentError) Error() string { return e.Message }

func invalidf(format string, args ...any) error {
	return &InvalidArgumentError{Message: fmt.Sprintf(format, args...)}
}

// WorkflowCancelledError answers a write made for a run whose workflow was
// cancelled: the run is to stop as cancelled, not as a zombie.
type WorkflowCancelledError struct{ WorkflowID string }

func (e *WorkflowCancelledError) Error() string {
	return fmt.Sprintf("workflow %s was cancelled", e.WorkflowID)
}

// ShuttingDownError refuses new work while the agent drains, or a request
// of a session that is closing.
type ShuttingDownError struct{ Message string }

func (e *ShuttingDownError) Error() string { return e.Message }

var errDraining = &ShuttingDownError{Message: "the agent is shutting down"}

// WorkflowsNotFoundError names the workflows of a request (resume) that do
// not exist, each once, in the request's order.
type WorkflowsNotFoundError struct{ WorkflowIDs []string }

func (e *WorkflowsNotFoundError) Error() string {
	if len(e.WorkflowIDs) == 1 {
		return fmt.Sprintf("workflow %s does not exist", e.WorkflowIDs[0])
	}
	return fmt.Sprintf("workflows %s do not exist", strings.Join(e.WorkflowIDs, ", "))
}

// DebounceKeyHeldError refuses a debounce whose key (its deduplication id on
// the queue) is held by a workflow that is not a pending debounce.
type DebounceKeyHeldError struct {
	Key, Name, HolderID, QueueName, DeduplicationID string
}

func (e *DebounceKeyHeldError) Error() string {
	return fmt.Sprintf("debounce key %q of %s is held by workflow %s, which is not a pending debounce", e.Key, e.Name, e.HolderID)
}

// ContentionError is an operation that lost a race too many times in a row
// (a debounce key changing hands); trying again may succeed.
type ContentionError struct{ Message string }

func (e *ContentionError) Error() string { return e.Message }

// QueueRegistrationError is a queue registration the database could not
// store (not one it refused: that is an InvalidArgumentError).
type QueueRegistrationError struct{ Err error }

func (e *QueueRegistrationError) Error() string {
	return "register queues: " + sysdb.Redact(e.Err.Error())
}

func (e *QueueRegistrationError) Unwrap() error { return e.Err }

// NewOneShot returns an engine for a one-shot caller (an operator command):
// its methods work against the database at once, but it runs no services,
// so no recovery, pollers, sweeps, scheduler, rescuer or listener, and
// step records and outcomes are written directly rather than group-committed.
// Start refuses it; it holds no goroutine, so it needs no Shutdown.
func NewOneShot(cfg Config) (*Agent, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	a.oneShot = true
	return a, nil
}

// recordStep checkpoints a step: group-committed by the batcher, or
// directly for a one-shot engine.
func (a *Agent) recordStep(ctx context.Context, p sysdb.StepRecordParams) error {
	if a.oneShot {
		return a.db.StepRecord(ctx, p)
	}
	return a.steps.record(ctx, p)
}

func (a *Agent) finishWorkflow(ctx context.Context, p sysdb.WorkflowFinishParams) (sysdb.WorkflowFinishResult, error) {
	if a.oneShot {
		return a.db.WorkflowFinish(ctx, p)
	}
	return a.finishes.write(ctx, p)
}

// stepCaller checks where in a run an operation is made and turns it into
// the database's form.
func stepCaller(op string, c Caller, r StepRef) (sysdb.StepCaller, error) {
	if err := required(op, "caller.workflow_id", r.WorkflowID, "caller.owner_xid", r.OwnerXID); err != nil {
		return sysdb.StepCaller{}, err
	}
	// Function ids start where the SDK a binding mirrors starts them: 1 in
	// DBOS Python, 0 in DBOS TypeScript (PROTOCOL.md 2.3).
	if err := checkFunctionID(op, "caller.function_id", r.FunctionID); err != nil {
		return sysdb.StepCaller{}, err
	}
	return sysdb.StepCaller{
		WorkflowID:      r.WorkflowID,
		OwnerXID:        r.OwnerXID,
		FunctionID:      r.FunctionID,
		InStep:          r.InStep,
		ApplicationName: optional(c.App),
	}, nil
}

// checkFunctionID bounds a step id: from 0 (DBOS TypeScript numbers its
// steps from 0, DBOS Python from 1) to 2^31-1 (the DBOS schema stores it as
// a 32-bit integer).
func checkFunctionID(op, field string, id int) error {
	if id < 0 || id > math.MaxInt32 {
		return invalidf("%s: %s must be from 0 to 2^31-1", op, field)
	}
	return nil
}

// required checks (field name, value) pairs, in order: the first empty value
// is the error.
func required(op string, fieldsAndValues ...string) error {
	for i := 0; i+1 < len(fieldsAndValues); i += 2 {
		if fieldsAndValues[i+1] == "" {
			return invalidf("%s: %s is required", op, fieldsAndValues[i])
		}
	}
	return nil
}

// runFailed is the answer to a write made on behalf of a run that failed.
// A fenced write ends the run here; when the fence was a cancellation the
// run is told so (WorkflowCancelledError), to stop as cancelled rather than
// as a zombie.
func (a *Agent) runFailed(ctx context.Context, workflowID, ownerXID string, err error) error {
	var fenced *sysdb.FencedError
	if errors.As(err, &fenced) {
		a.endRun(workflowID, ownerXID)
		if wf, gerr := a.db.WorkflowGet(ctx, workflowID); gerr == nil && wf.Status == sysdb.StatusCancelled {
			return &WorkflowCancelledError{WorkflowID: workflowID}
		}
	}
	return err
}

// Durations and instants cross the wire as milliseconds; these convert
// them for the engine's params, 0 meaning none.

// millis is a duration of ms milliseconds, saturating rather than
// overflowing for a value past what a time.Duration holds (292 years).
func millis(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > most:
		return math.MaxInt64
	case ms < -most:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// epochMillis is the instant ms milliseconds after the Unix epoch; 0 is the
// zero time (none).
func epochMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// epochMS is an instant as epoch milliseconds, 0 for the zero time.
func epochMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// optionalEpoch is an instant as epoch milliseconds, nil for the zero
// time.
func optionalEpoch(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// negativeEpoch reports whether t is set and before the Unix epoch.
func negativeEpoch(t time.Time) bool { return !t.IsZero() && t.UnixMilli() < 0 }

// optionalDuration is d in milliseconds, nil when d is 0.
func optionalDuration(d time.Duration) *int64 {
	if d == 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// draining refuses new work while the agent shuts down.
func (a *Agent) refuseWhileDraining() error {
	if a.draining.Load() {
		return errDraining
	}
	return nil
}

// queueOrInternal is the queue a workflow waits on: the one named, or the
// internal queue.
func queueOrInternal(queue string) string {
	if queue == "" {
		return sysdb.InternalQueueName
	}
	return queue
}

// payloadsCleared is wf without its inputs, output and error.
func payloadsCleared(wf sysdb.Workflow) sysdb.Workflow {
	wf.Inputs, wf.Output, wf.Error = nil, nil, nil
	return wf
}
