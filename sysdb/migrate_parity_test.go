package sysdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// These tests hold our migrations to the official DBOS Go SDK: the schema
// they build (at every version, and from any starting version) must be the
// one the SDK builds, down to default expressions and index predicates,
// because every DBOS SDK reads and writes the same tables.

func parityContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sdkMigrate brings schema to the latest version with the official SDK.
func sdkMigrate(t *testing.T, ctx context.Context, databaseURL, schema string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	require.NoError(t, dbos.Migrate(ctx, databaseURL, dbos.WithMigrateSchema(schema), dbos.WithMigrateLogger(quiet)))
}

// sdkStep is one migration of the SDK's script: its statements, the last
// of which records the version.
type sdkStep struct {
	version    int64
	statements []string
}

var sdkBookkeeping = regexp.MustCompile(`dbos_migrations(?: \(version\) VALUES \((\d+)\)| SET version = (\d+));$`)

// sdkSteps splits the SDK's fresh-database script into migrations. The two
// setup statements (schema and migrations table) go with the first one.
func sdkSteps(t *testing.T, schema string) []sdkStep {
	t.Helper()
	statements, err := dbos.MigrationStatements(schema, 1)
	require.NoError(t, err)
	var steps []sdkStep
	var pending []string
	for _, s := range statements {
		if isOnlyComments(s) {
			continue
		}
		pending = append(pending, s)
		m := sdkBookkeeping.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		digits := m[1] + m[2]
		v, err := strconv.ParseInt(digits, 10, 64)
		require.NoError(t, err)
		steps = append(steps, sdkStep{version: v, statements: pending})
		pending = nil
	}
	require.Empty(t, pending, "SDK script ends without version bookkeeping")
	return steps
}

func isOnlyComments(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "--") {
			return false
		}
	}
	return true
}

// sdkMigrateTo runs the SDK's own SQL on a plain connection, statement by
// statement, up to and including version's bookkeeping.
func sdkMigrateTo(t *testing.T, ctx context.Context, conn *pgx.Conn, schema string, version int64) {
	t.Helper()
	for _, step := range sdkSteps(t, schema) {
		if step.version > version {
			return
		}
		for _, s := range step.statements {
			_, err := conn.Exec(ctx, s)
			require.NoError(t, err, "SDK migration %d: %s", step.version, s)
		}
	}
}

// ourFile is one of our migration files as the runner sees it.
type ourFile struct {
	version int64
	name    string
	sql     string
	online  bool
}

func ourFiles(t *testing.T) []ourFile {
	t.Helper()
	dir := filepath.Join("migrations", "postgres")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []ourFile
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		require.True(t, ok, e.Name())
		require.Len(t, prefix, 3, "%s: version must be zero-padded to 3 digits", e.Name())
		v, err := strconv.ParseInt(prefix, 10, 64)
		require.NoError(t, err, e.Name())
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		text := string(body)
		first, _, _ := strings.Cut(text, "\n")
		files = append(files, ourFile{version: v, name: e.Name(), sql: text, online: first == "-- dbos:online"})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].version < files[j].version })
	return files
}

func (f ourFile) render(schema string, concurrently bool) string {
	kw := ""
	if concurrently {
		kw = "CONCURRENTLY"
	}
	return strings.NewReplacer("{{schema}}", pgx.Identifier{schema}.Sanitize(), "{{concurrently}}", kw).Replace(f.sql)
}

// ---------------------------------------------------------------------------
// Catalog snapshots

// schemaCatalog describes everything in a schema that another SDK could
// depend on, as sorted text with the schema name replaced by <schema>, so
// that two schemas built by different code compare with require.Equal.
type schemaCatalog struct {
	Relations   []string
	Columns     []string
	Constraints []string
	Indexes     []string
	Functions   []string
	Triggers    []string
	Versions    []int64
}

func readCatalog(t *testing.T, ctx context.Context, conn *pgx.Conn, schema string) schemaCatalog {
	t.Helper()
	var c schemaCatalog
	c.Relations = catalogRows(t, ctx, conn, schema, `
		SELECT format('%s kind=%s persistence=%s options=%s', c.relname, c.relkind, c.relpersistence, c.reloptions)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1`)
	c.Columns = catalogRows(t, ctx, conn, schema, `
		SELECT format('%s.%s #%s type=%s default=%s notnull=%s identity=%s generated=%s collation=%s',
			c.relname, a.attname, a.attnum, pg_catalog.format_type(a.atttypid, a.atttypmod),
			coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '<none>'), a.attnotnull,
			a.attidentity, a.attgenerated, coalesce(co.collname, '<none>'))
		FROM pg_catalog.pg_attribute a
		JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0 AND NOT a.attisdropped`)
	c.Constraints = catalogRows(t, ctx, conn, schema, `
		SELECT format('%s.%s type=%s def=%s deferrable=%s deferred=%s validated=%s',
			cl.relname, co.conname, co.contype, pg_catalog.pg_get_constraintdef(co.oid),
			co.condeferrable, co.condeferred, co.convalidated)
		FROM pg_catalog.pg_constraint co
		JOIN pg_catalog.pg_class cl ON cl.oid = co.conrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = co.connamespace
		WHERE n.nspname = $1`)
	c.Indexes = catalogRows(t, ctx, conn, schema, `
		SELECT format('%s def=%s valid=%s ready=%s unique=%s primary=%s',
			i.relname, pg_catalog.pg_get_indexdef(x.indexrelid), x.indisvalid, x.indisready,
			x.indisunique, x.indisprimary)
		FROM pg_catalog.pg_index x
		JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = i.relnamespace
		WHERE n.nspname = $1`)
	c.Functions = catalogRows(t, ctx, conn, schema, `
		SELECT format('%s(%s) returns=%s language=%s config=%s volatility=%s security_definer=%s strict=%s parallel=%s kind=%s cost=%s leakproof=%s',
			p.proname, pg_catalog.pg_get_function_arguments(p.oid), pg_catalog.pg_get_function_result(p.oid),
			l.lanname, coalesce(p.proconfig::text, '<none>'), p.provolatile, p.prosecdef, p.proisstrict,
			p.proparallel, p.prokind, p.procost, p.proleakproof)
		FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
		JOIN pg_catalog.pg_language l ON l.oid = p.prolang
		WHERE n.nspname = $1`)
	c.Triggers = catalogRows(t, ctx, conn, schema, `
		SELECT format('%s enabled=%s', pg_catalog.pg_get_triggerdef(tg.oid), tg.tgenabled)
		FROM pg_catalog.pg_trigger tg
		JOIN pg_catalog.pg_class cl ON cl.oid = tg.tgrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace
		WHERE n.nspname = $1 AND NOT tg.tgisinternal`)

	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL`,
		pgx.Identifier{schema, "dbos_migrations"}.Sanitize()).Scan(&exists))
	if exists {
		rows, err := conn.Query(ctx, "SELECT version FROM "+pgx.Identifier{schema}.Sanitize()+".dbos_migrations ORDER BY version")
		require.NoError(t, err)
		c.Versions, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
	}
	return c
}

func catalogRows(t *testing.T, ctx context.Context, conn *pgx.Conn, schema, query string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, query, schema)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for i, s := range out {
		out[i] = normaliseSchema(s, schema)
	}
	sort.Strings(out)
	return out
}

// normaliseSchema replaces the qualifications by schema in s with
// "<schema>.", leaving names that merely contain the schema's name (the
// default schema "dbos" and the table dbos_migrations) alone.
func normaliseSchema(s, schema string) string {
	s = strings.ReplaceAll(s, pgx.Identifier{schema}.Sanitize()+".", "<schema>.")
	return regexp.MustCompile(`\b`+regexp.QuoteMeta(schema)+`\.`).ReplaceAllString(s, "<schema>.")
}

func requireSameCatalog(t *testing.T, want, got schemaCatalog, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want.Relations, got.Relations, msgAndArgs...)
	require.Equal(t, want.Columns, got.Columns, msgAndArgs...)
	require.Equal(t, want.Constraints, got.Constraints, msgAndArgs...)
	require.Equal(t, want.Indexes, got.Indexes, msgAndArgs...)
	require.Equal(t, want.Functions, got.Functions, msgAndArgs...)
	require.Equal(t, want.Triggers, got.Triggers, msgAndArgs...)
	require.Equal(t, want.Versions, got.Versions, msgAndArgs...)
}

// sdkCatalog migrates a fresh schema with the SDK and returns its catalog.
func sdkCatalog(t *testing.T, ctx context.Context, databaseURL string, conn *pgx.Conn) schemaCatalog {
	t.Helper()
	schema := pgtest.Schema(t)
	sdkMigrate(t, ctx, databaseURL, schema)
	return readCatalog(t, ctx, conn, schema)
}

func ourMigrate(t *testing.T, ctx context.Context, databaseURL, schema string) sysdb.MigrateResult {
	t.Helper()
	res, err := sysdb.Migrate(ctx, databaseURL, sysdb.MigrateOptions{Schema: schema})
	require.NoError(t, err)
	return res
}

// ---------------------------------------------------------------------------
// Tests

func TestMigrateParityWithGoSDK(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	url := pgtest.URL(t)
	conn := pgtest.Connect(t, url)

	want := sdkCatalog(t, ctx, url, conn)

	ours := pgtest.Schema(t)
	res := ourMigrate(t, ctx, url, ours)
	require.Equal(t, sysdb.MigrateResult{From: 0, To: sysdb.LatestSchemaVersion}, res)
	got := readCatalog(t, ctx, conn, ours)

	requireSameCatalog(t, want, got)
	require.Equal(t, []int64{125}, got.Versions)
	// Guard against both sides being empty through a broken query.
	require.Len(t, got.Functions, 3)
	require.Len(t, got.Triggers, 1)
	require.Contains(t, got.Indexes, "uq_workflow_status_dedup_id def=CREATE UNIQUE INDEX uq_workflow_status_dedup_id ON <schema>.workflow_status USING btree (queue_name, deduplication_id) WHERE (deduplication_id IS NOT NULL) valid=t ready=t unique=t primary=f")
}

// TestMigrateEveryVersionMatchesGoSDK applies our files and the SDK's
// script side by side, one version at a time, and compares the schemas
// after each, so the intermediate states a mixed fleet may meet (a database
// we left at version K, upgraded later by an SDK) match too.
func TestMigrateEveryVersionMatchesGoSDK(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	url := pgtest.URL(t)
	conn := pgtest.Connect(t, url)
	sdkSchema, ourSchema := pgtest.Schema(t), pgtest.Schema(t)
	quoted := pgx.Identifier{ourSchema}.Sanitize()

	steps := sdkSteps(t, sdkSchema)
	files := ourFiles(t)
	var sdkVersions, ourVersions []int64
	for _, s := range steps {
		sdkVersions = append(sdkVersions, s.version)
	}
	for _, f := range files {
		ourVersions = append(ourVersions, f.version)
	}
	require.Equal(t, sdkVersions, ourVersions)

	_, err := conn.Exec(ctx, "CREATE SCHEMA "+quoted+"; CREATE TABLE "+quoted+".dbos_migrations (version BIGINT NOT NULL PRIMARY KEY)")
	require.NoError(t, err)

	for i, f := range files {
		for _, s := range steps[i].statements {
			_, err := conn.Exec(ctx, s)
			require.NoError(t, err, "SDK migration %d", f.version)
		}
		record := "UPDATE " + quoted + ".dbos_migrations SET version = $1"
		if i == 0 {
			record = "INSERT INTO " + quoted + ".dbos_migrations (version) VALUES ($1)"
		}
		if f.online {
			_, err := conn.Exec(ctx, f.render(ourSchema, true))
			require.NoError(t, err, f.name)
			_, err = conn.Exec(ctx, record, f.version)
			require.NoError(t, err, f.name)
		} else {
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, f.render(ourSchema, false)); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, record, f.version)
				return err
			})
			require.NoError(t, err, f.name)
		}
		requireSameCatalog(t, readCatalog(t, ctx, conn, sdkSchema), readCatalog(t, ctx, conn, ourSchema), "after version %d (%s)", f.version, f.name)

		// Each version of enqueue_workflow behaves as the SDK's of the same
		// version. The rows stay, so later migrations run on non-empty tables.
		if calls, ok := historicalCalls[f.version]; ok {
			requireSameCalls(t, ctx, conn, sdkSchema, ourSchema, calls)
			tables := map[string][]string{
				"workflow_status": {"owner_xid", "created_at", "updated_at"},
				"notifications":   {"created_at_epoch_ms"},
			}
			if f.version >= 109 {
				tables["workflow_input"] = []string{"retention_timestamp"}
			}
			requireSameRows(t, ctx, conn, sdkSchema, ourSchema, tables)
		}
	}
}

// historicalCalls exercise the function versions of 014, 038, 105 and 113
// right after each is installed.
var historicalCalls = map[int64][]fnCall{
	14: {
		{"v14 enqueue", `SELECT {{schema}}.enqueue_workflow('wf14', 'q', ARRAY['1'::json], '{"a": 1}'::json, 'C', 'cfg', 'id-14', 'v1', 10, 20, 'd14', 2, 'p')`, nil},
		{"v14 enqueue generated id", `SELECT {{schema}}.enqueue_workflow('wf14b', 'q')`, nil},
		{"v14 same id", `SELECT {{schema}}.enqueue_workflow('wf14', 'q', workflow_id => 'id-14', deduplication_id => 'd14')`, nil},
		{"v14 duplicate dedup", `SELECT {{schema}}.enqueue_workflow('wf14', 'q', workflow_id => 'id-14-dup', deduplication_id => 'd14')`, nil},
		{"v14 bad named args", `SELECT {{schema}}.enqueue_workflow('wf14', 'q', named_args => '[]'::json)`, nil},
		{"v14 empty id", `SELECT {{schema}}.enqueue_workflow('wf14', 'q', workflow_id => '')`, nil},
		{"v14 send", `SELECT {{schema}}.send_message('id-14', '{"m": 1}'::json, 'tp', 'm14')::text`, nil},
		{"v14 send null topic", `SELECT {{schema}}.send_message('id-14', '2'::json)::text`, nil},
		{"v14 send missing", `SELECT {{schema}}.send_message('nope', '2'::json)::text`, nil},
	},
	38: {
		{"v38 enqueue delayed", `SELECT {{schema}}.enqueue_workflow('wf38', 'q', workflow_id => 'id-38', authenticated_user => 'bob', authenticated_roles => '["r"]', delay_until_epoch_ms => 5)`, nil},
		{"v38 enqueue", `SELECT {{schema}}.enqueue_workflow('wf38b', 'q', workflow_id => 'id-38b', deduplication_id => 'd38')`, nil},
		{"v38 duplicate dedup", `SELECT {{schema}}.enqueue_workflow('wf38c', 'q', deduplication_id => 'd38')`, nil},
		{"v38 negative delay", `SELECT {{schema}}.enqueue_workflow('wf38', 'q', delay_until_epoch_ms => -5)`, nil},
		{"v38 old signature gone", `SELECT {{schema}}.enqueue_workflow('a','b',ARRAY[]::json[],'{}'::json,'c','d','e','f',1,2,'g',3,'h','i')`, nil},
	},
	105: {
		{"v105 enqueue", `SELECT {{schema}}.enqueue_workflow('wf105', 'q', ARRAY['"x"'::json], workflow_id => 'id-105', application_name => 'app')`, nil},
		{"v105 duplicate dedup", `SELECT {{schema}}.enqueue_workflow('wf105', 'q', workflow_id => 'id-105b', deduplication_id => 'd38')`, nil},
	},
	113: {
		{"v113 enqueue", `SELECT {{schema}}.enqueue_workflow('wf113', 'q', ARRAY['"y"'::json], '{"k": "v"}'::json, workflow_id => 'id-113', application_name => 'app', delay_until_epoch_ms => 0)`, nil},
		{"v113 same id other inputs", `SELECT {{schema}}.enqueue_workflow('wf113', 'q', ARRAY['"z"'::json], workflow_id => 'id-113')`, nil},
		{"v113 duplicate dedup", `SELECT {{schema}}.enqueue_workflow('wf113', 'q', deduplication_id => 'd38')`, nil},
	},
}

func TestMigrationFilesFollowConventions(t *testing.T) {
	t.Parallel()
	files := ourFiles(t)
	require.Len(t, files, 47+26)
	onlineStatement := regexp.MustCompile(`^(CREATE (UNIQUE )?INDEX \{\{concurrently\}\} IF NOT EXISTS|DROP INDEX \{\{concurrently\}\} IF EXISTS) `)
	for _, f := range files {
		require.Regexp(t, `^\d{3}_[a-z0-9]+(_[a-z0-9]+)*\.sql$`, f.name)
		var body []string
		for _, line := range strings.Split(f.sql, "\n") {
			if trimmed := strings.TrimSpace(line); trimmed != "" && !strings.HasPrefix(trimmed, "--") {
				body = append(body, trimmed)
			}
		}
		require.NotEmpty(t, body, f.name)
		if f.online {
			stmt := strings.Join(body, " ")
			require.Regexp(t, onlineStatement, stmt, f.name)
			require.Equal(t, 1, strings.Count(stmt, ";"), "%s: an online migration is one statement", f.name)
			require.True(t, strings.HasSuffix(stmt, ";"), f.name)
		} else {
			require.NotContains(t, f.sql, "{{concurrently}}", "%s: CONCURRENTLY cannot run in a transaction", f.name)
		}
	}
}

// fnResult is what one call of a SQL client function leaves behind: its
// return value or its error, reduced to what a caller can rely on.
type fnResult struct {
	Value    string
	Code     string
	Message  string
	Detail   string
	Hint     string
	Severity string
}

func callFunction(ctx context.Context, conn *pgx.Conn, schema, call string, args ...any) fnResult {
	sql := strings.ReplaceAll(call, "{{schema}}", pgx.Identifier{schema}.Sanitize())
	var value *string
	err := conn.QueryRow(ctx, sql, args...).Scan(&value)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return fnResult{Code: pgErr.Code, Message: pgErr.Message, Detail: pgErr.Detail, Hint: pgErr.Hint, Severity: pgErr.Severity}
	case err != nil:
		return fnResult{Message: "client error: " + err.Error()}
	case value == nil:
		return fnResult{Value: "<null>"}
	default:
		return fnResult{Value: *value}
	}
}

// tableRows returns every row of a table as JSON objects, sorted, with the
// columns listed in volatile replaced by a marker saying only whether they
// were set.
func tableRows(t *testing.T, ctx context.Context, conn *pgx.Conn, schema, table string, volatile ...string) []string {
	t.Helper()
	strip := "to_jsonb(r)"
	for _, col := range volatile {
		strip = fmt.Sprintf("jsonb_set(%s, '{%s}', to_jsonb(CASE WHEN r.%s IS NULL THEN '<null>' ELSE '<set>' END))", strip, col, col)
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT (%s)::text FROM %s.%s r", strip, pgx.Identifier{schema}.Sanitize(), table))
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// fnCall is one call of a SQL client function; {{schema}} in sql names the
// schema under test.
type fnCall struct {
	name string
	sql  string
	args []any
}

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	epochMillis = regexp.MustCompile(`\b1\d{12}\b`)
)

// requireSameCalls makes each call in both schemas and requires the same
// outcome. Generated ids, schema names and the clock reading a failing row
// shows in a Detail differ by nature and are masked.
func requireSameCalls(t *testing.T, ctx context.Context, conn *pgx.Conn, sdkSchema, ourSchema string, calls []fnCall) {
	t.Helper()
	for _, c := range calls {
		want := callFunction(ctx, conn, sdkSchema, c.sql, c.args...)
		got := callFunction(ctx, conn, ourSchema, c.sql, c.args...)
		for r, schema := range map[*fnResult]string{&want: sdkSchema, &got: ourSchema} {
			for _, s := range []*string{&r.Value, &r.Message, &r.Detail, &r.Hint} {
				*s = uuidPattern.ReplaceAllString(*s, "<uuid>")
				*s = epochMillis.ReplaceAllString(*s, "<ms>")
				*s = normaliseSchema(*s, schema)
			}
		}
		require.Equal(t, want, got, c.name)
		require.NotContains(t, got.Message, "client error", c.name)
	}
}

// requireSameRows compares the rows the functions write. Generated ids,
// owner tokens and clock readings differ by nature; whether they were set
// does not.
func requireSameRows(t *testing.T, ctx context.Context, conn *pgx.Conn, sdkSchema, ourSchema string, tables map[string][]string) {
	t.Helper()
	normalise := func(rows []string) []string {
		for i := range rows {
			rows[i] = uuidPattern.ReplaceAllString(rows[i], "<uuid>")
		}
		sort.Strings(rows)
		return rows
	}
	for table, volatile := range tables {
		want := normalise(tableRows(t, ctx, conn, sdkSchema, table, volatile...))
		got := normalise(tableRows(t, ctx, conn, ourSchema, table, volatile...))
		require.NotEmpty(t, got, table)
		require.Equal(t, want, got, table)
	}
}

func TestMigrateFunctionsBehaveLikeGoSDK(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	url := pgtest.URL(t)
	conn := pgtest.Connect(t, url)
	sdkSchema, ourSchema := pgtest.Schema(t), pgtest.Schema(t)
	sdkMigrate(t, ctx, url, sdkSchema)
	ourMigrate(t, ctx, url, ourSchema)

	calls := []fnCall{
		{"minimal", `SELECT {{schema}}.enqueue_workflow('wf_minimal', 'q1')`, nil},
		{"positional only", `SELECT {{schema}}.enqueue_workflow('wf_pos', 'q1', ARRAY['1'::json, '"two"'::json, '{"three": [3]}'::json], workflow_id => 'id-pos')`, nil},
		{"every argument", `SELECT {{schema}}.enqueue_workflow(
			workflow_name => 'wf_full', queue_name => 'q1',
			positional_args => ARRAY['42'::json], named_args => '{"k": {"n": null}, "a": [1, 2]}'::json,
			class_name => 'Cls', config_name => 'cfg', workflow_id => 'id-full', app_version => 'v7',
			timeout_ms => 1000, deadline_epoch_ms => 99999999, deduplication_id => 'dedup-1',
			priority => 5, queue_partition_key => 'part-a', authenticated_user => 'alice',
			authenticated_roles => '["admin"]', delay_until_epoch_ms => 12345, application_name => 'app1')`, nil},
		{"parameters", `SELECT {{schema}}.enqueue_workflow($1, $2, workflow_id => $3, priority => $4, deduplication_id => $5)`,
			[]any{"wf_params", "q2", "id-params", int32(3), "dedup-2"}},
		{"same id again", `SELECT {{schema}}.enqueue_workflow('wf_full', 'q1', ARRAY['43'::json], workflow_id => 'id-full', deduplication_id => 'dedup-1')`, nil},
		{"duplicate dedup id", `SELECT {{schema}}.enqueue_workflow('wf_other', 'q1', workflow_id => 'id-other', deduplication_id => 'dedup-1')`, nil},
		{"duplicate dedup id, generated id", `SELECT {{schema}}.enqueue_workflow('wf_other', 'q2', deduplication_id => 'dedup-2')`, nil},
		{"same dedup id, other queue", `SELECT {{schema}}.enqueue_workflow('wf_other', 'q3', workflow_id => 'id-q3', deduplication_id => 'dedup-1')`, nil},
		{"named args array", `SELECT {{schema}}.enqueue_workflow('wf_bad', 'q1', named_args => '[1, 2]'::json)`, nil},
		{"named args scalar", `SELECT {{schema}}.enqueue_workflow('wf_bad', 'q1', named_args => '"x"'::json)`, nil},
		{"named args json null", `SELECT {{schema}}.enqueue_workflow('wf_bad', 'q1', named_args => 'null'::json)`, nil},
		{"named args sql null", `SELECT {{schema}}.enqueue_workflow('wf_null_named', 'q1', named_args => NULL, workflow_id => 'id-null-named')`, nil},
		{"positional sql null", `SELECT {{schema}}.enqueue_workflow('wf_null_pos', 'q1', NULL, workflow_id => 'id-null-pos')`, nil},
		{"empty workflow name", `SELECT {{schema}}.enqueue_workflow('', 'q1')`, nil},
		{"null workflow name", `SELECT {{schema}}.enqueue_workflow(NULL, 'q1')`, nil},
		{"empty queue name", `SELECT {{schema}}.enqueue_workflow('wf', '')`, nil},
		{"null queue name", `SELECT {{schema}}.enqueue_workflow('wf', NULL)`, nil},
		{"empty workflow id", `SELECT {{schema}}.enqueue_workflow('wf', 'q1', workflow_id => '')`, nil},
		{"negative delay", `SELECT {{schema}}.enqueue_workflow('wf', 'q1', delay_until_epoch_ms => -1)`, nil},
		{"zero delay", `SELECT {{schema}}.enqueue_workflow('wf_zero_delay', 'q1', workflow_id => 'id-zero-delay', delay_until_epoch_ms => 0)`, nil},
		{"too many arguments", `SELECT {{schema}}.enqueue_workflow('a','b',ARRAY[]::json[],'{}'::json,'c','d','e','f',1,2,'g',3,'h','i','j',4,'k','l')`, nil},

		{"send to existing", `SELECT {{schema}}.send_message('id-full', '{"hello": "world"}'::json, 'topic-1', 'msg-1')::text`, nil},
		{"send same message id", `SELECT {{schema}}.send_message('id-full', '"other"'::json, 'topic-2', 'msg-1')::text`, nil},
		{"send null topic", `SELECT {{schema}}.send_message('id-pos', '[1, 2, 3]'::json)::text`, nil},
		{"send explicit null topic", `SELECT {{schema}}.send_message('id-pos', '7'::json, NULL, 'msg-2')::text`, nil},
		{"send to missing", `SELECT {{schema}}.send_message('no-such-workflow', '1'::json, 'topic-1')::text`, nil},
		{"send to missing, null topic", `SELECT {{schema}}.send_message('no-such-workflow', '1'::json)::text`, nil},
		{"send null destination", `SELECT {{schema}}.send_message(NULL, '1'::json)::text`, nil},
		{"send null message", `SELECT {{schema}}.send_message('id-full', NULL, 'topic-3')::text`, nil},
	}

	requireSameCalls(t, ctx, conn, sdkSchema, ourSchema, calls)
	requireSameRows(t, ctx, conn, sdkSchema, ourSchema, map[string][]string{
		"workflow_status": {"owner_xid", "created_at", "updated_at"},
		"workflow_input":  {"retention_timestamp"},
		"notifications":   {"created_at_epoch_ms"},
	})

	// The clock readings agree with each other as the SDK writes them.
	consistency := `SELECT count(*)::text FROM {{schema}}.workflow_status s JOIN {{schema}}.workflow_input i USING (workflow_uuid)
		WHERE s.created_at <> i.retention_timestamp OR s.created_at > s.updated_at
		   OR s.owner_xid !~ '^[0-9a-f]{8}-[0-9a-f]{4}-'`
	for _, schema := range []string{sdkSchema, ourSchema} {
		require.Equal(t, fnResult{Value: "0"}, callFunction(ctx, conn, schema, consistency), schema)
	}
}

// TestMigrateNotificationTriggerLikeGoSDK checks the one trigger left at
// version 125 sends the same payloads as the SDK's.
func TestMigrateNotificationTriggerLikeGoSDK(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	url := pgtest.URL(t)
	conn := pgtest.Connect(t, url)
	listener := pgtest.Connect(t, url)
	sdkSchema, ourSchema := pgtest.Schema(t), pgtest.Schema(t)
	sdkMigrate(t, ctx, url, sdkSchema)
	ourMigrate(t, ctx, url, ourSchema)
	_, err := listener.Exec(ctx, "LISTEN dbos_notifications_channel")
	require.NoError(t, err)

	payloads := func(schema string) []string {
		q := pgx.Identifier{schema}.Sanitize()
		// Other tests' sends arrive on the same channel; tell ours apart by
		// a destination unique to this schema.
		dest := "trigger-" + schema
		_, err := conn.Exec(ctx, "SELECT "+q+".enqueue_workflow('wf', 'q', workflow_id => $1)", dest)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SELECT "+q+".send_message($1, '1'::json, 'tp')", dest)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SELECT "+q+".send_message($1, '1'::json)", dest)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "INSERT INTO "+q+".notifications (destination_uuid, topic, message) VALUES ($1, NULL, 'x')", dest)
		require.NoError(t, err)
		var got []string
		for len(got) < 3 {
			n, err := listener.WaitForNotification(ctx)
			require.NoError(t, err)
			if strings.HasPrefix(n.Payload, dest) || n.Payload == "" {
				got = append(got, strings.ReplaceAll(n.Payload, dest, "<dest>"))
			}
		}
		return got
	}
	want := payloads(sdkSchema)
	require.Equal(t, []string{"<dest>::tp", "<dest>::__null__topic__", ""}, want)
	require.Equal(t, want, payloads(ourSchema))
}

func TestMigrateUpgradeFromOlderVersions(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	url := pgtest.URL(t)
	conn := pgtest.Connect(t, url)
	want := sdkCatalog(t, ctx, url, conn)

	for _, from := range []int64{1, 9, 10, 14, 21, 28, 38, 39, 44, 47, 100, 105, 109, 112, 113, 124} {
		t.Run(fmt.Sprintf("from_%d", from), func(t *testing.T) {
			t.Parallel()
			ctx := parityContext(t)
			conn := pgtest.Connect(t, url)
			schema := pgtest.Schema(t)
			sdkMigrateTo(t, ctx, conn, schema, from)
			require.Equal(t, []int64{from}, readCatalog(t, ctx, conn, schema).Versions)

			res := ourMigrate(t, ctx, url, schema)
			require.Equal(t, sysdb.MigrateResult{From: from, To: sysdb.LatestSchemaVersion}, res)
			requireSameCatalog(t, want, readCatalog(t, ctx, conn, schema))
		})
	}

	// A database from an early DBOS release: notifications has no primary
	// key, which migration 10 adds.
	t.Run("from_9_without_notifications_key", func(t *testing.T) {
		t.Parallel()
		ctx := parityContext(t)
		conn := pgtest.Connect(t, url)
		schema := pgtest.Schema(t)
		sdkMigrateTo(t, ctx, conn, schema, 9)
		_, err := conn.Exec(ctx, "ALTER TABLE "+pgx.Identifier{schema}.Sanitize()+".notifications DROP CONSTRAINT notifications_pkey")
		require.NoError(t, err)

		res := ourMigrate(t, ctx, url, schema)
		require.Equal(t, sysdb.MigrateResult{From: 9, To: sysdb.LatestSchemaVersion}, res)
		requireSameCatalog(t, want, readCatalog(t, ctx, conn, schema))
	})

	t.Run("ours_twice", func(t *testing.T) {
		t.Parallel()
		ctx := parityContext(t)
		conn := pgtest.Connect(t, url)
		schema := pgtest.Schema(t)
		require.Equal(t, sysdb.MigrateResult{From: 0, To: sysdb.LatestSchemaVersion}, ourMigrate(t, ctx, url, schema))
		before := readCatalog(t, ctx, conn, schema)
		require.Equal(t, sysdb.MigrateResult{From: sysdb.LatestSchemaVersion, To: sysdb.LatestSchemaVersion}, ourMigrate(t, ctx, url, schema))
		after := readCatalog(t, ctx, conn, schema)
		requireSameCatalog(t, before, after)
		requireSameCatalog(t, want, after)
	})

	// The SDK accepts what we built, and we accept what it built.
	t.Run("sdk_after_ours", func(t *testing.T) {
		t.Parallel()
		ctx := parityContext(t)
		conn := pgtest.Connect(t, url)
		schema := pgtest.Schema(t)
		ourMigrate(t, ctx, url, schema)
		sdkMigrate(t, ctx, url, schema)
		requireSameCatalog(t, want, readCatalog(t, ctx, conn, schema))
		require.Equal(t, sysdb.MigrateResult{From: sysdb.LatestSchemaVersion, To: sysdb.LatestSchemaVersion}, ourMigrate(t, ctx, url, schema))
	})
}

func TestMigrateLeavesNewerDatabaseAlone(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	url := pgtest.URL(t)
	conn := pgtest.Connect(t, url)
	schema := pgtest.Schema(t)
	q := pgx.Identifier{schema}.Sanitize()
	ourMigrate(t, ctx, url, schema)

	// A newer SDK got here first: a later version, a column we do not know,
	// and an index of ours it decided to drop.
	_, err := conn.Exec(ctx, "UPDATE "+q+".dbos_migrations SET version = 130")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "ALTER TABLE "+q+".workflow_status ADD COLUMN from_the_future text")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "DROP INDEX "+q+".idx_workflow_status_deadline")
	require.NoError(t, err)
	before := readCatalog(t, ctx, conn, schema)
	require.Equal(t, []int64{130}, before.Versions)

	res := ourMigrate(t, ctx, url, schema)
	require.Equal(t, sysdb.MigrateResult{From: 130, To: 130}, res)
	requireSameCatalog(t, before, readCatalog(t, ctx, conn, schema))
}

func TestMigrateConcurrentRunners(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	url := pgtest.URL(t)
	conn := pgtest.Connect(t, url)
	want := sdkCatalog(t, ctx, url, conn)

	// Several agents starting at once on one database: exactly one of them
	// does the work, the others wait for it and find the schema current.
	run := func(t *testing.T, schema string, from int64) {
		const runners = 4
		var wg sync.WaitGroup
		results := make([]sysdb.MigrateResult, runners)
		errs := make([]error, runners)
		start := make(chan struct{})
		for i := 0; i < runners; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				results[i], errs[i] = sysdb.Migrate(ctx, url, sysdb.MigrateOptions{Schema: schema})
			}(i)
		}
		close(start)
		wg.Wait()

		worked := 0
		for i := 0; i < runners; i++ {
			require.NoError(t, errs[i], "runner %d", i)
			require.Equal(t, sysdb.LatestSchemaVersion, results[i].To, "runner %d", i)
			switch results[i].From {
			case from:
				worked++
			case sysdb.LatestSchemaVersion:
			default:
				t.Fatalf("runner %d started from version %d", i, results[i].From)
			}
		}
		require.Equal(t, 1, worked, "exactly one runner migrates: %+v", results)
		// A connection of its own: the subtests run in parallel, and a
		// pgx.Conn shared by them fails with "conn busy".
		requireSameCatalog(t, want, readCatalog(t, ctx, pgtest.Connect(t, url), schema))
	}

	t.Run("fresh", func(t *testing.T) {
		t.Parallel()
		run(t, pgtest.Schema(t), 0)
	})

	// Upgrading runs CREATE INDEX CONCURRENTLY, which waits for every
	// transaction holding an older snapshot, the other runners' lock
	// requests included.
	t.Run("upgrade_from_47", func(t *testing.T) {
		t.Parallel()
		schema := pgtest.Schema(t)
		sdkMigrateTo(t, ctx, pgtest.Connect(t, url), schema, 47)
		run(t, schema, 47)
	})
}

func TestMigrateCreatesDatabase(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	base := pgtest.URL(t)
	conn := pgtest.Connect(t, base)
	want := sdkCatalog(t, ctx, base, conn)

	name := pgtest.UniqueName("dbos_agent_created_")
	url := pgtest.WithDatabase(t, base, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})

	res, err := sysdb.Migrate(ctx, url, sysdb.MigrateOptions{}) // default schema "dbos"
	require.NoError(t, err)
	require.Equal(t, sysdb.MigrateResult{From: 0, To: sysdb.LatestSchemaVersion}, res)

	created := pgtest.Connect(t, url)
	requireSameCatalog(t, want, readCatalog(t, ctx, created, sysdb.DefaultSchema))
}
