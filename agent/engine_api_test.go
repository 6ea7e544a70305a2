package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// These tests call the engine's methods directly, as the CLI and the C
// library do, against a real PostgreSQL: the policy (what is refused, what
// is decided, what is stored) without a frame in between.

var client = Caller{App: "engine", Version: "v1"}

// requireInvalid checks err is an InvalidArgumentError saying want.
func requireInvalid(t *testing.T, err error, want string) {
	t.Helper()
	var invalid *InvalidArgumentError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, want, invalid.Message)
}

// runner is a connected worker of function name and the Caller its session
// makes requests as.
func runner(t *testing.T, a *Agent, name string) Caller {
	t.Helper()
	p := connect(t, a, workerHello(name))
	return p.s.caller()
}

// startHere starts a workflow the worker runs itself and returns its grant.
func startHere(t *testing.T, a *Agent, worker Caller, id, name string) *protocol.Run {
	t.Helper()
	res, err := a.StartWorkflow(t.Context(), worker, StartWorkflowParams{WorkflowID: id, Name: name, Inputs: str(`[]`),
		Serialization: "portable_json", RunHere: true})
	require.NoError(t, err)
	require.True(t, res.Created)
	require.Equal(t, sysdb.StatusPending, res.Status)
	require.NotNil(t, res.Run, "a worker that registered the function runs its direct start")
	return res.Run
}

func TestEngineStartWorkflowRefusesWhatItCannotMean(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	for _, c := range []struct {
		p    StartWorkflowParams
		want string
	}{
		{StartWorkflowParams{}, "start_workflow: name is required"},
		{StartWorkflowParams{Name: "w", Timeout: -time.Millisecond}, "start_workflow: timeout_ms, deadline_epoch_ms and delay_ms must not be negative"},
		{StartWorkflowParams{Name: "w", Deadline: time.UnixMilli(-1)}, "start_workflow: timeout_ms, deadline_epoch_ms and delay_ms must not be negative"},
		{StartWorkflowParams{Name: "w", Delay: -time.Second}, "start_workflow: timeout_ms, deadline_epoch_ms and delay_ms must not be negative"},
		{StartWorkflowParams{Name: "w", DeduplicationPolicy: "drop"}, `start_workflow: deduplication_policy must be "reject" or "return_existing"`},
		{StartWorkflowParams{Name: "w", WorkflowIDReusePolicy: "maybe"}, `start_workflow: workflow_id_reuse_policy must be "return-existing" or "reject"`},
		{StartWorkflowParams{Name: "w", Parent: &StepRef{WorkflowID: "p", OwnerXID: "o", FunctionID: -1}}, "start_workflow: caller.function_id must be from 0 to 2^31-1"},
		{StartWorkflowParams{Name: "w", Parent: &StepRef{OwnerXID: "o", FunctionID: 1}}, "start_workflow: caller.workflow_id is required"},
	} {
		_, err := a.StartWorkflow(ctx, client, c.p)
		requireInvalid(t, err, c.want)
	}
	_, err := a.StartWorkflow(ctx, client, StartWorkflowParams{Name: "w", Attributes: str(`[1]`)})
	var invalid *InvalidArgumentError
	require.ErrorAs(t, err, &invalid, "attributes must be a JSON object")
	require.Contains(t, invalid.Message, "start_workflow.attributes")

	wfs, err := a.ListWorkflows(ctx, ListWorkflowsParams{})
	require.NoError(t, err)
	require.Empty(t, wfs, "a refused start writes nothing")
}

func TestEngineStartWorkflowIsIdempotentAndRefusesAConflictingStart(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	p := StartWorkflowParams{WorkflowID: "idem", Name: "w", Inputs: str(`[1]`), Serialization: "portable_json", QueueName: "q"}
	first, err := a.StartWorkflow(ctx, client, p)
	require.NoError(t, err)
	require.Equal(t, StartWorkflowResult{WorkflowID: "idem", Status: sysdb.StatusEnqueued, Created: true}, first)

	again, err := a.StartWorkflow(ctx, client, p)
	require.NoError(t, err)
	require.Equal(t, StartWorkflowResult{WorkflowID: "idem", Status: sysdb.StatusEnqueued, Created: false}, again,
		"the same start again finds the workflow")

	other := p
	other.Name = "another"
	_, err = a.StartWorkflow(ctx, client, other)
	var conflict *sysdb.ConflictingWorkflowError
	require.ErrorAs(t, err, &conflict, "the id names a workflow of another function")

	reject := p
	reject.WorkflowIDReusePolicy = protocol.ReuseReject
	_, err = a.StartWorkflow(ctx, client, reject)
	var inUse *sysdb.WorkflowIDInUseError
	require.ErrorAs(t, err, &inUse)
	require.Equal(t, "idem", inUse.WorkflowID)

	// Without an id the engine makes one; for no queue, the internal one.
	made, err := a.StartWorkflow(ctx, client, StartWorkflowParams{Name: "w"})
	require.NoError(t, err)
	require.Len(t, made.WorkflowID, 36)
	wf, err := a.GetWorkflow(ctx, GetWorkflowParams{WorkflowID: made.WorkflowID})
	require.NoError(t, err)
	require.Equal(t, sysdb.InternalQueueName, deref(wf.QueueName), "a client's direct start waits on the internal queue")
	require.Equal(t, "engine", deref(wf.ApplicationName))
	require.Equal(t, "v1", deref(wf.ApplicationVersion), "the caller's version by default")
}

func TestEngineStartWorkflowDeduplicates(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	p := StartWorkflowParams{WorkflowID: "d1", Name: "w", QueueName: "q", DeduplicationID: "key"}
	_, err := a.StartWorkflow(ctx, client, p)
	require.NoError(t, err)

	p.WorkflowID = "d2"
	_, err = a.StartWorkflow(ctx, client, p)
	var dedup *sysdb.DeduplicatedError
	require.ErrorAs(t, err, &dedup)
	require.Equal(t, "key", dedup.DeduplicationID)

	p.DeduplicationPolicy = protocol.DedupReturnExisting
	res, err := a.StartWorkflow(ctx, client, p)
	require.NoError(t, err)
	require.Equal(t, StartWorkflowResult{WorkflowID: "d1", Status: sysdb.StatusEnqueued}, res, "the holder of the id is returned")
}

func TestEngineRunsADirectStartOfAWorkerAndFencesAStaleRun(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	worker := runner(t, a, "w")
	run := startHere(t, a, worker, "here", "w")
	require.Equal(t, "here", run.WorkflowID)

	// A client's start of the same function is not run by the client.
	res, err := a.StartWorkflow(ctx, client, StartWorkflowParams{WorkflowID: "there", Name: "w", RunHere: true})
	require.NoError(t, err)
	require.Nil(t, res.Run)
	require.Equal(t, sysdb.StatusEnqueued, res.Status)

	step := RecordStepParams{WorkflowID: "here", OwnerXID: run.OwnerXID, FunctionID: 1, Name: "s", Output: str(`1`),
		Serialization: "portable_json", StartedAt: time.UnixMilli(1000), CompletedAt: time.UnixMilli(2000)}
	require.NoError(t, a.RecordStep(ctx, worker, step))
	steps, err := a.ListSteps(ctx, "here")
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, int64(1000), derefInt(steps[0].StartedAt))
	require.Equal(t, int64(2000), derefInt(steps[0].CompletedAt))

	stale := step
	stale.FunctionID, stale.OwnerXID = 2, "not-the-owner"
	var fenced *sysdb.FencedError
	require.ErrorAs(t, a.RecordStep(ctx, worker, stale), &fenced, "only the run that owns the workflow records its steps")

	requireInvalid(t, a.RecordStep(ctx, worker, RecordStepParams{WorkflowID: "here", OwnerXID: "o"}), "record_step: name is required")
	requireInvalid(t, a.RecordStep(ctx, worker, RecordStepParams{WorkflowID: "here", OwnerXID: "o", Name: "s", FunctionID: -1}),
		"record_step: function_id must be from 0 to 2^31-1")
	requireInvalid(t, a.RecordStep(ctx, worker, RecordStepParams{WorkflowID: "here", OwnerXID: "o", Name: "s", FunctionID: 1 << 31}),
		"record_step: function_id must be from 0 to 2^31-1")

	// Cancelled, the run's next step is told so, not merely fenced.
	cancelled, err := a.Cancel(ctx, CancelParams{WorkflowID: "here"})
	require.NoError(t, err)
	require.Equal(t, []string{"here"}, cancelled)
	step.FunctionID = 2
	var gone *WorkflowCancelledError
	require.ErrorAs(t, a.RecordStep(ctx, worker, step), &gone)
	require.Equal(t, "workflow here was cancelled", gone.Error())
}

func TestEngineFinishStoresTheOutcomeOnceAndWakesItsWaiters(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	worker := runner(t, a, "w")
	run := startHere(t, a, worker, "fin", "w")

	_, err := a.Finish(ctx, FinishParams{WorkflowID: "fin", OwnerXID: run.OwnerXID, Status: sysdb.StatusPending})
	requireInvalid(t, err, "finish: status must be SUCCESS or ERROR")

	// A waiter with a timeout gives up with the deadline's error.
	_, err = a.GetResult(ctx, GetResultParams{WorkflowID: "fin", Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	waited := make(chan sysdb.Workflow, 1)
	go func() {
		wf, err := a.GetResult(ctx, GetResultParams{WorkflowID: "fin"})
		if err == nil {
			waited <- wf
		}
		close(waited)
	}()
	res, err := a.Finish(ctx, FinishParams{WorkflowID: "fin", OwnerXID: run.OwnerXID, Status: sysdb.StatusSuccess, Output: str(`"done"`)})
	require.NoError(t, err)
	require.True(t, res.Applied)
	wf, ok := <-waited
	require.True(t, ok, "the waiter gets the outcome")
	require.Equal(t, sysdb.StatusSuccess, wf.Status)
	require.Equal(t, `"done"`, deref(wf.Output))

	// A second outcome does not replace the first.
	res, err = a.Finish(ctx, FinishParams{WorkflowID: "fin", OwnerXID: run.OwnerXID, Status: sysdb.StatusError, Error: str(`"late"`)})
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.Equal(t, sysdb.StatusSuccess, res.Result.Status)

	_, err = a.GetResult(ctx, GetResultParams{WorkflowID: "nope"})
	var notFound *sysdb.NotFoundError
	require.ErrorAs(t, err, &notFound)
}

func TestEngineCancelResumeAndForkOutcomes(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	worker := runner(t, a, "w")
	parent := startHere(t, a, worker, "parent", "w")
	_, err := a.StartWorkflow(ctx, worker, StartWorkflowParams{WorkflowID: "child", Name: "other", QueueName: "q",
		Parent: &StepRef{WorkflowID: "parent", OwnerXID: parent.OwnerXID, FunctionID: 1}})
	require.NoError(t, err)

	_, err = a.Cancel(ctx, CancelParams{WorkflowID: "nope"})
	var notFound *sysdb.NotFoundError
	require.ErrorAs(t, err, &notFound)
	require.Equal(t, "workflow nope does not exist", notFound.Error())

	cancelled, err := a.Cancel(ctx, CancelParams{WorkflowID: "parent", CancelChildren: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"parent", "child"}, cancelled, "the children are cancelled with their parent")
	for _, id := range cancelled {
		wf, err := a.GetWorkflow(ctx, GetWorkflowParams{WorkflowID: id})
		require.NoError(t, err)
		require.Equal(t, sysdb.StatusCancelled, wf.Status)
	}

	// All or none: one missing id resumes nothing.
	err = a.Resume(ctx, ResumeParams{WorkflowIDs: []string{"child", "ghost", "ghost2"}})
	var missing *WorkflowsNotFoundError
	require.ErrorAs(t, err, &missing)
	require.Equal(t, []string{"ghost", "ghost2"}, missing.WorkflowIDs)
	require.Equal(t, "workflows ghost, ghost2 do not exist", missing.Error())
	wf, err := a.GetWorkflow(ctx, GetWorkflowParams{WorkflowID: "child"})
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusCancelled, wf.Status)

	requireInvalid(t, a.Resume(ctx, ResumeParams{}), "resume_workflow: workflow_id is required")
	requireInvalid(t, a.Resume(ctx, ResumeParams{WorkflowIDs: []string{""}}), "resume_workflow: workflow_ids has an empty id")
	require.NoError(t, a.Resume(ctx, ResumeParams{WorkflowIDs: []string{"child"}, QueueName: "elsewhere"}))
	wf, err = a.GetWorkflow(ctx, GetWorkflowParams{WorkflowID: "child"})
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, wf.Status)
	require.Equal(t, "elsewhere", deref(wf.QueueName))

	_, err = a.Fork(ctx, client, ForkParams{WorkflowID: "parent", StartStep: -1})
	requireInvalid(t, err, "fork_workflow: start_step and timeout_ms must not be negative")
	// On a queue no worker serves, so the fork stays ENQUEUED while it is read
	// (on the internal queue, the worker above, which registered "parent",
	// could claim it first).
	forked, err := a.Fork(ctx, client, ForkParams{WorkflowID: "parent", StartStep: 2, NewWorkflowID: "forked", Timeout: time.Minute, QueueName: "unserved"})
	require.NoError(t, err)
	require.Equal(t, "forked", forked)
	wf, err = a.GetWorkflow(ctx, GetWorkflowParams{WorkflowID: "forked", LoadPayloads: true})
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, wf.Status)
	require.Equal(t, "parent", deref(wf.ForkedFrom))
	require.Equal(t, int64(60_000), derefInt(wf.TimeoutMS))
	require.Equal(t, `[]`, deref(wf.Inputs), "the fork runs the original's inputs")
	steps, err := a.ListSteps(ctx, "forked")
	require.NoError(t, err)
	require.Len(t, steps, 1, "the steps below start_step are copied")
	require.Equal(t, "child", deref(steps[0].ChildWorkflowID))

	_, err = a.Fork(ctx, client, ForkParams{WorkflowID: "ghost", StartStep: 1})
	require.ErrorAs(t, err, &notFound)
}

func TestEngineListWorkflowsFilters(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	for _, p := range []StartWorkflowParams{
		{WorkflowID: "list-a", Name: "alpha", QueueName: "q1", Inputs: str(`[1]`)},
		{WorkflowID: "list-b", Name: "beta", QueueName: "q2", Attributes: str(`{"team":"pay"}`)},
		{WorkflowID: "other-c", Name: "alpha", QueueName: "q2", ApplicationName: "elsewhere"},
	} {
		_, err := a.StartWorkflow(ctx, client, p)
		require.NoError(t, err)
	}
	_, err := a.Cancel(ctx, CancelParams{WorkflowID: "list-b"})
	require.NoError(t, err)

	ids := func(p ListWorkflowsParams) []string {
		t.Helper()
		wfs, err := a.ListWorkflows(ctx, p)
		require.NoError(t, err)
		out := make([]string, len(wfs))
		for i, wf := range wfs {
			out[i] = wf.ID
		}
		return out
	}
	require.Equal(t, []string{"list-a", "list-b", "other-c"}, ids(ListWorkflowsParams{}))
	require.Equal(t, []string{"other-c", "list-b", "list-a"}, ids(ListWorkflowsParams{SortDesc: true}))
	require.Equal(t, []string{"list-a", "other-c"}, ids(ListWorkflowsParams{Names: []string{"alpha"}}))
	require.Equal(t, []string{"list-b"}, ids(ListWorkflowsParams{Statuses: []string{sysdb.StatusCancelled}}))
	require.Equal(t, []string{"other-c"}, ids(ListWorkflowsParams{QueueNames: []string{"q2"}}), "a cancelled workflow left its queue")
	require.Equal(t, []string{"list-a", "list-b"}, ids(ListWorkflowsParams{IDPrefixes: []string{"list-"}}))
	require.Equal(t, []string{"list-b"}, ids(ListWorkflowsParams{Attributes: str(`{"team":"pay"}`)}))
	require.Equal(t, []string{"list-b"}, ids(ListWorkflowsParams{Limit: 1, Offset: 1}))
	require.Empty(t, ids(ListWorkflowsParams{CreatedAfter: time.Now().Add(time.Hour)}))
	require.Equal(t, []string{"list-a", "list-b", "other-c"}, ids(ListWorkflowsParams{CreatedBefore: time.Now().Add(time.Hour)}))

	wfs, err := a.ListWorkflows(ctx, ListWorkflowsParams{WorkflowIDs: []string{"list-a"}, LoadInputs: true})
	require.NoError(t, err)
	require.Equal(t, `[1]`, deref(wfs[0].Inputs))

	_, err = a.ListWorkflows(ctx, ListWorkflowsParams{Limit: -1})
	requireInvalid(t, err, "list_workflows: limit and offset must not be negative")
	_, err = a.ListWorkflows(ctx, ListWorkflowsParams{Attributes: str(`"team"`)})
	var invalid *InvalidArgumentError
	require.ErrorAs(t, err, &invalid)
}

func TestEngineMessagesAndEventsOfARun(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	worker := runner(t, a, "w")
	run := startHere(t, a, worker, "talker", "w")
	at := func(id int) StepRef { return StepRef{WorkflowID: "talker", OwnerXID: run.OwnerXID, FunctionID: id} }

	requireInvalid(t, a.Send(ctx, client, SendParams{}), "send: messages is empty")
	requireInvalid(t, a.Send(ctx, client, SendParams{Messages: []OutgoingMessage{{Message: "m"}}}),
		"send: messages[0].destination_id is required")
	requireInvalid(t, a.Send(ctx, client, SendParams{Messages: []OutgoingMessage{
		{DestinationID: "talker", IdempotencyKey: "k"}, {DestinationID: "talker", IdempotencyKey: "k"}}}),
		`send: idempotency key "k" appears twice`)
	require.NoError(t, a.Send(ctx, client, SendParams{Messages: []OutgoingMessage{
		{DestinationID: "talker", Topic: str("t"), Message: `"hi"`, Serialization: "portable_json"}}}))

	_, err := a.Recv(ctx, ctx, worker, RecvParams{Caller: at(1), TimeoutFunctionID: 1, Topic: str("t")})
	requireInvalid(t, err, "recv: timeout_function_id must be from 1 to 2^31-1 and differ from caller.function_id")
	got, err := a.Recv(ctx, ctx, worker, RecvParams{Caller: at(1), TimeoutFunctionID: 2, Topic: str("t"), Timeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, RecvResult{Received: true, Message: str(`"hi"`), Serialization: "portable_json"}, got)
	// Nothing more comes: the timeout's output is recorded and answered.
	got, err = a.Recv(ctx, ctx, worker, RecvParams{Caller: at(3), TimeoutFunctionID: 4, Topic: str("t"),
		Timeout: 10 * time.Millisecond, TimeoutOutput: str(`null`), TimeoutSerialization: "portable_json"})
	require.NoError(t, err)
	require.Equal(t, RecvResult{Message: str(`null`), Serialization: "portable_json"}, got)

	require.NoError(t, a.SetEvent(ctx, worker, SetEventParams{Caller: at(5), Key: "k", Value: `7`, Serialization: "portable_json"}))
	requireInvalid(t, a.SetEvent(ctx, worker, SetEventParams{Caller: at(6)}), "set_event: key is required")
	ev, err := a.GetEvent(ctx, ctx, client, GetEventParams{WorkflowID: "talker", Key: "k"})
	require.NoError(t, err)
	require.Equal(t, GetEventResult{Found: true, Value: str(`7`), Serialization: "portable_json"}, ev)
	ev, err = a.GetEvent(ctx, ctx, client, GetEventParams{WorkflowID: "talker", Key: "missing"})
	require.NoError(t, err)
	require.False(t, ev.Found)
	events, err := a.ListEvents(ctx, "talker")
	require.NoError(t, err)
	require.Equal(t, []sysdb.Event{{Key: "k", Value: `7`, Serialization: str("portable_json")}}, events)

	slept, err := a.Sleep(ctx, worker, SleepParams{Caller: at(6), Duration: time.Hour})
	require.NoError(t, err)
	require.Greater(t, slept.Remaining, 59*time.Minute)
	require.WithinDuration(t, time.Now().Add(time.Hour), slept.WakeAt, time.Minute)
	_, err = a.Sleep(ctx, worker, SleepParams{Caller: at(7), Duration: -1})
	requireInvalid(t, err, "sleep: duration_ms must not be negative")

	require.NoError(t, a.WriteStream(ctx, worker, WriteStreamParams{Caller: at(7), Key: "s", Value: `1`, Serialization: "portable_json"}))
	require.NoError(t, a.WriteStream(ctx, worker, WriteStreamParams{Caller: at(8), Key: "s", Close: true}))
	read, err := a.ReadStream(ctx, ReadStreamParams{WorkflowID: "talker", Key: "s"})
	require.NoError(t, err)
	require.Equal(t, ReadStreamResult{Values: []protocol.StreamValue{{Offset: 0, Value: `1`, Serialization: "portable_json"}}, Closed: true}, read)
	_, err = a.ReadStream(ctx, ReadStreamParams{WorkflowID: "ghost", Key: "s"})
	var notFound *sysdb.NotFoundError
	require.ErrorAs(t, err, &notFound)
}

func TestEngineSharedConfiguration(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()

	requireInvalid(t, a.DeleteQueue(ctx, sysdb.InternalQueueName), "delete_queue: the internal queue "+sysdb.InternalQueueName+" cannot be deleted")
	_, err := a.GetQueue(ctx, "nope")
	requireInvalid(t, err, "queue nope is not registered and has no active workflows")
	limit := 3
	require.NoError(t, a.RegisterQueues(ctx, client, RegisterQueuesParams{Queues: []protocol.QueueRegistration{{Name: "limited", Concurrency: &limit}}}))
	q, err := a.GetQueue(ctx, "limited")
	require.NoError(t, err)
	require.True(t, q.Registered)
	require.Equal(t, 3, *q.Config.Concurrency)
	require.Equal(t, "engine", deref(q.Config.ApplicationName), "a client's queue is its application's")
	err = a.RegisterQueues(ctx, Caller{App: "thief"}, RegisterQueuesParams{Queues: []protocol.QueueRegistration{{Name: "limited", Concurrency: &limit}}})
	var invalid *InvalidArgumentError
	require.ErrorAs(t, err, &invalid, "another application's queue")
	require.Contains(t, invalid.Message, "(no queue of this registration was written)")
	require.ErrorContains(t, a.Register(ctx, client, RegisterParams{Workflows: []protocol.WorkflowRegistration{{Name: "w"}}}),
		"only a worker registers workflows")

	// A debounce of the same key pushes the pending start back.
	first, err := a.Debounce(ctx, client, DebounceParams{Key: "k", Name: "w", Delay: time.Hour})
	require.NoError(t, err)
	require.False(t, first.Bounced)
	second, err := a.Debounce(ctx, client, DebounceParams{Key: "k", Name: "w", Delay: time.Hour, Inputs: str(`[2]`)})
	require.NoError(t, err)
	require.Equal(t, DebounceResult{WorkflowID: first.WorkflowID, Bounced: true}, second)
	wf, err := a.GetWorkflow(ctx, GetWorkflowParams{WorkflowID: first.WorkflowID})
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusDelayed, wf.Status)
	require.NoError(t, a.SetWorkflowDelay(ctx, first.WorkflowID, time.Now().Add(-time.Second)))
	var notDelayed *sysdb.NotDelayedError
	started, err := a.StartWorkflow(ctx, client, StartWorkflowParams{Name: "w"})
	require.NoError(t, err)
	require.ErrorAs(t, a.SetWorkflowDelay(ctx, started.WorkflowID, time.Now()), &notDelayed)

	// Schedules: the cron is parsed as it fires, and a tick is enqueued once.
	bad := protocol.Schedule{ScheduleName: "s", WorkflowName: "w", Cron: "61 * * * *"}
	var cronErr *InvalidArgumentError
	require.ErrorAs(t, a.CreateSchedule(ctx, client, bad), &cronErr)
	require.Contains(t, cronErr.Message, "create_schedule: Invalid cron schedule")
	worker := runner(t, a, "w")
	requireInvalid(t, a.CreateSchedule(ctx, worker, protocol.Schedule{ScheduleName: "s", WorkflowName: "w", Cron: "* * * * *", ApplicationName: "else"}),
		"create_schedule: a worker creates schedules for its own application only")
	require.NoError(t, a.CreateSchedule(ctx, client, protocol.Schedule{ScheduleName: "s", WorkflowName: "w", Cron: "0 0 1 1 *"}))
	sched, err := a.GetSchedule(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, sysdb.ScheduleActive, sched.Status)
	require.Equal(t, "null", sched.Context)
	require.Nil(t, sched.LastFiredAtRaw, "a new schedule has fired nothing")
	// A re-created schedule keeps the last tick it is given (a binding's update, as DBOS's keeps it).
	requireInvalid(t, a.CreateSchedule(ctx, client, protocol.Schedule{ScheduleName: "kept", WorkflowName: "w", Cron: "0 0 1 1 *", LastFiredAt: "yesterday"}),
		`create_schedule.last_fired_at: must be an ISO 8601 time, not "yesterday"`)
	require.NoError(t, a.CreateSchedule(ctx, client, protocol.Schedule{ScheduleName: "kept", WorkflowName: "w", Cron: "0 0 1 1 *", LastFiredAt: "2026-01-01T03:00:00-05:00"}))
	kept, err := a.GetSchedule(ctx, "kept")
	require.NoError(t, err)
	require.Equal(t, str("2026-01-01T03:00:00-05:00"), kept.LastFiredAtRaw)
	require.NoError(t, a.DeleteSchedule(ctx, "kept"))
	tick, err := a.TriggerSchedule(ctx, "s")
	require.NoError(t, err)
	require.True(t, tick.Created)
	ticks, err := a.BackfillSchedule(ctx, "s", time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	require.NoError(t, err)
	require.Len(t, ticks, 3)
	again, err := a.BackfillSchedule(ctx, "s", time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	require.NoError(t, err)
	for i := range again {
		require.True(t, ticks[i].Created)
		require.False(t, again[i].Created, "a tick is enqueued once")
		require.Equal(t, ticks[i].WorkflowID, again[i].WorkflowID)
	}
	require.NoError(t, a.SetScheduleStatus(ctx, "s", sysdb.SchedulePaused))
	listed, err := a.ListSchedules(ctx, client, ListSchedulesParams{Statuses: []string{sysdb.SchedulePaused}})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.NoError(t, a.DeleteSchedule(ctx, "s"))
	_, err = a.GetSchedule(ctx, "s")
	var noSchedule *sysdb.ScheduleNotFoundError
	require.ErrorAs(t, err, &noSchedule)
}

// A one-shot engine (the CLI's) runs no service: it holds no goroutine,
// refuses Start, and writes steps and outcomes without the batchers.
func TestEngineOneShotRunsNoServices(t *testing.T) {
	db, err := sysdb.OpenPostgres(t.Context(), pgtest.URL(t), sysdb.PostgresOptions{Schema: pgtest.Schema(t), MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	a, err := NewOneShot(Config{DB: db, ExecutorID: "cli"})
	require.NoError(t, err)
	require.Error(t, a.Start(t.Context()))
	ctx := t.Context()

	// A run's writes go straight to the database: claim a workflow as a
	// worker would, then record and finish it.
	res, err := a.StartWorkflow(ctx, client, StartWorkflowParams{WorkflowID: "one", Name: "w"})
	require.NoError(t, err)
	require.True(t, res.Created)
	claimed, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: sysdb.InternalQueueName, ExecutorID: "cli",
		ApplicationVersion: "v1", ApplicationName: str("engine"), MaxClaim: 1, WorkflowNames: []string{"w"}, OwnerPrefix: a.ownerPrefix})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	owner := deref(claimed[0].OwnerXID)
	require.NoError(t, a.RecordStep(ctx, client, RecordStepParams{WorkflowID: "one", OwnerXID: owner, FunctionID: 1, Name: "s"}))
	fin, err := a.Finish(ctx, FinishParams{WorkflowID: "one", OwnerXID: owner, Status: sysdb.StatusSuccess, Output: str(`1`)})
	require.NoError(t, err)
	require.True(t, fin.Applied)
	wf, err := a.GetWorkflow(ctx, GetWorkflowParams{WorkflowID: "one"})
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusSuccess, wf.Status)
	require.Equal(t, "cli", deref(wf.ExecutorID))
	require.Empty(t, a.Goroutines(), "a one-shot engine starts no goroutine")
}

// Every engine error reaches the wire through one mapping, with the codes
// and messages the bindings match on.
func TestSessionMapsEngineErrorsToTheCatalogOnce(t *testing.T) {
	a := setup(t).agent
	s := a.NewSession("map")
	t.Cleanup(s.Close)
	for _, c := range []struct {
		err     error
		code    protocol.Code
		message string
	}{
		{invalidf("x: y"), protocol.CodeInvalidArgument, "x: y"},
		{&WorkflowCancelledError{WorkflowID: "w"}, protocol.CodeWorkflowCancelled, "workflow w was cancelled"},
		{errDraining, protocol.CodeShuttingDown, "the agent is shutting down"},
		{&WorkflowsNotFoundError{WorkflowIDs: []string{"a"}}, protocol.CodeWorkflowNotFound, "workflow a does not exist"},
		{&sysdb.NotFoundError{WorkflowID: "a"}, protocol.CodeWorkflowNotFound, "workflow a does not exist"},
		{&sysdb.ConflictingWorkflowError{WorkflowID: "a", Reason: "r"}, protocol.CodeWorkflowConflict, "r"},
		{&sysdb.FencedError{WorkflowID: "a"}, protocol.CodeFenced, "workflow a is no longer owned by this run"},
		{&sysdb.ScheduleNotFoundError{Name: "s"}, protocol.CodeInvalidArgument, (&sysdb.ScheduleNotFoundError{Name: "s"}).Error()},
		{&QueueRegistrationError{Err: errors.New("boom")}, protocol.CodeDatabaseDown, "register queues: boom"},
		{&ContentionError{Message: "debounce_workflow: the key kept changing hands; try again"}, protocol.CodeInternal,
			"debounce_workflow: the key kept changing hands; try again"},
		{context.DeadlineExceeded, protocol.CodeTimeout, "get_result timed out"},
		{context.Canceled, protocol.CodeShuttingDown, "get_result was abandoned: the session or agent is closing"},
		{errors.New("boom"), protocol.CodeInternal, "get_result failed: boom"},
	} {
		perr := s.protocolError(protocol.OpGetResult, c.err)
		require.Equal(t, c.code, perr.Code, "%v", c.err)
		require.Equal(t, c.message, perr.Message)
	}
	perr := s.protocolError(protocol.OpResume, &WorkflowsNotFoundError{WorkflowIDs: []string{"a", "b"}})
	require.Equal(t, "workflows a, b do not exist", perr.Message)
	require.Equal(t, map[string]any{"workflow_id": "a, b"}, perr.Data)
	perr = s.protocolError(protocol.OpDebounceWorkflow, &DebounceKeyHeldError{Key: "k", Name: "w", HolderID: "h", QueueName: "q", DeduplicationID: "w-k"})
	require.Equal(t, protocol.CodeDeduplicated, perr.Code)
	require.Equal(t, map[string]any{"workflow_id": "h", "queue_name": "q", "deduplication_id": "w-k"}, perr.Data)
}
