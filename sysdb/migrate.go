package sysdb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// LatestSchemaVersion is the cross-SDK migration version this build brings a
// system database to. Every DBOS SDK numbers its migrations the same way, so a
// database at this version (or above) is usable by all of them.
const LatestSchemaVersion int64 = 125

// DefaultSchema is where the DBOS SDKs keep the system tables unless told
// otherwise.
const DefaultSchema = "dbos"

// migrationLockKey is the session advisory lock DBOS Python (and other
// agents) hold while migrating, so we serialise with them. The Go SDK v1.8.0
// takes no lock; its migrations are written to be re-run safely, as ours are.
// One key for every schema: migrations of different schemas in one database
// simply take turns.
const migrationLockKey int64 = 1234567890

// onlineMarker on a migration's first line says it is a single statement that
// builds or drops an index CONCURRENTLY, so it must run outside a transaction
// when upgrading a database that may be in use.
const onlineMarker = "-- dbos:online"

//go:embed migrations/postgres/*.sql
var postgresMigrationFiles embed.FS

// MigrateOptions configures Migrate.
type MigrateOptions struct {
	// Schema holds the system tables; empty means DefaultSchema.
	Schema string
	// Logger receives progress; nil means no logs.
	Logger *zap.Logger
	// RetryFor bounds how long connecting retries while the server does
	// not answer, as PostgresOptions.RetryFor does (0: a few attempts over
	// about six seconds; negative: until ctx ends, so that an agent
	// started before its database waits for it).
	RetryFor time.Duration
	// Password, when set, replaces the URL's (see PostgresOptions).
	Password string
	// ApplicationRole, when set, is granted what an application needs on the
	// system schema (its tables, sequences and functions, and those created
	// later), as DBOS's migrate does for a role less privileged than the
	// migrator's.
	ApplicationRole string
}

// MigrateResult says where the schema was and where it is now.
type MigrateResult struct {
	From int64
	To   int64
}

type migration struct {
	version int64
	name    string
	sql     string
	online  bool
}

// loadMigrations parses the embedded files once per call; there are few of
// them and migration is not a hot path.
func loadMigrations() ([]migration, error) {
	return readMigrations(postgresMigrationFiles, "migrations/postgres", LatestSchemaVersion)
}

// readMigrations parses the NNN_description.sql files of dir, in version
// order, and checks that the last one is numbered latest.
func readMigrations(fsys fs.FS, dir string, latest int64) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration file %q: name must be NNN_description.sql", name)
		}
		version, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration file %q: bad version: %w", name, err)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		text := string(body)
		firstLine, _, _ := strings.Cut(text, "\n")
		out = append(out, migration{
			version: version,
			name:    strings.TrimSuffix(name, ".sql"),
			sql:     text,
			online:  strings.TrimSpace(firstLine) == onlineMarker,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("two migrations numbered %d", out[i].version)
		}
	}
	if len(out) == 0 || out[len(out)-1].version != latest {
		return nil, fmt.Errorf("embedded migrations do not end at version %d", latest)
	}
	return out, nil
}

func (m migration) render(quotedSchema string, concurrently bool) string {
	kw := ""
	if concurrently {
		kw = "CONCURRENTLY"
	}
	return strings.NewReplacer("{{schema}}", quotedSchema, "{{concurrently}}", kw).Replace(m.sql)
}

// Migrate brings the DBOS system schema in the database at databaseURL to
// LatestSchemaVersion, creating the database and the schema when they are
// missing. A database at or above LatestSchemaVersion is left as it is, so a
// newer SDK sharing the database is never undone. Concurrent migrators (other
// agents, the DBOS SDKs) are serialised on the SDKs' advisory lock.
func Migrate(ctx context.Context, databaseURL string, opts MigrateOptions) (MigrateResult, error) {
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return MigrateResult{}, &ConfigError{Reason: "invalid database URL", Err: redactErr(err)}
	}
	if opts.Password != "" {
		cfg.Password = opts.Password
	}
	migrations, err := loadMigrations()
	if err != nil {
		return MigrateResult{}, err
	}

	var conn *pgx.Conn
	err = retryConnect(ctx, log, opts.RetryFor, func(ctx context.Context) error {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if isMissingDatabase(err) {
			if cerr := createDatabase(ctx, cfg, log); cerr != nil {
				return cerr
			}
			c, err = pgx.ConnectConfig(ctx, cfg)
		}
		if err != nil {
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		return MigrateResult{}, &UnreachableError{Target: describeTarget(cfg), Err: err}
	}
	defer conn.Close(context.WithoutCancel(ctx))

	res, err := migrateSchema(ctx, conn, schema, migrations, log)
	if err != nil || opts.ApplicationRole == "" {
		return res, err
	}
	if err := grantSchema(ctx, conn, schema, opts.ApplicationRole); err != nil {
		return res, err
	}
	log.Info("system schema granted", zap.String("schema", schema), zap.String("role", opts.ApplicationRole))
	return res, nil
}

// grantSchema gives role the use of every object in the system schema, now
// and to come (the statements DBOS's migrate runs for an application role).
func grantSchema(ctx context.Context, conn *pgx.Conn, schema, role string) error {
	s, r := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{
		"GRANT USAGE ON SCHEMA " + s + " TO " + r,
		"GRANT ALL PRIVILEGES ON ALL TABLES IN SCHEMA " + s + " TO " + r,
		"GRANT ALL PRIVILEGES ON ALL SEQUENCES IN SCHEMA " + s + " TO " + r,
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA " + s + " TO " + r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " GRANT ALL ON TABLES TO " + r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " GRANT ALL ON SEQUENCES TO " + r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " GRANT EXECUTE ON FUNCTIONS TO " + r,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("grant the system schema to role %q: %w", role, err)
		}
	}
	return nil
}

// migrateSchema brings schema to LatestSchemaVersion on conn (see Migrate).
func migrateSchema(ctx context.Context, conn *pgx.Conn, schema string, migrations []migration, log *zap.Logger) (MigrateResult, error) {
	quoted := pgx.Identifier{schema}.Sanitize()

	// Cheap check first, so a migrated database costs one query and no lock.
	from, err := schemaVersion(ctx, conn, schema)
	if err != nil {
		return MigrateResult{}, err
	}
	if from >= LatestSchemaVersion {
		return MigrateResult{From: from, To: from}, nil
	}

	if err := takeMigrationLock(ctx, conn); err != nil {
		return MigrateResult{}, err
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey)
	}()

	// Another migrator may have finished while we waited for the lock.
	from, err = schemaVersion(ctx, conn, schema)
	if err != nil {
		return MigrateResult{}, err
	}
	if from >= LatestSchemaVersion {
		return MigrateResult{From: from, To: from}, nil
	}

	if from == 0 {
		if err := migrateFresh(ctx, conn, quoted, migrations); err != nil {
			return MigrateResult{From: 0}, err
		}
		log.Info("system database created", zap.String("schema", schema), zap.Int64("version", LatestSchemaVersion))
		return MigrateResult{From: 0, To: LatestSchemaVersion}, nil
	}

	current := from
	cleanedInvalid := false
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		sql := m.render(quoted, true)
		if m.online {
			// A CREATE INDEX CONCURRENTLY that crashed leaves an INVALID index
			// behind whose name blocks the retry; clear those first.
			if !cleanedInvalid {
				if err := dropInvalidIndexes(ctx, conn, schema); err != nil {
					return MigrateResult{From: from, To: current}, err
				}
				cleanedInvalid = true
			}
			if _, err := conn.Exec(ctx, sql); err != nil {
				return MigrateResult{From: from, To: current}, fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := conn.Exec(ctx, "UPDATE "+quoted+".dbos_migrations SET version = $1", m.version); err != nil {
				return MigrateResult{From: from, To: current}, fmt.Errorf("record migration %s: %w", m.name, err)
			}
		} else {
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, sql); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "UPDATE "+quoted+".dbos_migrations SET version = $1", m.version)
				return err
			})
			if err != nil {
				return MigrateResult{From: from, To: current}, fmt.Errorf("apply migration %s: %w", m.name, err)
			}
		}
		current = m.version
		log.Debug("migration applied", zap.String("migration", m.name))
	}
	log.Info("system database migrated", zap.String("schema", schema), zap.Int64("from", from), zap.Int64("to", current))
	return MigrateResult{From: from, To: current}, nil
}

// takeMigrationLock takes the migrators' advisory lock by trying rather than
// waiting: a session blocked in pg_advisory_lock holds a snapshot, and a
// concurrent migrator's CREATE INDEX CONCURRENTLY (run while it holds the
// lock) waits for every such snapshot to end, a deadlock.
func takeMigrationLock(ctx context.Context, conn *pgx.Conn) error {
	wait := 20 * time.Millisecond
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", migrationLockKey).Scan(&got); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if got {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

// migrateFresh applies every migration in one transaction: on an empty
// schema nothing can be using the tables, so indexes need not be built
// concurrently, and a crash leaves nothing half-made.
func migrateFresh(ctx context.Context, conn *pgx.Conn, quoted string, migrations []migration) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoted); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+quoted+".dbos_migrations (version BIGINT NOT NULL PRIMARY KEY)"); err != nil {
			return fmt.Errorf("create migrations table: %w", err)
		}
		for _, m := range migrations {
			if _, err := tx.Exec(ctx, m.render(quoted, false)); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+quoted+".dbos_migrations"); err != nil {
			return fmt.Errorf("record migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+quoted+".dbos_migrations (version) VALUES ($1)", LatestSchemaVersion); err != nil {
			return fmt.Errorf("record migrations: %w", err)
		}
		return nil
	})
}

// SchemaVersion reports the migration version recorded in schema, 0 when the
// schema or its migrations table does not exist.
func SchemaVersion(ctx context.Context, databaseURL, schema string) (int64, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return 0, &ConfigError{Reason: "invalid database URL", Err: redactErr(err)}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, &UnreachableError{Target: describeTarget(cfg), Err: err}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return schemaVersion(ctx, conn, schema)
}

func schemaVersion(ctx context.Context, conn *pgx.Conn, schema string) (int64, error) {
	var exists bool
	err := conn.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'dbos_migrations')`,
		schema).Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("read migration version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var version int64
	err = conn.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM "+pgx.Identifier{schema}.Sanitize()+".dbos_migrations").Scan(&version)
	if err != nil {
		return 0, fmt.Errorf("read migration version: %w", err)
	}
	return version, nil
}

func dropInvalidIndexes(ctx context.Context, conn *pgx.Conn, schema string) error {
	rows, err := conn.Query(ctx, `
		SELECT i.relname FROM pg_catalog.pg_index x
		JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = i.relnamespace
		WHERE n.nspname = $1 AND NOT x.indisvalid`, schema)
	if err != nil {
		return fmt.Errorf("list invalid indexes: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list invalid indexes: %w", err)
	}
	for _, name := range names {
		q := "DROP INDEX CONCURRENTLY IF EXISTS " + pgx.Identifier{schema, name}.Sanitize()
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("drop invalid index %s: %w", name, err)
		}
	}
	return nil
}

func isMissingDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}

// createDatabase creates cfg's database through the server's maintenance
// database, tolerating a concurrent creator.
func createDatabase(ctx context.Context, cfg *pgx.ConnConfig, log *zap.Logger) error {
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to maintenance database to create %q: %w", cfg.Database, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil // created by someone else meanwhile
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", cfg.Database, err)
	}
	log.Info("system database created", zap.String("database", cfg.Database))
	return nil
}

// retryConnect retries op while it fails with a connection error, with
// exponential backoff (capped at 2 s), until ctx ends or retryFor passes
// (0: six attempts; negative: no bound but ctx).
func retryConnect(ctx context.Context, log *zap.Logger, retryFor time.Duration, op func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	start := time.Now()
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || !IsConnectionError(err) {
			return err
		}
		switch {
		case retryFor == 0 && attempt >= 6:
			return err
		case retryFor > 0 && time.Since(start)+backoff > retryFor:
			return err
		}
		if time.Since(lastLog) >= retryLogEvery {
			lastLog = time.Now()
			log.Warn("system database unreachable, retrying", zap.Error(redactErr(err)), zap.Duration("backoff", backoff),
				zap.Duration("waited", time.Since(start).Round(time.Millisecond)))
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}
