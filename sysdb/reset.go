package sysdb

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ResetOptions says how Reset empties a system database.
type ResetOptions struct {
	// Schema holds the system tables; empty means DefaultSchema. Used when
	// truncating.
	Schema string
	// Truncate empties the schema's tables and keeps the database, its schema
	// and its migration record; otherwise the database is dropped.
	Truncate bool
	// Password, when set, replaces the URL's (see PostgresOptions).
	Password string
}

// migrationTables keep their rows through a truncation: emptied, they would
// make the next migrator apply again what is applied (the system schema's, and
// DBOS's data-source table's when a data source shares the schema).
var migrationTables = map[string]bool{"dbos_migrations": true, "dbos_datasource_migrations": true}

// Reset destroys the system database at databaseURL, or with
// opts.Truncate empties every table of its schema, as DBOS's
// reset_system_database does: for tests, never for a database in use. Other
// sessions on the database are ended first (an agent's pool reconnects), since
// one holding a lock would block the reset. Dropping a missing database is
// not an error.
func Reset(ctx context.Context, databaseURL string, opts ResetOptions) error {
	if target, err := ParseTarget(databaseURL); err == nil && target.Kind == KindSQLite {
		return resetSQLite(ctx, target.Path, opts.Truncate)
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return &ConfigError{Reason: "invalid database URL", Err: redactErr(err)}
	}
	if opts.Password != "" {
		cfg.Password = opts.Password
	}
	if opts.Truncate {
		return truncateSchema(ctx, cfg, opts.Schema)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return &UnreachableError{Target: describeTarget(admin), Err: err}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %q: %w", cfg.Database, err)
	}
	return nil
}

func truncateSchema(ctx context.Context, cfg *pgx.ConnConfig, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return &UnreachableError{Target: describeTarget(cfg), Err: err}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Best effort: a role without the right to signal still truncates, only
	// perhaps after waiting for another session's locks.
	_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
	if err != nil {
		return fmt.Errorf("list the tables of schema %q: %w", schema, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list the tables of schema %q: %w", schema, err)
	}
	var tables []string
	for _, name := range names {
		if !migrationTables[name] {
			tables = append(tables, pgx.Identifier{schema, name}.Sanitize())
		}
	}
	if len(tables) == 0 {
		return fmt.Errorf("schema %q of database %q has no tables to empty", schema, cfg.Database)
	}
	if _, err := conn.Exec(ctx, "TRUNCATE TABLE "+strings.Join(tables, ", ")+" CASCADE"); err != nil {
		return fmt.Errorf("empty schema %q: %w", schema, err)
	}
	return nil
}
