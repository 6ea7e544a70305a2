package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// TestMaxConcurrencyBoundsEveryKindOfPushedRun: a worker announcing
// max_concurrency is pushed at most that many runs at once, whatever put
// them on a queue (a client's direct starts, which go to the internal
// queue, enqueues on the worker's queue, a schedule's ticks); the rest wait
// ENQUEUED, and all of them run once slots free.
func TestMaxConcurrencyBoundsEveryKindOfPushedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: scheduleArgs})
	ctx := context.Background()
	const limit = 2
	var running, peak atomic.Int32
	started := make(chan string, 64)
	release := make(chan struct{})
	held := func(wf *client.Workflow, _ *string) (*string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		started <- wf.ID()
		<-release
		return str(`"ok"`), nil
	}
	w, err := client.NewWorker(ctx, a.socket, client.WorkerConfig{AppName: "e2e", MaxConcurrency: limit,
		Workflows: map[string]client.WorkflowFunc{"held": held},
		Queues:    []protocol.QueueRegistration{{Name: "bounded"}}})
	require.NoError(t, err)
	defer w.Close()
	c := dialClient(t, a.socket)

	var ids []string
	for i := 0; i < 4; i++ {
		for _, queue := range []string{"", "bounded"} {
			id := fmt.Sprintf("burst-%s-%d", queue, i)
			require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: id, Name: "held", QueueName: queue}, nil))
			ids = append(ids, id)
		}
	}
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{ScheduleName: "bounded", WorkflowName: "held", Cron: "* * * * * *"}, nil))
	for i := 0; i < limit; i++ {
		<-started
	}
	// A tick fires while the slots are full: it waits on its queue too.
	require.Eventually(t, func() bool { return len(listIDs(t, c, "sched-bounded-")) > 0 }, 10*time.Second, 50*time.Millisecond)
	var queued protocol.ListWorkflowsReply
	require.NoError(t, c.Call(ctx, protocol.OpListWorkflows, &protocol.ListWorkflows{Statuses: []string{"ENQUEUED"}}, &queued))
	require.GreaterOrEqual(t, len(queued.Workflows), len(ids)-limit+1)
	require.Equal(t, int32(limit), running.Load())

	close(release)
	require.NoError(t, c.Call(ctx, protocol.OpDeleteSchedule, &protocol.ScheduleRef{ScheduleName: "bounded"}, nil))
	for _, id := range append(ids, listIDs(t, c, "sched-bounded-")...) {
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status, id)
	}
	require.Equal(t, int32(limit), peak.Load(), "never more than max_concurrency at once")
}

// TestResumeWorkflowsIsAllOrNone: resume_workflow with workflow_ids
// resumes every one or, when one is missing, none, naming the missing ones.
func TestResumeWorkflowsIsAllOrNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	ctx := context.Background()
	c := dialClient(t, a.socket)
	ids := []string{"resume-a", "resume-b"}
	for _, id := range ids {
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: id, Name: "nobody_runs_it"}, nil))
		require.NoError(t, c.Call(ctx, protocol.OpCancel, &protocol.WorkflowRef{WorkflowID: id}, nil))
	}
	status := func(id string) string {
		var info protocol.WorkflowInfo
		require.NoError(t, c.Call(ctx, protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: id}, &info))
		return info.Status
	}

	err := c.Call(ctx, protocol.OpResume, &protocol.ResumeWorkflow{WorkflowIDs: []string{"resume-a", "gone-1", "resume-b", "gone-2"}}, nil)
	perr := requireErrCode(t, err, protocol.CodeWorkflowNotFound)
	require.Equal(t, "gone-1, gone-2", perr.Data["workflow_id"])
	require.Equal(t, "CANCELLED", status("resume-a"))
	require.Equal(t, "CANCELLED", status("resume-b"))

	err = c.Call(ctx, protocol.OpResume, &protocol.ResumeWorkflow{WorkflowID: "resume-a", WorkflowIDs: ids}, nil)
	requireErrCode(t, err, protocol.CodeInvalidArgument)

	require.NoError(t, c.Call(ctx, protocol.OpResume, &protocol.ResumeWorkflow{WorkflowIDs: append(ids, "resume-a"), QueueName: "later"}, nil))
	for _, id := range ids {
		require.Equal(t, "ENQUEUED", status(id))
	}
}

// TestDeleteQueueStopsServingIt: after delete_queue the queue has no row,
// this agent's workers no longer take its workflows, and registering it
// again serves it again; deleting twice is harmless, the internal queue
// cannot be deleted.
func TestDeleteQueueStopsServingIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	ctx := context.Background()
	ran := make(chan string, 8)
	w, err := client.NewWorker(ctx, a.socket, client.WorkerConfig{AppName: "e2e",
		Workflows: map[string]client.WorkflowFunc{"quick": func(wf *client.Workflow, _ *string) (*string, error) {
			ran <- wf.ID()
			return str(`"ok"`), nil
		}},
		Queues: []protocol.QueueRegistration{{Name: "doomed"}}})
	require.NoError(t, err)
	defer w.Close()
	c := dialClient(t, a.socket)

	ref := &protocol.QueueRef{Name: "doomed"}
	require.NoError(t, c.Call(ctx, protocol.OpDeleteQueue, ref, nil))
	require.NoError(t, c.Call(ctx, protocol.OpDeleteQueue, ref, nil))
	requireErrCode(t, c.Call(ctx, protocol.OpGetQueue, ref, nil), protocol.CodeInvalidArgument)
	requireErrCode(t, c.Call(ctx, protocol.OpDeleteQueue, &protocol.QueueRef{Name: "_dbos_internal_queue"}, nil), protocol.CodeInvalidArgument)

	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "orphan", Name: "quick", QueueName: "doomed"}, nil))
	select {
	case id := <-ran:
		t.Fatalf("%s ran from a deleted queue", id)
	case <-time.After(time.Second): // five poll intervals
	}
	require.NoError(t, w.Client.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{{Name: "doomed"}}}, nil))
	require.Equal(t, "orphan", <-ran)
	require.Equal(t, "SUCCESS", awaitResult(t, c, "orphan").Status)
}
