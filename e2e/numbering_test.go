package e2e

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// jsWorker is a raw worker connection that talks as a Node binding
// mirroring DBOS TypeScript would: it numbers its steps from 0, as DBOS
// TypeScript's workflow context does, and its msgpack encoder writes
// numbers as float64.
type jsWorker struct {
	*rawConn
	t *testing.T
}

func dialJSWorker(t *testing.T, socket, workflow string) *jsWorker {
	raw := dialRaw(t, socket)
	env := raw.request(protocol.OpHello, map[string]any{"min_version": 1.0, "role": protocol.RoleWorker, "app_name": "js",
		"workflows": []any{map[string]any{"name": workflow, "max_recovery_attempts": 10.0}}})
	require.Nil(t, env.Error)
	return &jsWorker{rawConn: raw, t: t}
}

// call sends a request and decodes its successful reply into reply (nil:
// ignored).
func (w *jsWorker) call(op string, body, reply any) {
	w.t.Helper()
	env := w.request(op, body)
	require.Nil(w.t, env.Error, "%s: %v", op, env.Error)
	if reply != nil {
		require.NoError(w.t, protocol.DecodeBody(env.Body, reply))
	}
}

// TestStepsNumberedFromZero: everything a binding that numbers its steps
// from 0 (DBOS TypeScript's numbering) sends is accepted, with every number
// a float64 as JavaScript encoders write them: a recv at 0 with its
// deadline at 1, a step at 2, set_event at 3, a child started at 4, sleep
// at 5, get_event at 6 and 7. The steps list, a fork below step 1 and a
// rewind from step 0 agree with that numbering.
func TestStepsNumberedFromZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	ctx := context.Background()
	w := dialJSWorker(t, a.socket, "ts_workflow")

	var start protocol.StartWorkflowReply
	w.call(protocol.OpStartWorkflow, map[string]any{"workflow_id": "ts-1", "name": "ts_workflow", "inputs": `[]`,
		"serialization": "portable_json", "run_here": true, "timeout_ms": 3600000.0}, &start)
	require.NotNil(t, start.Run, "a run-here grant")
	owner := start.Run.OwnerXID
	caller := func(id float64) map[string]any {
		return map[string]any{"workflow_id": "ts-1", "owner_xid": owner, "function_id": id}
	}
	nothing := "null"

	var got protocol.RecvReply
	w.call(protocol.OpRecv, map[string]any{"caller": caller(0), "timeout_function_id": 1.0, "topic": nil,
		"timeout_ms": 0.0, "timeout_output": nothing, "timeout_serialization": "portable_json"}, &got)
	require.False(t, got.Received)
	w.call(protocol.OpRecordStep, map[string]any{"workflow_id": "ts-1", "owner_xid": owner, "function_id": 2.0,
		"name": "fetch", "output": `"ok"`, "error": nil, "serialization": "portable_json"}, nil)
	w.call(protocol.OpSetEvent, map[string]any{"caller": caller(3), "key": "progress", "value": "1", "serialization": "portable_json"}, nil)
	var child protocol.StartWorkflowReply
	w.call(protocol.OpStartWorkflow, map[string]any{"workflow_id": "ts-1-4", "name": "ts_child", "inputs": `[]`,
		"serialization": "portable_json", "queue_name": "parked", "parent": caller(4)}, &child)
	require.True(t, child.Created)
	var slept protocol.SleepReply
	w.call(protocol.OpSleep, map[string]any{"caller": caller(5), "duration_ms": 0.0}, &slept)
	var event protocol.GetEventReply
	w.call(protocol.OpGetEvent, map[string]any{"workflow_id": "ts-1", "key": "progress", "timeout_ms": 0.0,
		"caller": caller(6), "timeout_function_id": 7.0, "timeout_output": nothing}, &event)
	require.True(t, event.Found)
	// A retried record of step 2 (its answer lost) is accepted again.
	w.call(protocol.OpRecordStep, map[string]any{"workflow_id": "ts-1", "owner_xid": owner, "function_id": 2.0,
		"name": "fetch", "output": `"ok"`, "error": nil, "serialization": "portable_json"}, nil)
	w.call(protocol.OpFinish, map[string]any{"workflow_id": "ts-1", "owner_xid": owner, "status": "SUCCESS",
		"output": `"done"`, "error": nil, "serialization": "portable_json"}, nil)

	c := dialClient(t, a.socket)
	stepsOf := func(id string) map[int]string {
		var steps protocol.ListStepsReply
		require.NoError(t, c.Call(ctx, protocol.OpListSteps, &protocol.WorkflowRef{WorkflowID: id}, &steps))
		out := map[int]string{}
		for _, s := range steps.Steps {
			out[s.FunctionID] = s.Name
		}
		return out
	}
	require.Equal(t, map[int]string{0: protocol.StepRecv, 1: protocol.StepSleep, 2: "fetch", 3: protocol.StepSetEvent,
		4: "ts_child", 5: protocol.StepSleep, 6: protocol.StepGetEvent, 7: protocol.StepSleep}, stepsOf("ts-1"))
	require.Equal(t, "ts-1", getWorkflow(t, c, "ts-1-4").ParentWorkflowID)

	// A fork from step 1 keeps step 0, as DBOS TypeScript's fork of the
	// same workflow would.
	fork, err := c.ForkWorkflow(ctx, protocol.ForkWorkflow{WorkflowID: "ts-1", StartStep: 1, NewWorkflowID: "ts-1-fork", QueueName: "parked"})
	require.NoError(t, err)
	require.Equal(t, map[int]string{0: protocol.StepRecv}, stepsOf(fork))
	// A rewind from step 0 (DBOS TypeScript's rewindWorkflow accepts it)
	// drops the whole history.
	require.NoError(t, c.RewindWorkflow(ctx, protocol.RewindWorkflow{WorkflowID: "ts-1", StartStep: 0, QueueName: "parked"}))
	require.Empty(t, stepsOf("ts-1"))
}

// TestFloatsRefusedForIntegerFields: a float that holds no integer of the
// field's range is invalid_argument naming the field by its path from the
// op, whether in a message or nested in one; the connection stays usable.
func TestFloatsRefusedForIntegerFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	raw := dialRaw(t, a.socket)
	// The hello's fields too.
	env := raw.request(protocol.OpHello, map[string]any{"min_version": 1.0, "role": protocol.RoleWorker,
		"queues": []any{map[string]any{"name": "q", "concurrency": 2.5}}})
	requireCode(t, env, protocol.CodeInvalidArgument)
	require.Equal(t, "hello.queues[0].concurrency: 2.5 is not an integer", env.Error.Message)
	env = raw.request(protocol.OpHello, map[string]any{"min_version": 1.0})
	require.Nil(t, env.Error)
	for _, tc := range []struct {
		op   string
		body map[string]any
		want string
	}{
		{protocol.OpRecordStep, map[string]any{"workflow_id": "w", "owner_xid": "o", "name": "s", "function_id": 1.5},
			"record_step.function_id: 1.5 is not an integer"},
		{protocol.OpRecordStep, map[string]any{"workflow_id": "w", "owner_xid": "o", "name": "s", "function_id": math.NaN()},
			"record_step.function_id: NaN is not an integer"},
		{protocol.OpStartWorkflow, map[string]any{"name": "n", "deadline_epoch_ms": 0x1p63},
			"start_workflow.deadline_epoch_ms: 9.223372036854776e+18 is out of range (-2^63 to 2^63-1)"},
		{protocol.OpSleep, map[string]any{"caller": map[string]any{"workflow_id": "w", "owner_xid": "o", "function_id": math.Inf(1)}, "duration_ms": 1.0},
			"sleep.caller.function_id: +Inf is not an integer"},
		{protocol.OpCancelRequest, map[string]any{"request_id": -1.0},
			"cancel_request.request_id: -1 is out of range (0 to 2^64-1)"},
	} {
		env := raw.request(tc.op, tc.body)
		requireCode(t, env, protocol.CodeInvalidArgument)
		require.Equal(t, tc.want, env.Error.Message)
	}
	require.Nil(t, raw.request(protocol.OpPing, protocol.Empty{}).Error)
}
