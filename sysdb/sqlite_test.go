package sysdb_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// openSQLite opens a fresh system database file for one test, closed when
// it ends.
func openSQLite(t *testing.T) *sysdb.SQLite {
	t.Helper()
	db, err := sysdb.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "dbos.sqlite"), sysdb.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func TestSQLiteConformance(t *testing.T) {
	sysdbtest.Run(t, func(t *testing.T) sysdb.SystemDatabase { return openSQLite(t) })
}
