package sysdb_test

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// queuesOpenPair opens two SQLite handles on one fresh file: two agents (or
// an agent and a DBOS app) sharing it, each with its own writer connection.
func queuesOpenPair(t *testing.T) (string, *sysdb.SQLite, *sysdb.SQLite) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	var handles [2]*sysdb.SQLite
	for i := range handles {
		db, err := sysdb.OpenSQLite(context.Background(), path, sysdb.SQLiteOptions{})
		require.NoError(t, err)
		t.Cleanup(db.Close)
		handles[i] = db
	}
	return path, handles[0], handles[1]
}

// queuesEnqueue inserts n ENQUEUED workflows named name on queue "q".
func queuesEnqueue(t *testing.T, db sysdb.SystemDatabase, prefix, name string, n int) []string {
	t.Helper()
	queue := "q"
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%03d", prefix, i)
		res, err := db.WorkflowInsert(t.Context(), sysdb.WorkflowInsertParams{
			ID: id, Name: name, Status: sysdb.StatusEnqueued, QueueName: &queue, CreatorXID: "creator-" + id,
		})
		require.NoError(t, err)
		require.True(t, res.Created)
		ids = append(ids, id)
	}
	return ids
}

// TestSQLiteQueuesHandlesNeverDoubleClaim: many claimers on two handles of
// one file, each claim in its own write transaction, drain a queue between
// them: every workflow is claimed exactly once, under the token its
// claimer got back.
func TestSQLiteQueuesHandlesNeverDoubleClaim(t *testing.T) {
	_, a, b := queuesOpenPair(t)
	want := queuesEnqueue(t, a, "w", "work", 80)

	var mu sync.Mutex
	claimedBy := map[string]string{} // id -> owner token
	var doubles []string
	var wg sync.WaitGroup
	for i := range 8 {
		db := a
		if i%2 == 1 {
			db = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for empty := 0; empty < 3; {
				ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{
					QueueName: "q", ExecutorID: fmt.Sprintf("e%d", i), ApplicationVersion: "v1", MaxClaim: 3,
				})
				if !queuesNoError(t, err) {
					return
				}
				if len(ws) == 0 {
					empty++
					continue
				}
				mu.Lock()
				for _, w := range ws {
					if _, dup := claimedBy[w.ID]; dup {
						doubles = append(doubles, w.ID)
					}
					claimedBy[w.ID] = *w.OwnerXID
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, doubles, "claimed twice")
	require.Len(t, claimedBy, len(want))
	for _, id := range want {
		w, err := b.WorkflowGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, sysdb.StatusPending, w.Status, id)
		require.Equal(t, claimedBy[id], *w.OwnerXID, "%s: the row's owner is the claimer that got it", id)
		require.EqualValues(t, 1, w.RecoveryAttempts, id)
	}
}

// TestSQLiteQueuesGlobalLimitAcrossHandles: claimers on two handles whose
// candidates are disjoint (each serves other workflow names, the case that
// needs predicate locks on Postgres) still share one global concurrency
// limit, because each count-and-claim is one serialised write transaction
// on the file.
func TestSQLiteQueuesGlobalLimitAcrossHandles(t *testing.T) {
	_, a, b := queuesOpenPair(t)
	all := append(queuesEnqueue(t, a, "resize", "resize", 20), queuesEnqueue(t, b, "archive", "archive", 20)...)
	const limit = 3
	lim := sysdb.QueueLimits{GlobalConcurrency: new(int)}
	*lim.GlobalConcurrency = limit

	var mu sync.Mutex
	var claimed []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 10 {
		db, names := a, []string{"resize"}
		if i%2 == 1 {
			db, names = b, []string{"archive"}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range 5 {
				ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{
					QueueName: "q", ExecutorID: fmt.Sprintf("e%d", i), ApplicationVersion: "v1",
					Limits: lim, WorkflowNames: names,
				})
				if !queuesNoError(t, err) {
					return
				}
				mu.Lock()
				for _, w := range ws {
					claimed = append(claimed, w.ID)
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, claimed, limit, "never more running than the global limit: %v", claimed)
	running := 0
	for _, id := range all {
		w, err := a.WorkflowGet(t.Context(), id)
		require.NoError(t, err)
		if w.Status == sysdb.StatusPending {
			running++
		}
	}
	require.Equal(t, limit, running, "the rows agree")
}

// TestSQLiteQueuesDequeuePythonRow: a row written as DBOS Python writes an
// enqueue on SQLite (millisecond instants, its defaults, inputs on the
// payload table, no application name or version) is claimed, stamped with
// the claimer's version, executor and application, and returned with its
// inputs.
func TestSQLiteQueuesDequeuePythonRow(t *testing.T) {
	path, db, _ := queuesOpenPair(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)")
	require.NoError(t, err)
	defer raw.Close()
	now := time.Now().UnixMilli()
	_, err = raw.Exec(`INSERT INTO workflow_status (workflow_uuid, status, name, queue_name, executor_id,
		    created_at, updated_at, workflow_timeout_ms, priority, serialization)
		VALUES ('py-1', 'ENQUEUED', 'py_workflow', 'q', 'local', ?1, ?1, 60000, 0, 'py_pickle')`, now)
	require.NoError(t, err)
	_, err = raw.Exec(`INSERT INTO workflow_input (workflow_uuid, inputs) VALUES ('py-1', 'gASVAAAA')`)
	require.NoError(t, err)

	app := "shop"
	ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{
		QueueName: "q", ExecutorID: "agent", ApplicationVersion: "v7", ApplicationName: &app, OwnerPrefix: "agent-",
	})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	w := ws[0]
	require.Equal(t, "py-1", w.ID)
	require.Equal(t, sysdb.StatusPending, w.Status)
	require.Equal(t, "gASVAAAA", *w.Inputs)
	require.Equal(t, "v7", *w.ApplicationVersion)
	require.Equal(t, "shop", *w.ApplicationName)
	require.Regexp(t, `^agent-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, *w.OwnerXID, "the prefix and a v4 uuid")
	require.NotNil(t, w.DeadlineEpochMS)
	require.InDelta(t, time.Now().UnixMilli()+60000, *w.DeadlineEpochMS, 10000, "the deadline runs from the claim")
	require.NotNil(t, w.PreClaim)
	require.Nil(t, w.PreClaim.ApplicationVersion)
	require.Nil(t, w.PreClaim.ApplicationName)
	require.Equal(t, "local", *w.PreClaim.ExecutorID)

	// What DBOS Python reads back: plain integers for the instants.
	// and 0/1 for the booleans, as SQLAlchemy's Boolean stores them.
	var started, updated, attempts, rateLimited int64
	var typ, rateType string
	require.NoError(t, raw.QueryRow(`SELECT started_at_epoch_ms, updated_at, recovery_attempts, typeof(started_at_epoch_ms),
		    rate_limited, typeof(rate_limited)
		FROM workflow_status WHERE workflow_uuid = 'py-1'`).Scan(&started, &updated, &attempts, &typ, &rateLimited, &rateType))
	require.Equal(t, "integer", typ)
	require.Equal(t, started, updated)
	require.EqualValues(t, 1, attempts)
	require.Equal(t, "integer", rateType)
	require.EqualValues(t, 0, rateLimited)
}

// TestSQLiteQueuesIdlePollSkipsWriteLock: while another process holds the
// file's write lock (a DBOS app in a long transaction), polling a queue
// with nothing ENQUEUED returns at once from a reader instead of queueing
// for the lock, and a queue with work waits for it and then claims.
func TestSQLiteQueuesIdlePollSkipsWriteLock(t *testing.T) {
	path, db, _ := queuesOpenPair(t)
	queuesEnqueue(t, db, "busy", "work", 1)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)")
	require.NoError(t, err)
	defer raw.Close()
	conn, err := raw.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(t.Context(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	locked := true
	defer func() {
		if locked {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	began := time.Now()
	ws, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: "idle", ExecutorID: "e", ApplicationVersion: "v1"})
	require.NoError(t, err)
	require.Empty(t, ws)
	require.Less(t, time.Since(began), time.Second, "an idle poll does not wait for the write lock")

	claimed := make(chan []sysdb.Workflow, 1)
	go func() {
		ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "e", ApplicationVersion: "v1"})
		queuesNoError(t, err)
		claimed <- ws
	}()
	select {
	case <-claimed:
		t.Fatal("claimed while another process held the write lock")
	case <-time.After(300 * time.Millisecond):
	}
	_, err = conn.ExecContext(t.Context(), "COMMIT")
	require.NoError(t, err)
	locked = false
	select {
	case ws := <-claimed:
		require.Len(t, ws, 1)
		require.Equal(t, "busy-000", ws[0].ID)
	case <-time.After(10 * time.Second):
		t.Fatal("the claim did not go ahead once the lock was released")
	}
}

// queuesNoError reports err from a claimer goroutine (require must not
// stop a test from another goroutine).
func queuesNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("dequeue: %v", err)
		return false
	}
	return true
}

// TestSQLiteQueuesDequeueDBOSPythonEnqueue: workflows DBOS Python 3.4's
// client enqueues on the file the agent serves (another process, its own
// SQLAlchemy connection and clock) are claimed by QueueDequeue in priority
// order, with their inputs and the deadline their timeout gives them.
func TestSQLiteQueuesDequeueDBOSPythonEnqueue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs DBOS Python")
	}
	python, err := dbosPythonPath()
	require.NoError(t, err, "DBOS Python 3.4 (scripts/dbos-python.sh, or DBOS_TEST_PYTHON)")
	path, db, _ := queuesOpenPair(t)
	enqueue := func(id, priority string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), python, filepath.Join("testdata", "dbos_sqlite_enqueue.py"), path, "jobs", "work", id, priority)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, id+"\n", string(out))
	}
	enqueue("py-low", "5")
	enqueue("py-high", "1")

	ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{
		QueueName: "jobs", ExecutorID: "agent", ApplicationVersion: "v1", OwnerPrefix: "agent-", MaxClaim: 1,
	})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "py-high", ws[0].ID, "priority first")
	w := ws[0]
	require.Equal(t, "work", w.Name)
	require.Equal(t, sysdb.StatusPending, w.Status)
	require.NotNil(t, w.Inputs, "the inputs DBOS wrote")
	require.NotEmpty(t, *w.Inputs)
	require.EqualValues(t, 60000, *w.TimeoutMS)
	require.InDelta(t, time.Now().UnixMilli()+60000, *w.DeadlineEpochMS, 10000)
	require.Equal(t, "v1", *w.ApplicationVersion, "an unversioned row goes to the (only) version")

	ws, err = db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{QueueName: "jobs", ExecutorID: "agent", ApplicationVersion: "v1"})
	require.NoError(t, err)
	require.Equal(t, []string{"py-low"}, []string{ws[0].ID})
	ws, err = db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{QueueName: "jobs", ExecutorID: "agent", ApplicationVersion: "v1"})
	require.NoError(t, err)
	require.Empty(t, ws)
}

// TestSQLiteQueuesUnboundedClaim: a claim without a bound takes a backlog
// larger than SQLite's cap on statement parameters (32766), in queue order.
func TestSQLiteQueuesUnboundedClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("a large backlog (some 45 s under -race)")
	}
	path, db, _ := queuesOpenPair(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)")
	require.NoError(t, err)
	defer raw.Close()
	const backlog = 33000
	_, err = raw.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
		INSERT INTO workflow_status (workflow_uuid, status, name, queue_name, created_at, updated_at, priority)
		SELECT printf('bulk-%05d', i), 'ENQUEUED', 'work', 'q', 1000 + i, 1000 + i, 0 FROM n`, backlog)
	require.NoError(t, err)

	ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "e", ApplicationVersion: "v1"})
	require.NoError(t, err)
	require.Len(t, ws, backlog)
	tokens := map[string]bool{}
	for i, w := range ws {
		if w.ID != fmt.Sprintf("bulk-%05d", i) || w.Status != sysdb.StatusPending {
			t.Fatalf("claim %d: %s %s", i, w.ID, w.Status)
		}
		tokens[*w.OwnerXID] = true
	}
	require.Len(t, tokens, backlog, "a token of its own for every row")
	var left int
	require.NoError(t, raw.QueryRow(`SELECT count(*) FROM workflow_status WHERE status = 'ENQUEUED'`).Scan(&left))
	require.Zero(t, left)
}

// TestSQLiteQueuesScheduleListPrefixIsExact: SQLite's LIKE ignores ASCII
// case and treats % and _ as wildcards; a schedule name prefix must match
// bytes exactly, as on Postgres.
func TestSQLiteQueuesScheduleListPrefixIsExact(t *testing.T) {
	_, db, _ := queuesOpenPair(t)
	for _, name := range []string{"Nightly-report", "nightly-backup", "night_x", "nightXy", "100%-done", "100-done"} {
		require.NoError(t, db.ScheduleCreate(t.Context(), sysdb.Schedule{Name: name, WorkflowName: "w", Cron: "* * * * *"}))
	}
	names := func(prefix string) []string {
		t.Helper()
		ss, err := db.ScheduleList(t.Context(), sysdb.ScheduleListParams{NamePrefix: prefix})
		require.NoError(t, err)
		out := []string{}
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	require.Equal(t, []string{"nightly-backup"}, names("nightly"))
	require.Equal(t, []string{"Nightly-report"}, names("Night"))
	require.Equal(t, []string{"night_x"}, names("night_"))
	require.Equal(t, []string{"100%-done"}, names("100%"))
	require.Equal(t, []string{"100%-done", "100-done", "Nightly-report", "nightXy", "night_x", "nightly-backup"}, names(""), "byte order")
}

// TestSQLiteQueuesShareAQueueWithDBOSPython: a DBOS Python 3.4 app and the
// agent serve one queue on one file at once, each dequeuing in its own
// transactions: every workflow is claimed by exactly one of them, and both
// get work.
func TestSQLiteQueuesShareAQueueWithDBOSPython(t *testing.T) {
	if testing.Short() {
		t.Skip("runs DBOS Python")
	}
	python, err := dbosPythonPath()
	require.NoError(t, err, "DBOS Python 3.4 (scripts/dbos-python.sh, or DBOS_TEST_PYTHON)")
	path, db, _ := queuesOpenPair(t)
	const n = 60

	stop := make(chan struct{})
	agentClaims := make(chan []string, 1)
	go func() {
		var got []string
		defer func() { agentClaims <- got }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{
				QueueName: "jobs", ExecutorID: "agent", ApplicationVersion: "v1", OwnerPrefix: "agent-", MaxClaim: 1,
			})
			if !queuesNoError(t, err) {
				return
			}
			for _, w := range ws {
				got = append(got, w.ID)
			}
		}
	}()
	cmd := exec.CommandContext(t.Context(), python, filepath.Join("testdata", "dbos_sqlite_queue_worker.py"), path, fmt.Sprint(n))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	close(stop)
	agent := <-agentClaims
	require.NoError(t, err, "%s", stderr.String())
	pythonRan := strings.Fields(string(out))

	byAgent := map[string]bool{}
	for _, id := range agent {
		require.False(t, byAgent[id], "the agent claimed %s twice", id)
		byAgent[id] = true
	}
	for _, id := range pythonRan {
		require.False(t, byAgent[id], "%s was claimed by the agent and run by DBOS", id)
	}
	require.Equal(t, n, len(agent)+len(pythonRan), "every workflow claimed once: agent %d, DBOS %d", len(agent), len(pythonRan))
	require.NotEmpty(t, agent, "the agent got work")
	require.NotEmpty(t, pythonRan, "DBOS got work")
	for _, id := range agent {
		w, err := db.WorkflowGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, sysdb.StatusPending, w.Status, id)
		require.Equal(t, "agent", *w.ExecutorID, id)
	}
	t.Logf("agent claimed %d, DBOS ran %d", len(agent), len(pythonRan))
}

// BenchmarkSQLiteQueuesDequeue: one claim of up to 10 from a backlog, per
// operation, with no limits and with the shared ones counted (global
// concurrency over every PENDING row claimed so far, and a rate limit over
// every start).
func BenchmarkSQLiteQueuesDequeue(b *testing.B) {
	many := 1 << 30
	for _, c := range []struct {
		name string
		lim  sysdb.QueueLimits
	}{
		{"no-limits", sysdb.QueueLimits{}},
		{"global-and-rate", sysdb.QueueLimits{GlobalConcurrency: &many, RateLimitMax: &many, RateLimitPeriod: time.Hour}},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "dbos.sqlite")
			db, err := sysdb.OpenSQLite(context.Background(), path, sysdb.SQLiteOptions{})
			require.NoError(b, err)
			defer db.Close()
			raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)")
			require.NoError(b, err)
			defer raw.Close()
			_, err = raw.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
				INSERT INTO workflow_status (workflow_uuid, status, name, queue_name, created_at, updated_at, priority)
				SELECT printf('bench-%08d', i), 'ENQUEUED', 'work', 'q', 1000 + i, 1000 + i, 0 FROM n`, 10*b.N+10)
			require.NoError(b, err)
			b.ResetTimer()
			claimed := 0
			for range b.N {
				ws, err := db.QueueDequeue(context.Background(), sysdb.QueueDequeueParams{
					QueueName: "q", ExecutorID: "e", ApplicationVersion: "v1", Limits: c.lim, MaxClaim: 10,
				})
				if err != nil {
					b.Fatal(err)
				}
				claimed += len(ws)
			}
			b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "workflows/s")
		})
	}
}
