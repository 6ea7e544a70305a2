package sysdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite is the SystemDatabase on one SQLite file, through modernc.org/sqlite
// (pure Go: libdbos.so carries no second C SQLite and exports none of its
// symbols; see SQLITE-DRIVER.md). The file is the one DBOS Python creates
// for a sqlite:/// system database, so both can use it at once.
//
// Every write goes through one connection (SQLite admits one writer at a
// time anyway; queueing in Go is cheaper than spinning on the file lock) in
// BEGIN IMMEDIATE transactions, so a write never upgrades a read lock and
// fails with "database is locked" halfway. Reads run on a small pool of
// read-only connections: in WAL mode they see the last commit and never
// block the writer. Commits are durable (synchronous=FULL) before they are
// acknowledged, as on Postgres; group commit (StepRecordMany,
// WorkflowFinishMany) amortises the fsync.
type SQLite struct {
	path     string
	w        *sql.DB // the writer: one connection
	r        *sql.DB // readers
	log      *zap.Logger
	retryFor time.Duration
	poll     time.Duration
	notes    *localNotifier
	owner    *ownerLock // set when opened Exclusive
	// readers is the readers' cap; acquires counts the transactions begun
	// and retries the operations repeated while the file was busy
	// (PoolStats).
	readers  int
	acquires atomic.Int64
	retries  atomic.Uint64
}

var (
	_ SystemDatabase = (*SQLite)(nil)
	_ Notifications  = (*SQLite)(nil)
)

// SQLiteOptions configures a SQLite system database.
type SQLiteOptions struct {
	// Logger receives warnings; nil means none.
	Logger *zap.Logger
	// SkipMigrations opens a file someone else migrated; the schema version
	// is still checked.
	SkipMigrations bool
	// ReadConns caps the read-only connections; 0 means 4.
	ReadConns int
	// PollInterval bounds how long a write by another process on the file
	// (a DBOS app, a second agent) goes unnoticed by this one's waiters and
	// queue pollers; 0 means DefaultSQLitePollInterval. Writes through this
	// SQLite wake its listeners at once.
	PollInterval time.Duration
	// RetryFor bounds how long an operation retries while the file stays
	// locked by another process beyond the busy timeout (or cannot be
	// opened); 0 means one minute, RetryUntilCancelled until ctx ends.
	RetryFor time.Duration
	// Exclusive is for the agent that serves the file: while it has it
	// open, another Exclusive open (a second agent, in any process) fails
	// with a FileServedError. One agent per file keeps one owner of its
	// recovery, queues and schedules; DBOS apps and the CLI open it shared.
	Exclusive bool
}

// DefaultSQLitePollInterval is how often the file is checked for commits
// made by other processes.
const DefaultSQLitePollInterval = 100 * time.Millisecond

// sqliteBusyTimeout is how long a statement waits for another process's lock
// before SQLITE_BUSY: DBOS Python's own value, so that neither side gives up
// before the other would.
const sqliteBusyTimeout = 30 * time.Second

// OpenSQLite migrates (unless told not to) and opens the system database in
// the file at path, creating it (and its directory) when missing.
func OpenSQLite(ctx context.Context, path string, opts SQLiteOptions) (*SQLite, error) {
	if path == "" {
		return nil, &ConfigError{Reason: "SQLite system database: a file path is required"}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &ConfigError{Reason: "SQLite system database path " + path, Err: err}
	}
	if opts.SkipMigrations {
		// Whoever skips migrations reads a database someone made: a missing
		// file is a wrong path, not a file to create empty.
		if _, err := os.Stat(abs); err != nil {
			return nil, &ConfigError{Reason: "no SQLite system database at " + abs + " (start the agent on it, or run `dbos-agent migrate`, first)", Err: err}
		}
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("create the directory of the system database: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if fs, remote := remoteFilesystem(filepath.Dir(abs)); remote {
		log.Warn("the SQLite system database is on a network filesystem: its file locks may not hold, "+
			"and two processes may corrupt it; put it on a local disk",
			zap.String("path", abs), zap.String("filesystem", fs))
	}
	s := &SQLite{path: abs, log: log, retryFor: opts.RetryFor, poll: opts.PollInterval, notes: newLocalNotifier()}
	if opts.Exclusive {
		if s.owner, err = lockOwner(abs); err != nil {
			return nil, err
		}
	}
	if s.retryFor == 0 {
		s.retryFor = time.Minute
	}
	if s.poll <= 0 {
		s.poll = DefaultSQLitePollInterval
	}
	s.w, err = sql.Open("sqlite", sqliteDSN(abs, true))
	if err != nil {
		s.owner.release()
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	readers := opts.ReadConns
	if readers <= 0 {
		readers = 4
	}
	s.r, err = sql.Open("sqlite", sqliteDSN(abs, false))
	if err != nil {
		_ = s.w.Close()
		s.owner.release()
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	s.readers = readers
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	s.r.SetConnMaxIdleTime(0)

	err = s.retry(ctx, "open the system database "+abs, func(ctx context.Context) error {
		if opts.SkipMigrations {
			var version int64
			if err := s.w.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM dbos_migrations").Scan(&version); err != nil {
				if strings.Contains(err.Error(), "no such table") {
					version = 0
				} else {
					return err
				}
			}
			if version < LatestSchemaVersion {
				return &nonRetryable{fmt.Errorf("system database %s is at version %d, this agent needs %d: run `dbos-agent migrate`",
					abs, version, LatestSchemaVersion)}
			}
			return nil
		}
		_, err := MigrateSQLite(ctx, s.w, log)
		return err
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// sqliteDSN is the driver's connection string for the file: WAL (readers
// and the writer do not block each other; DBOS Python uses WAL too), FULL
// synchronous commits (a commit is on disk before it is acknowledged), foreign
// keys (DBOS's schema cascades deletes through them), and DBOS's busy timeout.
// The writer begins every transaction IMMEDIATE.
func sqliteDSN(path string, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Path is the absolute path of the database file.
func (s *SQLite) Path() string { return s.path }

// Close releases the connections. Listeners already running stop with
// their contexts.
func (s *SQLite) Close() {
	s.notes.close()
	if s.r != nil {
		_ = s.r.Close()
	}
	if s.w != nil {
		_ = s.w.Close()
	}
	s.owner.release()
}

// nowMS is the clock SQLite rows are stamped with. Unlike Postgres there is
// no server clock: every process on the file shares the host's.
func nowMS() int64 { return time.Now().UnixMilli() }

// write runs fn in one IMMEDIATE transaction on the writer connection and
// commits it, retrying the whole transaction while the file is locked by
// another process beyond the busy timeout. fn must not use s.w itself (it
// holds the only writer connection); it may read through s.r, which sees
// the last commit, not fn's uncommitted writes.
func (s *SQLite) write(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	return s.retry(ctx, what, func(ctx context.Context) error {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}

// read runs fn in one read transaction (a consistent snapshot) on a reader.
func (s *SQLite) read(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	return s.retry(ctx, what, func(ctx context.Context) error {
		tx, err := s.r.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		return fn(tx)
	})
}

// retry runs op until it succeeds, fails with an error other than the file
// being locked or unopenable, or the retry window (or ctx) ends. As on
// Postgres, every operation passed here is safe to repeat: a locked
// transaction rolled back whole.
func (s *SQLite) retry(ctx context.Context, what string, op func(context.Context) error) error {
	deadline := time.Now().Add(s.retryFor)
	backoff := 10 * time.Millisecond
	var lastLog time.Time
	for {
		s.acquires.Add(1)
		err := op(ctx)
		var final *nonRetryable
		if err == nil || errors.As(err, &final) || !isSQLiteTransient(err) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
		if s.retryFor > 0 && time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("%s (gave up after %s): %w", what, s.retryFor, &UnreachableError{Target: s.path, Err: err})
		}
		s.retries.Add(1)
		if time.Since(lastLog) >= retryLogEvery {
			lastLog = time.Now()
			s.log.Warn("system database file busy or unavailable, retrying",
				zap.String("operation", what), zap.Duration("backoff", backoff), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, errors.Join(ctx.Err(), err))
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// isSQLiteTransient reports whether err is the file being locked by another
// process (past the busy timeout), or the file or its directory being
// momentarily unavailable: worth retrying the whole transaction.
func isSQLiteTransient(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL:
		return true
	}
	return false
}

// isSQLiteConstraint reports whether err is a constraint violation of the
// given extended code (sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, _UNIQUE, ...),
// or of any kind when code is 0.
func isSQLiteConstraint(err error, code int) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_CONSTRAINT {
		return false
	}
	return code == 0 || e.Code() == code
}

// sqliteErrorCode is err's extended SQLite result code, 0 when err is not
// from SQLite.
func sqliteErrorCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// DefaultSQLitePath is where `dbos-agent serve` keeps its system database
// when given no URL: dbos-agent/dbos.sqlite in the user's data directory
// ($XDG_DATA_HOME, else ~/.local/share; ~/Library/Application Support on
// macOS).
func DefaultSQLitePath() (string, error) {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no data directory for the default system database (set a database URL): %w", err)
		}
		dir = filepath.Join(home, ".local", "share")
		if isDarwin {
			dir = filepath.Join(home, "Library", "Application Support")
		}
	}
	return filepath.Join(dir, "dbos-agent", "dbos.sqlite"), nil
}
