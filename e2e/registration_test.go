package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// queuesTable is the test schema's queues table as text, row by row: what
// the DBOS SDKs sharing the database would read.
func (e *env) queuesTable(t *testing.T) []string {
	t.Helper()
	conn := e.commSQL()
	rows, err := conn.Query(context.Background(), "SELECT row_to_json(q)::text FROM "+e.commTable("queues")+" AS q ORDER BY name")
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var row string
		require.NoError(t, rows.Scan(&row))
		out = append(out, row)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireFieldError checks an invalid_argument that names the field path.
func requireFieldError(t *testing.T, env protocol.Envelope, path string) {
	t.Helper()
	requireCode(t, env, protocol.CodeInvalidArgument)
	require.True(t, strings.HasPrefix(env.Error.Message, path+": "), "message %q names %s", env.Error.Message, path)
}

// TestAbsurdHelloGetsInvalidArgumentAndWritesNothing: each class of absurd
// registration is answered at once with invalid_argument naming the
// field, and the shared queues table is left as it was (read from the
// database), although the bad queue comes after a good one.
func TestAbsurdHelloGetsInvalidArgumentAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	c := dialRaw(t, agent.socket)
	ok := c.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker, AppName: "e2e",
		Workflows: []protocol.WorkflowRegistration{{Name: "w"}},
		Queues:    []protocol.QueueRegistration{{Name: "kept", Concurrency: intp(3)}}})
	require.Nil(t, ok.Error)
	before := e.queuesTable(t)
	require.Len(t, before, 1)

	many := make([]protocol.QueueRegistration, 10000)
	for i := range many {
		many[i] = protocol.QueueRegistration{Name: fmt.Sprintf("q%05d", i), Concurrency: intp(1)}
	}
	first := protocol.QueueRegistration{Name: "would-be-written", Concurrency: intp(2)}
	for _, tc := range []struct {
		name, path string
		bad        protocol.QueueRegistration
		hello      *protocol.Hello // instead of a hello with first and bad
	}{
		{name: "negative concurrency", path: "hello.queues[1].concurrency", bad: protocol.QueueRegistration{Name: "b", Concurrency: intp(-1)}},
		{name: "negative worker concurrency", path: "hello.queues[1].worker_concurrency", bad: protocol.QueueRegistration{Name: "b", WorkerConcurrency: intp(-4)}},
		{name: "NaN rate-limit period", path: "hello.queues[1].rate_limit_period_sec",
			bad: protocol.QueueRegistration{Name: "b", RateLimitMax: intp(5), RateLimitPeriodSec: floatp(math.NaN())}},
		{name: "infinite rate-limit period", path: "hello.queues[1].rate_limit_period_sec",
			bad: protocol.QueueRegistration{Name: "b", RateLimitMax: intp(5), RateLimitPeriodSec: floatp(math.Inf(1))}},
		{name: "zero rate-limit period", path: "hello.queues[1].rate_limit_period_sec",
			bad: protocol.QueueRegistration{Name: "b", RateLimitMax: intp(5), RateLimitPeriodSec: floatp(0)}},
		{name: "NaN polling interval", path: "hello.queues[1].polling_interval_sec", bad: protocol.QueueRegistration{Name: "b", PollingIntervalSec: math.NaN()}},
		{name: "1 MB queue name", path: "hello.queues[1].name", bad: protocol.QueueRegistration{Name: strings.Repeat("n", 1<<20)}},
		{name: "NUL in a queue name", path: "hello.queues[1].name", bad: protocol.QueueRegistration{Name: "bad\x00name"}},
		{name: "NUL in a workflow name", path: "hello.workflows[0].name", hello: &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker,
			AppName: "e2e", Workflows: []protocol.WorkflowRegistration{{Name: "w\x00"}}, Queues: []protocol.QueueRegistration{first}}},
		{name: "1 MB app name", path: "hello.app_name", hello: &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker,
			AppName: strings.Repeat("a", 1<<20), Queues: []protocol.QueueRegistration{first}}},
		{name: "10,000 queues", path: "hello.queues", hello: &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker,
			AppName: "e2e", Workflows: []protocol.WorkflowRegistration{{Name: "w"}}, Queues: many}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.hello
			if h == nil {
				h = &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker, AppName: "e2e",
					Workflows: []protocol.WorkflowRegistration{{Name: "w"}}, Queues: []protocol.QueueRegistration{first, tc.bad}}
			}
			c := dialRaw(t, agent.socket)
			start := time.Now()
			env := c.request(protocol.OpHello, h)
			took := time.Since(start)
			requireFieldError(t, env, tc.path)
			require.Less(t, took, 5*time.Second, "answered promptly")
			require.Less(t, len(env.Error.Message), 300, "the message does not echo the value")
			require.Equal(t, before, e.queuesTable(t), "nothing was written")
			// The connection stays open, and a good hello is then accepted.
			require.Nil(t, c.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, Role: protocol.RoleClient, AppName: "e2e"}).Error)
		})
	}

	// After the hello, register_queues follows the same rules.
	requireFieldError(t, c.request(protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{
		first, {Name: "b", RateLimitMax: intp(1), RateLimitPeriodSec: floatp(math.Inf(-1))}}}),
		"register_queues.queues[1].rate_limit_period_sec")
	requireFieldError(t, c.request(protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: many}), "register_queues.queues")
	require.Equal(t, before, e.queuesTable(t), "nothing was written")
	// The worker's queues count together: 999 more make 1000, one more
	// than that is refused.
	require.Nil(t, c.request(protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: many[:protocol.MaxQueuesPerWorker-1]}).Error)
	requireFieldError(t, c.request(protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: many[protocol.MaxQueuesPerWorker-1 : protocol.MaxQueuesPerWorker]}),
		"register_queues.queues")
	require.Len(t, e.queuesTable(t), protocol.MaxQueuesPerWorker)
}

// TestHelloAtTheQueueBoundIsAnsweredPromptly: the most queues a worker may
// register in one hello are registered and answered within seconds (a
// hello with 10,000 went unanswered before registrations were bounded).
func TestHelloAtTheQueueBoundIsAnsweredPromptly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	queues := make([]protocol.QueueRegistration, protocol.MaxQueuesPerWorker)
	for i := range queues {
		queues[i] = protocol.QueueRegistration{Name: fmt.Sprintf("bound-%04d", i), WorkerConcurrency: intp(1)}
	}
	c := dialRaw(t, agent.socket)
	start := time.Now()
	env := c.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker, AppName: "e2e",
		Workflows: []protocol.WorkflowRegistration{{Name: "w"}}, Queues: queues})
	took := time.Since(start)
	require.Nil(t, env.Error)
	t.Logf("a hello with %d queues was answered in %v", len(queues), took)
	require.Less(t, took, 20*time.Second)
	require.Len(t, e.queuesTable(t), protocol.MaxQueuesPerWorker)
}

// TestSharedConfigurationWritesAreValidated: the other requests that write
// shared configuration (schedules, versions, attributes) refuse bad values
// by field, and write nothing.
func TestSharedConfigurationWritesAreValidated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	c := dialRaw(t, agent.socket)
	c.hello()
	for _, tc := range []struct {
		op, path string
		body     any
	}{
		{protocol.OpCreateSchedule, "create_schedule.schedule_name", &protocol.Schedule{ScheduleName: "n\x00", WorkflowName: "w", Cron: "* * * * *"}},
		{protocol.OpCreateSchedule, "create_schedule.workflow_name", &protocol.Schedule{ScheduleName: "n", WorkflowName: strings.Repeat("w", 1<<20), Cron: "* * * * *"}},
		{protocol.OpCreateSchedule, "create_schedule.context", &protocol.Schedule{ScheduleName: "n", WorkflowName: "w", Cron: "* * * * *", Context: `{"a":"\u0000"}`}},
		{protocol.OpCreateSchedule, "create_schedule.queue_name", &protocol.Schedule{ScheduleName: "n", WorkflowName: "w", Cron: "* * * * *", QueueName: "q\n"}},
		{protocol.OpPauseSchedule, "pause_schedule.schedule_name", &protocol.ScheduleRef{ScheduleName: "\x00"}},
		{protocol.OpBackfillSchedule, "backfill_schedule.end_epoch_ms", &protocol.BackfillSchedule{ScheduleName: "n", StartEpochMS: 5, EndEpochMS: 5}},
		{protocol.OpPromoteVersion, "promote_version.version_name", &protocol.VersionRef{VersionName: strings.Repeat("v", 256)}},
		{protocol.OpUpdateAttributes, "update_workflow_attributes.attributes", &protocol.UpdateAttributes{WorkflowID: "w", Attributes: str(`{"k":"\u0000"}`)}},
	} {
		requireFieldError(t, c.request(tc.op, tc.body), tc.path)
	}
	var n int
	require.NoError(t, e.commSQL().QueryRow(context.Background(), "SELECT count(*) FROM "+e.commTable("workflow_schedules")).Scan(&n))
	require.Zero(t, n, "no schedule was written")
}

// TestWorkerConcurrencyZero: a worker_concurrency of 0 is DBOS Python's pause
// of dequeuing, accepted as it accepts it: stored in the row, it lets neither
// the worker that registered it nor one that subscribes by name start any of
// the queue's workflows; a worker with a limit of its own runs them.
func TestWorkerConcurrencyZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ran, run := recordingWorkflow("zq_wf")
	clock := startClock(t, agent.socket)
	qWorker(t, agent.socket, client.WorkerConfig{AppName: "e2e", Workflows: run,
		Queues: []protocol.QueueRegistration{{Name: "zq", WorkerConcurrency: intp(0)}}})
	var stored *int
	require.NoError(t, e.commSQL().QueryRow(context.Background(),
		"SELECT worker_concurrency FROM "+e.commTable("queues")+" WHERE name = 'zq'").Scan(&stored))
	require.NotNil(t, stored)
	require.Equal(t, 0, *stored)
	qWorker(t, agent.socket, client.WorkerConfig{AppName: "e2e", Workflows: run, Queues: []protocol.QueueRegistration{{Name: "zq"}}})
	c := dialClient(t, agent.socket)
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "zq-1", Name: "zq_wf", QueueName: "zq"})
	clock.waitTicks(t, 2)
	require.Equal(t, "ENQUEUED", getWorkflow(t, c, "zq-1").Status)
	require.Empty(t, ran)

	// A worker that registers a worker_concurrency of its own runs it.
	qWorker(t, agent.socket, client.WorkerConfig{AppName: "e2e", Workflows: run,
		Queues: []protocol.QueueRegistration{{Name: "zq", WorkerConcurrency: intp(1)}}})
	require.Equal(t, "SUCCESS", awaitResult(t, c, "zq-1").Status)
	require.Equal(t, "zq-1", recv(t, ran, "the run"))
}

// TestConfigureOnlyQueueIsStoredNotServed: a registration marked
// configure_only (DBOS's listen_queues leaving a declared queue out) writes
// the queue's row but does not serve it, in a hello and in a later register
// that takes back a queue the worker served.
func TestConfigureOnlyQueueIsStoredNotServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ran, run := recordingWorkflow("cq_wf")
	clock := startClock(t, agent.socket)
	w := qWorker(t, agent.socket, client.WorkerConfig{AppName: "e2e", Workflows: run, Queues: []protocol.QueueRegistration{
		{Name: "cq_stored", Concurrency: intp(3), ConfigureOnly: true}, {Name: "cq_taken_back"}}})
	var concurrency *int
	require.NoError(t, e.commSQL().QueryRow(context.Background(),
		"SELECT concurrency FROM "+e.commTable("queues")+" WHERE name = 'cq_stored'").Scan(&concurrency))
	require.NotNil(t, concurrency)
	require.Equal(t, 3, *concurrency)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.Register(ctx, nil, []protocol.QueueRegistration{{Name: "cq_taken_back", ConfigureOnly: true}}))
	c := dialClient(t, agent.socket)
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "cq-1", Name: "cq_wf", QueueName: "cq_stored"})
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "cq-2", Name: "cq_wf", QueueName: "cq_taken_back"})
	clock.waitTicks(t, 2)
	require.Equal(t, "ENQUEUED", getWorkflow(t, c, "cq-1").Status)
	require.Equal(t, "ENQUEUED", getWorkflow(t, c, "cq-2").Status)
	require.Empty(t, ran)

	qWorker(t, agent.socket, client.WorkerConfig{AppName: "e2e", Workflows: run, Queues: []protocol.QueueRegistration{
		{Name: "cq_stored"}, {Name: "cq_taken_back"}}})
	require.Equal(t, "SUCCESS", awaitResult(t, c, "cq-1").Status)
	require.Equal(t, "SUCCESS", awaitResult(t, c, "cq-2").Status)
}

// recordingWorkflow is a workflow function of that name that sends the id
// of each run it makes on ran.
func recordingWorkflow(name string) (ran chan string, run map[string]client.WorkflowFunc) {
	ran = make(chan string, 4)
	return ran, map[string]client.WorkflowFunc{name: func(wf *client.Workflow, _ *string) (*string, error) {
		ran <- wf.ID()
		return str("ran"), nil
	}}
}

// TestHelloWithAQueueOwnedElsewhereWritesNothing: the queues of one hello
// are registered all or none, so one that another application owns leaves
// the others unwritten (they used to be written one at a time, up to the
// refused one).
func TestHelloWithAQueueOwnedElsewhereWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	bank := dialRaw(t, agent.socket)
	require.Nil(t, bank.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker, AppName: "bank",
		Workflows: []protocol.WorkflowRegistration{{Name: "w"}}, Queues: []protocol.QueueRegistration{{Name: "payments"}}}).Error)
	before := e.queuesTable(t)
	require.Len(t, before, 1)

	shop := dialRaw(t, agent.socket)
	env := shop.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, Role: protocol.RoleWorker, AppName: "shop",
		Workflows: []protocol.WorkflowRegistration{{Name: "w"}},
		Queues:    []protocol.QueueRegistration{{Name: "aaa-first"}, {Name: "payments"}, {Name: "zzz-last"}}})
	requireCode(t, env, protocol.CodeInvalidArgument)
	require.Contains(t, env.Error.Message, "payments")
	require.Contains(t, env.Error.Message, "no queue of this registration was written")
	require.Equal(t, before, e.queuesTable(t), "neither the queue before nor the one after the refused one was written")
}
