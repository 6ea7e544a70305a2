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
