package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// slowPolls makes an agent's pollers wait a minute between idle polls, so
// that a run reaching a worker within seconds was woken by what the test
// did, not found by a poll that came round.
var slowPolls = []string{"--poll-interval", "1m"}

// promptly is how soon woken work must reach a worker: far below the
// minute of slowPolls.
const promptly = 15 * time.Second

func workflowStatus(t *testing.T, c *client.Client, id string) protocol.WorkflowInfo {
	t.Helper()
	var info protocol.WorkflowInfo
	require.NoError(t, c.Call(context.Background(), protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: id}, &info))
	return info
}

// TestLateRegisteredFunctionGetsRecoveredAndQueuedRuns: a worker that
// registers a workflow function after its hello gets the runs of it that
// waited for a worker: one recovered when the agent restarted (its first
// run was cut by a SIGKILL of the agent) and one enqueued on a queue the
// worker served from its hello. Both reach it within seconds of the
// register, though its agent polls once a minute: the registration wakes
// the pollers that had already passed them over.
func TestLateRegisteredFunctionGetsRecoveredAndQueuedRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.startAgent(agentOptions{executorID: "host-late", extraArgs: slowPolls})
	g1 := newGate(t)
	w1 := qWorker(t, first.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"late": g1.workflow("first")}})
	ctx := context.Background()
	_, err := w1.Start(ctx, protocol.StartWorkflow{WorkflowID: "late-recovered", Name: "late"})
	require.NoError(t, err)
	g1.waitEntered(t, 1)
	first.kill()

	restarted := e.startAgent(agentOptions{executorID: "host-late", extraArgs: slowPolls})
	g2 := newGate(t)
	w2 := qWorker(t, restarted.socket, client.WorkerConfig{
		Workflows: map[string]client.WorkflowFunc{"other": g2.workflow("other")},
		Queues:    []protocol.QueueRegistration{{Name: "early"}},
	})
	c := dialClient(t, restarted.socket)
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "late-queued", Name: "late", QueueName: "early"})
	// Served by no worker yet: both wait on their queues.
	for _, id := range []string{"late-recovered", "late-queued"} {
		require.Equal(t, "ENQUEUED", workflowStatus(t, c, id).Status, id)
	}
	require.Empty(t, g2.entered, "a run reached a worker that had not registered its function")

	registered := time.Now()
	require.NoError(t, w2.Register(ctx, map[string]client.WorkflowFunc{"late": g2.workflow("late")}, nil))
	for range 2 {
		select {
		case <-g2.entered:
		case <-time.After(promptly):
			t.Fatalf("the late function's runs did not reach the worker within %s of its registration", promptly)
		}
	}
	took := time.Since(registered)
	t.Logf("both runs reached the worker %s after its register", took.Round(time.Millisecond))
	require.Less(t, took, promptly)
	g2.release <- struct{}{}
	g2.release <- struct{}{}
	for _, id := range []string{"late-recovered", "late-queued"} {
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status, id)
	}
	require.Equal(t, int64(2), workflowStatus(t, c, "late-recovered").RecoveryAttempts, "the recovered run is its second")
	require.Equal(t, 2, g2.max("worker:late"))
}

// TestLateRegisteredQueueIsServedWithItsLimits: one register adds a
// function and a queue with a worker_concurrency of 1; the queue's
// workflows, enqueued before, then run here one at a time.
func TestLateRegisteredQueueIsServedWithItsLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: slowPolls})
	g := newGate(t)
	w := qWorker(t, a.socket, client.WorkerConfig{})
	c := dialClient(t, a.socket)
	const total = 3
	for i := range total {
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("lq-%d", i), Name: "gated", QueueName: "lq"})
	}
	require.NoError(t, w.Register(context.Background(), map[string]client.WorkflowFunc{"gated": g.workflow("w")},
		[]protocol.QueueRegistration{{Name: "lq", WorkerConcurrency: intp(1)}}))
	g.waitEntered(t, 1)
	clock := startClock(t, a.socket)
	clock.waitTicks(t, 2)
	require.Empty(t, g.entered, "the registered worker_concurrency was not applied")
	g.drain(t, 1, total)
	for i := range total {
		id := fmt.Sprintf("lq-%d", i)
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status, id)
		g.requireRanOnce(t, id)
	}
	require.Equal(t, 1, g.max("all"))
	var q protocol.QueueInfo
	require.NoError(t, c.Call(context.Background(), protocol.OpGetQueue, &protocol.QueueRef{Name: "lq"}, &q))
	// The row as stored, with the SDKs' default polling interval and its owner.
	require.Equal(t, protocol.QueueInfo{Name: "lq", Registered: true, WorkerConcurrency: intp(1), PollingIntervalSec: 1, ApplicationName: "e2e"}, q)
}

// TestRegisterBounds: register is validated as hello is (each field, each
// name once per request, a path in the message), the worker's functions
// and queues count together across hello and every register, a name
// registered again is idempotent and counts once, and a client registers
// nothing.
func TestRegisterBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialRaw(t, a.socket)
	fns := func(from, to int) []protocol.WorkflowRegistration {
		regs := make([]protocol.WorkflowRegistration, 0, to-from)
		for i := from; i < to; i++ {
			regs = append(regs, protocol.WorkflowRegistration{Name: fmt.Sprintf("wf%05d", i)})
		}
		return regs
	}
	bound := protocol.MaxWorkflowsPerWorker
	require.Nil(t, c.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker, AppName: "e2e", Workflows: fns(0, bound-10)}).Error)

	requireFieldError(t, c.request(protocol.OpRegister, &protocol.Register{}), "register")
	requireFieldError(t, c.request(protocol.OpRegister, &protocol.Register{Workflows: fns(0, bound+1)}), "register.workflows")
	requireFieldError(t, c.request(protocol.OpRegister, &protocol.Register{Workflows: []protocol.WorkflowRegistration{{Name: "a"}, {Name: "a"}}}),
		"register.workflows[1].name")
	requireFieldError(t, c.request(protocol.OpRegister, &protocol.Register{Workflows: []protocol.WorkflowRegistration{{Name: "bad\x00name"}}}),
		"register.workflows[0].name")
	requireFieldError(t, c.request(protocol.OpRegister, &protocol.Register{Workflows: []protocol.WorkflowRegistration{{Name: "a", MaxRecoveryAttempts: -1}}}),
		"register.workflows[0].max_recovery_attempts")
	requireFieldError(t, c.request(protocol.OpRegister, &protocol.Register{Queues: []protocol.QueueRegistration{{Name: protocol.InternalQueueName}}}),
		"register.queues[0].name")

	// Ten more fit; names already registered count once, whatever their
	// options; the one past the bound is refused, naming the totals.
	require.Nil(t, c.request(protocol.OpRegister, &protocol.Register{Workflows: fns(bound-10, bound)}).Error)
	again := fns(0, 5)
	again[0].MaxRecoveryAttempts = 7
	require.Nil(t, c.request(protocol.OpRegister, &protocol.Register{Workflows: again}).Error, "registering names again is idempotent")
	over := c.request(protocol.OpRegister, &protocol.Register{Workflows: fns(bound, bound+1)})
	requireFieldError(t, over, "register.workflows")
	require.Contains(t, over.Error.Message, fmt.Sprintf("would register %d workflow functions; a worker registers at most %d", bound+1, bound))
	// A refused register writes nothing: its queue is not created.
	refused := c.request(protocol.OpRegister, &protocol.Register{Workflows: fns(bound, bound+1), Queues: []protocol.QueueRegistration{{Name: "not-written", Concurrency: intp(1)}}})
	requireFieldError(t, refused, "register.workflows")
	require.Empty(t, e.queuesTable(t))

	cl := dialRaw(t, a.socket)
	require.Nil(t, cl.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, Role: protocol.RoleClient, AppName: "e2e"}).Error)
	refusedClient := cl.request(protocol.OpRegister, &protocol.Register{Workflows: []protocol.WorkflowRegistration{{Name: "a"}}})
	requireCode(t, refusedClient, protocol.CodeInvalidArgument)
	require.Contains(t, refusedClient.Error.Message, "only a worker")
}

// TestLateRegisteredFunctionsScheduleFires: a schedule of a workflow that
// a worker registers only after its hello fires once it does, within
// seconds, though the agent re-reads its schedules only once a minute
// here: the registration makes it look again. The ticks run on that
// worker.
func TestLateRegisteredFunctionsScheduleFires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: append([]string{"--schedule-interval", "1m"}, slowPolls...)})
	w := qWorker(t, a.socket, client.WorkerConfig{})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{
		ScheduleName: "every-second", WorkflowName: "late_tick", Cron: "* * * * * *",
	}, nil))
	ticks := make(chan string, 64)
	registered := time.Now()
	require.NoError(t, w.Register(ctx, map[string]client.WorkflowFunc{
		"late_tick": func(wf *client.Workflow, _ *string) (*string, error) {
			ticks <- wf.ID()
			return str("ticked"), nil
		},
	}, nil))
	var id string
	select {
	case id = <-ticks:
	case <-time.After(promptly):
		t.Fatalf("no tick of the late-registered workflow within %s", promptly)
	}
	t.Logf("first tick ran %s after the register", time.Since(registered).Round(time.Millisecond))
	require.Regexp(t, `^sched-every-second-`, id)
	require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status)
}
