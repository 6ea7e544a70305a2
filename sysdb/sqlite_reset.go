package sysdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// resetSQLite deletes the database file (with its WAL and shared-memory
// files), or with truncate empties every table but the migration record,
// in one transaction. A missing file is not an error. As with Postgres, this
// is for tests: a process with the file open keeps the deleted file.
func resetSQLite(ctx context.Context, path string, truncate bool) error {
	if !truncate {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("reset %s: %w", path, err)
			}
		}
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	db, err := sql.Open("sqlite", sqliteDSN(path, true))
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reset %s: %w", path, err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
	if err != nil {
		return fmt.Errorf("reset %s: %w", path, err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return err
		}
		if !migrationTables[name] {
			tables = append(tables, name)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("reset %s: %w", path, err)
	}
	// With the foreign key checks deferred to the commit, the order of the
	// deletes does not matter: by then nothing refers to anything.
	if _, err := tx.ExecContext(ctx, "PRAGMA defer_foreign_keys = ON"); err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM "`+t+`"`); err != nil {
			return fmt.Errorf("reset %s: empty %s: %w", path, t, err)
		}
	}
	return tx.Commit()
}
