package sysdb

import (
	"context"
	"database/sql"
	"errors"

	"go.uber.org/zap"
)

// TEMPORARY: replaced by sqlite_migrate.go (the SQLite migrations); delete
// this file when merging it.
func MigrateSQLite(ctx context.Context, db *sql.DB, log *zap.Logger) (int, error) {
	return 0, errors.New("SQLite migrations not yet merged")
}
