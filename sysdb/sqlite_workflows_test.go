package sysdb_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// workflowsTestRaw opens the file of db for statements of the test's own
// (as another client of the file would write them).
func workflowsTestRaw(t *testing.T, db *sysdb.SQLite) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+db.Path()+"?_pragma=busy_timeout(30000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}

// TestSQLiteJSONContains: the SQL function behind WorkflowList's attributes
// filter decides containment as Postgres's jsonb @> does.
func TestSQLiteJSONContains(t *testing.T) {
	raw := workflowsTestRaw(t, openSQLite(t))
	for _, c := range []struct {
		container, contained string
		want                 bool
	}{
		{`{"a":1,"b":"x"}`, `{}`, true},
		{`{"a":1,"b":"x"}`, `{"a":1}`, true},
		{`{"a":1,"b":"x"}`, `{"a":1.0}`, true}, // numbers by value
		{`{"a":1,"b":"x"}`, `{"a":"1"}`, false},
		{`{"a":1,"b":"x"}`, `{"c":null}`, false},
		{`{"a":null}`, `{"a":null}`, true},
		{`{"a":{"b":{"c":true,"d":2}}}`, `{"a":{"b":{"c":true}}}`, true},
		{`{"a":{"b":{"c":true}}}`, `{"a":{"b":{"c":false}}}`, false},
		{`{"tags":["x","y","z"]}`, `{"tags":["z","x"]}`, true}, // order does not matter
		{`{"tags":["x","y"]}`, `{"tags":["x","x"]}`, true},     // nor duplicates
		{`{"tags":["x"]}`, `{"tags":"x"}`, false},              // a nested array does not contain a scalar
		{`{"tags":[{"k":1,"v":2}]}`, `{"tags":[{"k":1}]}`, true},
		{`["a","b"]`, `"a"`, true}, // but a top-level one does
		{`["a","b"]`, `["b"]`, true},
		{`"a"`, `["a"]`, false},
		{`{"a":1}`, `[]`, false},
		{`1e2`, `100`, true},
	} {
		var got bool
		require.NoError(t, raw.QueryRow("SELECT dbos_agent_jsonb_contains(?, ?)", c.container, c.contained).Scan(&got))
		require.Equal(t, c.want, got, "%s @> %s", c.container, c.contained)
	}
	var null sql.NullBool
	require.NoError(t, raw.QueryRow("SELECT dbos_agent_jsonb_contains(NULL, '{}')").Scan(&null))
	require.False(t, null.Valid, "strict, as @> is")
	var got bool
	require.NoError(t, raw.QueryRow("SELECT dbos_agent_jsonb_contains('{oops', '{}')").Scan(&got))
	require.False(t, got, "text that is not JSON contains nothing")
	require.Error(t, raw.QueryRow("SELECT dbos_agent_jsonb_contains('{}', '{oops')").Scan(&got), "a filter that is not JSON is an error")
}

// TestSQLiteAttributesOfOtherWriters: attributes another client wrote as
// JSON text in its own spacing and key order are matched by the filter, and
// rows whose attributes are no object are not.
func TestSQLiteAttributesOfOtherWriters(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	raw := workflowsTestRaw(t, db)
	_, err := raw.Exec(`INSERT INTO workflow_status (workflow_uuid, status, name, attributes) VALUES
		('py-1', 'SUCCESS', 'f', '{ "region" : "eu",  "tier": {"level": 2, "beta": true} }'),
		('py-2', 'SUCCESS', 'f', '{"region":"us"}'),
		('py-3', 'SUCCESS', 'f', NULL),
		('py-4', 'SUCCESS', 'f', 'null'),
		('py-5', 'SUCCESS', 'f', '{not json')`)
	require.NoError(t, err)
	ws, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{Attributes: sysdbtest.Ptr(`{"tier":{"beta":true},"region":"eu"}`)})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "py-1", ws[0].ID)
	ws, err = db.WorkflowList(ctx, sysdb.WorkflowListParams{Attributes: sysdbtest.Ptr(`{}`)})
	require.NoError(t, err)
	require.Len(t, ws, 2, "every object contains {}; NULL, JSON null (DBOS Python's none) and text that is not JSON do not")
}

// TestSQLiteRowDefaults: a row holding only what the schema requires, its
// other columns at their defaults (as a minimal writer leaves them), reads
// back with DBOS's meanings: created_at at the schema's whole-second
// default in ms, zero attempts, false booleans, no payloads.
func TestSQLiteRowDefaults(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	raw := workflowsTestRaw(t, db)
	before := time.Now().Add(-time.Second).UnixMilli()
	_, err := raw.Exec(`INSERT INTO workflow_status (workflow_uuid, status, name) VALUES ('bare', 'PENDING', 'f')`)
	require.NoError(t, err)
	_, err = raw.Exec(`INSERT INTO operation_outputs (workflow_uuid, function_id) VALUES ('bare', 0)`)
	require.NoError(t, err)
	w, err := db.WorkflowGet(ctx, "bare")
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusPending, w.Status)
	require.GreaterOrEqual(t, w.CreatedAt, before)
	require.LessOrEqual(t, w.CreatedAt, time.Now().UnixMilli())
	require.Equal(t, w.CreatedAt, w.UpdatedAt)
	require.Zero(t, w.CreatedAt%1000, "the default is whole seconds, in ms")
	require.Zero(t, w.RecoveryAttempts)
	require.Zero(t, w.Priority)
	require.False(t, w.WasForkedFrom || w.RateLimited || w.IsDebounced)
	require.Nil(t, w.Inputs)
	require.Nil(t, w.Output)
	require.Nil(t, w.Attributes)
	steps, err := db.StepList(ctx, "bare")
	require.NoError(t, err)
	require.Equal(t, []sysdb.Step{{FunctionID: 0, Name: ""}}, steps)

	// And what this backend writes is in DBOS's formats: ms integers, 0/1
	// booleans, JSON text.
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "ours", Name: "f", Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr("q"), CreatorXID: sysdbtest.Token(),
		ExecutorID: "local", Attributes: sysdbtest.Ptr(`{"a":1}`), IsDebounced: true,
	})
	require.NoError(t, err)
	var createdType, debouncedType, attributesType string
	var debounced int64
	require.NoError(t, raw.QueryRow(`SELECT typeof(created_at), typeof(is_debounced), is_debounced, typeof(attributes)
		FROM workflow_status WHERE workflow_uuid = 'ours'`).Scan(&createdType, &debouncedType, &debounced, &attributesType))
	require.Equal(t, []any{"integer", "integer", int64(1), "text"}, []any{createdType, debouncedType, debounced, attributesType})
}

// TestSQLiteStepFencedAcrossHandles: two handles on one file (two agents'
// processes, as far as the file is concerned): once the workflow moved to
// another run through one, the old run's step records through the other
// are refused, and a batch commits nothing of a fenced record.
func TestSQLiteStepFencedAcrossHandles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	open := func() *sysdb.SQLite {
		db, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{})
		require.NoError(t, err)
		t.Cleanup(db.Close)
		return db
	}
	a, b := open(), open()
	first := sysdbtest.Token()
	_, err := a.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "wf", Name: "f", Status: sysdb.StatusPending, CreatorXID: first, ExecutorID: "e1"})
	require.NoError(t, err)
	require.NoError(t, a.StepRecord(ctx, sysdb.StepRecordParams{WorkflowID: "wf", OwnerXID: first, FunctionID: 0, Name: "s0", Output: sysdbtest.Ptr(`0`)}))

	// b recovers the workflow, and a new run claims it (as a dequeue does).
	recovered, err := b.WorkflowRecover(ctx, sysdb.WorkflowRecoverParams{ExecutorIDs: []string{"e1"}})
	require.NoError(t, err)
	require.Equal(t, []string{"wf"}, recovered)
	second := sysdbtest.Token()
	_, err = workflowsTestRaw(t, b).Exec("UPDATE workflow_status SET status = 'PENDING', owner_xid = ? WHERE workflow_uuid = 'wf'", second)
	require.NoError(t, err)

	// The first run, through a, is fenced; the second, through a too, is not.
	results, err := a.StepRecordMany(ctx, []sysdb.StepRecordParams{
		{WorkflowID: "wf", OwnerXID: first, FunctionID: 1, Name: "s1", Output: sysdbtest.Ptr(`"old"`)},
		{WorkflowID: "wf", OwnerXID: second, FunctionID: 1, Name: "s1", Output: sysdbtest.Ptr(`"new"`)},
		{WorkflowID: "wf", OwnerXID: second, FunctionID: 0, Name: "s0", Output: sysdbtest.Ptr(`0`)},
	})
	require.NoError(t, err)
	var fenced *sysdb.FencedError
	require.ErrorAs(t, results[0], &fenced)
	require.NoError(t, results[1])
	require.NoError(t, results[2], "the same record again is its own retry")
	steps, err := b.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, sysdbtest.Ptr(`"new"`), steps[1].Output)

	// A finish by the old run, through b, loses and learns the new run's state.
	res, err := b.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "wf", OwnerXID: first, Status: sysdb.StatusSuccess, Output: sysdbtest.Ptr(`1`)})
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.Equal(t, sysdb.StatusPending, res.Stored.Status)
	require.Equal(t, &second, res.Stored.OwnerXID)
}

// BenchmarkSQLiteStepRecordMany measures checkpoint throughput on a real
// file (synchronous=FULL: every batch is one fsync): steps/s by batch size.
func BenchmarkSQLiteStepRecordMany(b *testing.B) {
	for _, batch := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			db, err := sysdb.OpenSQLite(ctx, filepath.Join(b.TempDir(), "dbos.sqlite"), sysdb.SQLiteOptions{})
			require.NoError(b, err)
			defer db.Close()
			owner := sysdbtest.Token()
			_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "wf", Name: "f", Status: sysdb.StatusPending, CreatorXID: owner, ExecutorID: "e"})
			require.NoError(b, err)
			steps := make([]sysdb.StepRecordParams, batch)
			next := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range steps {
					steps[j] = sysdb.StepRecordParams{WorkflowID: "wf", OwnerXID: owner, FunctionID: next, Name: "step",
						Output: sysdbtest.Ptr(`{"value":"a typical small JSON output"}`), StartedAt: sysdbtest.Ptr(int64(next)), CompletedAt: sysdbtest.Ptr(int64(next))}
					next++
				}
				results, err := db.StepRecordMany(ctx, steps)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range results {
					if r != nil {
						b.Fatal(r)
					}
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// workflowsTestPython runs testdata/workflows_sqlite.py under DBOS Python
// and decodes the JSON it prints.
func workflowsTestPython(t *testing.T, ctx context.Context, args ...string) map[string]any {
	t.Helper()
	python, err := dbosPythonPath()
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "workflows_sqlite.py")}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "workflows_sqlite.py %v:\n%s", args, errOut.String())
	var got map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &got), out.String())
	return got
}

// TestSQLiteDBOSPythonReadsOurWorkflow: a workflow run through this backend
// (inserted, steps checkpointed, finished) is what DBOS Python's client
// reads from the file: status, decoded inputs, result and step outputs.
func TestSQLiteDBOSPythonReadsOurWorkflow(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	path := ourFreshFile(t, ctx)
	db, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{})
	require.NoError(t, err)
	defer db.Close()
	owner := sysdbtest.Token()
	portable := sysdbtest.Ptr("portable_json")
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "ours", Name: "work", Status: sysdb.StatusPending, CreatorXID: owner, ExecutorID: "local",
		ApplicationVersion: sysdbtest.Ptr("v1"), Attributes: sysdbtest.Ptr(`{"tier":"gold"}`),
		Serialization: portable, Inputs: sysdbtest.Ptr(`{"positionalArgs":[20],"namedArgs":{}}`),
	})
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	results, err := db.StepRecordMany(ctx, []sysdb.StepRecordParams{
		{WorkflowID: "ours", OwnerXID: owner, FunctionID: 0, Name: "double", Output: sysdbtest.Ptr(`40`), Serialization: portable, StartedAt: &now, CompletedAt: &now},
		{WorkflowID: "ours", OwnerXID: owner, FunctionID: 1, Name: "triple", Output: sysdbtest.Ptr(`{"x":[60]}`), Serialization: portable, StartedAt: &now, CompletedAt: &now},
	})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, results)
	res, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "ours", OwnerXID: owner, Status: sysdb.StatusSuccess, Output: sysdbtest.Ptr(`41`)})
	require.NoError(t, err)
	require.True(t, res.Applied)
	w, err := db.WorkflowGet(ctx, "ours")
	require.NoError(t, err)

	got := workflowsTestPython(t, ctx, "read", path, "ours")
	require.Equal(t, "SUCCESS", got["status"])
	require.Equal(t, "work", got["name"])
	require.Equal(t, float64(41), got["result"])
	require.Equal(t, float64(w.CreatedAt), got["created_at"])
	require.Equal(t, float64(w.UpdatedAt), got["updated_at"])
	require.Equal(t, float64(1), got["recovery_attempts"])
	require.Contains(t, fmt.Sprint(got["input"]), "20")
	require.Equal(t, map[string]any{"tier": "gold"}, got["attributes"])
	require.Equal(t, []any{
		map[string]any{"function_id": float64(0), "function_name": "double", "output": float64(40), "child_workflow_id": nil, "started_at_epoch_ms": float64(now)},
		map[string]any{"function_id": float64(1), "function_name": "triple", "output": map[string]any{"x": []any{float64(60)}}, "child_workflow_id": nil, "started_at_epoch_ms": float64(now)},
	}, got["steps"])
}

// TestSQLiteWeReadDBOSPythonWorkflow: a workflow DBOS Python ran on the
// file reads back through this backend with its outcome, inputs and steps.
func TestSQLiteWeReadDBOSPythonWorkflow(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	path := ourFreshFile(t, ctx)
	stdout, stderr := dbosPython(t, ctx, "workflow", path)
	require.Equal(t, "41 40 SUCCESS\n", stdout, stderr)
	db, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{SkipMigrations: true})
	require.NoError(t, err)
	defer db.Close()
	ws, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{Statuses: []string{sysdb.StatusSuccess}, LoadInputs: true, LoadOutputs: true})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	w := ws[0]
	require.Contains(t, w.Name, "work")
	require.NotNil(t, w.Inputs)
	require.NotNil(t, w.Output)
	require.NotNil(t, w.CompletedAt)
	require.GreaterOrEqual(t, *w.CompletedAt, w.CreatedAt)
	require.Nil(t, w.OwnerXID, "a finished workflow has no owner")
	steps, err := db.StepList(ctx, w.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(steps), 2, "the step and set_event")
	require.Contains(t, steps[0].Name, "double")
	require.NotNil(t, steps[0].Output)
	many, err := db.StepListMany(ctx, []string{w.ID, "missing"})
	require.NoError(t, err)
	require.Equal(t, map[string][]sysdb.Step{w.ID: steps}, many)
}

// TestSQLiteEnqueueOrderAcrossHandles: enqueues made one after another
// through two handles on one file (two processes, as far as the file is
// concerned) get strictly increasing created_at, however many fall in one
// millisecond, so every DBOS SDK dequeues them in that order.
func TestSQLiteEnqueueOrderAcrossHandles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	handles := make([]*sysdb.SQLite, 2)
	for i := range handles {
		db, err := sysdb.OpenSQLite(ctx, path, sysdb.SQLiteOptions{})
		require.NoError(t, err)
		t.Cleanup(db.Close)
		handles[i] = db
	}
	const n = 60
	for i := 0; i < n; i++ {
		_, err := handles[i%2].WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
			ID: fmt.Sprintf("wf-%02d", i), Name: "f", Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr("q"),
			CreatorXID: sysdbtest.Token(), ExecutorID: "local",
		})
		require.NoError(t, err)
	}
	ws, err := handles[0].WorkflowList(ctx, sysdb.WorkflowListParams{QueueNames: []string{"q"}})
	require.NoError(t, err)
	require.Len(t, ws, n)
	for i, w := range ws {
		require.Equal(t, fmt.Sprintf("wf-%02d", i), w.ID)
		if i > 0 {
			require.Greater(t, w.CreatedAt, ws[i-1].CreatedAt)
		}
	}
}
