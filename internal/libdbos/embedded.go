package libdbos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/hosting"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// startTimeout bounds how long opening the first handle of an engine waits
// for its database (serve waits without a bound; a library call must
// return): past it dbos_open is ErrUnavailable.
const startTimeout = 30 * time.Second

// defaultLogLevel is the library's: a host's stderr is not the agent's own.
const defaultLogLevel = "warn"

// sharedEngine is an embedded engine (or a sidecar child) and the handles
// using it.
type sharedEngine struct {
	cfg  Config
	refs int
	log  *zap.Logger
	// engine is set for embedded mode, child for sidecar.
	engine *hosting.Engine
	child  *sidecarChild
}

// acquireEngine returns the engine of cfg's settings, starting it for the
// first handle; the caller releases it with releaseEngine.
func (l *Library) acquireEngine(cfg Config, start func(*sharedEngine) error) (*sharedEngine, error) {
	l.engineMu.Lock()
	defer l.engineMu.Unlock()
	key := cfg.engineKey()
	if e := l.engines[key]; e != nil {
		if e.cfg.ApplicationVersion != cfg.ApplicationVersion || e.cfg.LogLevel != cfg.LogLevel ||
			e.cfg.AgentPath != cfg.AgentPath || e.cfg.RuntimeDir != cfg.RuntimeDir || e.cfg.OrphanGraceSec != cfg.OrphanGraceSec {
			return nil, errorf(ErrInvalid, "an open handle runs this engine (database_url, schema, executor_id) with another application_version, log_level, agent_path, runtime_dir or orphan_grace_sec: open it with the same ones")
		}
		e.refs++
		return e, nil
	}
	level := cfg.LogLevel
	if level == "" {
		level = defaultLogLevel
	}
	log, err := hosting.NewLogger(level)
	if err != nil {
		return nil, errorf(ErrInvalid, "config: %v", err)
	}
	e := &sharedEngine{cfg: cfg, refs: 1, log: log.With(zap.String("libdbos", cfg.Mode))}
	if err := start(e); err != nil {
		_ = log.Sync()
		return nil, err
	}
	l.engines[key] = e
	return e, nil
}

// releaseEngine drops a handle's reference; the last one stops the engine
// (draining as serve does on SIGTERM) and frees its pool.
func (l *Library) releaseEngine(e *sharedEngine) {
	l.engineMu.Lock()
	defer l.engineMu.Unlock()
	if e.refs--; e.refs > 0 {
		return
	}
	delete(l.engines, e.cfg.engineKey())
	if e.engine != nil {
		e.engine.Stop(context.Background())
	}
	if e.child != nil {
		e.child.stop()
	}
	_ = e.log.Sync()
}

func (l *Library) openEmbedded(cfg Config) (conn, error) {
	e, err := l.acquireEngine(cfg, func(e *sharedEngine) error {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		settings := agent.Config{
			ExecutorID:        cfg.ExecutorID,
			DefaultAppVersion: cfg.ApplicationVersion,
			AgentVersion:      Version,
		}
		if l.tune != nil {
			l.tune(&settings)
		}
		eng, err := hosting.Start(ctx, e.log, hosting.Options{
			DatabaseURL: cfg.DatabaseURL, Schema: cfg.Schema, Engine: settings,
		})
		if err != nil {
			return startError(err)
		}
		e.engine = eng
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := e.engine.Agent.NewSession(fmt.Sprintf("libdbos pid %d", os.Getpid()))
	c := &embeddedConn{lib: l, engine: e, session: s, in: newInbox()}
	go func() {
		c.in.pump(s.TakeOutbound)
		s.Close()
	}()
	return c, nil
}

// startError maps a failure to start an engine to its code: a config the
// database refuses to take is the caller's, anything else is unavailable.
func startError(err error) error {
	var ce *sysdb.ConfigError
	if errors.As(err, &ce) {
		return errorf(ErrInvalid, "config: %v", sysdb.Redact(err.Error()))
	}
	return errorf(ErrUnavailable, "the embedded agent could not start: %s", sysdb.Redact(err.Error()))
}

// embeddedConn is a session of an in-process engine.
type embeddedConn struct {
	lib     *Library
	engine  *sharedEngine
	session *agent.Session
	in      *inbox
}

func (c *embeddedConn) send(raw []byte) error {
	return eachFrame(raw, func(p []byte) error {
		select {
		case <-c.session.Done():
			return errClosed
		default:
		}
		if err := c.session.HandleFrame(p); err != nil {
			return errClosed
		}
		return nil
	})
}

func (c *embeddedConn) inbox() *inbox { return c.in }

func (c *embeddedConn) maxFrame() int {
	if n := c.session.MaxFrameSize(); n > 0 {
		return n
	}
	return protocol.DefaultMaxFrameSize
}

func (c *embeddedConn) close() {
	c.session.Close()
	c.in.close()
	<-c.in.ended
	c.lib.releaseEngine(c.engine)
}
