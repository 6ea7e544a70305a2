package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// TestListWorkflowsByAttributesAndApplication: list_workflows' attributes
// filter is jsonb containment as DBOS queries it, application_name matches
// the owner's rows and the unclaimed ones, and attributes that are not an
// object are invalid_argument.
func TestListWorkflowsByAttributesAndApplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket) // application "e2e"
	ctx := context.Background()
	other, err := client.Dial(ctx, a.socket, protocol.Hello{Role: protocol.RoleClient, AppName: "other"})
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	enqueue := func(c *client.Client, id string, attributes *string) {
		t.Helper()
		var r protocol.StartWorkflowReply
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: id, Name: "wf", QueueName: "unserved", Inputs: str(`[]`), Serialization: "portable_json", Attributes: attributes,
		}, &r))
		require.True(t, r.Created)
	}
	enqueue(c, "attr-1", str(`{"team":"core","tier":1,"meta":{"region":"eu"}}`))
	enqueue(c, "attr-2", str(`{"team":"core","tier":2}`))
	enqueue(other, "attr-3", str(`{"team":"edge"}`))
	enqueue(c, "attr-4", nil)
	list := func(m protocol.ListWorkflows) []string {
		t.Helper()
		m.IDPrefixes = []string{"attr-"}
		var reply protocol.ListWorkflowsReply
		require.NoError(t, c.Call(ctx, protocol.OpListWorkflows, &m, &reply))
		ids := []string{}
		for _, w := range reply.Workflows {
			ids = append(ids, w.WorkflowID)
		}
		return ids
	}
	require.Equal(t, []string{"attr-1", "attr-2"}, list(protocol.ListWorkflows{Attributes: str(`{"team":"core"}`)}))
	require.Equal(t, []string{"attr-2"}, list(protocol.ListWorkflows{Attributes: str(`{"team":"core","tier":2}`)}))
	require.Equal(t, []string{"attr-1"}, list(protocol.ListWorkflows{Attributes: str(`{"meta":{"region":"eu"}}`)}))
	require.Equal(t, []string{}, list(protocol.ListWorkflows{Attributes: str(`{"tier":"1"}`)}))
	require.Equal(t, []string{"attr-3"}, list(protocol.ListWorkflows{ApplicationNames: []string{"other"}}))
	require.Equal(t, []string{"attr-1", "attr-2", "attr-4"}, list(protocol.ListWorkflows{ApplicationNames: []string{"e2e"}}))
	require.Equal(t, []string{"attr-1", "attr-2", "attr-3", "attr-4"}, list(protocol.ListWorkflows{}))
	require.Equal(t, []string{"attr-4"}, list(protocol.ListWorkflows{HasParent: new(bool), WasForkedFrom: new(bool), IsFork: new(bool),
		Statuses: []string{"ENQUEUED"}, Names: []string{"wf"}, WorkflowIDs: []string{"attr-4", "attr-3"}, ApplicationNames: []string{"e2e"}}))
	for _, bad := range []string{`[1]`, `"x"`, `{`} {
		err := c.Call(ctx, protocol.OpListWorkflows, &protocol.ListWorkflows{Attributes: str(bad)}, nil)
		perr := requireErrCode(t, err, protocol.CodeInvalidArgument)
		require.Contains(t, perr.Message, "list_workflows.attributes", bad)
	}
}

// TestStartWithRejectReusePolicy: workflow_id_reuse_policy "reject" makes a
// taken id workflow_id_in_use, naming the stored workflow, and changes
// nothing; a fresh id starts; the default policy attaches.
func TestStartWithRejectReusePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	start := func(id, name, policy string) (protocol.StartWorkflowReply, error) {
		var r protocol.StartWorkflowReply
		err := c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: id, Name: name, QueueName: "unserved", Inputs: str(`[1]`), Serialization: "portable_json",
			WorkflowIDReusePolicy: policy,
		}, &r)
		return r, err
	}
	r, err := start("reuse-1", "wf", protocol.ReuseReject)
	require.NoError(t, err)
	require.True(t, r.Created)
	before := getWorkflow(t, c, "reuse-1")
	for _, name := range []string{"wf", "other"} { // the id is checked before the name
		_, err = start("reuse-1", name, protocol.ReuseReject)
		perr := requireErrCode(t, err, protocol.CodeWorkflowIDInUse)
		require.Equal(t, map[string]any{"workflow_id": "reuse-1", "status": "ENQUEUED", "name": "wf"}, perr.Data)
		require.Equal(t, "workflow_id_in_use", perr.Name)
	}
	require.Equal(t, before, getWorkflow(t, c, "reuse-1"))
	r, err = start("reuse-1", "wf", protocol.ReuseReturnExisting)
	require.NoError(t, err)
	require.False(t, r.Created)
	_, err = start("reuse-2", "wf", "bogus")
	requireErrCode(t, err, protocol.CodeInvalidArgument)
}

// TestClientRegistersQueuesWithoutServingThem: a client's register_queues
// (DBOS's DBOSClient.register_queue) writes the queue's row for its
// application; a bare name leaves a stored row as it is; a worker serving
// the queue runs its work under those limits.
func TestClientRegistersQueuesWithoutServingThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	getQueue := func(name string) protocol.QueueInfo {
		t.Helper()
		var q protocol.QueueInfo
		require.NoError(t, c.Call(ctx, protocol.OpGetQueue, &protocol.QueueRef{Name: name}, &q))
		return q
	}
	register := func(q protocol.QueueRegistration) {
		t.Helper()
		require.NoError(t, c.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{q}}, nil))
	}
	register(protocol.QueueRegistration{Name: "from-client", Concurrency: intp(3), WorkerConcurrency: intp(1), PollingIntervalSec: 1})
	q := getQueue("from-client")
	require.True(t, q.Registered)
	require.Equal(t, intp(3), q.Concurrency)
	require.Equal(t, intp(1), q.WorkerConcurrency)
	register(protocol.QueueRegistration{Name: "from-client"})
	require.Equal(t, intp(3), getQueue("from-client").Concurrency, "a bare name leaves the stored row")
	register(protocol.QueueRegistration{Name: "from-client", Concurrency: intp(5), PollingIntervalSec: 1})
	q = getQueue("from-client")
	require.Equal(t, intp(5), q.Concurrency)
	require.Nil(t, q.WorkerConcurrency)
	register(protocol.QueueRegistration{Name: "bare-new"})
	require.True(t, getQueue("bare-new").Registered)
	// Still refused: a client registers no workflow functions.
	requireErrCode(t, c.Call(ctx, protocol.OpRegister, &protocol.Register{Workflows: []protocol.WorkflowRegistration{{Name: "wf"}}}, nil),
		protocol.CodeInvalidArgument)

	// The client serves nothing: its enqueue waits for a worker of the queue.
	var r protocol.StartWorkflowReply
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "queued-1", Name: "wf", QueueName: "from-client", Inputs: str(`[]`), Serialization: "portable_json",
	}, &r))
	_, ran := wfWorker(t, a.socket, "e2e", "from-client")
	require.Equal(t, "queued-1", recv(t, ran, "the client's enqueued workflow"))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "queued-1").Status)
	require.Equal(t, intp(5), getQueue("from-client").Concurrency)
}

// TestDebounceRecordsTheFirstCallsAttributes: a debounced workflow carries
// the attributes of the call that created it; a bounce keeps them.
func TestDebounceRecordsTheFirstCallsAttributes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	debounce := func(attributes *string) protocol.DebounceWorkflowReply {
		t.Helper()
		var r protocol.DebounceWorkflowReply
		require.NoError(t, c.Call(ctx, protocol.OpDebounceWorkflow, &protocol.DebounceWorkflow{
			Key: "k", Name: "deb", DelayMS: 60000, Inputs: str(`[]`), Serialization: "portable_json", Attributes: attributes,
		}, &r))
		return r
	}
	first := debounce(str(`{"source":"debouncer"}`))
	require.False(t, first.Bounced)
	require.True(t, debounce(str(`{"source":"second"}`)).Bounced)
	require.Equal(t, str(`{"source": "debouncer"}`), getWorkflow(t, c, first.WorkflowID).Attributes)
	err := c.Call(ctx, protocol.OpDebounceWorkflow, &protocol.DebounceWorkflow{Key: "k2", Name: "deb", Attributes: str(`[1]`)}, nil)
	requireErrCode(t, err, protocol.CodeInvalidArgument)
}

// TestStartAndRegisterQueuesForAnotherApplication: a start naming another
// application (DBOS's EnqueueOptions application_name) writes that
// application's row with no version of the caller's, and its worker runs it;
// a client's register_queues may name the owner, a worker's may not.
func TestStartAndRegisterQueuesForAnotherApplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket) // application "e2e"
	ctx := context.Background()
	require.NoError(t, c.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{
		Queues: []protocol.QueueRegistration{{Name: "billing-q", Concurrency: intp(2), PollingIntervalSec: 1}}, ApplicationName: "billing",
	}, nil))
	var r protocol.StartWorkflowReply
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "for-billing", Name: "wf", QueueName: "billing-q", Inputs: str(`[]`), Serialization: "portable_json",
		ApplicationName: "billing",
	}, &r))
	info := getWorkflow(t, c, "for-billing")
	require.Equal(t, "billing", info.AppName)
	require.Empty(t, info.AppVersion)
	w, ran := wfWorker(t, a.socket, "billing", "billing-q")
	require.Equal(t, "for-billing", recv(t, ran, "billing's workflow"))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "for-billing").Status)
	// The queue is billing's: another application's registration of it is refused.
	requireErrCode(t, c.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{
		Queues: []protocol.QueueRegistration{{Name: "billing-q", Concurrency: intp(9), PollingIntervalSec: 1}},
	}, nil), protocol.CodeInvalidArgument)
	requireErrCode(t, w.Client.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{
		Queues: []protocol.QueueRegistration{{Name: "mine"}}, ApplicationName: "e2e",
	}, nil), protocol.CodeInvalidArgument)
}

// wfWorker is a worker of app serving queue with the workflow "wf", which
// sends its id on the channel.
func wfWorker(t *testing.T, socket, app, queue string) (*client.Worker, <-chan string) {
	t.Helper()
	ran := make(chan string, 1)
	w := qWorker(t, socket, client.WorkerConfig{
		AppName: app,
		Workflows: map[string]client.WorkflowFunc{"wf": func(wf *client.Workflow, _ *string) (*string, error) {
			ran <- wf.ID()
			return str(`"ok"`), nil
		}},
		Queues: []protocol.QueueRegistration{{Name: queue}},
	})
	return w, ran
}
