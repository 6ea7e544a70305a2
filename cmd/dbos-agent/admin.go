package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/admin"
	"github.com/dbos-agent/dbos-agent/admin/ui"
	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/metrics"
)

// adminOptions are serve's admin HTTP flags.
type adminOptions struct {
	addr, tokenFile string
	pprof           bool
	// token is read from tokenFile or DBOS_AGENT_ADMIN_TOKEN by resolve.
	token string
}

// adminShutdownTimeout bounds how long admin requests in flight may finish
// once the engine stopped.
const adminShutdownTimeout = 5 * time.Second

func (o *adminOptions) register(f *pflag.FlagSet) {
	f.StringVar(&o.addr, "admin-addr", "", "serve the admin HTTP endpoints (liveness /livez, readiness /readyz, Prometheus /metrics, the workflow dashboard /ui, and DBOS's admin endpoints) on HOST:PORT (default off); "+
		"beyond loopback it needs --admin-token-file")
	f.StringVar(&o.tokenFile, "admin-token-file", "", "file holding the admin bearer token (env DBOS_AGENT_ADMIN_TOKEN_FILE, or the token itself in DBOS_AGENT_ADMIN_TOKEN); "+
		"with a token every admin endpoint but /livez, /readyz and /dbos-healthz requires Authorization: Bearer <token>, reads included (workflow inputs and outputs are application data)")
	f.BoolVar(&o.pprof, "pprof", false, "mount net/http/pprof under /debug/pprof/ on the admin server (needs --admin-addr)")
}

// resolve reads the token and checks the flags go together.
func (o *adminOptions) resolve() error {
	if o.addr == "" {
		if o.pprof {
			return fmt.Errorf("--pprof is served on the admin server: give --admin-addr too")
		}
		return nil
	}
	file := firstNonEmpty(o.tokenFile, os.Getenv("DBOS_AGENT_ADMIN_TOKEN_FILE"))
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
		o.token = strings.TrimSpace(string(raw))
		if o.token == "" {
			return fmt.Errorf("admin token file %s is empty", file)
		}
		return o.checkToken()
	}
	o.token = strings.TrimSpace(os.Getenv("DBOS_AGENT_ADMIN_TOKEN"))
	return o.checkToken()
}

// checkToken refuses, before the database is opened, an address beyond
// loopback without a token.
func (o *adminOptions) checkToken() error {
	loopback, err := admin.IsLoopback(o.addr)
	if err != nil {
		return err
	}
	if !loopback && o.token == "" {
		return admin.ErrTokenRequired
	}
	return nil
}

// startAdmin binds the admin server when --admin-addr asks for it (nil
// server otherwise); Serve is the caller's.
func startAdmin(log *zap.Logger, a *agent.Agent, o adminOptions) (*admin.Server, error) {
	if o.addr == "" {
		return nil, nil
	}
	// Prometheus scrapes /metrics; behind the token like every read, since
	// queue names are application data.
	metricsRoute := admin.Route{Pattern: "GET /metrics", Handler: metrics.Handler(a)}
	s, err := admin.Listen(o.addr, admin.Config{Agent: a, Token: o.token, Pprof: o.pprof, Logger: log, Routes: append([]admin.Route{metricsRoute}, ui.Routes(a)...)})
	if err != nil {
		return nil, err
	}
	log.Info("admin HTTP listening", zap.String("addr", s.Addr()), zap.Bool("token", o.token != ""), zap.Bool("pprof", o.pprof))
	return s, nil
}

// stopAdmin lets admin requests in flight finish, within
// adminShutdownTimeout.
func stopAdmin(s *admin.Server) {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
	defer cancel()
	_ = s.Shutdown(ctx)
}
