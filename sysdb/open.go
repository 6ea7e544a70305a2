package sysdb

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Backend is a system database with its change notifications: everything
// the engine needs from one, on either backend.
type Backend interface {
	SystemDatabase
	Notifications
	// Describe names the database for people, without credentials: a file
	// path, or user@host:port/database.
	Describe() string
}

var (
	_ Backend = (*Postgres)(nil)
	_ Backend = (*SQLite)(nil)
)

// Kinds of system database a URL chooses.
const (
	KindPostgres = "postgres"
	KindSQLite   = "sqlite"
)

// Target is a parsed system database URL.
type Target struct {
	Kind string
	// URL is the Postgres connection string (KindPostgres).
	URL string
	// Path is the database file (KindSQLite), absolute.
	Path string
}

// ParseTarget reads a system database URL as DBOS's configuration does:
// postgres:// or postgresql:// (any libpq connection string) is Postgres;
// sqlite:///file is a SQLite file, relative to the working directory, and
// sqlite:////file an absolute one (SQLAlchemy's form, which DBOS Python's
// system_database_url takes, so one URL names one file for both).
func ParseTarget(raw string) (Target, error) {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return Target{}, &ConfigError{Reason: "no system database URL"}
	case strings.HasPrefix(raw, "sqlite:"):
		rest, ok := strings.CutPrefix(raw, "sqlite:///")
		if !ok {
			return Target{}, &ConfigError{Reason: "a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path, not " + raw}
		}
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			return Target{}, &ConfigError{Reason: "a SQLite URL takes no options (" + rest[i:] + "): the agent sets WAL, FULL sync and DBOS's busy timeout itself"}
		}
		if rest == "" || rest == ":memory:" {
			return Target{}, &ConfigError{Reason: "a SQLite system database must be a file, not " + raw}
		}
		abs, err := filepath.Abs(rest)
		if err != nil {
			return Target{}, &ConfigError{Reason: "SQLite system database path " + rest, Err: err}
		}
		return Target{Kind: KindSQLite, Path: abs}, nil
	default:
		// libpq accepts URLs and key=value strings; pgx says what is wrong
		// with either when the pool is configured.
		return Target{Kind: KindPostgres, URL: raw}, nil
	}
}

// SQLiteURL is the URL naming the SQLite file at path (absolute), as
// ParseTarget reads it.
func SQLiteURL(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return "sqlite:///" + abs
}

// OpenOptions configures Open for either backend; each ignores what does
// not apply to it.
type OpenOptions struct {
	// Schema, Password, MaxConns and ConnectionLabel are Postgres's (see
	// PostgresOptions).
	Schema          string
	Password        string
	MaxConns        int32
	ConnectionLabel string
	// PollInterval and Exclusive are SQLite's (see SQLiteOptions).
	PollInterval   time.Duration
	Exclusive      bool
	Logger         *zap.Logger
	SkipMigrations bool
	RetryFor       time.Duration
}

// Open opens (migrating unless told not to) the system database the URL
// names.
func Open(ctx context.Context, rawURL string, opts OpenOptions) (Backend, error) {
	target, err := ParseTarget(rawURL)
	if err != nil {
		return nil, err
	}
	if target.Kind == KindSQLite {
		return OpenSQLite(ctx, target.Path, SQLiteOptions{
			Logger: opts.Logger, SkipMigrations: opts.SkipMigrations, PollInterval: opts.PollInterval, RetryFor: opts.RetryFor,
			Exclusive: opts.Exclusive,
		})
	}
	return OpenPostgres(ctx, target.URL, PostgresOptions{
		Schema: opts.Schema, MaxConns: opts.MaxConns, Logger: opts.Logger, SkipMigrations: opts.SkipMigrations,
		ConnectionLabel: opts.ConnectionLabel, RetryFor: opts.RetryFor, Password: opts.Password,
	})
}

// Describe implements Backend.
func (s *SQLite) Describe() string { return s.path }
