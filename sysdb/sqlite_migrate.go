package sysdb

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"go.uber.org/zap"
)

// SQLiteSchemaVersion is the migration version MigrateSQLite records: the
// number DBOS Python 3.4 records on a SQLite system database it has migrated,
// so that it and the agent each find the file up to date. DBOS numbers its
// SQLite migrations by their place in one list: 1-40 are SQLite's own, 41-99
// are unused, and from 100 on the numbers are those of every SDK's Postgres
// migrations (some of which have nothing to do on SQLite, and no file here).
const SQLiteSchemaVersion = 125

//go:embed migrations/sqlite/*.sql
var sqliteMigrationFiles embed.FS

// MigrateSQLite brings the SQLite system database behind db to
// SQLiteSchemaVersion and returns the version now recorded. It runs every
// pending migration in one BEGIN IMMEDIATE transaction on one connection, so
// a concurrent migrator (another agent, DBOS Python) waits for it (up to the
// connection's busy timeout) and then finds nothing to do, and a crash leaves
// the file as it was. A file recorded at or above SQLiteSchemaVersion is left
// as it is (a newer SDK sharing the file is never undone), as Migrate does on
// Postgres.
func MigrateSQLite(ctx context.Context, db *sql.DB, log *zap.Logger) (version int, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	migrations, err := readMigrations(sqliteMigrationFiles, "migrations/sqlite", SQLiteSchemaVersion)
	if err != nil {
		return 0, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate the SQLite system database: %w", err)
	}
	defer conn.Close()

	// Cheap check first, so that a migrated file costs one read and no write lock.
	from, err := sqliteSchemaVersion(ctx, conn)
	if err != nil || from >= SQLiteSchemaVersion {
		return from, err
	}

	// BEGIN IMMEDIATE, not the driver's BeginTx: the write lock must be held
	// from the version check on, whatever the DSN's transaction mode.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, fmt.Errorf("migrate the SQLite system database: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	// Another migrator may have finished while we waited for the lock.
	if from, err = sqliteSchemaVersion(ctx, conn); err != nil || from >= SQLiteSchemaVersion {
		if err == nil {
			_, err = conn.ExecContext(ctx, "COMMIT")
		}
		return from, err
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS dbos_migrations (version INTEGER NOT NULL PRIMARY KEY)"); err != nil {
		return 0, fmt.Errorf("create the migrations table: %w", err)
	}
	for _, m := range migrations {
		if m.version <= int64(from) {
			continue
		}
		if _, err := conn.ExecContext(ctx, m.sql); err != nil {
			return 0, fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		log.Debug("migration applied", zap.String("migration", m.name))
	}
	// One row, as DBOS keeps it; the versions without a file count as applied.
	if _, err := conn.ExecContext(ctx, "DELETE FROM dbos_migrations"); err != nil {
		return 0, fmt.Errorf("record the migration version: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO dbos_migrations (version) VALUES (?)", SQLiteSchemaVersion); err != nil {
		return 0, fmt.Errorf("record the migration version: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return 0, fmt.Errorf("migrate the SQLite system database: commit: %w", err)
	}
	log.Info("system database migrated", zap.Int("from", from), zap.Int("to", SQLiteSchemaVersion))
	return SQLiteSchemaVersion, nil
}

// sqliteSchemaVersion reads the recorded migration version, 0 when the
// migrations table is missing or empty.
func sqliteSchemaVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var tables, version int
	err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dbos_migrations'").Scan(&tables)
	if err == nil && tables > 0 {
		err = conn.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM dbos_migrations").Scan(&version)
	}
	if err != nil {
		return 0, fmt.Errorf("read the migration version: %w", err)
	}
	return version, nil
}
