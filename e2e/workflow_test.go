package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

func stepsInputs(t *testing.T, steps, blockAfter int) *string {
	raw, err := json.Marshal(stepsInput{Steps: steps, BlockAfter: blockAfter})
	require.NoError(t, err)
	return str(string(raw))
}

func requireEachStepOnce(t *testing.T, effects, workflowID string, steps int) {
	t.Helper()
	counts := effectCounts(t, effects)
	for i := 1; i <= steps; i++ {
		require.Equal(t, 1, counts[fmt.Sprintf("%s %d", workflowID, i)], "step %d ran %d times", i, counts[fmt.Sprintf("%s %d", workflowID, i)])
	}
	require.Len(t, counts, steps)
}

func TestWorkflowWithStepsRunsToSuccess(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{})
		effects := filepath.Join(e.dir, "effects")
		e.startWorkerProcess(agent.socket, effects, false)
		c := dialClient(t, agent.socket)
		ctx := context.Background()

		var started protocol.StartWorkflowReply
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-success", Name: "steps_wf", Inputs: stepsInputs(t, 5, 0), Serialization: "portable_json",
		}, &started))
		require.True(t, started.Created)
		require.Equal(t, "ENQUEUED", started.Status)

		res := awaitResult(t, c, "wf-success")
		require.Equal(t, "SUCCESS", res.Status)
		require.Equal(t, `{"steps":5}`, *res.Output)
		requireEachStepOnce(t, effects, "wf-success", 5)

		var steps protocol.ListStepsReply
		require.NoError(t, c.Call(ctx, protocol.OpListSteps, &protocol.WorkflowRef{WorkflowID: "wf-success"}, &steps))
		require.Len(t, steps.Steps, 5)
		for i, s := range steps.Steps {
			require.Equal(t, i+1, s.FunctionID)
			require.Equal(t, fmt.Sprintf("step-%d", i+1), s.Name)
			require.Equal(t, fmt.Sprint((i+1)*(i+1)), *s.Output)
		}

		// Starting the same id again is idempotent.
		var again protocol.StartWorkflowReply
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-success", Name: "steps_wf", Inputs: stepsInputs(t, 5, 0),
		}, &again))
		require.False(t, again.Created)
		require.Equal(t, "SUCCESS", again.Status)

		var info protocol.WorkflowInfo
		require.NoError(t, c.Call(ctx, protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: "wf-success"}, &info))
		require.Equal(t, "local", info.ExecutorID)
		require.Equal(t, "e2e", info.AppName)
	})
}

func TestKilledWorkerIsReplacedWithoutRerunningSteps(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{})
		effects := filepath.Join(e.dir, "effects")
		first := e.startWorkerProcess(agent.socket, effects, true)
		c := dialClient(t, agent.socket)

		require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-crash", Name: "steps_wf", Inputs: stepsInputs(t, 8, 3), Serialization: "portable_json",
		}, nil))
		first.out.waitFor(t, "recorded wf-crash 3")
		first.kill()

		// The agent noticed the closed connection and re-enqueued the workflow;
		// a new worker receives it with its history.
		second := e.startWorkerProcess(agent.socket, effects, false)
		res := awaitResult(t, c, "wf-crash")
		require.Equal(t, "SUCCESS", res.Status)
		requireEachStepOnce(t, effects, "wf-crash", 8)
		second.out.waitFor(t, "recorded wf-crash 8")
		second.out.waitFor(t, "replayed wf-crash 3")
		for _, l := range second.out.all() {
			require.NotContains(t, []string{"recorded wf-crash 1", "recorded wf-crash 2", "recorded wf-crash 3"}, l,
				"the replacement re-ran a recorded step")
		}
	})
}

func TestKilledAgentRecoversPendingWorkOnRestart(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		first := e.startAgent(agentOptions{executorID: "host-a"})
		effects := filepath.Join(e.dir, "effects")
		worker := e.startWorkerProcess(first.socket, effects, true)
		c := dialClient(t, first.socket)
		require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-agent-crash", Name: "steps_wf", Inputs: stepsInputs(t, 6, 2), Serialization: "portable_json",
		}, nil))
		worker.out.waitFor(t, "recorded wf-agent-crash 2")

		first.kill()
		worker.kill()

		restarted := e.startAgent(agentOptions{executorID: "host-a"})
		e.startWorkerProcess(restarted.socket, effects, false)
		c2 := dialClient(t, restarted.socket)
		res := awaitResult(t, c2, "wf-agent-crash")
		require.Equal(t, "SUCCESS", res.Status)
		requireEachStepOnce(t, effects, "wf-agent-crash", 6)

		var info protocol.WorkflowInfo
		require.NoError(t, c2.Call(context.Background(), protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: "wf-agent-crash"}, &info))
		require.Equal(t, int64(2), info.RecoveryAttempts)
	})
}

func TestCancelStopsRunAtNextStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ctx := context.Background()

	inStep2 := make(chan struct{})
	release := make(chan struct{})
	pushed := make(chan struct{})
	var step3Ran bool
	w, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{
		AppName: "e2e",
		Workflows: map[string]client.WorkflowFunc{"cancellable": func(wf *client.Workflow, _ *string) (*string, error) {
			if _, err := wf.Step("one", func(context.Context) (*string, error) { return str("1"), nil }); err != nil {
				return nil, err
			}
			_, err := wf.Step("two", func(stepCtx context.Context) (*string, error) {
				close(inStep2)
				<-stepCtx.Done() // the cancel push ends the run's context
				close(pushed)
				<-release
				return str("2"), nil
			})
			if err != nil {
				return nil, err
			}
			_, err = wf.Step("three", func(context.Context) (*string, error) { step3Ran = true; return str("3"), nil })
			return nil, err
		}},
	})
	require.NoError(t, err)
	defer w.Close()
	c := dialClient(t, agent.socket)

	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "wf-cancel", Name: "cancellable"}, nil))
	<-inStep2
	require.NoError(t, c.Call(ctx, protocol.OpCancel, &protocol.WorkflowRef{WorkflowID: "wf-cancel"}, nil))
	<-pushed
	close(release)
	w.Wait()
	require.False(t, step3Ran)

	res := awaitResult(t, c, "wf-cancel")
	require.Equal(t, "CANCELLED", res.Status)
	var steps protocol.ListStepsReply
	require.NoError(t, c.Call(ctx, protocol.OpListSteps, &protocol.WorkflowRef{WorkflowID: "wf-cancel"}, &steps))
	require.Len(t, steps.Steps, 1, "the step after the cancel must not be recorded")

	err = c.Call(ctx, protocol.OpCancel, &protocol.WorkflowRef{WorkflowID: "no-such-workflow"}, nil)
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, protocol.CodeWorkflowNotFound, perr.Code)
}

func TestCancelledWorkflowRejectsNextRecordWithoutPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ctx := context.Background()
	// A worker that runs a direct start itself, and a raw record_step
	// after a cancel made by another connection: the agent answers
	// workflow_cancelled.
	w, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{AppName: "e2e",
		Workflows: map[string]client.WorkflowFunc{"manual": func(*client.Workflow, *string) (*string, error) { select {} }}})
	require.NoError(t, err)
	defer w.Close()
	var started protocol.StartWorkflowReply
	require.NoError(t, w.Client.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "wf-direct", Name: "manual", RunHere: true}, &started))
	require.NotNil(t, started.Run)
	require.Equal(t, "PENDING", started.Status)
	owner := started.Run.OwnerXID

	require.NoError(t, w.Client.Call(ctx, protocol.OpRecordStep, &protocol.RecordStep{WorkflowID: "wf-direct", OwnerXID: owner,
		Step: protocol.Step{FunctionID: 1, Name: "a", Output: str("x")}}, nil))
	other := dialClient(t, agent.socket)
	require.NoError(t, other.Call(ctx, protocol.OpCancel, &protocol.WorkflowRef{WorkflowID: "wf-direct"}, nil))
	err = w.Client.Call(ctx, protocol.OpRecordStep, &protocol.RecordStep{WorkflowID: "wf-direct", OwnerXID: owner,
		Step: protocol.Step{FunctionID: 2, Name: "b", Output: str("y")}}, nil)
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, protocol.CodeWorkflowCancelled, perr.Code)

	// Resume puts it back on a queue; the old owner token is fenced.
	require.NoError(t, other.Call(ctx, protocol.OpResume, &protocol.WorkflowRef{WorkflowID: "wf-direct"}, nil))
	var fin protocol.FinishReply
	require.NoError(t, w.Client.Call(ctx, protocol.OpFinish, &protocol.Finish{WorkflowID: "wf-direct", OwnerXID: owner, Status: "SUCCESS", Output: str("z")}, &fin))
	require.False(t, fin.Applied)
}

func TestTwoWorkersShareQueueHonouringWorkerConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ctx := context.Background()
	const perWorker = 2
	const total = 12

	var mu sync.Mutex
	running := map[int]int{}
	maxRunning := map[int]int{}
	ran := map[int]int{}
	started := make(chan struct{}, total)
	release := make(chan struct{}, total)
	newWorker := func(n int) *client.Worker {
		wc := perWorker
		w, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{
			AppName: "e2e",
			Queues:  []protocol.QueueRegistration{{Name: "shared", WorkerConcurrency: &wc}},
			Workflows: map[string]client.WorkflowFunc{"queued": func(wf *client.Workflow, _ *string) (*string, error) {
				_, err := wf.Step("work", func(context.Context) (*string, error) {
					mu.Lock()
					running[n]++
					ran[n]++
					if running[n] > maxRunning[n] {
						maxRunning[n] = running[n]
					}
					mu.Unlock()
					started <- struct{}{}
					<-release
					mu.Lock()
					running[n]--
					mu.Unlock()
					return str("ok"), nil
				})
				return str("done"), err
			}},
		})
		require.NoError(t, err)
		t.Cleanup(func() { w.Close() })
		return w
	}
	newWorker(1)
	newWorker(2)
	c := dialClient(t, agent.socket)
	for i := 0; i < total; i++ {
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: fmt.Sprintf("q-%02d", i), Name: "queued", QueueName: "shared",
		}, nil))
	}
	// Both workers fill their slots...
	for i := 0; i < 2*perWorker; i++ {
		<-started
	}
	// ...and each release lets exactly one more in.
	for i := 0; i < total; i++ {
		release <- struct{}{}
		if i < total-2*perWorker {
			<-started
		}
	}
	for i := 0; i < total; i++ {
		require.Equal(t, "SUCCESS", awaitResult(t, c, fmt.Sprintf("q-%02d", i)).Status)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, perWorker, maxRunning[1], "worker 1 max concurrency")
	require.Equal(t, perWorker, maxRunning[2], "worker 2 max concurrency")
	require.Equal(t, total, ran[1]+ran[2])
}

func TestGetResultTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	c := dialClient(t, agent.socket)
	ctx := context.Background()
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "never-runs", Name: "nobody_registers_this", QueueName: "q"}, nil))
	start := time.Now()
	err := c.Call(ctx, protocol.OpGetResult, &protocol.GetResult{WorkflowID: "never-runs", TimeoutMS: 300}, nil)
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, protocol.CodeTimeout, perr.Code)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	err = c.Call(ctx, protocol.OpGetResult, &protocol.GetResult{WorkflowID: "does-not-exist"}, nil)
	require.ErrorAs(t, err, &perr)
	require.Equal(t, protocol.CodeWorkflowNotFound, perr.Code)
}
