package e2e

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// `workflow list --user` and `workflow queue list`, as the official dbos CLI
// has them: the workflows an authenticated user ran, and the workflows on
// queues that have not finished.
func TestCLIListsByUserAndQueuedWorkflows(t *testing.T) {
	b := clicSetup(t)
	ctx := context.Background()
	insert := func(id, status, user string, queue *string) {
		t.Helper()
		res, err := b.db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
			ID: id, Name: "clic_wf", Status: status, CreatorXID: "owner-" + id, ExecutorID: "clic",
			QueueName: queue, AuthenticatedUser: str(user),
		})
		require.NoError(t, err)
		require.True(t, res.Created)
	}
	insert("alice-queued", sysdb.StatusEnqueued, "alice", str("orders"))
	insert("bob-queued", sysdb.StatusEnqueued, "bob", str("orders"))
	insert("alice-direct", sysdb.StatusPending, "alice", nil)
	insert("bob-done", sysdb.StatusPending, "bob", str("orders"))
	_, err := b.db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
		WorkflowID: "bob-done", OwnerXID: "owner-bob-done", Status: sysdb.StatusSuccess, Output: str("1"),
	})
	require.NoError(t, err)

	ids := func(args ...string) []string {
		t.Helper()
		rows := cliqJSON[[]map[string]any](t, b.with(append(args, "--json")...)...)
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = r["workflow_id"].(string)
		}
		sort.Strings(out)
		return out
	}
	require.Equal(t, []string{"alice-direct", "alice-queued"}, ids("workflow", "list", "--user", "alice"))
	require.Equal(t, []string{"alice-queued", "bob-queued"}, ids("workflow", "queue", "list"))
	require.Equal(t, []string{"bob-queued"}, ids("workflow", "queue", "list", "--user", "bob"))
	require.Equal(t, []string{"bob-done"}, ids("workflow", "queue", "list", "--status", "success"))
	require.Empty(t, ids("workflow", "list", "--user", "carol"))
}

// The official dbos CLI's flag spellings and one-letter forms work as the
// agent's own: an operator's `dbos workflow list -s URL --sort-desc ...`
// lines run unchanged against the agent's CLI.
func TestCLIAcceptsTheOfficialCLIsFlagSpellings(t *testing.T) {
	b := clicSetup(t)
	ctx := context.Background()
	insert := func(id, status, version string, queue *string) {
		t.Helper()
		res, err := b.db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
			ID: id, Name: "clic_wf", Status: status, CreatorXID: "owner-" + id, ExecutorID: "clic",
			QueueName: queue, ApplicationVersion: str(version), AuthenticatedUser: str("alice"),
			Serialization: str(sysdb.PortableJSON), Inputs: str(`{"positionalArgs":[1],"namedArgs":{}}`),
		})
		require.NoError(t, err)
		require.True(t, res.Created)
	}
	insert("spell-1", sysdb.StatusEnqueued, "v1", str("orders"))
	insert("spell-2", sysdb.StatusEnqueued, "v2", str("orders"))
	insert("spell-3", sysdb.StatusEnqueued, "v2", str("other"))

	official := func(args ...string) []string {
		t.Helper()
		rows := cliqJSON[[]map[string]any](t, append(args, "--sys-db-url", b.e.url, "--schema", b.e.schema, "--json")...)
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = r["workflow_id"].(string)
		}
		return out
	}
	require.Equal(t, []string{"spell-3", "spell-2"}, official("workflow", "list", "--application-version", "v2", "--sort-desc"))
	require.Equal(t, []string{"spell-3", "spell-2"}, official("workflow", "list", "-v", "v2", "-d"))
	require.Equal(t, []string{"spell-1", "spell-2", "spell-3"}, official("workflow", "list", "--sort", "asc", "-u", "alice", "-S", "ENQUEUED"))
	require.Equal(t, []string{"spell-3"}, official("workflow", "list", "--sort", "desc", "-l", "1"))
	require.Equal(t, []string{"spell-2"}, official("workflow", "list", "--sort", "asc", "-l", "1", "-o", "1", "-n", "clic_wf"))
	require.Equal(t, []string{"spell-2", "spell-1"}, official("workflow", "queue", "list", "--queue-name", "orders"))
	require.Equal(t, []string{"spell-1"}, official("workflow", "queue", "list", "-q", "orders", "-t", "2000-01-01T00:00:00", "-e", "2999-01-01", "-v", "v1"))

	// fork: --forked-workflow-id/-f and --application-version/-v, from step
	// 1 unless -S says otherwise, as the official fork.
	stdout, stderr, code := cli(t, "workflow", "fork", "spell-1", "--forked-workflow-id", "spell-1-fork",
		"--application-version", "v9", "-s", b.e.url, "--schema", b.e.schema)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "spell-1-fork\n", stdout)
	forked, err := b.db.WorkflowGet(ctx, "spell-1-fork")
	require.NoError(t, err)
	require.Equal(t, "v9", *forked.ApplicationVersion)
	require.Equal(t, "spell-1", *forked.ForkedFrom)
	stdout, stderr, code = cli(t, "workflow", "fork", "spell-2", "-f", "spell-2-fork", "-S", "1", "-s", b.e.url, "--schema", b.e.schema)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "spell-2-fork\n", stdout)
}
