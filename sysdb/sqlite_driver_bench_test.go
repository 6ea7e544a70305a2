//go:build sqlitedrivers && unix

// The step-record path on SQLite, measured for each candidate driver (issue
// 14's first decision; results and the choice in SQLITE-DRIVER.md). Behind
// the sqlitedrivers tag so neither `make test` nor `make bench` runs it and
// no production package links a driver through it (and unix: getrusage):
//
//	go test -tags sqlitedrivers -run '^$' -bench BenchmarkSQLiteStepRecord -benchmem -count 3 ./sysdb/
//
// Each driver writes a file database in WAL mode with a busy timeout, one
// connection, prepared statements, and BEGIN IMMEDIATE transactions. A step
// is the fencing check (the owner and status of its workflow's row) and the
// insert of its operation_outputs row; "batch" steps share one transaction
// (group commit). One benchmark op is one step, so ns/op, B/op and allocs/op
// are per step; cpu-ns/step is the process's user+system CPU (getrusage)
// over the timed loop divided by the steps.
//
// modernc.org/sqlite and mattn/go-sqlite3 run through database/sql, as the
// agent would use them. ncruces/go-sqlite3 runs through its own API: its
// database/sql driver registers the name "sqlite3" as mattn's does, and
// database/sql panics when one name is registered twice in a binary.
package sysdb_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	ncruces "github.com/ncruces/go-sqlite3"
	_ "modernc.org/sqlite"
)

const (
	benchWorkflows = 64 // workflows the steps are spread over, round robin
	benchOwner     = "owner-0"
)

// benchSchema is shaped like DBOS's SQLite system database: the
// operation_outputs columns the step path writes, and the workflow_status
// columns the fencing check reads.
const benchSchema = `
CREATE TABLE workflow_status (
    workflow_uuid TEXT PRIMARY KEY,
    status TEXT,
    owner_xid TEXT,
    name TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE operation_outputs (
    workflow_uuid TEXT NOT NULL,
    function_id INTEGER NOT NULL,
    function_name TEXT NOT NULL DEFAULT '',
    output TEXT,
    error TEXT,
    child_workflow_id TEXT,
    started_at_epoch_ms INTEGER,
    completed_at_epoch_ms INTEGER,
    PRIMARY KEY (workflow_uuid, function_id),
    FOREIGN KEY (workflow_uuid) REFERENCES workflow_status(workflow_uuid) ON UPDATE CASCADE ON DELETE CASCADE
);`

const (
	fenceSQL  = `SELECT owner_xid, status FROM workflow_status WHERE workflow_uuid = ?`
	insertSQL = `INSERT INTO operation_outputs (workflow_uuid, function_id, function_name, output, error,
    child_workflow_id, started_at_epoch_ms, completed_at_epoch_ms)
VALUES (?, ?, ?, ?, NULL, NULL, ?, ?) ON CONFLICT (workflow_uuid, function_id) DO NOTHING`
)

// stepWriter is one driver's connection with the step path's statements
// prepared.
type stepWriter interface {
	exec(sql string) error
	// value runs a query of one row and one column.
	value(q string) (string, error)
	begin() error
	commit() error
	// step checks that the workflow is PENDING and owned by benchOwner, then
	// inserts the step; it reports whether the row was inserted.
	step(workflowID string, functionID int, name, output string, started, completed int64) (bool, error)
	close() error
}

// sqlWriter drives a database/sql driver on one pinned connection.
type sqlWriter struct {
	db                                   *sql.DB
	conn                                 *sql.Conn
	beginStmt, commitStmt, fence, insert *sql.Stmt
}

func openSQL(driver, dsn string) (stepWriter, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &sqlWriter{db: db, conn: conn}, nil
}

func (w *sqlWriter) exec(q string) error {
	_, err := w.conn.ExecContext(context.Background(), q)
	return err
}

func (w *sqlWriter) value(q string) (string, error) {
	var v string
	err := w.conn.QueryRowContext(context.Background(), q).Scan(&v)
	return v, err
}

func (w *sqlWriter) prepare() error {
	ctx := context.Background()
	var err error
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{{&w.beginStmt, "BEGIN IMMEDIATE"}, {&w.commitStmt, "COMMIT"}, {&w.fence, fenceSQL}, {&w.insert, insertSQL}} {
		if *p.dst, err = w.conn.PrepareContext(ctx, p.q); err != nil {
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
	}
	return nil
}

func (w *sqlWriter) begin() error {
	_, err := w.beginStmt.Exec()
	return err
}

func (w *sqlWriter) commit() error {
	_, err := w.commitStmt.Exec()
	return err
}

func (w *sqlWriter) step(workflowID string, functionID int, name, output string, started, completed int64) (bool, error) {
	var owner, status sql.NullString
	if err := w.fence.QueryRow(workflowID).Scan(&owner, &status); err != nil {
		return false, err
	}
	if owner.String != benchOwner || status.String != "PENDING" {
		return false, fmt.Errorf("workflow %s fenced: owner %q status %q", workflowID, owner.String, status.String)
	}
	res, err := w.insert.Exec(workflowID, functionID, name, output, started, completed)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (w *sqlWriter) close() error {
	for _, s := range []*sql.Stmt{w.beginStmt, w.commitStmt, w.fence, w.insert} {
		if s != nil {
			_ = s.Close()
		}
	}
	_ = w.conn.Close()
	return w.db.Close()
}

// ncrucesWriter drives ncruces/go-sqlite3 through its own API.
type ncrucesWriter struct {
	conn                                 *ncruces.Conn
	beginStmt, commitStmt, fence, insert *ncruces.Stmt
}

func openNcruces(path string) (stepWriter, error) {
	conn, err := ncruces.Open(path)
	if err != nil {
		return nil, err
	}
	return &ncrucesWriter{conn: conn}, nil
}

func (w *ncrucesWriter) exec(q string) error { return w.conn.Exec(q) }

func (w *ncrucesWriter) value(q string) (string, error) {
	s, _, err := w.conn.Prepare(q)
	if err != nil {
		return "", err
	}
	defer s.Close()
	if !s.Step() {
		return "", fmt.Errorf("%s: no row: %v", q, s.Err())
	}
	return s.ColumnText(0), nil
}

func (w *ncrucesWriter) prepare() error {
	var err error
	for _, p := range []struct {
		dst **ncruces.Stmt
		q   string
	}{{&w.beginStmt, "BEGIN IMMEDIATE"}, {&w.commitStmt, "COMMIT"}, {&w.fence, fenceSQL}, {&w.insert, insertSQL}} {
		if *p.dst, _, err = w.conn.Prepare(p.q); err != nil {
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
	}
	return nil
}

func (w *ncrucesWriter) begin() error  { return w.beginStmt.Exec() }
func (w *ncrucesWriter) commit() error { return w.commitStmt.Exec() }

func (w *ncrucesWriter) step(workflowID string, functionID int, name, output string, started, completed int64) (bool, error) {
	f := w.fence
	if err := f.BindText(1, workflowID); err != nil {
		return false, err
	}
	if !f.Step() {
		err := f.Err()
		_ = f.Reset()
		return false, fmt.Errorf("workflow %s: no row: %v", workflowID, err)
	}
	owner, status := f.ColumnText(0), f.ColumnText(1)
	if err := f.Reset(); err != nil {
		return false, err
	}
	if owner != benchOwner || status != "PENDING" {
		return false, fmt.Errorf("workflow %s fenced: owner %q status %q", workflowID, owner, status)
	}
	s := w.insert
	for _, err := range []error{
		s.BindText(1, workflowID), s.BindInt64(2, int64(functionID)), s.BindText(3, name),
		s.BindText(4, output), s.BindInt64(5, started), s.BindInt64(6, completed),
	} {
		if err != nil {
			return false, err
		}
	}
	if err := s.Exec(); err != nil {
		return false, err
	}
	return w.conn.Changes() == 1, nil
}

func (w *ncrucesWriter) close() error {
	for _, s := range []*ncruces.Stmt{w.beginStmt, w.commitStmt, w.fence, w.insert} {
		if s != nil {
			_ = s.Close()
		}
	}
	return w.conn.Close()
}

type benchDriver struct {
	name string
	open func(path string) (stepWriter, error)
}

var benchDrivers = []benchDriver{
	{"modernc", func(path string) (stepWriter, error) { return openSQL("sqlite", "file:"+path) }},
	{"mattn", func(path string) (stepWriter, error) { return openSQL("sqlite3", "file:"+path) }},
	{"ncruces", openNcruces},
}

// openBench creates the database at path with the settings the agent would
// use, checks that they hold, and seeds the workflows.
func openBench(tb testing.TB, d benchDriver, path, synchronous string) stepWriter {
	tb.Helper()
	w, err := d.open(path)
	if err != nil {
		tb.Fatalf("%s: open: %v", d.name, err)
	}
	for _, q := range []string{
		"PRAGMA journal_mode = WAL",
		"PRAGMA synchronous = " + synchronous,
		"PRAGMA busy_timeout = 5000",
		"PRAGMA foreign_keys = ON",
		benchSchema,
	} {
		if err := w.exec(q); err != nil {
			tb.Fatalf("%s: %s: %v", d.name, q, err)
		}
	}
	want := map[string]string{"journal_mode": "wal", "synchronous": map[string]string{"FULL": "2", "NORMAL": "1"}[synchronous], "busy_timeout": "5000"}
	for name, v := range want {
		got, err := w.value("PRAGMA " + name)
		if err != nil || strings.ToLower(got) != v {
			tb.Fatalf("%s: PRAGMA %s = %q (%v), want %q", d.name, name, got, err, v)
		}
	}
	now := time.Now().UnixMilli()
	var seed strings.Builder
	seed.WriteString("BEGIN IMMEDIATE;")
	for i := range benchWorkflows {
		fmt.Fprintf(&seed, "INSERT INTO workflow_status VALUES ('wf-%02d', 'PENDING', '%s', 'bench', %d, %d);", i, benchOwner, now, now)
	}
	seed.WriteString("COMMIT;")
	if err := w.exec(seed.String()); err != nil {
		tb.Fatalf("%s: seed: %v", d.name, err)
	}
	switch p := w.(type) {
	case *sqlWriter:
		err = p.prepare()
	case *ncrucesWriter:
		err = p.prepare()
	}
	if err != nil {
		tb.Fatalf("%s: %v", d.name, err)
	}
	return w
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSQLiteStepRecord: driver × synchronous × steps per transaction.
func BenchmarkSQLiteStepRecord(b *testing.B) {
	workflowIDs := make([]string, benchWorkflows)
	for i := range workflowIDs {
		workflowIDs[i] = fmt.Sprintf("wf-%02d", i)
	}
	// A step output as the SDKs store it: a serialized value, here ~120 bytes.
	output := `{"json":{"order":"ord-000123","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"total":"42.50","ok":true}}`
	for _, d := range benchDrivers {
		for _, synchronous := range []string{"FULL", "NORMAL"} {
			for _, batch := range []int{1, 16, 64} {
				b.Run(fmt.Sprintf("driver=%s/sync=%s/batch=%d", d.name, synchronous, batch), func(b *testing.B) {
					w := openBench(b, d, filepath.Join(b.TempDir(), "sys.db"), synchronous)
					defer func() {
						if err := w.close(); err != nil {
							b.Fatal(err)
						}
					}()
					b.ReportAllocs()
					b.ResetTimer()
					cpu0 := cpuTime()
					open := false
					for i := 0; i < b.N; i++ {
						if !open {
							if err := w.begin(); err != nil {
								b.Fatal(err)
							}
							open = true
						}
						now := time.Now().UnixMilli()
						ok, err := w.step(workflowIDs[i%benchWorkflows], i/benchWorkflows, "step", output, now, now)
						if err != nil || !ok {
							b.Fatalf("step %d: inserted %v: %v", i, ok, err)
						}
						if (i+1)%batch == 0 || i == b.N-1 {
							if err := w.commit(); err != nil {
								b.Fatal(err)
							}
							open = false
						}
					}
					cpu := cpuTime() - cpu0
					b.StopTimer()
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/step")
				})
			}
		}
	}
}

// TestSQLiteStepRecordDrivers checks the benchmark's path on each driver:
// the rows land, a second insert of a step is not a new row, and a workflow
// owned by another run fails the fencing check.
func TestSQLiteStepRecordDrivers(t *testing.T) {
	for _, d := range benchDrivers {
		t.Run(d.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sys.db")
			w := openBench(t, d, path, "FULL")
			if err := w.begin(); err != nil {
				t.Fatal(err)
			}
			for fid := range 3 {
				if ok, err := w.step("wf-01", fid, "step", "out", 1, 2); err != nil || !ok {
					t.Fatalf("step %d: inserted %v: %v", fid, ok, err)
				}
			}
			if ok, err := w.step("wf-01", 0, "step", "out", 1, 2); err != nil || ok {
				t.Fatalf("repeated step: inserted %v: %v", ok, err)
			}
			if err := w.exec("UPDATE workflow_status SET owner_xid = 'other' WHERE workflow_uuid = 'wf-02'"); err != nil {
				t.Fatal(err)
			}
			if _, err := w.step("wf-02", 0, "step", "out", 1, 2); err == nil || !strings.Contains(err.Error(), "fenced") {
				t.Fatalf("fenced step: %v", err)
			}
			if err := w.commit(); err != nil {
				t.Fatal(err)
			}
			if err := w.close(); err != nil {
				t.Fatal(err)
			}
			// Read the file back through another driver once this one has
			// closed it (two SQLite copies in one process must not have one
			// file open at once: their locks do not see each other).
			other := benchDrivers[(indexOf(d.name)+1)%len(benchDrivers)]
			r, err := other.open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			count, err := r.value("SELECT count(*) FROM operation_outputs")
			if err != nil || count != "3" {
				t.Fatalf("%s reading %s's file: %q rows: %v", other.name, d.name, count, err)
			}
		})
	}
}

func indexOf(name string) int {
	for i, d := range benchDrivers {
		if d.name == name {
			return i
		}
	}
	return -1
}
