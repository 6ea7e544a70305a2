package e2e

import (
	"context"
	"encoding/base64"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// clicBundle is a migrated system database that a test seeds through the
// sysdb API (the rows the agent and the SDKs write), and the flags that
// point the CLI at it.
type clicBundle struct {
	t  *testing.T
	e  *env
	db *sysdb.Postgres
}

func clicSetup(t *testing.T) *clicBundle {
	t.Helper()
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := sysdb.OpenPostgres(ctx, e.url, sysdb.PostgresOptions{Schema: e.schema, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return &clicBundle{t: t, e: e, db: db}
}

// with appends the database flags to a CLI command line.
func (b *clicBundle) with(args ...string) []string {
	return append(args, "--database-url", b.e.url, "--schema", b.e.schema)
}

// workflow inserts a PENDING workflow (a child of parent, when given) and
// returns its run, which owns it.
func (b *clicBundle) workflow(id, parent string) sysdb.StepCaller {
	b.t.Helper()
	p := sysdb.WorkflowInsertParams{
		ID: id, Name: "clic_wf", Status: sysdb.StatusPending, CreatorXID: "owner-" + id, ExecutorID: "clic",
		QueueName: str(sysdb.InternalQueueName), Serialization: str(sysdb.PortableJSON),
		Inputs: str(`{"positionalArgs":[1],"namedArgs":{}}`),
	}
	if parent != "" {
		p.ParentWorkflowID = &parent
	}
	res, err := b.db.WorkflowInsert(context.Background(), p)
	require.NoError(b.t, err)
	require.True(b.t, res.Created)
	return sysdb.StepCaller{WorkflowID: id, OwnerXID: p.CreatorXID}
}

// at is the run making a write at a step id.
func clicAt(run sysdb.StepCaller, functionID int) sysdb.StepCaller {
	run.FunctionID = functionID
	return run
}

// steps records steps 1..n of a run, named step-<i>, returning i*10.
func (b *clicBundle) steps(run sysdb.StepCaller, n int) {
	b.t.Helper()
	for i := 1; i <= n; i++ {
		out := strconv.Itoa(i * 10)
		require.NoError(b.t, b.db.StepRecord(context.Background(), sysdb.StepRecordParams{
			WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID, FunctionID: i, Name: "step-" + strconv.Itoa(i),
			Output: &out, Serialization: str(sysdb.PortableJSON),
		}))
	}
}

// succeed ends a run in success.
func (b *clicBundle) succeed(run sysdb.StepCaller) {
	b.t.Helper()
	res, err := b.db.WorkflowFinish(context.Background(), sysdb.WorkflowFinishParams{
		WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID, Status: sysdb.StatusSuccess, Output: str(`"done"`),
	})
	require.NoError(b.t, err)
	require.True(b.t, res.Applied)
}

// getJSON is `workflow get --json` of a workflow.
func (b *clicBundle) getJSON(id string) map[string]any {
	b.t.Helper()
	return cliqJSON[map[string]any](b.t, b.with("workflow", "get", id, "--json")...)
}

func clicPortable() *string { return str(sysdb.PortableJSON) }
func clicPickle() *string   { return str("py_pickle") }

// Pickles of Python values (protocol 4), as DBOS Python stores them.
const (
	clicPickledUPS    = "gASVBwAAAAAAAACMA1VQU5Qu"         // "UPS"
	clicPickledRefund = "gASVDAAAAAAAAACMCGV4cGVkaXRllC4=" // "expedite"
)

// TestCLIListsEventsMessagesAndStreams seeds a workflow's events (with
// their history), messages (one consumed, one from the official Go SDK's
// client) and streams (one closed), then reads them with the real binary:
// portable_json is shown as JSON, every other serialization raw and never
// decoded, cut in tables and whole in --json.
func TestCLIListsEventsMessagesAndStreams(t *testing.T) {
	b := clicSetup(t)
	ctx := context.Background()
	run := b.workflow("clic-talker", "")

	// Events: "status" published twice (steps 1 and 2), "carrier" once,
	// pickled, from inside step 3 (which records nothing of its own).
	require.NoError(t, b.db.EventSet(ctx, sysdb.EventSetParams{Caller: clicAt(run, 1), Key: "status", Value: `"packed"`, Serialization: clicPortable()}))
	require.NoError(t, b.db.EventSet(ctx, sysdb.EventSetParams{Caller: clicAt(run, 2), Key: "status",
		Value: `{"state": "shipped", "eta": 3}`, Serialization: clicPortable()}))
	inStep := clicAt(run, 3)
	inStep.InStep = true
	require.NoError(t, b.db.EventSet(ctx, sysdb.EventSetParams{Caller: inStep, Key: "carrier", Value: clicPickledUPS, Serialization: clicPickle()}))

	// Streams: "progress" with two values, then closed; "log" open, with a
	// pickle and a long text of an unknown serialization.
	long := strings.Repeat("abcdefghij", 12)
	for i, w := range []sysdb.StreamWriteParams{
		{Key: "progress", Value: `{"pct":50}`, Serialization: clicPortable()},
		{Key: "progress", Value: `{"pct":100}`, Serialization: clicPortable()},
		{Key: "progress", Close: true},
		{Key: "log", Value: clicPickledRefund, Serialization: clicPickle()},
		{Key: "log", Value: long, Serialization: str("custom_text")},
	} {
		w.Caller = clicAt(run, 4+i)
		require.NoError(t, b.db.StreamWrite(ctx, w))
	}

	// Messages: on the default topic (consumed by step 10), a pickle on
	// "payments", and one from the Go SDK's client (DBOS_JSON).
	_, err := b.db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{
		{DestinationID: "clic-talker", Message: `{"hello": "world"}`, Serialization: clicPortable()},
	}})
	require.NoError(t, err)
	_, err = b.db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{
		{DestinationID: "clic-talker", Topic: str("payments"), Message: clicPickledRefund, Serialization: clicPickle()},
	}})
	require.NoError(t, err)
	sdk := sdkClient(t, b.e)
	require.NoError(t, dbos.Send(sdk, "clic-talker", map[string]string{"from": "go"}, "go"))
	got, err := b.db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: clicAt(run, 10)})
	require.NoError(t, err)
	require.True(t, got.Received)

	// Current events, as JSON: portable_json as JSON values, the pickle raw;
	// the table shows it decoded.
	events := cliqJSON[[]map[string]any](t, b.with("workflow", "events", "clic-talker", "--json")...)
	require.Equal(t, []map[string]any{
		{"key": "carrier", "serialization": "py_pickle", "value": clicPickledUPS},
		{"key": "status", "serialization": "portable_json", "value": map[string]any{"state": "shipped", "eta": float64(3)}},
	}, events)
	table := cliqOK(t, b.with("workflow", "events", "clic-talker")...)
	require.Contains(t, table, "KEY")
	clicRequireRow(t, table, "carrier", "py_pickle", `'UPS'`) // the table decodes it
	clicRequireRow(t, table, "status", "portable_json", `{"state":"shipped","eta":3}`)

	// The history: every value by the step that published it.
	history := cliqJSON[[]map[string]any](t, b.with("workflow", "events", "clic-talker", "--history", "--json")...)
	require.Equal(t, []map[string]any{
		{"function_id": float64(1), "key": "status", "serialization": "portable_json", "value": "packed"},
		{"function_id": float64(2), "key": "status", "serialization": "portable_json", "value": map[string]any{"state": "shipped", "eta": float64(3)}},
		{"function_id": float64(3), "key": "carrier", "serialization": "py_pickle", "value": clicPickledUPS},
	}, history)
	table = cliqOK(t, b.with("workflow", "events", "clic-talker", "--history")...)
	clicRequireRow(t, table, "1", "status", "portable_json", `"packed"`)

	// Messages (by topic; the default topic is null in JSON).
	messages := cliqJSON[[]map[string]any](t, b.with("workflow", "messages", "clic-talker", "--json")...)
	require.Len(t, messages, 3)
	byTopic := map[string]map[string]any{}
	for _, m := range messages {
		topic, _ := m["topic"].(string)
		byTopic[topic] = m
	}
	require.Nil(t, byTopic[""]["topic"])
	require.Equal(t, true, byTopic[""]["consumed"])
	require.Equal(t, float64(10), byTopic[""]["consumed_by_step"])
	require.Equal(t, map[string]any{"hello": "world"}, byTopic[""]["message"])
	require.Equal(t, false, byTopic["payments"]["consumed"])
	require.NotContains(t, byTopic["payments"], "consumed_by_step")
	require.Equal(t, "py_pickle", byTopic["payments"]["serialization"])
	require.Equal(t, clicPickledRefund, byTopic["payments"]["message"])
	require.Equal(t, "DBOS_JSON", byTopic["go"]["serialization"])
	goMessage, ok := byTopic["go"]["message"].(string)
	require.True(t, ok, "a DBOS_JSON message is shown raw: %v", byTopic["go"]["message"])
	require.Equal(t, "go", messages[2]["topic"], "oldest first: the Go SDK's message came last")
	decoded, err := base64.StdEncoding.DecodeString(goMessage)
	require.NoError(t, err, "the Go SDK's base64 text, as stored")
	require.JSONEq(t, `{"from":"go"}`, string(decoded))
	for _, m := range messages {
		_, err := time.Parse(time.RFC3339Nano, m["created_at"].(string))
		require.NoError(t, err)
		require.NotEmpty(t, m["message_id"])
	}
	table = cliqOK(t, b.with("workflow", "messages", "clic-talker")...)
	clicRequireRow(t, table, "(default)", "yes", "10", "portable_json", `{"hello":"world"}`)
	clicRequireRow(t, table, "payments", "no", "-", "py_pickle", `'expedite'`)
	clicRequireRow(t, table, "go", "no", "-", "DBOS_JSON", `{"from":"go"}`) // the table decodes it

	// Streams by key: the closing marker is a flag, not a value.
	streams := cliqJSON[[]map[string]any](t, b.with("workflow", "streams", "clic-talker", "--json")...)
	require.Equal(t, []map[string]any{
		{"key": "log", "closed": false, "values": []any{
			map[string]any{"offset": float64(0), "function_id": float64(7), "serialization": "py_pickle", "value": clicPickledRefund},
			map[string]any{"offset": float64(1), "function_id": float64(8), "serialization": "custom_text", "value": long},
		}},
		{"key": "progress", "closed": true, "values": []any{
			map[string]any{"offset": float64(0), "function_id": float64(4), "serialization": "portable_json", "value": map[string]any{"pct": float64(50)}},
			map[string]any{"offset": float64(1), "function_id": float64(5), "serialization": "portable_json", "value": map[string]any{"pct": float64(100)}},
		}},
	}, streams)
	only := cliqJSON[[]map[string]any](t, b.with("workflow", "streams", "clic-talker", "--key", "progress", "--json")...)
	require.Len(t, only, 1)
	require.Equal(t, "progress", only[0]["key"])
	table = cliqOK(t, b.with("workflow", "streams", "clic-talker")...)
	clicRequireRow(t, table, "progress", "0", "4", "portable_json", `{"pct":50}`)
	clicRequireRow(t, table, "progress", "-", "-", "-", "(closed)")
	clicRequireRow(t, table, "log", "-", "-", "-", "(open)")
	clicRequireRow(t, table, "log", "1", "8", "custom_text", long[:60]+"...")
	require.NotContains(t, table, long, "a table cuts long raw values")

	// A workflow that has none shows empty listings; an unknown id is an
	// error, in one line.
	b.workflow("clic-quiet", "")
	for _, what := range []string{"events", "messages", "streams"} {
		require.Equal(t, []any{}, cliqJSON[[]any](t, b.with("workflow", what, "clic-quiet", "--json")...), what)
		cliqFails(t, "workflow clic-nope does not exist", b.with("workflow", what, "clic-nope")...)
	}
}

// clicRequireRow checks that a table has a row holding these cells side by
// side (cells are separated by two spaces or more).
func clicRequireRow(t *testing.T, table string, cells ...string) {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		fields := clicCellGap.Split(strings.TrimSpace(line), -1)
		for i := 0; i+len(cells) <= len(fields); i++ {
			if slices.Equal(fields[i:i+len(cells)], cells) {
				return
			}
		}
	}
	t.Fatalf("no row with cells %q in:\n%s", cells, table)
}

var clicCellGap = regexp.MustCompile(`\s{2,}`)

// TestCLIForksAndRewindsWorkflows forks a finished workflow into a new
// ENQUEUED one with the steps below the cut, which the official Go SDK reads
// as a fork; then rewinds: refused for a running workflow, and for an ended
// one the history is cut and the workflow enqueued again under its id.
func TestCLIForksAndRewindsWorkflows(t *testing.T) {
	b := clicSetup(t)
	ctx := context.Background()
	run := b.workflow("clic-orig", "")
	b.steps(run, 3)
	inStep := clicAt(run, 1)
	inStep.InStep = true
	require.NoError(t, b.db.EventSet(ctx, sysdb.EventSetParams{Caller: inStep, Key: "k", Value: `"v1"`, Serialization: clicPortable()}))
	b.succeed(run)

	// Fork at step 3 under a chosen id: steps 1 and 2 are copied.
	out := cliqOK(t, b.with("workflow", "fork", "clic-orig", "--step", "3", "--new-id", "clic-fork", "--queue", "clic-q",
		"--app-version", "v9", "--timeout", "90s")...)
	require.Equal(t, "clic-fork\n", out)
	fork := b.getJSON("clic-fork")
	require.Equal(t, "ENQUEUED", fork["status"])
	require.Equal(t, "clic-orig", fork["forked_from"])
	require.Equal(t, "clic-q", fork["queue_name"])
	require.Equal(t, "v9", fork["application_version"])
	require.Equal(t, "clic_wf", fork["name"])
	steps := cliqJSON[[]map[string]any](t, b.with("workflow", "steps", "clic-fork", "--json")...)
	require.Len(t, steps, 2)
	require.Equal(t, "10", steps[0]["output"])
	require.Equal(t, "20", steps[1]["output"])
	require.Equal(t, "SUCCESS", b.getJSON("clic-orig")["status"], "the original is left as it was")
	table := cliqOK(t, b.with("workflow", "get", "clic-fork")...)
	clicRequireRow(t, table, "Forked from:", "clic-orig")

	// The Go SDK sees the fork and the original it came from.
	sdk := sdkClient(t, b.e)
	forks, err := dbos.ListWorkflows(sdk, dbos.WithFilterWorkflowIDs("clic-fork", "clic-orig"))
	require.NoError(t, err)
	require.Len(t, forks, 2)
	for _, w := range forks {
		if w.ID == "clic-fork" {
			require.Equal(t, dbos.WorkflowStatusEnqueued, w.Status)
			require.Equal(t, "clic-orig", w.ForkedFrom)
		} else {
			require.True(t, w.WasForkedFrom)
		}
	}

	// Without --new-id the fork gets a UUID; a fork of nothing fails.
	out = cliqOK(t, b.with("workflow", "fork", "clic-orig", "--step", "1")...)
	newID := strings.TrimSpace(out)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, newID)
	require.Equal(t, "clic-orig", b.getJSON(newID)["forked_from"])
	require.Empty(t, cliqJSON[[]any](t, b.with("workflow", "steps", newID, "--json")...))
	cliqFails(t, "clic-nope", b.with("workflow", "fork", "clic-nope", "--step", "1")...)
	// Without --step, as the official CLI's fork: from step 1, nothing copied.
	fromStart := strings.TrimSpace(cliqOK(t, b.with("workflow", "fork", "clic-orig")...))
	require.Empty(t, cliqJSON[[]any](t, b.with("workflow", "steps", fromStart, "--json")...))
	cliqFails(t, `required flag(s) "step" not set`, b.with("workflow", "rewind", "clic-orig")...)

	// Rewind of a running workflow: refused, nothing changed.
	active := b.workflow("clic-active", "")
	b.steps(active, 2)
	cliqFails(t, "cancel it first", b.with("workflow", "rewind", "clic-active", "--step", "1")...)
	require.Equal(t, "PENDING", b.getJSON("clic-active")["status"])
	require.Len(t, cliqJSON[[]any](t, b.with("workflow", "steps", "clic-active", "--json")...), 2)
	cliqFails(t, "--step must not be negative", b.with("workflow", "rewind", "clic-orig", "--step", "-1")...)
	cliqFails(t, "clic-nope", b.with("workflow", "rewind", "clic-nope", "--step", "1")...)

	// Rewind of the ended original from step 2: step 1 stays, it is
	// enqueued again on the queue asked for, under its own id.
	out = cliqOK(t, b.with("workflow", "rewind", "clic-orig", "--step", "2", "--queue", "clic-q")...)
	require.Equal(t, "workflow clic-orig is ENQUEUED\n", out)
	orig := b.getJSON("clic-orig")
	require.Equal(t, "ENQUEUED", orig["status"])
	require.Equal(t, "clic-q", orig["queue_name"])
	steps = cliqJSON[[]map[string]any](t, b.with("workflow", "steps", "clic-orig", "--json")...)
	require.Len(t, steps, 1)
	require.Equal(t, float64(1), steps[0]["function_id"])
	events := cliqJSON[[]map[string]any](t, b.with("workflow", "events", "clic-orig", "--json")...)
	require.Equal(t, []map[string]any{{"key": "k", "serialization": "portable_json", "value": "v1"}}, events,
		"an event published below the cut stays")
}

// TestCLIDeletesAndCancelsWorkflowTrees deletes a workflow with its children
// and grandchildren (and nothing else), refuses to delete anything when an
// id is unknown, and cancels a workflow with its children.
func TestCLIDeletesAndCancelsWorkflowTrees(t *testing.T) {
	b := clicSetup(t)
	ctx := context.Background()
	root := b.workflow("clic-root", "")
	b.workflow("clic-root-1", "clic-root")
	b.workflow("clic-root-1-1", "clic-root-1")
	b.workflow("clic-other", "")
	require.NoError(t, b.db.EventSet(ctx, sysdb.EventSetParams{Caller: clicAt(root, 1), Key: "k", Value: `1`, Serialization: clicPortable()}))

	// An unknown id among the ids: an error, and nothing is deleted.
	cliqFails(t, "workflow clic-nope does not exist", b.with("workflow", "delete", "clic-other", "clic-nope")...)
	b.getJSON("clic-other")

	out := cliqOK(t, b.with("workflow", "delete", "clic-root", "--children")...)
	require.Equal(t, "deleted workflow clic-root\n"+
		"deleted workflow clic-root-1 (child of clic-root)\n"+
		"deleted workflow clic-root-1-1 (child of clic-root-1)\n", out)
	for _, id := range []string{"clic-root", "clic-root-1", "clic-root-1-1"} {
		cliqFails(t, "workflow "+id+" does not exist", b.with("workflow", "get", id)...)
	}
	events, err := b.db.EventList(ctx, "clic-root")
	require.NoError(t, err)
	require.Empty(t, events, "what was stored under a deleted workflow goes with it")
	require.Equal(t, "PENDING", b.getJSON("clic-other")["status"])

	// Without --children, only the workflow named goes.
	b.workflow("clic-p", "")
	b.workflow("clic-p-1", "clic-p")
	require.Equal(t, "deleted workflow clic-p\n", cliqOK(t, b.with("workflow", "delete", "clic-p")...))
	require.Equal(t, "PENDING", b.getJSON("clic-p-1")["status"])

	// Cancel with children: the tree, and only the tree, is cancelled.
	b.workflow("clic-c", "")
	b.workflow("clic-c-1", "clic-c")
	b.workflow("clic-c-1-1", "clic-c-1")
	out = cliqOK(t, b.with("workflow", "cancel", "clic-c", "--children")...)
	require.Equal(t, "workflow clic-c is CANCELLED\n"+
		"workflow clic-c-1 is CANCELLED (child of clic-c)\n"+
		"workflow clic-c-1-1 is CANCELLED (child of clic-c-1)\n", out)
	for _, id := range []string{"clic-c", "clic-c-1", "clic-c-1-1"} {
		require.Equal(t, "CANCELLED", b.getJSON(id)["status"], id)
	}
	require.Equal(t, "PENDING", b.getJSON("clic-other")["status"])
	b.workflow("clic-d", "")
	b.workflow("clic-d-1", "clic-d")
	require.Equal(t, "workflow clic-d is CANCELLED\n", cliqOK(t, b.with("workflow", "cancel", "clic-d")...))
	require.Equal(t, "PENDING", b.getJSON("clic-d-1")["status"], "without --children a child runs on")
}

// TestCLISetsWorkflowAttributes replaces, merges and clears a workflow's
// attributes, which the official Go SDK reads.
func TestCLISetsWorkflowAttributes(t *testing.T) {
	b := clicSetup(t)
	b.workflow("clic-attrs", "")
	require.Equal(t, "null\n", cliqOK(t, b.with("workflow", "attributes", "clic-attrs")...))

	cliqOK(t, b.with("workflow", "attributes", "clic-attrs", "--set", `{"team":"payments","tier":1}`)...)
	out := cliqOK(t, b.with("workflow", "attributes", "clic-attrs", "--merge", `{"tier":2,"vip":true}`)...)
	require.JSONEq(t, `{"team":"payments","tier":2,"vip":true}`, out)
	require.Equal(t, map[string]any{"team": "payments", "tier": float64(2), "vip": true}, b.getJSON("clic-attrs")["attributes"])

	sdk := sdkClient(t, b.e)
	listed, err := dbos.ListWorkflows(sdk, dbos.WithFilterWorkflowIDs("clic-attrs"))
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, "payments", listed[0].Attributes["team"])
	require.Equal(t, true, listed[0].Attributes["vip"])

	out = cliqOK(t, b.with("workflow", "attributes", "clic-attrs", "--set", `{"only":"this"}`)...)
	require.JSONEq(t, `{"only":"this"}`, out)
	require.Equal(t, "null\n", cliqOK(t, b.with("workflow", "attributes", "clic-attrs", "--clear")...))
	require.NotContains(t, b.getJSON("clic-attrs"), "attributes")

	cliqFails(t, "must be a JSON object", b.with("workflow", "attributes", "clic-attrs", "--set", `[1,2]`)...)
	cliqFails(t, "none of the others can be", b.with("workflow", "attributes", "clic-attrs", "--set", `{}`, "--clear")...)
	cliqFails(t, "workflow clic-nope does not exist", b.with("workflow", "attributes", "clic-nope", "--set", `{"a":1}`)...)
}
