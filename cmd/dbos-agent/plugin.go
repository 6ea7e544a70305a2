package main

import (
	"context"
	"errors"
	"io"
	stdlog "log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/internal/sidecar"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// defaultOrphanGrace is how long a sidecar child outlives its host's last
// heartbeat: long enough for a crashed host's successor to reattach, short
// enough that a child nobody comes back for does not hold its pool long.
const defaultOrphanGrace = 30 * time.Second

// pluginAgent is the child's lifecycle service (internal/sidecar).
type pluginAgent struct {
	info  sidecar.Info
	beats chan struct{}
}

func (p *pluginAgent) Info() (sidecar.Info, error) { return p.info, nil }

func (p *pluginAgent) Heartbeat() error {
	select {
	case p.beats <- struct{}{}:
	default: // one pending beat is as good as many
	}
	return nil
}

// runPlugin is `dbos-agent plugin`: serve's agent, started by libdbos.so's
// sidecar mode through hashicorp/go-plugin. Once its socket listens it
// answers go-plugin's handshake; it stops when the host stops it (go-plugin's
// Kill), on SIGTERM, or when no host has sent a heartbeat for orphanGrace
// (the host crashed and no successor reattached).
func runPlugin(ctx context.Context, log *zap.Logger, o serveOptions, orphanGrace time.Duration) error {
	if os.Getenv(sidecar.Handshake.MagicCookieKey) != sidecar.Handshake.MagicCookieValue {
		return errors.New("`dbos-agent plugin` is libdbos.so's sidecar child, started by the library: run `dbos-agent serve` instead")
	}
	if orphanGrace <= 0 {
		return errors.New("--orphan-grace must be positive")
	}
	// A crashed host leaves this child's stderr a broken pipe: a log line
	// must then fail, not kill the child (SIGPIPE) before a successor
	// reattaches.
	signal.Ignore(syscall.SIGPIPE)
	// go-plugin's net/rpc server reports a closed connection (a host that
	// went) through the standard logger, at debug level: not this agent's
	// log.
	stdlog.SetOutput(io.Discard)
	// The host's readiness is the host's to tell its service manager: a
	// sidecar inheriting $NOTIFY_SOCKET must not say READY=1 for it.
	_ = os.Unsetenv("NOTIFY_SOCKET")
	impl := &pluginAgent{beats: make(chan struct{}, 1), info: sidecar.Info{
		AgentVersion: version, ProtocolMin: protocol.MinVersion, ProtocolMax: protocol.Version,
		Socket: o.socket, PID: os.Getpid(), Key: os.Getenv(sidecar.EnvKey),
	}}
	o.listening = func(cancel context.CancelFunc) {
		quit := make(chan struct{})
		go func() {
			// Returns when the host quits it (go-plugin's Control.Quit).
			plugin.Serve(&plugin.ServeConfig{HandshakeConfig: sidecar.Handshake, Plugins: sidecar.Plugins(impl),
				Logger: hclog.New(&hclog.LoggerOptions{Name: "plugin", Output: os.Stderr, JSONFormat: true,
					Level: hclog.LevelFromString(log.Level().String())})})
			close(quit)
		}()
		go func() {
			timer := time.NewTimer(orphanGrace)
			defer timer.Stop()
			for {
				select {
				case <-impl.beats:
					timer.Reset(orphanGrace)
				case <-timer.C:
					log.Warn("no host has used this sidecar for its orphan grace period; stopping",
						zap.Duration("orphan_grace", orphanGrace))
					cancel()
					return
				case <-quit:
					log.Info("the host stopped its sidecar")
					cancel()
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return serve(ctx, log, o)
}
