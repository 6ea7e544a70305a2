package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// echoWorker runs "echo" (returns its input) and reports which workflows it
// ran on ran.
func echoWorker(t *testing.T, socket, app, version string, ran chan<- string) *client.Worker {
	t.Helper()
	w, err := client.NewWorker(context.Background(), socket, client.WorkerConfig{
		AppName: app, AppVersion: version,
		Workflows: map[string]client.WorkflowFunc{"echo": func(wf *client.Workflow, in *string) (*string, error) {
			ran <- wf.ID()
			return wf.Step("echo-step", func(context.Context) (*string, error) { return in, nil })
		}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

func TestOneAgentServesSeveralApplicationsAndVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ranBy := map[string]chan string{}
	for _, key := range []string{"shop/v1", "shop/v2", "billing/v1"} {
		app, version, _ := strings.Cut(key, "/")
		ranBy[key] = make(chan string, 16)
		echoWorker(t, agent.socket, app, version, ranBy[key])
	}
	ctx := context.Background()
	start := func(app, version, id string) {
		c, err := client.Dial(ctx, agent.socket, protocol.Hello{Role: protocol.RoleClient, AppName: app, AppVersion: version})
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: id, Name: "echo", Inputs: str(id)}, nil))
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status)
	}
	start("shop", "v1", "shop-v1-a")
	start("shop", "v2", "shop-v2-a")
	start("billing", "v1", "billing-v1-a")
	require.Equal(t, "shop-v1-a", <-ranBy["shop/v1"])
	require.Equal(t, "shop-v2-a", <-ranBy["shop/v2"])
	require.Equal(t, "billing-v1-a", <-ranBy["billing/v1"])
	for key, ch := range ranBy {
		require.Empty(t, ch, "%s ran a workflow of another application or version", key)
	}

	// A workflow of a version no worker runs waits; it never goes to
	// another version's worker.
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "shop-v3", Name: "echo", AppVersion: "v3"}, nil))
	err := c.Call(ctx, protocol.OpGetResult, &protocol.GetResult{WorkflowID: "shop-v3", TimeoutMS: 500}, nil)
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, protocol.CodeTimeout, perr.Code)
	// Its worker arrives and runs it.
	v3 := make(chan string, 1)
	echoWorker(t, agent.socket, "e2e", "v3", v3)
	require.Equal(t, "SUCCESS", awaitResult(t, c, "shop-v3").Status)
	require.Equal(t, "shop-v3", <-v3)
}

func TestWorkflowIsDeadLetteredPastMaxRecoveryAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ctx := context.Background()
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "doomed", Name: "crashy"}, nil))

	// Each worker takes the workflow and dies with it. With a maximum of
	// one recovery attempt, the workflow runs twice, then is dead-lettered.
	for attempt := 1; attempt <= 2; attempt++ {
		wc, err := client.Dial(ctx, agent.socket, protocol.Hello{Role: protocol.RoleWorker, AppName: "e2e",
			Workflows: []protocol.WorkflowRegistration{{Name: "crashy", MaxRecoveryAttempts: 1}}})
		require.NoError(t, err)
		var push client.Push
		select {
		case push = <-wc.Pushes():
		case <-time.After(30 * time.Second):
			t.Fatalf("attempt %d: no run pushed within 30s", attempt)
		}
		require.Equal(t, protocol.PushRun, push.Op)
		var run protocol.Run
		require.NoError(t, protocol.DecodeBody(push.Body, &run))
		require.Equal(t, "doomed", run.WorkflowID)
		require.Equal(t, int64(attempt), run.RecoveryAttempts)
		require.NoError(t, wc.Close())
	}
	last, err := client.Dial(ctx, agent.socket, protocol.Hello{Role: protocol.RoleWorker, AppName: "e2e",
		Workflows: []protocol.WorkflowRegistration{{Name: "crashy", MaxRecoveryAttempts: 1}}})
	require.NoError(t, err)
	defer last.Close()
	res := awaitResult(t, c, "doomed")
	require.Equal(t, "MAX_RECOVERY_ATTEMPTS_EXCEEDED", res.Status)
	select {
	case p := <-last.Pushes():
		t.Fatalf("a dead-lettered workflow was dispatched: %s", p.Op)
	default:
	}
}

func TestSIGTERMDrainsRunningWorkflows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{extraArgs: []string{"--grace-period", "30s"}})
	ctx := context.Background()
	running := make(chan struct{})
	release := make(chan struct{})
	w, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{AppName: "e2e",
		Workflows: map[string]client.WorkflowFunc{"slow": func(wf *client.Workflow, _ *string) (*string, error) {
			return wf.Step("wait", func(context.Context) (*string, error) {
				close(running)
				<-release
				return str("finished"), nil
			})
		}}})
	require.NoError(t, err)
	defer w.Close()
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "draining", Name: "slow"}, nil))
	<-running

	require.NoError(t, agent.cmd.Process.Signal(syscallSIGTERM))
	agent.waitForLog(t, "no new work is taken")
	err = c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "too-late", Name: "slow"}, nil)
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, protocol.CodeShuttingDown, perr.Code)

	close(release)
	select {
	case <-agent.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not exit once the run finished")
	}
	conn := pgtest.Connect(t, e.url)
	var status string
	require.NoError(t, conn.QueryRow(ctx, "SELECT status FROM "+e.schema+".workflow_status WHERE workflow_uuid = 'draining'").Scan(&status))
	require.Equal(t, "SUCCESS", status)
}

func TestResultWaitersWakeAcrossAgentsAndForOutsideWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	// b's fallback poll is too slow to matter: only a's notification can
	// wake its waiter in time.
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock", extraArgs: []string{"--result-poll-interval", "1h"}})
	ctx := context.Background()
	ran := make(chan string, 4)
	echoWorker(t, a.socket, "e2e", "", ran)
	cb := dialClient(t, b.socket)

	// Started through agent b (which has no worker), run on agent a's
	// worker, awaited on b: b learns of the outcome from a's notification.
	require.NoError(t, cb.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "cross", Name: "echo", Inputs: str("hi")}, nil))
	res := awaitResultWithin(t, cb, "cross", 20*time.Second)
	require.Equal(t, "SUCCESS", res.Status)
	require.Equal(t, "hi", *res.Output)

	// An outcome written by someone who does not notify (an SDK, here
	// plain SQL) reaches the waiter through the fallback poll.
	conn := pgtest.Connect(t, e.url)
	cc := dialClient(t, a.socket)
	require.NoError(t, cc.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "outside", Name: "unserved", QueueName: "nobody"}, nil))
	done := make(chan protocol.WorkflowResult, 1)
	go func() { done <- awaitResult(t, cc, "outside") }()
	_, err := conn.Exec(ctx, "UPDATE "+e.schema+".workflow_status SET status = 'ERROR' WHERE workflow_uuid = 'outside'")
	require.NoError(t, err)
	require.Equal(t, "ERROR", (<-done).Status)
}
