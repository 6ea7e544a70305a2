package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// jsonText is v as JSON text (a portable_json payload).
func jsonText(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

// portableMessage is a message on topic in portable_json.
func portableMessage(dest, topic, payload string) protocol.Message {
	return protocol.Message{DestinationID: dest, Topic: &topic, Message: payload, Serialization: "portable_json"}
}

// startTwoAgents starts two agents on the test's database, executors "a"
// and "b".
func (e *env) startTwoAgents() (a, b *agentProc) {
	return e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"}), e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
}

// sendMessage sends one portable_json message from outside any workflow.
func sendMessage(t testing.TB, c *client.Client, dest, topic, payload string) {
	t.Helper()
	require.NoError(t, c.Send(context.Background(), protocol.Send{Messages: []protocol.Message{portableMessage(dest, topic, payload)}}))
}

// awaitEvent reads an event from outside any workflow, waiting for it to be
// set; the reply (or, in Value, the error) arrives on the channel.
func awaitEvent(c *client.Client, workflowID, key string) <-chan protocol.GetEventReply {
	got := make(chan protocol.GetEventReply, 1)
	go func() {
		r, err := c.GetEvent(context.Background(), protocol.GetEvent{WorkflowID: workflowID, Key: key, TimeoutMS: signalWait.Milliseconds()})
		if err != nil {
			msg := err.Error()
			r.Value = &msg
		}
		got <- r
	}()
	return got
}

// listSteps lists a workflow's recorded steps through the agent.
func listSteps(t testing.TB, c *client.Client, workflowID string) []protocol.Step {
	t.Helper()
	var reply protocol.ListStepsReply
	require.NoError(t, c.Call(context.Background(), protocol.OpListSteps, &protocol.WorkflowRef{WorkflowID: workflowID}, &reply))
	return reply.Steps
}

// waitForStep waits until a workflow recorded a step at functionID. A recv
// or get_event records its deadline (a DBOS.sleep) before it waits, and
// nothing else tells from outside that it waits: this polls.
func waitForStep(t testing.TB, c *client.Client, workflowID string, functionID int) protocol.Step {
	t.Helper()
	deadline := time.Now().Add(signalWait)
	for {
		for _, s := range listSteps(t, c, workflowID) {
			if s.FunctionID == functionID {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s recorded no step %d within %s", workflowID, functionID, signalWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// table is a DBOS table of the test's schema, quoted for SQL.
func (e *env) commTable(name string) string {
	return pgx.Identifier{e.schema, name}.Sanitize()
}

// sqlConn is a plain connection to the test's database.
func (e *env) commSQL() *pgx.Conn {
	return pgtest.Connect(e.t, e.url)
}

// launchSDK launches the official Go SDK on a schema, as application
// appName and executor "go-sdk" (not the agents' executor ids, so that no
// agent ever recovers its workflows), after register registered its
// workflows. It is shut down before the schema is dropped.
func launchSDK(t testing.TB, url, schema, appName string, register func(dbos.Context)) dbos.Context {
	t.Helper()
	ctx, err := dbos.NewContext(context.Background(), dbos.Config{
		AppName: appName, DatabaseURL: url, DatabaseSchema: schema, ExecutorID: "go-sdk", Logger: sdkLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dbos.Shutdown(ctx, 30*time.Second) })
	register(ctx)
	require.NoError(t, dbos.Launch(ctx))
	return ctx
}
