package e2e

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver sysdb uses, to read the file as DBOS Python would

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// chaosDB is how the fault suite reads the ground truth, the system
// database itself, on either backend.
type chaosDB interface {
	table(name string) string
	query(q string) (chaosRows, error)
	queryRow(q string, dest ...any) error
}

type chaosRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

type chaosPostgres struct {
	conn   *pgx.Conn
	schema string
}

func (p chaosPostgres) table(name string) string { return pgx.Identifier{p.schema, name}.Sanitize() }

func (p chaosPostgres) query(q string) (chaosRows, error) {
	return p.conn.Query(context.Background(), q)
}

func (p chaosPostgres) queryRow(q string, dest ...any) error {
	return p.conn.QueryRow(context.Background(), q).Scan(dest...)
}

type chaosSQLite struct{ db *sql.DB }

// openChaosSQLite opens the file an agent serves, read-only, beside it.
func openChaosSQLite(t *testing.T, url string) chaosSQLite {
	t.Helper()
	target, err := sysdb.ParseTarget(url)
	if err != nil {
		t.Fatal(err)
	}
	// The agent creates the file; the suite may read before it starts.
	db, err := sql.Open("sqlite", "file:"+target.Path+"?_pragma=busy_timeout(30000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return chaosSQLite{db: db}
}

func (s chaosSQLite) table(name string) string { return name }

func (s chaosSQLite) query(q string) (chaosRows, error) { return s.db.Query(q) }

func (s chaosSQLite) queryRow(q string, dest ...any) error { return s.db.QueryRow(q).Scan(dest...) }
