package agent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// incompressible is n bytes of random hex: the worst case for the index a
// deduplication id lands in (Postgres compresses repetitive entries).
func incompressible(t *testing.T, n int) string {
	b := make([]byte, (n+1)/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)[:n]
}

// TestSessionBoundsDeduplicationIDs: a deduplication id longer than
// protocol.MaxDeduplicationIDBytes is invalid_argument naming its field, on
// start_workflow and debounce_workflow (given, or formed from the name and
// key), and nothing is written; one of exactly the bound is stored and
// deduplicates, the database indexing it.
func TestSessionBoundsDeduplicationIDs(t *testing.T) {
	b := setup(t)
	p := connect(t, b.agent, clientHello())
	const limit = protocol.MaxDeduplicationIDBytes
	refused := func(op string, body any, want string) {
		t.Helper()
		env := p.await(p.send(op, body))
		require.NotNil(t, env.Error, "%s answered no error", op)
		require.Equal(t, protocol.CodeInvalidArgument, env.Error.Code)
		require.Equal(t, want, env.Error.Message)
	}
	start := func(dedup string) protocol.StartWorkflow {
		return protocol.StartWorkflow{Name: "w", Inputs: str(`[]`), Serialization: "portable_json", QueueName: "q", DeduplicationID: dedup}
	}
	debounce := func(key, dedup string) protocol.DebounceWorkflow {
		return protocol.DebounceWorkflow{Key: key, Name: "w", DelayMS: time.Hour.Milliseconds(), Inputs: str(`[]`), Serialization: "portable_json",
			DeduplicationID: dedup}
	}

	refused(protocol.OpStartWorkflow, start(incompressible(t, limit+1)),
		fmt.Sprintf("start_workflow.deduplication_id: %d bytes; at most %d", limit+1, limit))
	refused(protocol.OpDebounceWorkflow, debounce("k", incompressible(t, limit+1)),
		fmt.Sprintf("debounce_workflow.deduplication_id: %d bytes; at most %d", limit+1, limit))
	refused(protocol.OpDebounceWorkflow, debounce(incompressible(t, limit-1), ""),
		fmt.Sprintf("debounce_workflow.key: the deduplication id it forms (<name>-<key>) is %d bytes; at most %d", limit+1, limit))
	wfs, err := b.agent.ListWorkflows(t.Context(), ListWorkflowsParams{})
	require.NoError(t, err)
	require.Empty(t, wfs, "a refused start writes nothing")

	// At the bound: stored, and it deduplicates.
	atLimit := incompressible(t, limit)
	var first protocol.StartWorkflowReply
	p.call(protocol.OpStartWorkflow, start(atLimit), &first)
	require.True(t, first.Created)
	again := p.await(p.send(protocol.OpStartWorkflow, start(atLimit)))
	require.NotNil(t, again.Error)
	require.Equal(t, protocol.CodeDeduplicated, again.Error.Code)

	var created protocol.DebounceWorkflowReply
	key := incompressible(t, limit-2) // "w-" + key: the bound exactly
	p.call(protocol.OpDebounceWorkflow, debounce(key, ""), &created)
	require.False(t, created.Bounced)
	var bounced protocol.DebounceWorkflowReply
	p.call(protocol.OpDebounceWorkflow, debounce(key, ""), &bounced)
	require.True(t, bounced.Bounced)
	require.Equal(t, created.WorkflowID, bounced.WorkflowID)
	info, err := b.agent.ListWorkflows(t.Context(), ListWorkflowsParams{WorkflowIDs: []string{created.WorkflowID}})
	require.NoError(t, err)
	require.Len(t, info, 1)
	require.Equal(t, "w-"+key, deref(info[0].DeduplicationID))
}

// TestEngineBoundsIndexedKeys: a workflow id the agent would create, a
// partition key, a message's topic and idempotency key, and an event's or
// stream's key longer than protocol.MaxKeyBytes are invalid_argument naming
// the field, and nothing is written; keys of exactly the bound are stored,
// two of them side by side in one index entry.
func TestEngineBoundsIndexedKeys(t *testing.T) {
	a := setup(t).agent
	ctx := t.Context()
	const limit = protocol.MaxKeyBytes
	long := incompressible(t, limit+1)
	refused := func(err error, want string) {
		t.Helper()
		var invalid *InvalidArgumentError
		require.ErrorAs(t, err, &invalid)
		require.Equal(t, fmt.Sprintf("%s: %d bytes; at most %d", want, limit+1, limit), invalid.Message)
	}
	_, err := a.StartWorkflow(ctx, client, StartWorkflowParams{WorkflowID: long, Name: "w"})
	refused(err, "start_workflow.workflow_id")
	_, err = a.StartWorkflow(ctx, client, StartWorkflowParams{Name: "w", QueueName: "q", PartitionKey: long})
	refused(err, "start_workflow.partition_key")
	_, err = a.Debounce(ctx, client, DebounceParams{Key: "k", Name: "w", Delay: time.Hour, WorkflowID: long})
	refused(err, "debounce_workflow.workflow_id")
	wfs, err := a.ListWorkflows(ctx, ListWorkflowsParams{})
	require.NoError(t, err)
	require.Empty(t, wfs, "a refused start writes nothing")

	worker := runner(t, a, "w")
	run := startHere(t, a, worker, incompressible(t, limit), "w")
	_, err = a.Fork(ctx, client, ForkParams{WorkflowID: run.WorkflowID, NewWorkflowID: long})
	refused(err, "fork_workflow.new_workflow_id")
	refused(a.Send(ctx, client, SendParams{Messages: []OutgoingMessage{{DestinationID: run.WorkflowID, Topic: str(long), Message: `1`}}}),
		"send.messages[0].topic")
	refused(a.Send(ctx, client, SendParams{Messages: []OutgoingMessage{{DestinationID: run.WorkflowID, Message: `1`, IdempotencyKey: long}}}),
		"send.messages[0].idempotency_key")
	caller := StepRef{WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID, FunctionID: 1}
	refused(a.SetEvent(ctx, worker, SetEventParams{Caller: caller, Key: long, Value: `1`, Serialization: "portable_json"}), "set_event.key")
	refused(a.WriteStream(ctx, worker, WriteStreamParams{Caller: caller, Key: long, Value: `1`, Serialization: "portable_json"}), "write_stream.key")
	steps, err := a.ListSteps(ctx, run.WorkflowID)
	require.NoError(t, err)
	require.Empty(t, steps, "a refused write records no step")

	// At the bound, beside a workflow id at the bound: stored and indexed.
	atLimit := incompressible(t, limit)
	require.NoError(t, a.Send(ctx, client, SendParams{Messages: []OutgoingMessage{{DestinationID: run.WorkflowID, Topic: str(atLimit), Message: `1`,
		Serialization: "portable_json", IdempotencyKey: atLimit}}}))
	require.NoError(t, a.SetEvent(ctx, worker, SetEventParams{Caller: caller, Key: atLimit, Value: `1`, Serialization: "portable_json"}))
	caller.FunctionID = 2
	require.NoError(t, a.WriteStream(ctx, worker, WriteStreamParams{Caller: caller, Key: atLimit, Value: `1`, Serialization: "portable_json"}))
}
