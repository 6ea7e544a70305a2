package sysdb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// schemaPool hands each test a migrated, empty schema. A fresh migration
// costs about 130 ms, and migrators serialise on the SDKs' advisory lock, so
// forty parallel subtests each migrating their own schema queue for seconds;
// emptying a used schema costs a few milliseconds and needs no lock. Schemas
// live as long as the test that made the pool and are dropped after it.
type schemaPool struct {
	url   string
	admin *pgxpool.Pool // empties used schemas

	mu   sync.Mutex
	free []string
	made []string

	migrations, resets, opens           atomic.Int64
	migrateNanos, resetNanos, openNanos atomic.Int64
}

func newSchemaPool(t *testing.T) *schemaPool {
	sp := &schemaPool{url: pgtest.URL(t)}
	admin, err := pgxpool.New(t.Context(), sp.url)
	require.NoError(t, err)
	sp.admin = admin
	t.Cleanup(func() {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		t.Logf("schema pool: %d schemas migrated (%v each), %d emptied for reuse (%v each), %d opens (%v each)",
			sp.migrations.Load(), average(sp.migrateNanos.Load(), sp.migrations.Load()),
			sp.resets.Load(), average(sp.resetNanos.Load(), sp.resets.Load()),
			sp.opens.Load(), average(sp.openNanos.Load(), sp.opens.Load()))
		admin.Close()
		for _, s := range sp.made {
			pgtest.DropSchema(t, sp.url, s)
		}
	})
	return sp
}

func average(total, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	return time.Duration(total / n).Round(time.Millisecond / 10)
}

// take returns a migrated, empty schema for t and takes it back, emptied,
// when t ends.
func (sp *schemaPool) take(t *testing.T) string {
	t.Helper()
	sp.mu.Lock()
	var schema string
	if n := len(sp.free); n > 0 {
		schema, sp.free = sp.free[n-1], sp.free[:n-1]
	}
	sp.mu.Unlock()
	if schema == "" {
		schema = pgtest.UniqueName("sysdb_")
		began := time.Now()
		_, err := sysdb.Migrate(t.Context(), sp.url, sysdb.MigrateOptions{Schema: schema})
		require.NoError(t, err)
		sp.migrateNanos.Add(int64(time.Since(began)))
		sp.migrations.Add(1)
		sp.mu.Lock()
		sp.made = append(sp.made, schema)
		sp.mu.Unlock()
	}
	t.Cleanup(func() { sp.give(t, schema) })
	return schema
}

// give empties schema and puts it back. DELETE, not TRUNCATE: on tables
// this small it is several times faster. Every foreign key cascades, so the
// order does not matter.
func (sp *schemaPool) give(t *testing.T, schema string) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := func() error {
		return pgx.BeginFunc(ctx, sp.admin, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename <> 'dbos_migrations'`, schema)
			if err != nil {
				return err
			}
			tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			for _, table := range tables {
				if _, err := tx.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema, table}.Sanitize()); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	if err != nil {
		t.Logf("schema pool: could not empty %s, dropping it: %v", schema, err)
		return // dropped with the others when the pool ends
	}
	sp.resetNanos.Add(int64(time.Since(began)))
	sp.resets.Add(1)
	sp.mu.Lock()
	sp.free = append(sp.free, schema)
	sp.mu.Unlock()
}

// open opens a Postgres system database on a pooled schema, closed when t
// ends (before the schema goes back to the pool).
func (sp *schemaPool) open(t *testing.T) sysdb.SystemDatabase {
	t.Helper()
	schema := sp.take(t)
	began := time.Now()
	db, err := sysdb.OpenPostgres(t.Context(), sp.url, sysdb.PostgresOptions{Schema: schema, MaxConns: 8})
	require.NoError(t, err)
	sp.openNanos.Add(int64(time.Since(began)))
	sp.opens.Add(1)
	t.Cleanup(db.Close)
	return db
}

func TestPostgresConformance(t *testing.T) {
	sysdbtest.Run(t, newSchemaPool(t).open)
}

// openFresh migrates a schema of its own for t and opens it with opts.
func openFresh(t *testing.T, opts sysdb.PostgresOptions) (*sysdb.Postgres, string) {
	t.Helper()
	if opts.Schema == "" {
		opts.Schema = pgtest.Schema(t)
	}
	db, err := sysdb.OpenPostgres(t.Context(), pgtest.URL(t), opts)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db, opts.Schema
}

// TestPostgresReconnects kills the pool's connections from outside before
// each kind of operation: every one must still succeed, retried on a new
// connection.
// reconnecting opens a system database whose connections kill terminates:
// kill waits until those backends are gone, so the next operation is sure to
// meet a dead connection. (The pool may open new ones meanwhile, for
// instance to send a notification after a commit: only the killed ones are
// waited for.) retried checks that operations met dead connections and
// retried.
func reconnecting(t *testing.T) (db *sysdb.Postgres, kill func(), retried func()) {
	label := pgtest.UniqueName("reconnect_")
	core, logs := observer.New(zapcore.WarnLevel)
	db, _ = openFresh(t, sysdb.PostgresOptions{ConnectionLabel: label, MaxConns: 2, Logger: zap.New(core)})
	admin := pgtest.Connect(t, pgtest.URL(t))
	retried = func() {
		t.Helper()
		require.NotZero(t, logs.FilterMessage("system database connection failed, retrying").Len(),
			"the operations above should have met dead connections and retried")
	}
	return db, func() {
		t.Helper()
		ctx := t.Context()
		var killed []int32
		require.NoError(t, admin.QueryRow(ctx,
			`SELECT coalesce(array_agg(pid) FILTER (WHERE pg_terminate_backend(pid)), '{}') FROM pg_stat_activity WHERE application_name = $1`,
			label).Scan(&killed))
		require.NotEmpty(t, killed, "the pool had no connection to kill")
		for {
			var left int
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, killed).Scan(&left))
			if left == 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}, retried
}

func TestPostgresReconnects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, kill, retried := reconnecting(t)

	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "wf", Name: "wf", Status: sysdb.StatusPending, CreatorXID: "t1", ExecutorID: "local"})
	require.NoError(t, err)

	kill()
	res, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "wf", Name: "wf", Status: sysdb.StatusPending, CreatorXID: "t1", ExecutorID: "local"})
	require.NoError(t, err, "insert after connection loss")
	require.True(t, res.Created, "the retried insert recognises its row")

	kill()
	require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{WorkflowID: "wf", OwnerXID: "t1", FunctionID: 1, Name: "s"}), "step after connection loss")

	kill()
	w, err := db.WorkflowGet(ctx, "wf")
	require.NoError(t, err, "get after connection loss")
	require.Equal(t, sysdb.StatusPending, w.Status)

	kill()
	steps, err := db.StepList(ctx, "wf")
	require.NoError(t, err, "step list after connection loss")
	require.Len(t, steps, 1)

	kill()
	fin, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "wf", OwnerXID: "t1", Status: sysdb.StatusSuccess, Output: sysdbtest.Ptr("1")})
	require.NoError(t, err, "finish after connection loss")
	require.True(t, fin.Applied)

	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "q", Name: "wf", Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr("q"), CreatorXID: "t2", ExecutorID: "local"})
	require.NoError(t, err)
	kill()
	claimed, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "local", ApplicationVersion: "v1"})
	require.NoError(t, err, "dequeue after connection loss")
	require.Len(t, claimed, 1)

	kill()
	listed, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{})
	require.NoError(t, err, "list after connection loss")
	require.Len(t, listed, 2)

	retried()
}

func TestPostgresBadURL(t *testing.T) {
	t.Parallel()
	const secret = "s3cretpw"
	for _, url := range []string{
		"postgres://dbos:" + secret + "@localhost:5432/db?sslmode=bogus",
		"postgres://dbos:" + secret + "@localhost:notaport/db",
		"postgres://dbos:" + secret + "@localhost:5432/db?connect_timeout=soon",
		"host=localhost user=dbos password=" + secret + " sslmode=bogus",
		"host=localhost user=dbos password=" + secret + " port=notaport",
	} {
		_, err := sysdb.OpenPostgres(t.Context(), url, sysdb.PostgresOptions{Schema: "unused"})
		var cfgErr *sysdb.ConfigError
		require.ErrorAs(t, err, &cfgErr, url)
		require.NotContains(t, err.Error(), secret, "the password leaked into the error")

		_, err = sysdb.Migrate(t.Context(), url, sysdb.MigrateOptions{Schema: "unused"})
		require.ErrorAs(t, err, &cfgErr, url)
		require.NotContains(t, err.Error(), secret)

		_, err = sysdb.SchemaVersion(t.Context(), url, "unused")
		require.ErrorAs(t, err, &cfgErr, url)
		require.NotContains(t, err.Error(), secret)
	}
}

func TestPostgresUnreachableHidesPassword(t *testing.T) {
	t.Parallel()
	const secret = "s3cretpw"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := sysdb.OpenPostgres(ctx, "postgres://dbos:"+secret+"@127.0.0.1:1/db?connect_timeout=1", sysdb.PostgresOptions{})
	var unreachable *sysdb.UnreachableError
	require.ErrorAs(t, err, &unreachable)
	require.NotContains(t, err.Error(), secret)
	require.Contains(t, err.Error(), "127.0.0.1", "the message names the target")
}

func TestPostgresPasswordOption(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgx.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	password := cfg.Password
	require.NotEmpty(t, password, "the test database URL has a password")
	// The same database, its password out of the URL (and, in a key/value
	// string, a wrong one the option replaces).
	bare := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	keyValue := fmt.Sprintf("host=%s port=%d user=%s dbname=%s password=wrong sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	schema := pgtest.Schema(t)
	for _, url := range []string{bare, keyValue} {
		_, err := sysdb.Migrate(ctx, url, sysdb.MigrateOptions{Schema: schema, Password: password})
		require.NoError(t, err, url)
		db, err := sysdb.OpenPostgres(ctx, url, sysdb.PostgresOptions{Schema: schema, Password: password, MaxConns: 2})
		require.NoError(t, err, url)
		db.Close()
	}

	const wrong = "not-the-password-51c2"
	_, err = sysdb.Migrate(ctx, bare, sysdb.MigrateOptions{Schema: schema, Password: wrong})
	var unreachable *sysdb.UnreachableError
	require.ErrorAs(t, err, &unreachable)
	_, err2 := sysdb.OpenPostgres(ctx, bare, sysdb.PostgresOptions{Schema: schema, Password: wrong, SkipMigrations: true, RetryFor: time.Second})
	for _, err := range []error{err, err2} {
		require.ErrorContains(t, err, "password authentication failed")
		require.NotContains(t, err.Error(), wrong)
	}
}

func TestPostgresSkipMigrations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)

	_, err := sysdb.OpenPostgres(ctx, url, sysdb.PostgresOptions{Schema: schema, SkipMigrations: true})
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, schema)
	require.Contains(t, msg, "version 0")
	require.Contains(t, msg, fmt.Sprint(sysdb.LatestSchemaVersion))
	require.Contains(t, msg, "migrate")

	var exists bool
	require.NoError(t, pgtest.Connect(t, url).QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`, schema).Scan(&exists))
	require.False(t, exists, "SkipMigrations must not create anything")

	_, err = sysdb.Migrate(ctx, url, sysdb.MigrateOptions{Schema: schema})
	require.NoError(t, err)
	db, err := sysdb.OpenPostgres(ctx, url, sysdb.PostgresOptions{Schema: schema, SkipMigrations: true})
	require.NoError(t, err, "a migrated schema opens without migrating")
	defer db.Close()
	_, err = db.WorkflowList(ctx, sysdb.WorkflowListParams{})
	require.NoError(t, err)
}

// TestPostgresMigrateGrantsApplicationRole migrates as the privileged user
// with an application role, as DBOS's migrate does, and checks that the role
// (which may not create anything) can then run an agent on the schema: its
// tables, sequences and functions are usable.
func TestPostgresMigrateGrantsApplicationRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	role := pgtest.UniqueName("app_role_")
	admin := pgtest.Connect(t, url)
	_, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD 'app-role-pw'")
	require.NoError(t, err)
	t.Cleanup(func() {
		c := pgtest.Connect(t, url)
		for _, stmt := range []string{"DROP OWNED BY ", "DROP ROLE "} {
			_, _ = c.Exec(context.Background(), stmt+pgx.Identifier{role}.Sanitize())
		}
	})
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	asRole := fmt.Sprintf("postgres://%s:app-role-pw@%s:%d/%s?sslmode=disable", role, cfg.Host, cfg.Port, cfg.Database)

	_, err = sysdb.Migrate(ctx, url, sysdb.MigrateOptions{Schema: schema})
	require.NoError(t, err)
	_, err = sysdb.OpenPostgres(ctx, asRole, sysdb.PostgresOptions{Schema: schema, SkipMigrations: true, RetryFor: time.Second})
	require.ErrorContains(t, err, "permission denied", "without the grant the role reaches nothing")

	// Granting works on a schema already at the latest version, as DBOS's does.
	_, err = sysdb.Migrate(ctx, url, sysdb.MigrateOptions{Schema: schema, ApplicationRole: role})
	require.NoError(t, err)
	db, err := sysdb.OpenPostgres(ctx, asRole, sysdb.PostgresOptions{Schema: schema, SkipMigrations: true, RetryFor: time.Second})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.WorkflowList(ctx, sysdb.WorkflowListParams{})
	require.NoError(t, err)
	appConn := pgtest.Connect(t, asRole)
	_, err = appConn.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+".workflow_status (workflow_uuid, status) VALUES ('granted', 'PENDING')")
	require.NoError(t, err, "the role writes the system tables")
}

// TestPostgresReset empties a system schema (keeping its migration record)
// while a pool is open on it, then drops the database, as DBOS's
// reset_system_database does; on a database of its own, since a reset ends
// every other session on its database.
func TestPostgresReset(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.Database(t)
	schema := "reset_sys"
	db, err := sysdb.OpenPostgres(ctx, url, sysdb.PostgresOptions{Schema: schema})
	require.NoError(t, err)
	defer db.Close()
	conn := pgtest.Connect(t, url)
	table := pgx.Identifier{schema}.Sanitize()
	_, err = conn.Exec(ctx, "INSERT INTO "+table+".workflow_status (workflow_uuid, status) VALUES ('before', 'SUCCESS')")
	require.NoError(t, err)

	require.NoError(t, sysdb.Reset(ctx, url, sysdb.ResetOptions{Schema: schema, Truncate: true}))
	conn = pgtest.Connect(t, url) // the reset ended every other session
	var rows, version int64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM "+table+".workflow_status").Scan(&rows))
	require.Zero(t, rows)
	require.NoError(t, conn.QueryRow(ctx, "SELECT version FROM "+table+".dbos_migrations").Scan(&version))
	require.Equal(t, sysdb.LatestSchemaVersion, version, "the migration record stays")
	_, err = db.WorkflowList(ctx, sysdb.WorkflowListParams{})
	require.NoError(t, err, "an open pool reconnects to the emptied schema")
	conn.Close(ctx)

	require.ErrorContains(t, sysdb.Reset(ctx, url, sysdb.ResetOptions{Schema: "no_such_schema", Truncate: true}), "no tables")
	require.NoError(t, sysdb.Reset(ctx, url, sysdb.ResetOptions{}))
	var exists bool
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	require.NoError(t, pgtest.Connect(t, pgtest.URL(t)).QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", cfg.Database).Scan(&exists))
	require.False(t, exists)
	require.NoError(t, sysdb.Reset(ctx, url, sysdb.ResetOptions{}), "a missing database is not an error")
}

// TestPostgresDequeueLatestVersion writes application versions as another
// runtime would, with chosen timestamps, and checks that unversioned rows go
// to executors of the latest version only (an application's own and
// unclaimed versions counting for it).
func TestPostgresDequeueLatestVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, schema := openFresh(t, sysdb.PostgresOptions{})
	conn := pgtest.Connect(t, pgtest.URL(t))
	addVersion := func(name string, ts int64, app *string) {
		_, err := conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "application_versions"}.Sanitize()+
			` (version_id, version_name, version_timestamp, created_at, application_name) VALUES ($1, $1, $2, $2, $3)`, name, ts, app)
		require.NoError(t, err)
	}
	addVersion("v1", 1000, nil)
	addVersion("v2", 2000, nil)
	addVersion("v9", 9000, sysdbtest.Ptr("bank"))

	enqueue := func(id string, version *string) {
		_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
			ID: id, Name: "wf", Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr("q"),
			CreatorXID: id, ExecutorID: "local", ApplicationVersion: version,
		})
		require.NoError(t, err)
	}
	enqueue("unversioned", nil)
	enqueue("for-v1", sysdbtest.Ptr("v1"))
	enqueue("for-v2", sysdbtest.Ptr("v2"))
	enqueue("unversioned-2", nil)

	claim := func(version string, app *string) []string {
		ws, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "local", ApplicationVersion: version, ApplicationName: app})
		require.NoError(t, err)
		out := []string{}
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	// v1 is not the latest: its own rows only.
	require.Equal(t, []string{"for-v1"}, claim("v1", sysdbtest.Ptr("shop")))
	// For any application, bank's v9 is the latest: v2 takes no unversioned row.
	require.Equal(t, []string{"for-v2"}, claim("v2", nil))
	// For shop, bank's version does not count: v2 is shop's latest.
	require.Equal(t, []string{"unversioned", "unversioned-2"}, claim("v2", sysdbtest.Ptr("shop")))
}

// TestPostgresEnqueueOrderAsSDKsDequeue: the order a DBOS SDK's dequeue
// reads (ORDER BY priority, created_at, nothing after) is the enqueue order,
// for back-to-back enqueues in one millisecond and after a row another
// runtime stamped ahead of this database's clock.
func TestPostgresEnqueueOrderAsSDKsDequeue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, schema := openFresh(t, sysdb.PostgresOptions{})
	conn := pgtest.Connect(t, pgtest.URL(t))
	ws := pgx.Identifier{schema, "workflow_status"}.Sanitize()
	enqueue := func(id string) {
		_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
			ID: id, Name: "wf", Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr("q"), CreatorXID: id, ExecutorID: "local",
		})
		require.NoError(t, err)
	}
	enqueue("sdk-row")
	var ahead int64
	require.NoError(t, conn.QueryRow(ctx, `UPDATE `+ws+` SET created_at = (EXTRACT(epoch FROM now()) * 1000)::bigint + 10000
		WHERE workflow_uuid = 'sdk-row' RETURNING created_at`).Scan(&ahead))
	want := []string{"sdk-row"}
	for i := range 30 {
		id := fmt.Sprintf("ours-%02d", i)
		enqueue(id)
		want = append(want, id)
	}
	rows, err := conn.Query(ctx, `SELECT workflow_uuid, created_at FROM `+ws+` WHERE queue_name = 'q' AND status = 'ENQUEUED' ORDER BY priority ASC, created_at ASC`)
	require.NoError(t, err)
	var got []string
	var stamps []int64
	for rows.Next() {
		var id string
		var at int64
		require.NoError(t, rows.Scan(&id, &at))
		got, stamps = append(got, id), append(stamps, at)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got)
	require.Equal(t, ahead+1, stamps[1], "after the row ahead of the clock, not at the clock")
	for i := 1; i < len(stamps); i++ {
		require.Greater(t, stamps[i], stamps[i-1])
	}
}

// TestPostgresQueueListRegistered writes queue rows as another runtime
// would and lists them with the active ones.
func TestPostgresQueueListRegistered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, schema := openFresh(t, sysdb.PostgresOptions{})
	conn := pgtest.Connect(t, pgtest.URL(t))
	_, err := conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "queues"}.Sanitize()+`
		(name, concurrency, worker_concurrency, rate_limit_max, rate_limit_period_sec, priority_enabled, partition_queue, application_name)
		VALUES ('registered', 5, 2, 10, 60.5, TRUE, TRUE, 'shop'), ('idle', NULL, NULL, NULL, NULL, FALSE, FALSE, NULL)`)
	require.NoError(t, err)
	for _, q := range [][2]string{{"r-1", "registered"}, {"r-2", "registered"}, {"adhoc-1", "adhoc"}} {
		_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: q[0], Name: "wf", Status: sysdb.StatusEnqueued,
			QueueName: sysdbtest.Ptr(q[1]), CreatorXID: q[0], ExecutorID: "local"})
		require.NoError(t, err)
	}

	got, err := db.QueueList(ctx)
	require.NoError(t, err)
	require.Equal(t, []sysdb.QueueSummary{
		{Name: "adhoc", Enqueued: 1},
		{Name: "idle", Registered: true},
		{Name: "registered", Registered: true, Concurrency: sysdbtest.Ptr(5), WorkerConcurrency: sysdbtest.Ptr(2),
			RateLimitMax: sysdbtest.Ptr(10), RateLimitPeriodSec: sysdbtest.Ptr(60.5), PriorityEnabled: true, PartitionQueue: true,
			ApplicationName: sysdbtest.Ptr("shop"), Enqueued: 2},
	}, got)
}

// TestPostgresListForks sets forked_from by hand (forking is not part of the
// interface) and filters on it.
func TestPostgresListForks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, schema := openFresh(t, sysdb.PostgresOptions{})
	for _, id := range []string{"original", "fork", "plain"} {
		_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: id, Name: "wf", Status: sysdb.StatusPending, CreatorXID: id, ExecutorID: "local"})
		require.NoError(t, err)
	}
	conn := pgtest.Connect(t, pgtest.URL(t))
	table := pgx.Identifier{schema, "workflow_status"}.Sanitize()
	_, err := conn.Exec(ctx, `UPDATE `+table+` SET forked_from = 'original' WHERE workflow_uuid = 'fork'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE `+table+` SET was_forked_from = TRUE WHERE workflow_uuid = 'original'`)
	require.NoError(t, err)

	list := func(p sysdb.WorkflowListParams) []string {
		ws, err := db.WorkflowList(ctx, p)
		require.NoError(t, err)
		out := []string{}
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	yes, no := true, false
	require.Equal(t, []string{"fork"}, list(sysdb.WorkflowListParams{ForkedFrom: []string{"original"}}))
	require.Equal(t, []string{"fork"}, list(sysdb.WorkflowListParams{IsFork: &yes}))
	require.ElementsMatch(t, []string{"original", "plain"}, list(sysdb.WorkflowListParams{IsFork: &no}))
	w, err := db.WorkflowGet(ctx, "fork")
	require.NoError(t, err)
	require.Equal(t, sysdbtest.Ptr("original"), w.ForkedFrom)
	w, err = db.WorkflowGet(ctx, "original")
	require.NoError(t, err)
	require.True(t, w.WasForkedFrom)
}

// TestPostgresLegacyPayloadColumns: rows written before the payload tables
// existed keep inputs and outcomes on workflow_status; readers fall back to
// them.
func TestPostgresLegacyPayloadColumns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, schema := openFresh(t, sysdb.PostgresOptions{})
	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "old", Name: "wf", Status: sysdb.StatusPending, CreatorXID: "x", ExecutorID: "local"})
	require.NoError(t, err)
	conn := pgtest.Connect(t, pgtest.URL(t))
	_, err = conn.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, "workflow_input"}.Sanitize())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "workflow_status"}.Sanitize()+
		` SET status = 'ERROR', owner_xid = NULL, inputs = 'legacy-in', output = 'legacy-out', error = 'legacy-err' WHERE workflow_uuid = 'old'`)
	require.NoError(t, err)

	w, err := db.WorkflowGet(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, sysdbtest.Ptr("legacy-in"), w.Inputs)
	require.Equal(t, sysdbtest.Ptr("legacy-out"), w.Output)
	require.Equal(t, sysdbtest.Ptr("legacy-err"), w.Error)
	ws, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{LoadInputs: true, LoadOutputs: true})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, sysdbtest.Ptr("legacy-in"), ws[0].Inputs)
	require.Equal(t, sysdbtest.Ptr("legacy-err"), ws[0].Error)
}

// TestPostgresDeleteClearsEverything checks the tables directly: payloads
// and steps (no foreign key) and messages, events and streams (cascade).
func TestPostgresDeleteClearsEverything(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, schema := openFresh(t, sysdb.PostgresOptions{})
	conn := pgtest.Connect(t, pgtest.URL(t))
	tbl := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }

	for _, id := range []string{"parent", "child", "keep"} {
		var parent *string
		if id == "child" {
			parent = sysdbtest.Ptr("parent")
		}
		_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
			ID: id, Name: "wf", Status: sysdb.StatusPending, CreatorXID: id, ExecutorID: "local",
			ParentWorkflowID: parent, Inputs: sysdbtest.Ptr(`"in"`), Serialization: sysdbtest.Ptr("portable_json"),
		})
		require.NoError(t, err)
		require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{WorkflowID: id, OwnerXID: id, FunctionID: 1, Name: "s", Output: sysdbtest.Ptr("1")}))
		_, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: id, OwnerXID: id, Status: sysdb.StatusSuccess, Output: sysdbtest.Ptr(`"out"`)})
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO `+tbl("notifications")+` (destination_uuid, topic, message) VALUES ($1, 't', 'm')`, id)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO `+tbl("workflow_events")+` (workflow_uuid, key, value) VALUES ($1, 'k', 'v')`, id)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO `+tbl("streams")+` (workflow_uuid, key, value, "offset", function_id) VALUES ($1, 'k', 'v', 0, 2)`, id)
		require.NoError(t, err)
	}

	require.NoError(t, db.WorkflowDelete(ctx, sysdb.WorkflowDeleteParams{WorkflowIDs: []string{"parent"}, IncludeChildren: true}))

	for _, c := range []struct{ table, column string }{
		{"workflow_status", "workflow_uuid"}, {"workflow_input", "workflow_uuid"}, {"workflow_output", "workflow_uuid"},
		{"operation_outputs", "workflow_uuid"}, {"notifications", "destination_uuid"}, {"workflow_events", "workflow_uuid"},
		{"streams", "workflow_uuid"},
	} {
		var gone, kept int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE `+c.column+` IN ('parent', 'child')),
			count(*) FILTER (WHERE `+c.column+` = 'keep') FROM `+tbl(c.table)).Scan(&gone, &kept))
		require.Zero(t, gone, c.table)
		require.Equal(t, 1, kept, c.table)
	}
}

// TestPostgresStepRecordConcurrentFence races step writes against a cancel:
// once the cancel commits, no step of the old run lands.
func TestPostgresStepRecordConcurrentFence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _ := openFresh(t, sysdb.PostgresOptions{})
	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "wf", Name: "wf", Status: sysdb.StatusPending, CreatorXID: "run", ExecutorID: "local"})
	require.NoError(t, err)

	var wg sync.WaitGroup
	var accepted atomic.Int64
	results := make(chan error, 200)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				err := db.StepRecord(ctx, sysdb.StepRecordParams{WorkflowID: "wf", OwnerXID: "run", FunctionID: g*50 + i + 1, Name: "s"})
				if err == nil {
					accepted.Add(1)
				}
				results <- err
			}
		}()
	}
	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"wf"}})
	require.NoError(t, err)
	steps, err := db.StepList(ctx, "wf")
	require.NoError(t, err)
	afterCancel := len(steps)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			var fenced *sysdb.FencedError
			require.True(t, errors.As(err, &fenced), "unexpected error: %v", err)
		}
	}
	steps, err = db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Equal(t, afterCancel, len(steps), "a step landed after the cancel committed")
	require.Equal(t, int64(len(steps)), accepted.Load(), "every accepted step is durable")
}

func TestPostgresRedactsPasswordInErrors(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"failed to connect to postgres://dbos:s3cretpw@db:5432/x",
		"host=db user=dbos password=s3cretpw dbname=x",
	} {
		out := sysdb.Redact(text)
		require.False(t, strings.Contains(out, "s3cretpw"), out)
	}
}

// TestPostgresQueueNotifications listens on the queue channel from a
// connection of its own and checks that every way work becomes available on
// a queue wakes pollers with the queue's name, once per queue, and that
// nothing else does. Notifications arrive in commit order, so "nothing" is
// checked by a sentinel enqueue: it must be the next notification.
func TestPostgresQueueNotifications(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, listener := listening(t, sysdb.ChannelQueue)
	next := func() string {
		t.Helper()
		channel, payload := nextNotification(t, listener)
		require.Equal(t, sysdb.ChannelQueue, channel)
		return payload
	}
	insert := func(p sysdb.WorkflowInsertParams) {
		t.Helper()
		if p.Name == "" {
			p.Name = "wf"
		}
		if p.CreatorXID == "" {
			p.CreatorXID = sysdbtest.Token()
		}
		p.ExecutorID = "local"
		_, err := db.WorkflowInsert(ctx, p)
		require.NoError(t, err)
	}
	enqueue := func(id, queue string) {
		t.Helper()
		insert(sysdb.WorkflowInsertParams{ID: id, Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr(queue)})
	}
	sentinels := 0
	// expect reads exactly the notifications of the queues named (in any
	// order), then checks with a sentinel that no more came.
	expect := func(queues ...string) {
		t.Helper()
		got := make([]string, len(queues))
		for i := range queues {
			got[i] = next()
		}
		require.ElementsMatch(t, queues, got)
		sentinels++
		sentinel := fmt.Sprintf("sentinel-%d", sentinels)
		enqueue(sentinel, sentinel)
		require.Equal(t, sentinel, next(), "a notification came that should not have")
	}
	claim := func(queue, executor string) []sysdb.Workflow {
		t.Helper()
		ws, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: queue, ExecutorID: executor, ApplicationVersion: "v1"})
		require.NoError(t, err)
		return ws
	}

	// Inserts: only an ENQUEUED row made by this request.
	insert(sysdb.WorkflowInsertParams{ID: "direct", Status: sysdb.StatusPending})
	insert(sysdb.WorkflowInsertParams{ID: "direct-on-queue", Status: sysdb.StatusPending, QueueName: sysdbtest.Ptr("q1")})
	insert(sysdb.WorkflowInsertParams{ID: "later", Status: sysdb.StatusDelayed, QueueName: sysdbtest.Ptr("q1"),
		DelayUntilEpochMS: sysdbtest.Ptr(time.Now().UnixMilli() + 3_600_000)})
	expect()
	insert(sysdb.WorkflowInsertParams{ID: "queued", Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr("q1"), DeduplicationID: sysdbtest.Ptr("k")})
	expect("q1")
	enqueue("queued", "q1") // another request meets the existing row
	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "dup", Name: "wf", Status: sysdb.StatusEnqueued,
		QueueName: sysdbtest.Ptr("q1"), DeduplicationID: sysdbtest.Ptr("k"), CreatorXID: "x", ExecutorID: "local"})
	var dedup *sysdb.DeduplicatedError
	require.ErrorAs(t, err, &dedup)
	expect()

	// Delayed rows released: each queue once.
	past := time.Now().UnixMilli() - 1000
	for _, r := range [][2]string{{"d-1", "q2"}, {"d-2", "q2"}, {"d-3", "q3"}} {
		insert(sysdb.WorkflowInsertParams{ID: r[0], Status: sysdb.StatusDelayed, QueueName: sysdbtest.Ptr(r[1]), DelayUntilEpochMS: &past})
	}
	expect()
	released, err := db.WorkflowReleaseDelayed(ctx, nil)
	require.NoError(t, err)
	require.Len(t, released, 3)
	expect("q2", "q3")
	released, err = db.WorkflowReleaseDelayed(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, released)
	expect()

	// Resume, onto the named queue or the internal one.
	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"d-1", "d-2"}})
	require.NoError(t, err)
	_, err = db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: []string{"d-1"}, QueueName: "q4"})
	require.NoError(t, err)
	expect("q4")
	_, err = db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: []string{"d-2"}})
	require.NoError(t, err)
	expect(sysdb.InternalQueueName)
	_, err = db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: []string{"missing"}})
	require.NoError(t, err)
	expect()

	// Hand-back of claimed runs.
	enqueue("r-1", "q5")
	enqueue("r-2", "q6")
	expect("q5", "q6")
	var claims []sysdb.WorkflowClaim
	for _, q := range []string{"q5", "q6"} {
		for _, w := range claim(q, "worker") {
			claims = append(claims, sysdb.WorkflowClaim{WorkflowID: w.ID, OwnerXID: *w.OwnerXID})
		}
	}
	requeued, err := db.WorkflowRequeue(ctx, claims)
	require.NoError(t, err)
	require.Len(t, requeued, 2)
	expect("q5", "q6")

	// Recovery: onto each row's queue, or the internal one.
	// One at a time: two commits close together may share one coalesced
	// notification of the queue.
	enqueue("rec-1", "q7")
	expect("q7")
	enqueue("rec-2", "q7")
	expect("q7")
	require.Len(t, claim("q7", "crashed"), 2)
	insert(sysdb.WorkflowInsertParams{ID: "rec-direct", Status: sysdb.StatusPending})
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "rec-direct-2", Name: "wf", Status: sysdb.StatusPending, CreatorXID: "c", ExecutorID: "crashed"})
	require.NoError(t, err)
	recovered, err := db.WorkflowRecover(ctx, sysdb.WorkflowRecoverParams{ExecutorIDs: []string{"crashed"}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"rec-1", "rec-2", "rec-direct-2"}, recovered)
	expect("q7", sysdb.InternalQueueName)
}

// listening opens a system database in a database of its own (NOTIFY
// channels are database-wide: other tests' writes stay out) and a
// connection listening on channels there. It returns the database URL too.
func listening(t *testing.T, channels ...string) (*sysdb.Postgres, string, *pgx.Conn) {
	t.Helper()
	url := pgtest.Database(t)
	db, err := sysdb.OpenPostgres(t.Context(), url, sysdb.PostgresOptions{})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	listener := pgtest.Connect(t, url)
	for _, ch := range channels {
		_, err = listener.Exec(t.Context(), "LISTEN "+pgx.Identifier{ch}.Sanitize())
		require.NoError(t, err)
	}
	return db, url, listener
}

// nextNotification waits for the listener's next notification.
func nextNotification(t *testing.T, listener *pgx.Conn) (channel, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(ctx)
	require.NoError(t, err, "no notification came")
	return n.Channel, n.Payload
}
