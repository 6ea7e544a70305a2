package sysdb_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// These tests hold our SQLite migrations to DBOS Python 3.4's own: a file
// either of them migrated must be the same file to the other (tables,
// columns, defaults, keys, indexes and their predicates, the migration
// record), because DBOS Python and the agent share one SQLite system
// database. DBOS Python runs from the virtualenv scripts/dbos-python.sh
// makes, or the interpreter named by DBOS_TEST_PYTHON.

// dbosUpgradeFrom are the versions a file migrated by DBOS is stopped at
// before ours takes over: the start of each stretch of DBOS's list, the
// table rebuild (112) on either side, and the versions with no SQLite work
// (105, 113).
var dbosUpgradeFrom = []int{1, 6, 9, 12, 18, 25, 33, 40, 100, 104, 105, 108, 109, 111, 112, 113, 120, 124}

var dbosPythonPath = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("DBOS_TEST_PYTHON"); p != "" {
		return p, nil
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "dbos-python.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/dbos-python.sh: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

// dbosPython runs testdata/dbos_sqlite.py under DBOS Python and returns what
// it printed on stdout and stderr.
func dbosPython(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string) {
	t.Helper()
	python, err := dbosPythonPath()
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "dbos_sqlite.py")}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "dbos_sqlite.py %v:\n%s", args, errOut.String())
	return out.String(), errOut.String()
}

// dbosFiles holds files DBOS Python migrated, made once per test binary:
// "fresh" to the end of its list, and "<n>" stopped after migration n.
var dbosFiles struct {
	once sync.Once
	dir  string
	err  error
}

// dbosFile copies the file DBOS migrated to version (0: all the way) into
// a directory of the test's own and returns the copy's path.
func dbosFile(t *testing.T, version int) string {
	t.Helper()
	dbosFiles.once.Do(func() {
		dbosFiles.dir, dbosFiles.err = os.MkdirTemp("", "dbos-sqlite-parity-")
		if dbosFiles.err != nil {
			return
		}
		args := []string{"migrate", filepath.Join(dbosFiles.dir, "fresh")}
		for _, v := range dbosUpgradeFrom {
			args = append(args, fmt.Sprintf("%s:%d", filepath.Join(dbosFiles.dir, fmt.Sprint(v)), v))
		}
		python, err := dbosPythonPath()
		if err != nil {
			dbosFiles.err = err
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command(python, append([]string{filepath.Join("testdata", "dbos_sqlite.py")}, args...)...)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			dbosFiles.err = fmt.Errorf("dbos_sqlite.py migrate: %w\n%s", err, stderr.String())
		}
	})
	require.NoError(t, dbosFiles.err)
	name := "fresh"
	if version != 0 {
		name = fmt.Sprint(version)
	}
	src := filepath.Join(dbosFiles.dir, name)
	_, err := os.Stat(src + "-wal")
	require.True(t, os.IsNotExist(err), "DBOS left a WAL beside %s: a plain copy would miss it", src)
	body, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "dbos.sqlite")
	require.NoError(t, os.WriteFile(dst, body, 0o600))
	return dst
}

// openFile opens path as the backend does, one *sql.DB per call (so two
// calls are two independent openers, as two processes are).
func openFile(t *testing.T, path string) *sql.DB {
	t.Helper()
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// migrateLog records MigrateSQLite's logs, so a test can tell whether it
// applied anything.
func migrateLog() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// ourMigrateFile runs MigrateSQLite on path and says whether it applied
// any migration.
func ourMigrateFile(t *testing.T, ctx context.Context, path string) (version int, migrated bool) {
	t.Helper()
	log, logs := migrateLog()
	version, err := sysdb.MigrateSQLite(ctx, openFile(t, path), log)
	require.NoError(t, err)
	return version, logs.FilterMessage("system database migrated").Len() > 0
}

// ---------------------------------------------------------------------------
// Catalog snapshots

// sqliteCatalog is everything in a file another SDK could depend on, as text.
type sqliteCatalog struct {
	Objects     []string // type, name and table of each sqlite_master entry
	Columns     []string // PRAGMA table_xinfo of each table
	ForeignKeys []string // PRAGMA foreign_key_list of each table
	Indexes     []string // PRAGMA index_list of each table, with index_xinfo and the partial predicate
	Versions    []string // the rows of dbos_migrations
	// SQL is each entry's statement as stored: written differently by DBOS
	// and by us, so compared only between two states of one file.
	SQL []string
}

var (
	partialWhere = regexp.MustCompile(`(?is)\sWHERE\s(.*)$`)
	spaces       = regexp.MustCompile(`\s+`)
	// DBOS writes its timestamp default with unixepoch('subsec') on Python
	// 3.12 and later, and with strftime before; we write the strftime form
	// whatever the Python. The two are equivalent defaults, so a DBOS file
	// made on a newer Python is read as if made on an older one.
	dbosNewerNow = strings.NewReplacer("(unixepoch('subsec') * 1000)", "(strftime('%s','now') * 1000)")
)

func readSQLiteCatalog(t *testing.T, ctx context.Context, path string) sqliteCatalog {
	t.Helper()
	db := openFile(t, path)
	var c sqliteCatalog
	var tables []string
	rows := queryStrings(t, ctx, db, `SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	for _, r := range rows {
		c.Objects = append(c.Objects, strings.Join(r[:3], " "))
		c.SQL = append(c.SQL, r[1]+": "+r[3])
		if r[0] == "table" {
			tables = append(tables, r[1])
		}
	}
	for _, table := range tables {
		for _, r := range queryStrings(t, ctx, db, `SELECT cid, name, type, "notnull", coalesce(dflt_value, '<null>'), pk, hidden FROM pragma_table_xinfo(?) ORDER BY cid`, table) {
			c.Columns = append(c.Columns, table+": "+dbosNewerNow.Replace(strings.Join(r, " ")))
		}
		for _, r := range queryStrings(t, ctx, db, `SELECT id, seq, "table", "from", coalesce("to", '<null>'), on_update, on_delete, "match" FROM pragma_foreign_key_list(?) ORDER BY id, seq`, table) {
			c.ForeignKeys = append(c.ForeignKeys, table+": "+strings.Join(r, " "))
		}
		for _, r := range queryStrings(t, ctx, db, `SELECT name, "unique", origin, partial FROM pragma_index_list(?) ORDER BY name`, table) {
			entry := table + ": " + strings.Join(r, " ")
			for _, k := range queryStrings(t, ctx, db, `SELECT seqno, cid, coalesce(name, '<expr>'), "desc", coll, "key" FROM pragma_index_xinfo(?) ORDER BY seqno`, r[0]) {
				entry += " [" + strings.Join(k, " ") + "]"
			}
			if r[3] == "1" {
				var stmt string
				require.NoError(t, db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?`, r[0]).Scan(&stmt))
				m := partialWhere.FindStringSubmatch(stmt)
				require.NotNil(t, m, "partial index %s without WHERE: %s", r[0], stmt)
				entry += " WHERE " + strings.TrimSpace(spaces.ReplaceAllString(m[1], " "))
			}
			c.Indexes = append(c.Indexes, entry)
		}
	}
	for _, r := range queryStrings(t, ctx, db, `SELECT version FROM dbos_migrations ORDER BY version`) {
		c.Versions = append(c.Versions, r[0])
	}
	return c
}

// queryStrings returns every row of query, each column as text.
func queryStrings(t *testing.T, ctx context.Context, db *sql.DB, query string, args ...any) [][]string {
	t.Helper()
	rows, err := db.QueryContext(ctx, query, args...)
	require.NoError(t, err, query)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireSameSchema compares two catalogs but for their statements' text.
func requireSameSchema(t *testing.T, want, got sqliteCatalog, msgAndArgs ...any) {
	t.Helper()
	want.SQL, got.SQL = nil, nil
	require.Equal(t, want, got, msgAndArgs...)
}

// ourFreshFile is a new file migrated by MigrateSQLite.
func ourFreshFile(t *testing.T, ctx context.Context) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	version, migrated := ourMigrateFile(t, ctx, path)
	require.Equal(t, sysdb.SQLiteSchemaVersion, version)
	require.True(t, migrated)
	return path
}

// ---------------------------------------------------------------------------

func TestSQLiteSchemaMatchesDBOSPython(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	want := readSQLiteCatalog(t, ctx, dbosFile(t, 0))
	got := readSQLiteCatalog(t, ctx, ourFreshFile(t, ctx))
	requireSameSchema(t, want, got)

	// What DBOS Python 3.4 builds, as counted when these tests were written:
	// if one of these moves, the comparison above compared less than it seems.
	require.Equal(t, []string{fmt.Sprint(sysdb.SQLiteSchemaVersion)}, want.Versions)
	count := func(entries []string, prefix string) (n int) {
		for _, e := range entries {
			if strings.HasPrefix(e, prefix) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 12, count(want.Objects, "table "), "tables")
	require.Equal(t, 39, count(want.Columns, "workflow_status: "), "workflow_status columns")
	require.Equal(t, 37, count(want.Objects, "index "), "indexes, automatic ones included")
	require.Equal(t, len(want.Objects), count(want.Objects, "table ")+count(want.Objects, "index "), "no views or triggers")
	partial := 0
	for _, e := range want.Indexes {
		if strings.Contains(e, " WHERE ") {
			partial++
		}
	}
	require.Equal(t, 15, partial, "partial indexes")
}

// requireMigrateNoOp runs MigrateSQLite on path and requires that it
// reports version and changes nothing, down to the statements' text.
func requireMigrateNoOp(t *testing.T, ctx context.Context, path string, version int) {
	t.Helper()
	before := readSQLiteCatalog(t, ctx, path)
	got, migrated := ourMigrateFile(t, ctx, path)
	require.Equal(t, version, got)
	require.False(t, migrated)
	require.Equal(t, before, readSQLiteCatalog(t, ctx, path))
}

func TestSQLiteMigrateLeavesDBOSFileAlone(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	requireMigrateNoOp(t, ctx, dbosFile(t, 0), sysdb.SQLiteSchemaVersion)
}

func TestSQLiteMigrateTwice(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	requireMigrateNoOp(t, ctx, ourFreshFile(t, ctx), sysdb.SQLiteSchemaVersion)
}

// DBOS Python launched on a file we migrated finds nothing to migrate and
// runs a workflow (a step, an event) on it.
func TestSQLiteDBOSPythonRunsOnOurFile(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	path := ourFreshFile(t, ctx)
	before := readSQLiteCatalog(t, ctx, path)
	stdout, stderr := dbosPython(t, ctx, "workflow", path)
	require.Equal(t, "41 40 SUCCESS\n", stdout, stderr)
	require.NotContains(t, stderr, "schema migration", "DBOS migrated our file")
	require.Equal(t, before, readSQLiteCatalog(t, ctx, path))

	db := openFile(t, path)
	var workflows, steps int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM workflow_status WHERE status = 'SUCCESS'`).Scan(&workflows))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM operation_outputs`).Scan(&steps))
	require.Equal(t, 1, workflows)
	require.GreaterOrEqual(t, steps, 2, "the step and set_event")
}

func TestSQLiteMigrateUpgradesDBOSFile(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	want := readSQLiteCatalog(t, ctx, dbosFile(t, 0))
	for _, from := range dbosUpgradeFrom {
		t.Run(fmt.Sprintf("from_%d", from), func(t *testing.T) {
			t.Parallel()
			ctx := parityContext(t)
			path := dbosFile(t, from)
			require.Equal(t, []string{fmt.Sprint(from)}, readSQLiteCatalog(t, ctx, path).Versions)
			version, migrated := ourMigrateFile(t, ctx, path)
			require.Equal(t, sysdb.SQLiteSchemaVersion, version)
			require.True(t, migrated)
			requireSameSchema(t, want, readSQLiteCatalog(t, ctx, path))
		})
	}

	// Migration 112 rebuilds operation_outputs: the steps already recorded
	// survive it, and get a retention timestamp.
	t.Run("steps_survive_rebuild", func(t *testing.T) {
		t.Parallel()
		ctx := parityContext(t)
		path := dbosFile(t, 111)
		db := openFile(t, path)
		_, err := db.ExecContext(ctx, `INSERT INTO workflow_status (workflow_uuid, status, name) VALUES ('wf', 'SUCCESS', 'work')`)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `INSERT INTO operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
			VALUES ('wf', 1, 'step', '"out"', 1000, 2000)`)
		require.NoError(t, err)
		require.NoError(t, db.Close())

		version, migrated := ourMigrateFile(t, ctx, path)
		require.Equal(t, sysdb.SQLiteSchemaVersion, version)
		require.True(t, migrated)
		rows := queryStrings(t, ctx, openFile(t, path), `SELECT workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms, retention_timestamp > 0 FROM operation_outputs`)
		require.Equal(t, [][]string{{"wf", "1", "step", `"out"`, "1000", "2000", "1"}}, rows)
	})
}

func TestSQLiteMigrateLeavesNewerFileAlone(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	path := ourFreshFile(t, ctx)
	// A newer SDK got here first: a later version, a column we do not know,
	// and an index of ours it decided to drop.
	db := openFile(t, path)
	for _, stmt := range []string{
		`UPDATE dbos_migrations SET version = 130`,
		`ALTER TABLE workflow_status ADD COLUMN from_the_future TEXT`,
		`DROP INDEX idx_workflow_status_deadline`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.Equal(t, []string{"130"}, readSQLiteCatalog(t, ctx, path).Versions)
	requireMigrateNoOp(t, ctx, path, 130)
}

func TestSQLiteMigrateConcurrentRunners(t *testing.T) {
	t.Parallel()
	ctx := parityContext(t)
	want := readSQLiteCatalog(t, ctx, dbosFile(t, 0))

	// Several agents opening one file at once, each with its own *sql.DB
	// (as separate processes would): exactly one of them migrates, the
	// others wait for its transaction and find the file current.
	run := func(t *testing.T, path string) {
		const runners = 4
		dbs := make([]*sql.DB, runners)
		for i := range dbs {
			dbs[i] = openFile(t, path)
		}
		log, logs := migrateLog()
		versions := make([]int, runners)
		errs := make([]error, runners)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range dbs {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				versions[i], errs[i] = sysdb.MigrateSQLite(ctx, dbs[i], log)
			}(i)
		}
		close(start)
		wg.Wait()
		for i := range dbs {
			require.NoError(t, errs[i], "runner %d", i)
			require.Equal(t, sysdb.SQLiteSchemaVersion, versions[i], "runner %d", i)
		}
		require.Equal(t, 1, logs.FilterMessage("system database migrated").Len(), "exactly one runner migrates")
		requireSameSchema(t, want, readSQLiteCatalog(t, ctx, path))
	}
	t.Run("fresh", func(t *testing.T) {
		t.Parallel()
		run(t, filepath.Join(t.TempDir(), "dbos.sqlite"))
	})
	t.Run("upgrade_from_40", func(t *testing.T) {
		t.Parallel()
		run(t, dbosFile(t, 40))
	})

	// DBOS Python and the agent set off on a new file together: whichever
	// takes the write lock first migrates it, and the other accepts it.
	t.Run("with_dbos_python", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "dbos.sqlite")
		done := make(chan error, 1)
		go func() {
			python, err := dbosPythonPath()
			if err == nil {
				cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "dbos_sqlite.py"), "migrate", path)
				cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
				err = cmd.Run()
			}
			done <- err
		}()
		version, err := sysdb.MigrateSQLite(ctx, openFile(t, path), nil)
		require.NoError(t, err)
		require.Equal(t, sysdb.SQLiteSchemaVersion, version)
		require.NoError(t, <-done)
		requireSameSchema(t, want, readSQLiteCatalog(t, ctx, path))
	})
}
