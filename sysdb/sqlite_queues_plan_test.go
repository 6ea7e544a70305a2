package sysdb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSQLiteQueuesDequeuePlans holds the dequeue statements to the indexes
// built for them: SQLite uses a partial index only when the statement
// repeats its predicate, so a reworded status term silently turns every
// poll into a scan of workflow_status.
func TestSQLiteQueuesDequeuePlans(t *testing.T) {
	ctx := context.Background()
	db, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "dbos.sqlite"), SQLiteOptions{})
	require.NoError(t, err)
	defer db.Close()
	app := "shop"
	plan := func(query string, args ...any) string {
		t.Helper()
		rows, err := db.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
		require.NoError(t, err)
		defer rows.Close()
		var steps []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			steps = append(steps, detail)
		}
		require.NoError(t, rows.Err())
		return strings.Join(steps, "; ")
	}
	for _, c := range []struct {
		name, query string
		args        []any
		index       string
	}{
		{"probe", sqliteHasWorkSQL(""), []any{"q", ""}, "idx_workflow_status_in_flight_v2"},
		{"probe a partition", sqliteHasWorkSQL("p"), []any{"q", "p"}, "idx_workflow_status_partition_dequeue_v3"},
		{"running", sqliteRunningSQL(""), []any{"q", &app, ""}, "COVERING INDEX idx_workflow_status_in_flight_v2"},
		{"running in a partition", sqliteRunningSQL("p"), []any{"q", &app, "p"}, "COVERING INDEX idx_workflow_status_partition_dequeue_v3"},
		{"recent starts", sqliteRecentStartsSQL(""), []any{"q", int64(0), &app, ""}, "idx_workflow_status_rate_limited"},
	} {
		got := plan(c.query, c.args...)
		require.Contains(t, got, c.index, c.name)
		require.NotContains(t, got, "SCAN workflow_status", c.name)
	}
	for _, c := range []struct {
		name  string
		in    QueueDequeueParams
		index string
	}{
		{"candidates", QueueDequeueParams{QueueName: "q", ApplicationVersion: "v1", ApplicationName: &app}, "idx_workflow_status_in_flight_v2"},
		{"candidates by name", QueueDequeueParams{QueueName: "q", ApplicationVersion: "v1", WorkflowNames: []string{"a", "b"}}, "idx_workflow_status_in_flight_v2"},
		{"candidates of a partition", QueueDequeueParams{QueueName: "q", ApplicationVersion: "v1", PartitionKey: "p"}, "idx_workflow_status_partition_dequeue_v3"},
	} {
		query, args := sqliteCandidatesQuery(c.in, 10)
		got := plan(query, args...)
		require.Contains(t, got, c.index, c.name)
		require.NotContains(t, got, "SCAN workflow_status", c.name)
		// The rows come in index order; only the versions subquery sorts.
		before, _, _ := strings.Cut(got, "SCALAR SUBQUERY")
		require.NotContains(t, before, "TEMP B-TREE", c.name)
	}
}
