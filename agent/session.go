package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// outboundQueue is how many frames may wait for a slow peer before sends
// block.
const outboundQueue = 1024

// sendTimeout is how long a frame may wait for a peer that does not read;
// past it the session is closed rather than stall the agent.
const sendTimeout = 30 * time.Second

// ErrSessionClosed is returned for sends on a closed session.
var ErrSessionClosed = errors.New("session closed")

// Session is one connection of an application process. The transport feeds
// it frames with HandleFrame and writes what Outbound yields.
type Session struct {
	agent *Agent
	id    string
	log   *zap.Logger

	out       chan []byte
	done      chan struct{}
	closeOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc

	// Set by the handshake, read-only afterwards.
	helloMu sync.Mutex
	hello   *protocol.Hello
	group   groupKey
	version uint32

	encoders sync.Pool

	// inflight holds the waits being handled, by id, so that
	// cancel_request can stop one.
	inflightMu sync.Mutex
	inflight   map[uint64]*inflightRequest
}

type inflightRequest struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// cancellableOps are the requests cancel_request can stop: the waits.
var cancellableOps = map[string]bool{
	protocol.OpGetResult:  true,
	protocol.OpRecv:       true,
	protocol.OpGetEvent:   true,
	protocol.OpReadStream: true,
}

// errRequestCancelled is why a request's context ended when the peer
// cancelled it.
var errRequestCancelled = errors.New("cancelled by the peer")

// track registers a request being handled.
func (s *Session) track(id uint64) *inflightRequest {
	ctx, cancel := context.WithCancelCause(s.ctx)
	r := &inflightRequest{ctx: ctx, cancel: cancel}
	s.inflightMu.Lock()
	s.inflight[id] = r
	s.inflightMu.Unlock()
	return r
}

func (s *Session) untrack(id uint64, r *inflightRequest) {
	s.inflightMu.Lock()
	if s.inflight[id] == r {
		delete(s.inflight, id)
	}
	s.inflightMu.Unlock()
	r.cancel(nil)
}

// requestContext is the context of request id: it ends when the peer
// cancels the request or the session closes. Waits use it.
func (s *Session) requestContext(id uint64) context.Context {
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	if r := s.inflight[id]; r != nil {
		return r.ctx
	}
	return s.ctx
}

// cancelRequest stops request id, if it is still in flight.
func (s *Session) cancelRequest(id uint64) {
	s.inflightMu.Lock()
	r := s.inflight[id]
	s.inflightMu.Unlock()
	if r != nil {
		r.cancel(errRequestCancelled)
	}
}

// NewSession starts a session for a new connection. label names the peer in
// logs (for instance its pid).
func (a *Agent) NewSession(label string) *Session {
	ctx, cancel := context.WithCancel(a.ctx)
	s := &Session{
		agent:  a,
		id:     newToken(),
		out:    make(chan []byte, outboundQueue),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,

		inflight: map[uint64]*inflightRequest{},
	}
	s.log = a.log.With(zap.String("session", s.id[:8]), zap.String("peer", label))
	s.encoders.New = func() any { return protocol.NewEncoder() }
	a.mu.Lock()
	a.sessions[s] = struct{}{}
	a.mu.Unlock()
	return s
}

// Outbound yields the frames to write to the peer, each with its length
// prefix. It is never closed: writers stop at Done (after writing what is
// still queued, if they can).
func (s *Session) Outbound() <-chan []byte { return s.out }

// Done is closed when the session closes.
func (s *Session) Done() <-chan struct{} { return s.done }

// MaxFrameSize is the largest frame the session accepts.
func (s *Session) MaxFrameSize() int { return s.agent.cfg.MaxFrameSize }

// Close ends the session: in-flight requests are abandoned and the runs of
// a worker go back to their queues for another worker. Idempotent.
func (s *Session) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.cancel()
		a := s.agent
		a.mu.Lock()
		delete(a.sessions, s)
		var runs []*run
		if s.isWorker() {
			runs = a.removeWorkerLocked(s)
		}
		a.mu.Unlock()
		s.log.Debug("session closed", zap.Int("runs_handed_back", len(runs)))
		if len(runs) > 0 {
			claims := make([]sysdb.WorkflowClaim, len(runs))
			for i, r := range runs {
				claims[i] = sysdb.WorkflowClaim{WorkflowID: r.workflowID, OwnerXID: r.ownerXID}
			}
			// The agent's context, not the session's: the hand-back must
			// happen although the session is gone.
			ids, err := a.db.WorkflowRequeue(context.WithoutCancel(a.ctx), claims)
			if err != nil {
				s.log.Error("could not hand a closed worker's workflows back; agent restart recovers them", zap.Error(err))
			} else if len(ids) > 0 {
				s.log.Info("worker left; its workflows go to another worker", zap.Int("count", len(ids)))
				for _, r := range runs {
					a.wakeQueue(r.queue)
				}
			}
		}
	})
}

func (s *Session) isWorker() bool {
	s.helloMu.Lock()
	defer s.helloMu.Unlock()
	return s.hello != nil && s.hello.Role == protocol.RoleWorker
}

func (s *Session) handshaken() (*protocol.Hello, groupKey) {
	s.helloMu.Lock()
	defer s.helloMu.Unlock()
	return s.hello, s.group
}

// send queues a frame (copied) for the peer.
func (s *Session) send(frame []byte) error {
	buf := make([]byte, len(frame))
	copy(buf, frame)
	select {
	case <-s.done:
		return ErrSessionClosed
	default:
	}
	select {
	case s.out <- buf:
		return nil
	case <-s.done:
		return ErrSessionClosed
	case <-time.After(sendTimeout):
		s.log.Warn("peer does not read its frames; closing the session")
		go s.Close()
		return ErrSessionClosed
	}
}

func (s *Session) push(op string, body any) error {
	enc := s.encoders.Get().(*protocol.Encoder)
	defer s.encoders.Put(enc)
	frame, err := enc.Push(op, body)
	if err != nil {
		return err
	}
	return s.send(frame)
}

func (s *Session) reply(id uint64, body any, perr *protocol.Error) {
	enc := s.encoders.Get().(*protocol.Encoder)
	defer s.encoders.Put(enc)
	var frame []byte
	var err error
	if perr != nil {
		frame, err = enc.ErrorResponse(id, perr)
	} else {
		if body == nil {
			body = protocol.Empty{}
		}
		frame, err = enc.Response(id, body)
	}
	if err != nil {
		s.log.Error("could not encode a reply", zap.Error(err))
		frame, _ = enc.ErrorResponse(id, protocol.Errorf(protocol.CodeInternal, "could not encode the reply"))
	}
	_ = s.send(frame)
}

// HandleFrame processes one frame body from the peer. The frame may be
// reused by the caller once HandleFrame returns. It returns an error only
// when the connection must close (the error has been sent to the peer when
// possible).
func (s *Session) HandleFrame(frame []byte) error {
	body := make([]byte, len(frame))
	copy(body, frame)
	env, err := protocol.DecodeEnvelope(body)
	if err != nil {
		// A request whose id could be read is answered with it, so that it
		// fails now rather than at its caller's timeout. Otherwise id 0
		// says the error is about the connection: the id is unknown, or
		// the frame is a response or push, whose id names no request of
		// the peer.
		id := env.ID
		if env.Kind != protocol.KindRequest && env.Kind != 0 {
			id = 0
		}
		s.reply(id, nil, protocol.Errorf(protocol.CodeMalformedFrame, "%v", err))
		return nil
	}
	if env.Kind != protocol.KindRequest {
		// Responses and pushes are the agent's to send: it sends no
		// requests in version 1, so no response is awaited, and pushes
		// go one way. Refused on the connection, not dropped silently.
		s.reply(0, nil, protocol.Errorf(protocol.CodeMalformedFrame,
			"a peer sends only requests (kind 1); kind %d is the agent's to send in protocol version 1", env.Kind))
		return nil
	}
	hello, _ := s.handshaken()
	if env.Op == protocol.OpHello {
		if hello != nil {
			s.reply(env.ID, nil, protocol.Errorf(protocol.CodeHandshakeNeeded, "hello was already received"))
			return nil
		}
		return s.handleHello(env)
	}
	if hello == nil {
		s.reply(env.ID, nil, protocol.Errorf(protocol.CodeHandshakeNeeded, "the first request must be hello"))
		return nil
	}
	if env.Op == protocol.OpCancelRequest {
		// Answered in order, before any later frame: the request it names
		// was registered when its own frame was read.
		var m protocol.CancelRequest
		if perr := decode(env, &m); perr != nil {
			s.reply(env.ID, nil, perr)
			return nil
		}
		s.cancelRequest(m.RequestID)
		s.reply(env.ID, protocol.Empty{}, nil)
		return nil
	}
	handler, ok := handlers[env.Op]
	if !ok {
		s.reply(env.ID, nil, protocol.Errorf(protocol.CodeUnknownOp, "unknown op %q", env.Op))
		return nil
	}
	select {
	case <-s.done:
		return ErrSessionClosed
	default:
	}
	// Requests run concurrently: many may be in flight on one connection.
	// Only waits can be cancelled, so only they pay for a context of their
	// own (a step checkpoint does not).
	var req *inflightRequest
	if cancellableOps[env.Op] {
		req = s.track(env.ID)
	}
	go func() {
		if req != nil {
			defer s.untrack(env.ID, req)
		}
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("request handler panicked", zap.String("op", env.Op), zap.Any("panic", r))
				s.reply(env.ID, nil, protocol.Errorf(protocol.CodeInternal, "the agent failed handling %s", env.Op))
			}
		}()
		body, perr := handler(s, env)
		if perr != nil && req != nil && errors.Is(context.Cause(req.ctx), errRequestCancelled) {
			// It failed because the peer gave up on it; a request that
			// finished anyway answers as it would have.
			perr = protocol.Errorf(protocol.CodeRequestCancelled, "%s was cancelled by the peer", env.Op)
		}
		s.reply(env.ID, body, perr)
	}()
	return nil
}

// handleHello opens the session. The hello is checked whole (every field,
// every registration, the counts: protocol's Hello.Validate) before
// anything is written, so a bad one leaves the shared tables as they were.
func (s *Session) handleHello(env protocol.Envelope) error {
	a := s.agent
	var h protocol.Hello
	if err := protocol.DecodeBody(env.Body, &h); err != nil {
		s.reply(env.ID, nil, protocol.Errorf(protocol.CodeInvalidArgument, "hello: %v", err))
		return nil
	}
	// The version comes first: a peer of another protocol version may
	// send fields this one reads otherwise.
	version, ok := protocol.NegotiateVersion(h.MinVersion, h.MaxVersion)
	if !ok {
		s.reply(env.ID, nil, protocol.Errorf(protocol.CodeVersionMismatch,
			"the agent speaks protocol versions %d to %d, the peer %d to %d", protocol.MinVersion, protocol.Version, h.MinVersion, h.MaxVersion))
		return fmt.Errorf("no common protocol version")
	}
	if err := h.Validate(env.Op); err != nil {
		s.reply(env.ID, nil, protocol.Errorf(protocol.CodeInvalidArgument, "%v", err))
		return nil
	}
	if h.Role == "" {
		h.Role = protocol.RoleClient
	}
	if h.AppVersion == "" {
		h.AppVersion = a.cfg.DefaultAppVersion
	}
	var w *worker
	if h.Role == protocol.RoleWorker {
		if a.draining.Load() {
			s.reply(env.ID, nil, protocol.Errorf(protocol.CodeShuttingDown, "the agent is shutting down"))
			return nil
		}
		w = &worker{
			session:        s,
			functions:      make(map[string]protocol.WorkflowRegistration, len(h.Workflows)),
			queues:         make(map[string]protocol.QueueRegistration, len(h.Queues)),
			maxConcurrency: h.MaxConcurrency,
			running:        map[string]*run{},
		}
		for _, f := range h.Workflows {
			w.functions[f.Name] = f
		}
		for _, q := range h.Queues {
			w.queues[q.Name] = q
		}
		if perr := a.registerQueues(s.ctx, h.AppName, h.Queues); perr != nil {
			perr.Message = "hello: " + perr.Message
			s.reply(env.ID, nil, perr)
			return nil
		}
		// A worker announces its application version: the first of it
		// becomes the latest, which unversioned work follows.
		if h.AppVersion != "" {
			err := a.db.VersionRegister(s.ctx, h.AppVersion, optional(h.AppName))
			var owned *sysdb.NameOwnedError
			switch {
			case errors.As(err, &owned):
				// Version names are unique across applications in the
				// DBOS schema: this one's versions cannot be tracked, but
				// its workflows run all the same.
				s.log.Warn("application version name taken by another application; not registered", zap.Error(err))
			case err != nil:
				s.reply(env.ID, nil, protocolError(s, env.Op, err))
				return nil
			}
		} else if latest, found, err := a.db.VersionLatest(s.ctx, optional(h.AppName)); err == nil && found {
			// No version is never the latest (PROTOCOL.md 2.13): such a
			// worker runs only what it starts itself.
			s.log.Warn("a worker without an application version takes no queued unversioned work while its application has versions; give it one",
				zap.String("app", h.AppName), zap.String("latest_version", latest.Name))
		}
	}
	s.helloMu.Lock()
	s.hello = &h
	s.group = groupKey{app: h.AppName, version: h.AppVersion}
	s.version = version
	s.helloMu.Unlock()
	s.log = s.log.With(zap.String("app", h.AppName), zap.String("app_version", h.AppVersion), zap.String("role", h.Role))
	if w != nil {
		a.mu.Lock()
		a.addWorkerLocked(s, w)
		a.mu.Unlock()
	}
	s.log.Debug("session opened", zap.Int("workflows", len(h.Workflows)), zap.Int("queues", len(h.Queues)))
	s.reply(env.ID, &protocol.HelloReply{
		Version:      version,
		AgentVersion: a.cfg.AgentVersion,
		MaxFrameSize: uint32(a.cfg.MaxFrameSize),
		SessionID:    s.id,
		ExecutorID:   a.cfg.ExecutorID,
		AppVersion:   h.AppVersion,
	}, nil)
	return nil
}
