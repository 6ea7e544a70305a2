package sysdb_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The files DBOS Python migrated, shared by the SQLite parity tests.
	if dbosFiles.dir != "" {
		_ = os.RemoveAll(dbosFiles.dir)
	}
	os.Exit(code)
}
