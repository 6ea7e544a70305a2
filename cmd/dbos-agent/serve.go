package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/hosting"
	"github.com/dbos-agent/dbos-agent/server"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// fileConfig is the optional YAML config file of `serve`; flags and
// environment variables override it.
type fileConfig struct {
	DatabaseURL     string   `yaml:"database_url"`
	PasswordFile    string   `yaml:"database_password_file"`
	Schema          string   `yaml:"schema"`
	Socket          string   `yaml:"socket"`
	ExecutorID      string   `yaml:"executor_id"`
	AppVersion      string   `yaml:"application_version"`
	LogLevel        string   `yaml:"log_level"`
	PollIntervalSec float64  `yaml:"poll_interval_sec"`
	GracePeriodSec  float64  `yaml:"grace_period_sec"`
	AllowedUIDs     []uint32 `yaml:"allowed_uids"`
	// The bounds on connections, requests and frames.
	Limits connectionLimits `yaml:",inline"`
}

func defaultSocketPath() string { return hosting.DefaultSocketPath() }

func newServeCommand() *cobra.Command { return serveCommand(false) }

// serveCommand is `serve`, or with plugin set the hidden `plugin`: the same
// agent run as libdbos.so's sidecar child (see plugin.go).
func serveCommand(plugin bool) *cobra.Command {
	var (
		orphanGrace  time.Duration
		db           databaseFlags
		configPath   string
		socket       string
		executorID   string
		appVersion   string
		logLevel     string
		logFormat    string
		pollInterval time.Duration
		grace        time.Duration
		stepBatchMax int
		committers   int
		resultPoll   time.Duration
		messagePoll  time.Duration
		sweep        time.Duration
		schedPoll    time.Duration
		poolSize     int32
		shutdownMax  time.Duration
		dbRetry      time.Duration
		filePoll     time.Duration
		rescueEvery  time.Duration
		rescueAfter  time.Duration
		limits       connectionLimits
		adminFlags   adminOptions
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the agent: own the system database and serve applications on a Unix socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fc fileConfig
			if configPath != "" {
				raw, err := os.ReadFile(configPath)
				if err != nil {
					return fmt.Errorf("read config: %w", err)
				}
				if err := yaml.Unmarshal(raw, &fc); err != nil {
					return fmt.Errorf("config %s: %w", configPath, err)
				}
			}
			target, err := db.resolveWith(database{url: fc.DatabaseURL, schema: fc.Schema}, fc.PasswordFile)
			if err != nil {
				return err
			}
			socketPath := firstNonEmpty(socket, os.Getenv("DBOS_AGENT_SOCKET"), fc.Socket, defaultSocketPath())
			executor := firstNonEmpty(executorID, os.Getenv("DBOS__VMID"), fc.ExecutorID, "local")
			version := firstNonEmpty(appVersion, os.Getenv("DBOS__APPVERSION"), fc.AppVersion)
			level := firstNonEmpty(logLevel, os.Getenv("DBOS_AGENT_LOG_LEVEL"), fc.LogLevel, "info")
			if pollInterval == 0 && fc.PollIntervalSec > 0 {
				pollInterval = time.Duration(fc.PollIntervalSec * float64(time.Second))
			}
			if grace == 0 && fc.GracePeriodSec > 0 {
				grace = time.Duration(fc.GracePeriodSec * float64(time.Second))
			}
			if err := limits.resolve(fc.Limits); err != nil {
				return err
			}
			log, err := hosting.NewLoggerFormat(level, firstNonEmpty(logFormat, os.Getenv("DBOS_AGENT_LOG_FORMAT"), hosting.LogFormatJSON))
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			o := serveOptions{
				db: target, socket: socketPath, executorID: executor, appVersion: version,
				pollInterval: pollInterval, grace: grace, allowedUIDs: fc.AllowedUIDs,
				stepBatchMax: stepBatchMax, committers: committers, resultPoll: resultPoll, messagePoll: messagePoll,
				sweep: sweep, schedPoll: schedPoll, poolSize: poolSize, limits: limits,
				shutdownTimeout: shutdownMax, dbRetry: dbRetry, rescueInterval: rescueEvery, rescueHorizon: rescueAfter,
				filePoll: filePoll, admin: adminFlags,
			}
			if err := o.admin.resolve(); err != nil {
				return err
			}
			if plugin {
				return runPlugin(cmd.Context(), log, o, orphanGrace)
			}
			return serve(cmd.Context(), log, o)
		},
	}
	if plugin {
		cmd.Use = "plugin"
		cmd.Short = "Run the agent as libdbos.so's sidecar child (started by the library, not by hand)"
		cmd.Hidden = true
		cmd.Flags().DurationVar(&orphanGrace, "orphan-grace", defaultOrphanGrace,
			"how long the child runs without a host's heartbeat (a crashed host's successor reattaches within it)")
	}
	db.register(cmd)
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "YAML config file (keys: database_url, database_password_file, schema, socket, executor_id, application_version, log_level, poll_interval_sec, grace_period_sec, allowed_uids, "+limitsConfigKeys+")")
	f.StringVar(&socket, "socket", "", "Unix socket path (env DBOS_AGENT_SOCKET; default "+defaultSocketPath()+")")
	f.StringVar(&executorID, "executor-id", "", "executor id this agent's workflows carry (env DBOS__VMID; default local)")
	f.StringVar(&appVersion, "app-version", "", "application version for workers that announce none (env DBOS__APPVERSION)")
	f.StringVar(&logLevel, "log-level", "", "debug, info, warn or error (env DBOS_AGENT_LOG_LEVEL; default info)")
	f.StringVar(&logFormat, "log-format", "", "json (lines) or text (for people; env DBOS_AGENT_LOG_FORMAT; default json)")
	f.DurationVar(&pollInterval, "poll-interval", 0, "queue polling interval when idle (default 1s)")
	f.DurationVar(&grace, "grace-period", 0, "how long SIGTERM lets running workflows finish (default 10s)")
	f.IntVar(&stepBatchMax, "step-batch-max", 0, "most step records in one commit (default 512; 1 = one commit per step)")
	f.IntVar(&committers, "step-committers", 0, "most step-record commits in flight at once: one commits what waits, each other only while the one before it has been committing for over 10ms (default 2)")
	f.Int32Var(&poolSize, "pool-size", hosting.DefaultPoolSize, "most database connections the agent opens")
	f.DurationVar(&sweep, "sweep-interval", 0, "how often delayed workflows are released and timed-out ones cancelled (default 1s)")
	f.DurationVar(&schedPoll, "schedule-interval", 0, "how often schedules are re-read from the database (default 10s)")
	f.DurationVar(&resultPoll, "result-poll-interval", 0, "how often waiters re-check outcomes written without a notification (default 1s)")
	f.DurationVar(&shutdownMax, "shutdown-timeout", 0, "after the grace period, how long shutdown waits for the engine to stop before exiting anyway (default 5s)")
	f.DurationVar(&filePoll, "file-poll-interval", 0, "on a SQLite file: how often it is checked for commits by other processes (DBOS apps), which wake this agent's waits and queues (default 100ms)")
	f.DurationVar(&dbRetry, "database-retry", 0, "how long an operation retries while the database is unreachable (default 0: until it returns, however long; start-up waits the same way)")
	f.DurationVar(&rescueEvery, "rescue-interval", 0, "how often rows this agent claimed that no run holds go back to their queue (default 30s)")
	f.DurationVar(&rescueAfter, "rescue-horizon", 0, "how long such a row must be unchanged before it is rescued (default 1m)")
	f.DurationVar(&messagePoll, "message-poll-interval", 0, "how often waits for messages, events and stream values re-check without a notification (default 5s)")
	limits.register(f)
	adminFlags.register(f)
	return cmd
}

// logDatabase is serve's first line: which system database, and when it is
// the default, that it is one and how to choose another.
func logDatabase(log *zap.Logger, db database) {
	target, _ := sysdb.ParseTarget(db.url)
	switch {
	case db.defaulted:
		log.Info("system database: the default SQLite file (choose another, or Postgres, with --database-url or DBOS_SYSTEM_DATABASE_URL)",
			zap.String("path", target.Path))
	case target.Kind == sysdb.KindSQLite:
		log.Info("system database: SQLite file", zap.String("path", target.Path))
	default:
		log.Info("system database: Postgres", zap.String("url", sysdb.Redact(db.url)), zap.String("schema", db.schema))
	}
}

type serveOptions struct {
	db                                        database
	socket, executorID, appVersion            string
	pollInterval, grace                       time.Duration
	allowedUIDs                               []uint32
	stepBatchMax, committers                  int
	resultPoll, messagePoll, sweep, schedPoll time.Duration
	poolSize                                  int32
	shutdownTimeout, dbRetry                  time.Duration
	filePoll                                  time.Duration
	rescueInterval, rescueHorizon             time.Duration
	limits                                    connectionLimits
	admin                                     adminOptions
	// listening, when set, is called once the socket listens; cancel stops
	// the agent as the end of ctx does (plugin mode).
	listening func(cancel context.CancelFunc)
}

func serve(ctx context.Context, log *zap.Logger, o serveOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The socket's directory is checked (and made) before the database is
	// opened, so that a socket that cannot be trusted fails at once.
	if _, err := server.PrepareSocketPath(o.socket); err != nil {
		return socketError(err)
	}
	logDatabase(log, o.db)
	e, err := hosting.Start(ctx, log, hosting.Options{
		DatabaseURL: o.db.url, Schema: o.db.schema, Password: o.db.password,
		PoolSize: o.poolSize, DatabaseRetry: o.dbRetry, FilePollInterval: o.filePoll,
		Engine: agent.Config{
			ExecutorID:          o.executorID,
			DefaultAppVersion:   o.appVersion,
			AgentVersion:        version,
			PollInterval:        o.pollInterval,
			GracePeriod:         o.grace,
			MaxStepBatch:        o.stepBatchMax,
			StepBatchers:        o.committers,
			ResultPollInterval:  o.resultPoll,
			MessagePollInterval: o.messagePoll,
			SweepInterval:       o.sweep,
			ScheduleInterval:    o.schedPoll,
			ShutdownTimeout:     o.shutdownTimeout,
			RescueInterval:      o.rescueInterval,
			RescueHorizon:       o.rescueHorizon,
			MaxFrameSize:        int(o.limits.MaxFrameSize),
			MaxInFlight:         o.limits.MaxInFlight,
			MaxRunning:          o.limits.MaxRunning,
			MaxOutboundBytes:    int(o.limits.MaxOutbound),
			StallTimeout:        o.limits.stallTimeout,
		},
	})
	if err != nil {
		return err
	}
	a := e.Agent
	srv, err := server.Listen(server.Config{SocketPath: o.socket, Agent: a, AllowedUIDs: o.allowedUIDs, Logger: log,
		MaxConnections: o.limits.MaxConnections, MaxConnectionsPerUID: o.limits.MaxConnectionsPerUID})
	if err != nil {
		e.Stop(context.Background())
		return socketError(err)
	}
	adminSrv, err := startAdmin(log, a, o.admin)
	if err != nil {
		srv.Close()
		e.Stop(context.Background())
		return err
	}
	fields := []zap.Field{zap.String("socket", o.socket), zap.String("executor_id", o.executorID)}
	if !o.db.sqlite {
		fields = append(fields, zap.String("schema", o.db.schema))
	}
	log.Info("dbos-agent listening", append(fields, zap.String("version", version))...)
	hosting.NotifyReady(log)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve() }()
	if adminSrv != nil {
		go func() {
			if err := adminSrv.Serve(); err != nil {
				errc <- err
			}
		}()
	}
	if o.listening != nil {
		o.listening(cancel)
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining running workflows")
		hosting.NotifyStopping()
	case err := <-errc:
		e.Stop(context.Background())
		stopAdmin(adminSrv)
		srv.Close()
		return err
	}
	// Drain first (workers can still finish over their connections; the
	// admin server answers readiness 503 meanwhile), then close the socket
	// and the admin server.
	e.Stop(context.Background())
	srv.Close()
	stopAdmin(adminSrv)
	log.Info("dbos-agent stopped")
	return nil
}

// socketError says what to do about a socket the agent cannot listen on.
func socketError(err error) error {
	var unsafe *server.UnsafePathError
	switch {
	case errors.Is(err, server.ErrSocketInUse):
		return fmt.Errorf("%w (is another agent running? stop it or pass --socket)", err)
	case errors.As(err, &unsafe):
		return fmt.Errorf("%w (--socket, env DBOS_AGENT_SOCKET)", err)
	}
	return err
}
