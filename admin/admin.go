// Package admin is the agent's admin HTTP server: liveness and readiness
// for load balancers and service managers, and the endpoints of DBOS's admin
// server (health, recovery, queue metadata, workflow listing and
// management) with DBOS's request and response shapes, over the engine's
// typed API. It is off unless the operator gives it an address.
package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/agent"
)

// Route is an extra endpoint mounted beside the built-in ones (for example
// /metrics).
type Route struct {
	// Pattern is an http.ServeMux pattern ("GET /metrics").
	Pattern string
	Handler http.Handler
	// Open serves the route without the token even when one is set (as
	// the health endpoints are).
	Open bool
}

// Config is what the admin handler serves.
type Config struct {
	Agent *agent.Agent
	// Token, when set, is the bearer token every endpoint but the health
	// ones requires.
	Token string
	// Pprof mounts net/http/pprof under /debug/pprof/.
	Pprof bool
	// Routes are extra endpoints.
	Routes []Route
	Logger *zap.Logger
}

// readinessTimeout bounds the database probe of a readiness check: a
// database that does not answer within it is not ready (the engine would
// otherwise retry it for as long as the agent's retry window).
const readinessTimeout = 2 * time.Second

// NewHandler is the admin server's handler.
func NewHandler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	h := &handler{agent: cfg.Agent, log: cfg.Logger}
	mux := http.NewServeMux()
	open := func(pattern string, fn http.HandlerFunc) { mux.Handle(pattern, fn) }
	guarded := func(pattern string, fn http.Handler) { mux.Handle(pattern, requireToken(cfg.Token, fn)) }

	open("GET /livez", h.livez)
	open("GET /readyz", h.readyz)
	open("GET /dbos-healthz", h.healthz)

	guarded("POST /dbos-workflow-recovery", http.HandlerFunc(h.recover))
	guarded("GET /deactivate", http.HandlerFunc(h.deactivate))
	guarded("GET /dbos-workflow-queues-metadata", http.HandlerFunc(h.queuesMetadata))
	guarded("POST /dbos-garbage-collect", http.HandlerFunc(h.garbageCollect))
	guarded("POST /dbos-global-timeout", http.HandlerFunc(h.globalTimeout))
	guarded("POST /workflows", http.HandlerFunc(h.listWorkflows))
	guarded("POST /queues", http.HandlerFunc(h.listQueued))
	guarded("GET /workflows/{id}", http.HandlerFunc(h.getWorkflow))
	guarded("GET /workflows/{id}/steps", http.HandlerFunc(h.steps))
	guarded("POST /workflows/{id}/cancel", http.HandlerFunc(h.cancel))
	guarded("POST /workflows/{id}/resume", http.HandlerFunc(h.resume))
	guarded("POST /workflows/{id}/restart", http.HandlerFunc(h.restart))
	guarded("POST /workflows/{id}/fork", http.HandlerFunc(h.fork))

	if cfg.Pprof {
		guarded("/debug/pprof/", http.HandlerFunc(pprof.Index))
		guarded("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
		guarded("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
		guarded("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
		guarded("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	}
	for _, r := range cfg.Routes {
		if r.Open {
			mux.Handle(r.Pattern, r.Handler)
		} else {
			guarded(r.Pattern, r.Handler)
		}
	}
	return mux
}

// requireToken refuses requests without the bearer token (when one is
// set) with 401, comparing in constant time.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dbos-agent admin"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "a bearer token is required (Authorization: Bearer <token>)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether a listen address (HOST:PORT) binds only the
// loopback interface. An empty host binds every interface; a host name other
// than localhost may resolve anywhere, so it counts as beyond loopback.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("admin address %q: %w (use HOST:PORT)", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// ErrTokenRequired is returned by Listen for an address beyond loopback
// without a token.
var ErrTokenRequired = errors.New("the admin server binds beyond loopback: it needs a bearer token (--admin-token-file or DBOS_AGENT_ADMIN_TOKEN)")

// Server is a listening admin server.
type Server struct {
	http *http.Server
	ln   net.Listener
	log  *zap.Logger
}

// Listen binds addr; an address beyond loopback without cfg.Token is
// refused (ErrTokenRequired), since the endpoints cancel and restart
// workflows.
func Listen(addr string, cfg Config) (*Server, error) {
	loopback, err := IsLoopback(addr)
	if err != nil {
		return nil, err
	}
	if !loopback && cfg.Token == "" {
		return nil, ErrTokenRequired
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin server: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{
		http: &http.Server{Handler: NewHandler(cfg), ReadHeaderTimeout: 10 * time.Second},
		ln:   ln, log: log,
	}, nil
}

// Addr is the address the server listens on (with the port chosen, when
// addr asked for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve() error {
	if err := s.http.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops taking connections and waits for requests in flight,
// until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }
