package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// TestCommMessageWaitsForItsReceiverOnceAndAllOrNone: messages sent to a
// workflow that no worker runs yet are delivered when it runs; a send
// retried with its idempotency key delivers once; a send with one missing
// destination delivers nothing.
func TestCommMessageWaitsForItsReceiverOnceAndAllOrNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "inbox", Name: "receiver", QueueName: "mail", Serialization: "portable_json"})

	send := func(messages ...protocol.Message) error { return c.Send(ctx, protocol.Send{Messages: messages}) }
	require.NoError(t, send(portableMessage("inbox", "greet", `"hello"`)))
	once := portableMessage("inbox", "greet", `"once"`)
	once.IdempotencyKey = "k-1"
	require.NoError(t, send(once))
	require.NoError(t, send(once))
	requireErrCode(t, send(portableMessage("inbox", "greet", `"lost"`), portableMessage("nobody", "greet", `"x"`)), protocol.CodeWorkflowNotFound)

	qWorker(t, a.socket, client.WorkerConfig{
		Queues: []protocol.QueueRegistration{{Name: "mail"}},
		Workflows: map[string]client.WorkflowFunc{"receiver": func(wf *client.Workflow, _ *string) (*string, error) {
			var got []string
			for {
				r, err := wf.Recv(str("greet"), 500*time.Millisecond)
				if err != nil {
					return nil, err
				}
				if !r.Received {
					out := jsonText(t, got)
					return &out, nil
				}
				got = append(got, *r.Message)
			}
		}},
	})
	res := awaitResult(t, c, "inbox")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.JSONEq(t, `["\"hello\"", "\"once\""]`, *res.Output)

	rows, err := e.commSQL().Query(ctx, "SELECT message, consumed, message_uuid FROM "+e.commTable("notifications")+
		" WHERE destination_uuid = 'inbox' ORDER BY created_at_epoch_ms, message")
	require.NoError(t, err)
	type row struct {
		message, uuid string
		consumed      bool
	}
	var stored []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.message, &r.consumed, &r.uuid))
		stored = append(stored, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, stored, 2, "one row per delivered message: %v", stored)
	for _, r := range stored {
		require.True(t, r.consumed, "%v", r)
	}
	require.Contains(t, []string{stored[0].uuid, stored[1].uuid}, "k-1::inbox")
}

// TestCommDurableSleepAndRecvTimeout: a durable sleep is a DBOS.sleep step
// the worker sleeps out; a recv with no message answers at its deadline with
// nothing, recorded at N with a nil message and its deadline at N+1 as
// DBOS.sleep.
func TestCommDurableSleepAndRecvTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket)
	const nap, timeout = 200 * time.Millisecond, 300 * time.Millisecond
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"waiter": func(wf *client.Workflow, _ *string) (*string, error) {
		start := time.Now()
		if err := wf.Sleep(nap); err != nil {
			return nil, err
		}
		slept := time.Since(start)
		r, err := wf.Recv(nil, timeout)
		if err != nil {
			return nil, err
		}
		out := jsonText(t, map[string]any{"received": r.Received, "slept": slept >= nap, "waited": time.Since(start)-slept >= timeout})
		return &out, nil
	}}})
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "lonely", Name: "waiter", Serialization: "portable_json"})
	res := awaitResult(t, c, "lonely")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.JSONEq(t, `{"received": false, "slept": true, "waited": true}`, *res.Output)

	steps := listSteps(t, c, "lonely")
	require.Len(t, steps, 3)
	for i, name := range []string{protocol.StepSleep, protocol.StepRecv, protocol.StepSleep} {
		require.Equal(t, name, steps[i].Name)
		require.Equal(t, i+1, steps[i].FunctionID)
	}
	require.Nil(t, steps[1].Output, "a timed-out recv records nothing")
}

// TestCommConcurrentReceiversConsumeEachMessageOnce: many recvs on one
// destination and topic, through two agents on one database, race many
// sends made through both: every message is consumed exactly once, by the
// recv step recorded with it, and no recv gives up before its deadline.
func TestCommConcurrentReceiversConsumeEachMessageOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.startTwoAgents()
	ctx := context.Background()
	// The workflow is started for its owner token only; its function is
	// never called (run_here hands the run to the caller, who ignores it).
	wa := qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"sink": nil}})
	wb := qWorker(t, b.socket, client.WorkerConfig{})
	started, err := wa.Client.StartWorkflow(ctx, protocol.StartWorkflow{WorkflowID: "sink", Name: "sink", RunHere: true, Serialization: "portable_json"})
	require.NoError(t, err)
	require.NotNil(t, started.Run)
	owner := started.Run.OwnerXID
	senders := []*client.Client{dialClient(t, a.socket), dialClient(t, b.socket)}
	receivers := []*client.Client{wa.Client, wb.Client}

	// Each receiver receives until it gets "end"; one "end" per receiver
	// is sent once every message is, so the ends come last.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	const messages, receiversPerAgent = 200, 16
	const end = `"end"`
	var nextRecv, nextSend atomic.Int64
	got := make(chan string, messages)
	errs := make(chan error, 2*receiversPerAgent+len(senders)+1)
	var receiving, sending sync.WaitGroup
	for g := 0; g < 2*receiversPerAgent; g++ {
		receiving.Add(1)
		go func(c *client.Client) {
			defer receiving.Done()
			for {
				// Recv i is the step 2i+1, its deadline 2i+2.
				i := int(nextRecv.Add(1)) - 1
				r, err := c.Recv(ctx, protocol.Recv{
					Caller:            protocol.Caller{WorkflowID: "sink", OwnerXID: owner, FunctionID: 2*i + 1},
					TimeoutFunctionID: 2*i + 2, Topic: str("t"), TimeoutMS: signalWait.Milliseconds(),
				})
				switch {
				case err != nil:
					errs <- err
					return
				case !r.Received:
					// Losing a race to another receiver is no reason to
					// give up before the deadline.
					errs <- fmt.Errorf("recv %d answered nothing before its deadline", i)
					return
				case *r.Message == end:
					return
				default:
					got <- *r.Message
				}
			}
		}(receivers[g%2])
	}
	send := func(c *client.Client, payload string) bool {
		err := c.Send(ctx, protocol.Send{Messages: []protocol.Message{portableMessage("sink", "t", payload)}})
		if err != nil {
			errs <- err
		}
		return err == nil
	}
	for _, c := range senders {
		sending.Add(1)
		go func(c *client.Client) {
			defer sending.Done()
			for {
				i := int(nextSend.Add(1)) - 1
				if i >= messages || !send(c, fmt.Sprintf(`"m-%03d"`, i)) {
					return
				}
			}
		}(c)
	}
	sending.Wait()
	for g := 0; g < 2*receiversPerAgent; g++ {
		if !send(senders[g%2], end) {
			stop() // the receivers would wait for ends that never come
			break
		}
	}
	receiving.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	close(got)
	seen := map[string]int{}
	for m := range got {
		seen[m]++
	}
	require.Len(t, seen, messages)
	for m, n := range seen {
		require.Equal(t, 1, n, "message %s received %d times", m, n)
	}

	// In the database: every row consumed, each by its own recv step, whose
	// recorded output is that row's message.
	conn := e.commSQL()
	recorded := map[int]*string{}
	rows, err := conn.Query(ctx, "SELECT function_id, output FROM "+e.commTable("operation_outputs")+
		" WHERE workflow_uuid = 'sink' AND function_name = $1", protocol.StepRecv)
	require.NoError(t, err)
	for rows.Next() {
		var fid int
		var out *string
		require.NoError(t, rows.Scan(&fid, &out))
		recorded[fid] = out
	}
	require.NoError(t, rows.Err())
	require.Len(t, recorded, int(nextRecv.Load()), "one recv step per recv")
	rows, err = conn.Query(ctx, "SELECT message, consumed, consumed_by_function_id FROM "+e.commTable("notifications")+
		" WHERE destination_uuid = 'sink'")
	require.NoError(t, err)
	consumers := map[int]bool{}
	n := 0
	for rows.Next() {
		var msg string
		var consumed bool
		var by *int
		require.NoError(t, rows.Scan(&msg, &consumed, &by))
		require.True(t, consumed, "message %s not consumed", msg)
		require.NotNil(t, by, "message %s has no consumer", msg)
		require.False(t, consumers[*by], "step %d consumed two messages", *by)
		consumers[*by] = true
		require.NotNil(t, recorded[*by], "step %d consumed %s but recorded nothing", *by, msg)
		require.Equal(t, msg, *recorded[*by], "step %d recorded another message than it consumed", *by)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, messages+2*receiversPerAgent, n)
}

// TestCommRecvWokenBySendThroughAnotherAgent: a workflow waits in recv on one
// agent with a deadline far away; a send made through another agent on the
// same database wakes it.
func TestCommRecvWokenBySendThroughAnotherAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.startTwoAgents()
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"waiter": recvOnce("wake", 10*time.Minute)}})
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	enqueue(t, ca, protocol.StartWorkflow{WorkflowID: "sleeper", Name: "waiter", Serialization: "portable_json"})
	waitForStep(t, ca, "sleeper", 2) // the deadline is recorded: it waits

	sendMessage(t, cb, "sleeper", "wake", `"ring"`)
	res := awaitResultWithin(t, ca, "sleeper", signalWait)
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.Equal(t, `"ring"`, *res.Output)
}

// recvOnce is a workflow that receives one message on topic and returns it.
func recvOnce(topic string, timeout time.Duration) client.WorkflowFunc {
	return func(wf *client.Workflow, _ *string) (*string, error) {
		r, err := wf.Recv(&topic, timeout)
		if err != nil {
			return nil, err
		}
		if !r.Received {
			return nil, errors.New("no message")
		}
		return r.Message, nil
	}
}

// TestCommKilledAgentRecoveredRecvKeepsItsDeadline: the agent is SIGKILLed
// while a workflow waits in recv; a message is sent through another agent
// meanwhile. After the restart the recovered workflow replays its step and
// its event from the history, keeps the deadline recorded before the crash (the DBOS.sleep row is
// untouched) and receives the message.
func TestCommKilledAgentRecoveredRecvKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	first := e.startAgent(agentOptions{executorID: "host-a", socketName: "a.sock"})
	other := e.startAgent(agentOptions{executorID: "host-b", socketName: "b.sock"})
	var before atomic.Int64
	patient := func(wf *client.Workflow, _ *string) (*string, error) {
		if _, err := wf.Step("before", func(context.Context) (*string, error) {
			before.Add(1)
			return str(`"done"`), nil
		}); err != nil {
			return nil, err
		}
		if err := wf.SetEvent("phase", `"waiting"`); err != nil { // replayed from the history after the crash
			return nil, err
		}
		return recvOnce("late", 10*time.Minute)(wf, nil)
	}
	w := qWorker(t, first.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"patient": patient}})
	cOther := dialClient(t, other.socket)
	enqueue(t, dialClient(t, first.socket), protocol.StartWorkflow{WorkflowID: "patient-1", Name: "patient", Serialization: "portable_json"})
	waitForStep(t, cOther, "patient-1", 4)

	type sleepRow struct {
		name, serialization string
		output              *string
		started, completed  *int64
	}
	readSleep := func() sleepRow {
		var r sleepRow
		require.NoError(t, e.commSQL().QueryRow(ctx, "SELECT function_name, output, serialization, started_at_epoch_ms, completed_at_epoch_ms FROM "+
			e.commTable("operation_outputs")+" WHERE workflow_uuid = 'patient-1' AND function_id = 4").
			Scan(&r.name, &r.output, &r.serialization, &r.started, &r.completed))
		return r
	}
	deadline := readSleep()
	require.Equal(t, protocol.StepSleep, deadline.name)
	require.NotNil(t, deadline.output)

	first.kill()
	w.Close()
	sendMessage(t, cOther, "patient-1", "late", `"after-crash"`)

	restarted := e.startAgent(agentOptions{executorID: "host-a", socketName: "a2.sock"})
	qWorker(t, restarted.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"patient": patient}})
	c := dialClient(t, restarted.socket)
	res := awaitResult(t, c, "patient-1")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.Equal(t, `"after-crash"`, *res.Output)
	require.Equal(t, int64(1), before.Load(), "the recorded step ran again")
	require.Equal(t, deadline, readSleep(), "the recovered recv recorded another deadline")
	steps := listSteps(t, c, "patient-1")
	require.Len(t, steps, 4)
	require.Equal(t, protocol.StepRecv, steps[2].Name)
	require.Equal(t, `"after-crash"`, *steps[2].Output)
	var published int
	require.NoError(t, e.commSQL().QueryRow(ctx, "SELECT count(*) FROM "+e.commTable("workflow_events_history")+
		" WHERE workflow_uuid = 'patient-1'").Scan(&published))
	require.Equal(t, 1, published, "the event was published again on replay")
}

// TestCommEventsAcrossAgents: a workflow on one agent publishes events; a
// workflow and an outside reader on another agent, both already waiting,
// get them; a read of a key never set ends at its timeout with nothing.
func TestCommEventsAcrossAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.startTwoAgents()
	ctx := context.Background()
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"publisher": func(wf *client.Workflow, _ *string) (*string, error) {
		if _, err := recvOnce("go", time.Minute)(wf, nil); err != nil {
			return nil, err
		}
		for _, ev := range [][2]string{{"status", `"ready"`}, {"count", `1`}, {"count", `2`}} {
			if err := wf.SetEvent(ev[0], ev[1]); err != nil {
				return nil, err
			}
		}
		return str(`"published"`), nil
	}}})
	qWorker(t, b.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"subscriber": func(wf *client.Workflow, _ *string) (*string, error) {
		r, err := wf.GetEvent("pub", "status", time.Minute)
		if err != nil {
			return nil, err
		}
		if !r.Found {
			return nil, errors.New("event not found")
		}
		return r.Value, nil
	}}})
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	enqueue(t, ca, protocol.StartWorkflow{WorkflowID: "pub", Name: "publisher", Serialization: "portable_json"})
	enqueue(t, cb, protocol.StartWorkflow{WorkflowID: "sub", Name: "subscriber", Serialization: "portable_json"})
	waitForStep(t, cb, "sub", 2) // waiting for the event
	outside := awaitEvent(cb, "pub", "status")

	// Nothing set yet: a read with a short timeout ends with nothing.
	start := time.Now()
	none, err := cb.GetEvent(ctx, protocol.GetEvent{WorkflowID: "pub", Key: "status", TimeoutMS: 200})
	require.NoError(t, err)
	require.False(t, none.Found)
	require.Nil(t, none.Value)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	sendMessage(t, ca, "pub", "go", `"go"`)
	got := recv(t, outside, "event from outside")
	require.True(t, got.Found, "%v", got.Value)
	require.Equal(t, `"ready"`, *got.Value)
	require.Equal(t, "portable_json", got.Serialization)

	res := awaitResult(t, cb, "sub")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.Equal(t, `"ready"`, *res.Output)
	steps := listSteps(t, cb, "sub")
	require.Equal(t, []string{protocol.StepGetEvent, protocol.StepSleep}, []string{steps[0].Name, steps[1].Name})
	require.Equal(t, `"ready"`, *steps[0].Output)

	require.Equal(t, "SUCCESS", awaitResult(t, ca, "pub").Status)
	events, err := cb.GetAllEvents(ctx, "pub")
	require.NoError(t, err)
	sort.Slice(events, func(i, j int) bool { return events[i].Key < events[j].Key })
	require.Equal(t, []protocol.Event{
		{Key: "count", Value: `2`, Serialization: "portable_json"},
		{Key: "status", Value: `"ready"`, Serialization: "portable_json"},
	}, events)

	never, err := ca.GetEvent(ctx, protocol.GetEvent{WorkflowID: "pub", Key: "never", TimeoutMS: 100})
	require.NoError(t, err)
	require.False(t, never.Found)
}

// TestCommStreams: a reader on another agent follows a stream while it is
// written and sees it closed; a write after the close is accepted (as DBOS
// Python 3.4 accepts it) and never read; a
// stream whose writer ended without closing it ends; a read with a timeout
// on a live stream with nothing new ends empty; a workflow that does not
// exist has no stream to read.
func TestCommStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.startTwoAgents()
	ctx := context.Background()
	const written = 5
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{
		"closing": func(wf *client.Workflow, _ *string) (*string, error) {
			if _, err := recvOnce("go", time.Minute)(wf, nil); err != nil {
				return nil, err
			}
			for i := 0; i < written; i++ {
				if err := wf.WriteStream("s", fmt.Sprint(i)); err != nil {
					return nil, err
				}
			}
			if err := wf.CloseStream("s"); err != nil {
				return nil, err
			}
			if err := wf.WriteStream("s", `"late"`); err != nil {
				return nil, fmt.Errorf("write after close: %w", err)
			}
			return str(`"written after close"`), nil
		},
		"open": func(wf *client.Workflow, _ *string) (*string, error) {
			for _, v := range []string{`"a"`, `"b"`} {
				if err := wf.WriteStream("s", v); err != nil {
					return nil, err
				}
			}
			return nil, nil
		},
	}})
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	enqueue(t, ca, protocol.StartWorkflow{WorkflowID: "closing", Name: "closing", Serialization: "portable_json"})
	waitForStep(t, ca, "closing", 2)

	// The writer is active and wrote nothing: a read with a timeout ends
	// empty, neither closed nor ended.
	empty, err := cb.ReadStream(ctx, protocol.ReadStream{WorkflowID: "closing", Key: "s", TimeoutMS: 200})
	require.NoError(t, err)
	require.Equal(t, protocol.ReadStreamReply{Values: empty.Values}, empty)
	require.Empty(t, empty.Values)

	type readResult struct {
		values []protocol.StreamValue
		closed bool
		err    error
	}
	read := make(chan readResult, 1)
	go func() {
		values, closed, err := cb.ReadStreamAll(ctx, "closing", "s")
		read <- readResult{values, closed, err}
	}()
	sendMessage(t, ca, "closing", "go", `"go"`)
	r := recv(t, read, "the stream's end")
	require.NoError(t, r.err)
	require.True(t, r.closed)
	require.Len(t, r.values, written)
	for i, v := range r.values {
		require.Equal(t, protocol.StreamValue{Offset: i, Value: fmt.Sprint(i), Serialization: "portable_json"}, v)
	}
	res := awaitResult(t, ca, "closing")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.Equal(t, `"written after close"`, *res.Output)
	// The late value is stored, after the marker, and a read still ends at the marker.
	values, closed, err := cb.ReadStreamAll(ctx, "closing", "s")
	require.NoError(t, err)
	require.True(t, closed)
	require.Len(t, values, written)

	enqueue(t, ca, protocol.StartWorkflow{WorkflowID: "open", Name: "open", Serialization: "portable_json"})
	require.Equal(t, "SUCCESS", awaitResult(t, ca, "open").Status)
	values, closed, err = cb.ReadStreamAll(ctx, "open", "s")
	require.NoError(t, err)
	require.False(t, closed)
	require.Equal(t, []protocol.StreamValue{
		{Offset: 0, Value: `"a"`, Serialization: "portable_json"},
		{Offset: 1, Value: `"b"`, Serialization: "portable_json"},
	}, values)
	tail, err := cb.ReadStream(ctx, protocol.ReadStream{WorkflowID: "open", Key: "s", Offset: 2})
	require.NoError(t, err)
	require.True(t, tail.Ended)
	require.Empty(t, tail.Values)
	_, err = cb.ReadStream(ctx, protocol.ReadStream{WorkflowID: "no-such-workflow", Key: "s"})
	requireErrCode(t, err, protocol.CodeWorkflowNotFound)
}

// TestCommBadInput: malformed communication requests answer
// invalid_argument and the connection keeps serving; a rewind of an active
// workflow answers workflow_active.
func TestCommBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	raw := dialRaw(t, a.socket)
	raw.hello()
	for _, bad := range []struct {
		op   string
		body any
	}{
		{protocol.OpReadStream, map[string]any{}},
		{protocol.OpReadStream, map[string]any{"key": "s"}},
		{protocol.OpReadStream, map[string]any{"workflow_id": 5, "key": "s"}},
		{protocol.OpReadStream, map[string]any{"workflow_id": "w", "key": "s", "offset": "zero"}},
		{protocol.OpReadStream, map[string]any{"workflow_id": "w", "key": "s", "offset": -1}},
		{protocol.OpRecv, map[string]any{}},
		{protocol.OpRecv, map[string]any{"caller": "me", "timeout_ms": 10}},
		{protocol.OpRecv, map[string]any{"caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": "one"}, "timeout_function_id": 2}},
		{protocol.OpRecv, map[string]any{"caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": 1}, "timeout_function_id": 2, "timeout_ms": "soon"}},
		{protocol.OpRecv, map[string]any{"caller": map[string]any{"owner_xid": "o", "function_id": 1}, "timeout_function_id": 2, "timeout_ms": 10}},
		{protocol.OpRecv, map[string]any{"caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": 1}, "timeout_function_id": 2, "timeout_ms": 10, "topic": []int{1}}},
		{protocol.OpRecv, map[string]any{"caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": 1}, "timeout_function_id": 1, "timeout_ms": 10}},
		{protocol.OpSend, map[string]any{}},
		{protocol.OpSend, map[string]any{"messages": []any{map[string]any{"message": "x"}}}},
		{protocol.OpSend, map[string]any{"messages": []any{map[string]any{"destination_id": "a", "message": "x", "idempotency_key": "k"}, map[string]any{"destination_id": "b", "message": "y", "idempotency_key": "k"}}}},
		{protocol.OpSend, map[string]any{"messages": []any{map[string]any{"destination_id": "a", "message": "x"}}, "step_name": "DBOS.other"}},
		{protocol.OpSend, map[string]any{"messages": []any{map[string]any{"destination_id": "a", "message": "x"}}, "caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": -1}}},
		{protocol.OpSleep, map[string]any{"caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": 1}, "duration_ms": -5}},
		{protocol.OpSetEvent, map[string]any{"caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": 1}, "value": "v"}},
		{protocol.OpGetEvent, map[string]any{"workflow_id": "w", "key": "k", "timeout_ms": -1}},
		{protocol.OpWriteStream, map[string]any{"caller": map[string]any{"workflow_id": "w", "function_id": 1}, "key": "s", "value": "v"}},
		{protocol.OpForkWorkflow, map[string]any{"workflow_id": "w", "start_step": -1}},
		{protocol.OpRewindWorkflow, map[string]any{"workflow_id": "w", "start_step": -1}},
		{protocol.OpDeleteWorkflow, map[string]any{"workflow_ids": []string{}}},
		{protocol.OpUpdateAttributes, map[string]any{"workflow_id": "w", "attributes": "[1, 2]"}},
		{protocol.OpUpdateAttributes, map[string]any{"workflow_id": "w", "merge": true}},
		{protocol.OpStartWorkflow, map[string]any{"name": "n", "attributes": "not json"}},
		{protocol.OpStartWorkflow, map[string]any{"name": "n", "parent": map[string]any{"workflow_id": "p", "owner_xid": "o", "function_id": -1}}},
		{protocol.OpStartWorkflow, map[string]any{"name": "n", "parent": map[string]any{"workflow_id": "p", "owner_xid": "o", "function_id": 1 << 31}}},
		{protocol.OpRecordStep, map[string]any{"workflow_id": "w", "owner_xid": "o", "name": "s", "function_id": 1 << 31}},
		{protocol.OpRecordStep, map[string]any{"workflow_id": "w", "owner_xid": "o", "name": "s", "function_id": 1.5}},
		{protocol.OpRecordStep, map[string]any{"workflow_id": "w", "owner_xid": "o", "name": "s", "function_id": math.NaN()}},
		{protocol.OpStartWorkflow, map[string]any{"name": "n", "timeout_ms": 0x1p63}},
	} {
		env := raw.request(bad.op, bad.body)
		require.NotNil(t, env.Error, "%s %v was accepted", bad.op, bad.body)
		require.Equal(t, protocol.CodeInvalidArgument, env.Error.Code, "%s %v: %s", bad.op, bad.body, env.Error.Message)
	}
	require.Nil(t, raw.request(protocol.OpPing, protocol.Empty{}).Error)

	c := dialClient(t, a.socket)
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "parked", Name: "nobody_runs_this", QueueName: "parked"})
	requireErrCode(t, c.RewindWorkflow(context.Background(), protocol.RewindWorkflow{WorkflowID: "parked", StartStep: 1}), protocol.CodeWorkflowActive)
}

// TestCommChildrenForkRewindAttributesDelete: a child started from workflow
// code is recorded as its parent's step and cancelled with it; fork replays
// the steps below its start step; rewind re-runs an ended workflow from a
// step; attributes are set, merged, replaced and cleared; delete removes a
// workflow with its children.
func TestCommChildrenForkRewindAttributesDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// No fallback re-check within the test: only the cancel can end the
	// parent's wait.
	a := e.startAgent(agentOptions{extraArgs: []string{"--message-poll-interval", "1h"}})
	ctx := context.Background()
	var mu sync.Mutex
	ran := map[string]int{} // "<workflow id> <step>" -> executions
	step := func(wf *client.Workflow, name string) error {
		_, err := wf.Step(name, func(context.Context) (*string, error) {
			mu.Lock()
			ran[wf.ID()+" "+name]++
			mu.Unlock()
			return str(`"` + name + `"`), nil
		})
		return err
	}
	runs := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return ran[key]
	}
	parentRecv := make(chan error, 1)
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{
		"parent": func(wf *client.Workflow, _ *string) (*string, error) {
			if err := step(wf, "a"); err != nil {
				return nil, err
			}
			// Parked on a queue nobody serves: the child stays ENQUEUED.
			if _, err := wf.StartChild(protocol.StartWorkflow{Name: "child", QueueName: "parked"}); err != nil {
				return nil, err
			}
			// A raw recv, on a context the cancel push does not end: what
			// answers it is the agent.
			caller := wf.NextCaller()
			_, err := wf.Client().Recv(context.Background(), protocol.Recv{
				Caller: caller, TimeoutFunctionID: caller.FunctionID + 1, Topic: str("never"), TimeoutMS: (10 * time.Minute).Milliseconds(),
			})
			parentRecv <- err
			return nil, err
		},
		"counter": func(wf *client.Workflow, _ *string) (*string, error) {
			for _, name := range []string{"a", "b"} {
				if err := step(wf, name); err != nil {
					return nil, err
				}
			}
			return str(`"counted"`), nil
		},
	}})
	c := dialClient(t, a.socket)

	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "parent", Name: "parent", Serialization: "portable_json", Attributes: str(`{"team":"infra"}`)})
	waitForStep(t, c, "parent", 4) // step a, the child, the recv and its deadline
	steps := listSteps(t, c, "parent")
	require.Equal(t, "child", steps[1].Name)
	require.Equal(t, 2, steps[1].FunctionID)
	require.Equal(t, "parent-2", steps[1].ChildWorkflowID)
	child := getWorkflow(t, c, "parent-2")
	require.Equal(t, "parent", child.ParentWorkflowID)
	require.Equal(t, "ENQUEUED", child.Status)
	requireErrCode(t, c.RewindWorkflow(ctx, protocol.RewindWorkflow{WorkflowID: "parent", StartStep: 1}), protocol.CodeWorkflowActive)

	require.NoError(t, c.CancelWorkflow(ctx, protocol.CancelWorkflow{WorkflowID: "parent", CancelChildren: true}))
	require.Equal(t, "CANCELLED", awaitResult(t, c, "parent").Status)
	require.Equal(t, "CANCELLED", getWorkflow(t, c, "parent-2").Status)
	// The agent ends the cancelled run's wait at once, not at its deadline
	// ten minutes away.
	requireErrCode(t, recv(t, parentRecv, "the cancelled run's recv to answer"), protocol.CodeWorkflowCancelled)

	attributes := func() *string { return getWorkflow(t, c, "parent").Attributes }
	require.JSONEq(t, `{"team":"infra"}`, *attributes())
	require.NoError(t, c.UpdateAttributes(ctx, protocol.UpdateAttributes{WorkflowID: "parent", Attributes: str(`{"tier":1}`), Merge: true}))
	require.JSONEq(t, `{"team":"infra","tier":1}`, *attributes())
	require.NoError(t, c.UpdateAttributes(ctx, protocol.UpdateAttributes{WorkflowID: "parent", Attributes: str(`{"x":true}`)}))
	require.JSONEq(t, `{"x":true}`, *attributes())
	require.NoError(t, c.UpdateAttributes(ctx, protocol.UpdateAttributes{WorkflowID: "parent"}))
	require.Nil(t, attributes())

	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "count", Name: "counter", Serialization: "portable_json"})
	require.Equal(t, "SUCCESS", awaitResult(t, c, "count").Status)
	forked, err := c.ForkWorkflow(ctx, protocol.ForkWorkflow{WorkflowID: "count", StartStep: 2, NewWorkflowID: "count-fork"})
	require.NoError(t, err)
	require.Equal(t, "count-fork", forked)
	res := awaitResult(t, c, "count-fork")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.Equal(t, "count", getWorkflow(t, c, "count-fork").ForkedFrom)
	require.Equal(t, 0, runs("count-fork a"), "the fork re-ran a step below its start step")
	require.Equal(t, 1, runs("count-fork b"))
	require.Len(t, listSteps(t, c, "count-fork"), 2)

	require.NoError(t, c.RewindWorkflow(ctx, protocol.RewindWorkflow{WorkflowID: "count", StartStep: 2}))
	res = awaitResult(t, c, "count")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.Equal(t, 1, runs("count a"))
	require.Equal(t, 2, runs("count b"))

	require.NoError(t, c.DeleteWorkflows(ctx, protocol.DeleteWorkflows{WorkflowIDs: []string{"parent", "count"}, DeleteChildren: true}))
	for _, id := range []string{"parent", "parent-2", "count"} {
		requireErrCode(t, c.Call(ctx, protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: id}, nil), protocol.CodeWorkflowNotFound)
	}
	require.Equal(t, "SUCCESS", getWorkflow(t, c, "count-fork").Status, "a fork is not a child")
}

// TestCommInteropGoSDKClientTalksToAgentWorkflow: the official Go SDK's
// client sends to a workflow the agent runs (in its own serialization and in
// portable_json), reads the event it set and the stream it wrote.
func TestCommInteropGoSDKClientTalksToAgentWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket)
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"agent_inbox": func(wf *client.Workflow, _ *string) (*string, error) {
		var got []protocol.RecvReply
		for i := 0; i < 2; i++ {
			r, err := wf.Recv(str("sdk"), signalWait)
			if err != nil {
				return nil, err
			}
			got = append(got, r)
		}
		if err := wf.SetEvent("ack", `"got them"`); err != nil {
			return nil, err
		}
		for _, v := range []string{`"a"`, `"b"`} {
			if err := wf.WriteStream("out", v); err != nil {
				return nil, err
			}
		}
		if err := wf.CloseStream("out"); err != nil {
			return nil, err
		}
		out := jsonText(t, got)
		return &out, nil
	}}})
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "agent-inbox", Name: "agent_inbox", Serialization: "portable_json"})

	sdk := sdkClient(t, e)
	require.NoError(t, dbos.Send(sdk, "agent-inbox", "native hello", "sdk"))
	require.NoError(t, dbos.Send(sdk, "agent-inbox", "portable hello", "sdk", dbos.WithPortableSend()))
	res := awaitResult(t, c, "agent-inbox")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	// Read once set: a client just made may not listen yet, and the Go SDK
	// does not look again for what it missed before.
	ack, err := dbos.GetEvent[string](sdk, "agent-inbox", "ack", signalWait)
	require.NoError(t, err)
	require.Equal(t, "got them", ack)
	// The SDKs disagree on the closing marker: the Go SDK v1.8.0 writes and
	// recognises it bare and untagged, DBOS Python the portable_json string,
	// which the agent writes (DBOS-CONTRACT.md). The Go SDK's reader so
	// takes the agent's marker for a last value and does not see the stream
	// closed (it would end its read on the writer having ended, which it
	// notices only by polling: the read is a snapshot of the ended stream).
	values, closed, err := dbos.ReadStream[string](sdk, "agent-inbox", "out", dbos.WithReadStreamSnapshot())
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "__DBOS_STREAM_CLOSED__"}, values)
	require.False(t, closed)
	var got []protocol.RecvReply
	require.NoError(t, json.Unmarshal([]byte(*res.Output), &got))
	require.Len(t, got, 2)
	require.True(t, got[0].Received)
	require.Equal(t, "DBOS_JSON", got[0].Serialization)
	native, err := base64.StdEncoding.DecodeString(*got[0].Message)
	require.NoError(t, err)
	require.Equal(t, `"native hello"`, string(native))
	require.Equal(t, protocol.RecvReply{Received: true, Message: str(`"portable hello"`), Serialization: "portable_json"}, got[1])
}

// TestCommInteropAgentClientTalksToGoSDKWorkflow: the agent's client sends
// to a workflow the official Go SDK runs, reads the events it set (one
// portable, one in the SDK's own serialization, passed through with its
// tag) and the stream it wrote and closed.
func TestCommInteropAgentClientTalksToGoSDKWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	echo := func(ctx dbos.Context, _ string) (string, error) {
		msg, err := dbos.Recv[string](ctx, "agent", signalWait)
		if err != nil {
			return "", err
		}
		if err := dbos.SetEvent(ctx, "echo", "echo: "+msg, dbos.WithPortableSetEvent()); err != nil {
			return "", err
		}
		if err := dbos.SetEvent(ctx, "native", 42); err != nil {
			return "", err
		}
		if err := dbos.WriteStream(ctx, "out", "x", dbos.WithPortableWriteStream()); err != nil {
			return "", err
		}
		return msg, dbos.CloseStream(ctx, "out")
	}
	sdk := launchSDK(t, e.url, e.schema, "e2e-sdk", func(ctx dbos.Context) {
		dbos.RegisterWorkflow(ctx, echo, dbos.WithWorkflowName("sdk_echo"))
	})
	handle, err := dbos.RunWorkflow(sdk, echo, "", dbos.WithWorkflowID("sdk-echo"))
	require.NoError(t, err)
	// The recv's deadline is recorded (the Go SDK numbers steps from 0): it
	// waits. By then the SDK listens, as it started to at launch; a message
	// sent before it listened would wait for the recv's deadline: the SDK
	// does not look again.
	waitForStep(t, c, "sdk-echo", 1)

	// Waiting before the SDK sets it: woken by the SDK's notification.
	echoed := awaitEvent(c, "sdk-echo", "echo")
	sendMessage(t, c, "sdk-echo", "agent", `"hi from agent"`)
	got := recv(t, echoed, "the Go SDK workflow's event")
	require.Equal(t, protocol.GetEventReply{Found: true, Value: str(`"echo: hi from agent"`), Serialization: "portable_json"}, got)

	out, err := handle.GetResult()
	require.NoError(t, err)
	require.Equal(t, "hi from agent", out)
	native, err := c.GetEvent(ctx, protocol.GetEvent{WorkflowID: "sdk-echo", Key: "native"})
	require.NoError(t, err)
	require.Equal(t, protocol.GetEventReply{Found: true, Value: str(base64.StdEncoding.EncodeToString([]byte("42"))), Serialization: "DBOS_JSON"}, native)
	values, closed, err := c.ReadStreamAll(ctx, "sdk-echo", "out")
	require.NoError(t, err)
	require.True(t, closed)
	require.Equal(t, []protocol.StreamValue{{Offset: 0, Value: `"x"`, Serialization: "portable_json"}}, values)
	require.Equal(t, "SUCCESS", awaitResult(t, c, "sdk-echo").Status)
}

// TestCommCancelRequestEndsAWait: a binding that no longer needs a wait
// cancels it; the wait answers request_cancelled at once and the session
// goes on serving. A cancel of a finished or unknown request is a no-op.
func TestCommCancelRequestEndsAWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: []string{"--result-poll-interval", "1h", "--message-poll-interval", "1h"}})
	raw := dialRaw(t, a.socket)
	raw.hello()

	send := func(op string, body any) uint64 {
		raw.id++
		frame, err := raw.enc.Request(raw.id, op, body)
		require.NoError(t, err)
		raw.write(frame)
		return raw.id
	}
	// Waits that would otherwise hold until the connection closes: a
	// result of a workflow nobody creates, an event nobody sets, a stream
	// nobody writes.
	waits := []uint64{
		send(protocol.OpGetResult, &protocol.GetResult{WorkflowID: "never-created", WaitForCreation: true}),
		send(protocol.OpGetEvent, &protocol.GetEvent{WorkflowID: "never-created", Key: "k", TimeoutMS: time.Hour.Milliseconds()}),
	}
	for _, id := range waits {
		cancel := send(protocol.OpCancelRequest, &protocol.CancelRequest{RequestID: id})
		answers := map[uint64]protocol.Envelope{}
		for len(answers) < 2 {
			env := raw.next()
			answers[env.ID] = env
		}
		require.Nil(t, answers[cancel].Error)
		requireCode(t, answers[id], protocol.CodeRequestCancelled)
	}
	require.Nil(t, raw.request(protocol.OpCancelRequest, &protocol.CancelRequest{RequestID: 12345}).Error, "an unknown id is ignored")
	requireCode(t, raw.request(protocol.OpCancelRequest, map[string]any{"request_id": "x"}), protocol.CodeInvalidArgument)
	require.Nil(t, raw.request(protocol.OpPing, protocol.Empty{}).Error)
}
