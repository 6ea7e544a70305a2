// Package hosting runs the agent's engine: it opens the system database and
// starts an agent on it, and stops both. `dbos-agent serve` and the embedded
// mode of libdbos.so host the engine through it, so that the library runs the
// same engine with the same defaults as the daemon.
package hosting

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// DefaultPoolSize is the most database connections an engine opens unless
// told otherwise (serve's --pool-size default).
const DefaultPoolSize int32 = 20

// DefaultExecutorID is the executor id of an engine given none.
const DefaultExecutorID = "local"

// Options configure an engine. Engine holds the agent's settings: its DB,
// Notifications and Logger are filled in here, and an empty ExecutorID is
// DefaultExecutorID.
type Options struct {
	DatabaseURL string
	Schema      string
	// Password, when set, replaces the URL's.
	Password string
	// PoolSize caps the pool (default DefaultPoolSize).
	PoolSize int32
	// DatabaseRetry is how long an operation retries while the database is
	// unreachable; 0 means until its context ends (start-up waits the same
	// way, within Start's context).
	DatabaseRetry time.Duration
	// FilePollInterval is, on a SQLite file, how often other processes'
	// commits are looked for (0: sysdb.DefaultSQLitePollInterval).
	FilePollInterval time.Duration
	Engine           agent.Config
}

// Engine is a started agent and the database it owns.
type Engine struct {
	Agent *agent.Agent
	db    sysdb.Backend
}

// Start opens the system database (migrating it), recovers this executor's
// unfinished workflows and starts the agent's services. ctx bounds only the
// start: cancelling it later does not stop the engine (Stop does).
func Start(ctx context.Context, log *zap.Logger, o Options) (*Engine, error) {
	retry := o.DatabaseRetry
	if retry <= 0 {
		retry = sysdb.RetryUntilCancelled
	}
	poolSize := o.PoolSize
	if poolSize <= 0 {
		poolSize = DefaultPoolSize
	}
	db, err := sysdb.Open(ctx, o.DatabaseURL, sysdb.OpenOptions{
		Schema: o.Schema, Password: o.Password, Logger: log, MaxConns: poolSize, RetryFor: retry,
		PollInterval: o.FilePollInterval,
		Exclusive:    true, // the engine serves the file: one per SQLite file
	})
	if err != nil {
		return nil, err
	}
	log.Info("system database open", zap.String("database", db.Describe()))
	cfg := o.Engine
	cfg.DB = db
	cfg.Notifications = db
	cfg.Logger = log
	if cfg.ExecutorID == "" {
		cfg.ExecutorID = DefaultExecutorID
	}
	a, err := agent.New(cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		a.Shutdown(context.Background())
		db.Close()
		return nil, err
	}
	return &Engine{Agent: a, db: db}, nil
}

// Stop drains the engine (running workflows get the grace period), stops its
// services and closes its pool. It returns within the agent's grace period
// plus its shutdown timeout.
func (e *Engine) Stop(ctx context.Context) {
	e.Agent.Shutdown(ctx)
	e.db.Close()
}

// The formats NewLoggerFormat writes: JSON lines, or zap's console lines
// (time, level, message, then the fields as JSON) for people at a terminal.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// NewLogger is the agent's logger at level (debug, info, warn or error):
// JSON lines on stderr.
func NewLogger(level string) (*zap.Logger, error) { return NewLoggerFormat(level, LogFormatJSON) }

// NewLoggerFormat is the agent's logger at level in format (json or text) on
// stderr. Durations are written with their unit ("1.5s"), in both formats, so
// that a reader need not know zap's default of float seconds.
func NewLoggerFormat(level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	cfg := zap.NewProductionConfig()
	switch format {
	case LogFormatJSON:
	case LogFormatText:
		cfg.Encoding = "console"
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	default:
		return nil, fmt.Errorf("log format %q: use text or json", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.EncoderConfig.EncodeDuration = zapcore.StringDurationEncoder
	cfg.Sampling = nil
	return cfg.Build()
}
