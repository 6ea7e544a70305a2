package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The defaults of the per-session bounds (Config). Together they cap what one
// peer that sends requests and never reads its replies can make the agent
// hold: DefaultMaxRunning replies made and waiting for room (and up to
// DefaultMaxInFlight parked waits), and DefaultMaxOutboundBytes of frames
// (twice that with pushes) queued for it, until DefaultStallTimeout without
// progress closes the session.
const (
	// DefaultMaxInFlight is high enough for a process with two thousand
	// waits at once (a wait holds its place): a thousand workflows each in
	// a wait and a parent awaiting each of them, DBOS's gather of
	// get_result, which at 1024 left the children a few places to share
	// and took minutes. Low enough that a flood of waits parks a few tens
	// of MiB of goroutines at most.
	DefaultMaxInFlight = 4096
	// DefaultMaxRunning bounds the requests other than waits: they end by
	// themselves, but each holds its reply until there is room for it, and
	// a reply (list_workflows) can be large. 128 keeps a connection's step
	// checkpoints batching well.
	DefaultMaxRunning = 128
	// DefaultMaxOutboundBytes is one maximum-size frame: a peer that leaves
	// that much unread is not keeping up, and a larger frame still goes
	// out, alone.
	DefaultMaxOutboundBytes = 16 << 20
	// DefaultStallTimeout is how long a peer may read nothing of what it is
	// sent before its session is closed.
	DefaultStallTimeout = 30 * time.Second
)

// ErrSessionClosed is returned for sends on a closed session.
var ErrSessionClosed = errors.New("session closed")

// Session is one connection of an application process. The transport feeds
// it frames with HandleFrame and writes what Outbound yields.
type Session struct {
	agent *Agent
	id    string
	log   *zap.Logger

	done      chan struct{}
	closeOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc

	// slots bounds the requests being handled (Config.MaxInFlight): the
	// read loop takes one before it dispatches a request, so a peer at the
	// bound is no longer read from.
	slots chan struct{}
	// running bounds the requests other than waits among them
	// (Config.MaxRunning). Those end without the peer's help, so the read
	// loop may wait for one whatever the peer does next; a wait may need
	// a later request of the peer (a send), so only the larger bound,
	// which bindings respect, holds waits.
	running chan struct{}
	// throttled is closed the first time the peer reaches the bound (it is
	// logged then, once).
	throttled    chan struct{}
	throttleOnce sync.Once

	// The outbound queue: frames back to back, with their length prefixes,
	// bounded in bytes (see send). TakeOutbound copies them out.
	outMu  sync.Mutex
	outBuf byteQueue
	// outTaken is what the writer took last; it counts against the bound
	// until the writer comes back for more (it is then written).
	outTaken int
	// outProgress is when the writer last came back, or when a frame came
	// to a queue with nothing in it, taken or not (a writer with nothing to
	// write is not late).
	outProgress time.Time
	// outWaiters are the senders waiting for room; outRoom is closed (and
	// replaced) to wake them.
	outWaiters int
	outRoom    chan struct{}
	// outReady wakes the writer when the queue goes from empty to not.
	outReady chan struct{}
	// outFull is closed the first time a frame finds the queue at its
	// bound: it waits for room, or the writer has already made no
	// progress for the stall timeout and the session closes (it is logged
	// then, once).
	outFull     chan struct{}
	outFullOnce sync.Once
	stallOnce   sync.Once

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
	ctx, cancel := context.WithCancel(a.sup.ctx)
	s := &Session{
		agent:  a,
		id:     newToken(),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,

		slots:       make(chan struct{}, a.cfg.MaxInFlight),
		running:     make(chan struct{}, min(a.cfg.MaxRunning, a.cfg.MaxInFlight)),
		throttled:   make(chan struct{}),
		outRoom:     make(chan struct{}),
		outReady:    make(chan struct{}, 1),
		outFull:     make(chan struct{}),
		outProgress: time.Now(),

		inflight: map[uint64]*inflightRequest{},
	}
	s.log = a.log.With(zap.String("session", s.id[:8]), zap.String("peer", label))
	s.encoders.New = func() any { return protocol.NewEncoder() }
	a.mu.Lock()
	a.sessions[s] = struct{}{}
	a.mu.Unlock()
	return s
}

// TakeOutbound copies frames queued for the peer into buf (whole frames
// with their length prefixes, a frame larger than buf in parts), waiting
// until there are some. Coming back for more says the previous bytes were
// written: until then they count against the session's bound. After the
// session closes it returns what is still queued, then ErrSessionClosed.
// One writer calls it at a time.
func (s *Session) TakeOutbound(buf []byte) (int, error) {
	for {
		s.outMu.Lock()
		freed := s.outTaken > 0
		s.outTaken = 0
		n := s.outBuf.read(buf)
		s.outTaken = n
		if freed || n > 0 {
			s.outProgress = time.Now()
			if s.outWaiters > 0 {
				close(s.outRoom)
				s.outRoom = make(chan struct{})
			}
		}
		s.outMu.Unlock()
		if n > 0 {
			return n, nil
		}
		select {
		case <-s.done:
			s.outMu.Lock()
			empty := s.outBuf.len() == 0
			s.outMu.Unlock()
			if empty {
				return 0, ErrSessionClosed
			}
		case <-s.outReady:
		}
	}
}

// Done is closed when the session closes.
func (s *Session) Done() <-chan struct{} { return s.done }

// MaxFrameSize is the largest frame the session accepts.
func (s *Session) MaxFrameSize() int { return s.agent.cfg.MaxFrameSize }

// StallTimeout is how long a write to the peer may make no progress before
// the transport closes the session.
func (s *Session) StallTimeout() time.Duration { return s.agent.cfg.StallTimeout }

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
			a.handBack(s.log, runs)
		}
		if s.hitBounds() {
			a.releaseMemorySoon()
		}
	})
}

// hitBounds reports whether the peer ever reached its in-flight bound or
// filled its outbound queue: then it made the agent hold memory worth
// returning once it is gone.
func (s *Session) hitBounds() bool {
	for _, ch := range []chan struct{}{s.throttled, s.outFull} {
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}

// handBack returns a closed worker's runs to their queues, in the
// background: through an outage it keeps retrying until the database
// returns or shutdown's hard deadline. Should it give up, the rows stay
// PENDING under tokens of this agent, and the rescuer takes them back
// later (or the next start's recovery).
func (a *Agent) handBack(log *zap.Logger, runs []*run) {
	claims := make([]sysdb.WorkflowClaim, len(runs))
	for i, r := range runs {
		claims[i] = sysdb.WorkflowClaim{WorkflowID: r.workflowID, OwnerXID: r.ownerXID}
	}
	started := a.sup.goFn("hand-back", func() {
		backoff := 100 * time.Millisecond
		for {
			// Not the session's context (it is gone) nor the services'
			// (a hand-back outlives the start of a shutdown).
			ids, err := a.db.WorkflowRequeue(a.handbackCtx, claims)
			if err == nil {
				if len(ids) > 0 {
					log.Info("worker left; its workflows go to another worker", zap.Int("count", len(ids)))
					for _, r := range runs {
						a.wakeQueue(r.queue)
					}
				}
				return
			}
			if a.handbackCtx.Err() != nil {
				log.Warn("shutting down before a closed worker's workflows could be handed back; the next start recovers them",
					zap.Int("count", len(claims)), zap.Error(err))
				return
			}
			log.Warn("could not hand a closed worker's workflows back yet; retrying", zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-a.handbackCtx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 30*time.Second)
		}
	})
	if !started {
		log.Warn("the agent stopped before a closed worker's workflows could be handed back; the next start recovers them",
			zap.Int("count", len(claims)))
	}
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

// send queues a frame (copied) for the peer. The queue is bounded in bytes
// (Config.MaxOutboundBytes), whatever the frames' number, since a
// list_workflows reply can be large. A frame always goes into an empty
// queue (so one larger than the bound goes, alone); otherwise it waits for
// room, and if the writer makes no progress for the stall timeout
// meanwhile, the session closes and the frame is not sent (a worker's close
// hands its runs back to their queues, a pushed one included: nothing is
// dropped silently).
//
// A reply waits while the queue holds the bound: its request keeps its place
// meanwhile, so a peer that does not read is soon no longer read from
// either. A push (run, cancel) comes from the engine, a queue's dispatch or a
// cancellation, which should not wait for one slow peer: it may take as much
// room again before it waits. A worker that reads keeps up with a burst of
// dispatches within that; one that does not holds its queue's dispatch up
// for at most the stall timeout, then is disconnected.
func (s *Session) send(frame []byte, push bool) error {
	limit := s.agent.cfg.MaxOutboundBytes
	if push {
		limit *= 2
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-s.done:
			return ErrSessionClosed
		default:
		}
		s.outMu.Lock()
		queued := s.outBuf.len() + s.outTaken
		if s.queueLocked(frame, queued, limit) {
			s.outMu.Unlock()
			return nil
		}
		wait := s.agent.cfg.StallTimeout - time.Since(s.outProgress)
		if wait <= 0 {
			s.outMu.Unlock()
			// The writer took its last bytes longer than the stall
			// timeout ago, before the queue filled: the frame does not
			// wait, but the queue did reach its bound.
			s.markOutFull(queued)
			// Every sender waiting finds this at once: one says it.
			s.stallOnce.Do(func() {
				s.log.Warn("peer does not read what it is sent; closing the session",
					zap.Int("queued_bytes", queued), zap.Duration("stall_timeout", s.agent.cfg.StallTimeout))
				s.agent.sup.goFn("session close", s.Close)
			})
			return ErrSessionClosed
		}
		s.outWaiters++
		room := s.outRoom
		s.outMu.Unlock()
		s.markOutFull(queued)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-room:
		case <-s.done:
		case <-timer.C: // the loop checks the writer's progress again
		}
		s.outMu.Lock()
		s.outWaiters--
		s.outMu.Unlock()
	}
}

// queueLocked queues frame if the out-queue (queued bytes) has room for it
// under limit; an empty queue takes any frame. Called with outMu held.
func (s *Session) queueLocked(frame []byte, queued, limit int) bool {
	if queued != 0 && queued+len(frame) > limit {
		return false
	}
	if queued == 0 {
		// The writer was not late: it had nothing to write.
		s.outProgress = time.Now()
	}
	if s.outBuf.len() == 0 {
		select {
		case s.outReady <- struct{}{}:
		default:
		}
	}
	s.outBuf.write(frame)
	s.agent.counters.framesOut.Add(1)
	s.agent.counters.bytesOut.Add(uint64(len(frame)))
	return true
}

// offer queues a reply if there is room for it now, never waiting; false
// when it would have to wait (then send it with send). A closed session
// takes it, as send would, and drops it.
func (s *Session) offer(frame []byte) bool {
	select {
	case <-s.done:
		return true
	default:
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.queueLocked(frame, s.outBuf.len()+s.outTaken, s.agent.cfg.MaxOutboundBytes)
}

// markOutFull closes outFull the first time a frame finds the queue at its
// bound, whether it then waits for room or the session closes for a stall.
func (s *Session) markOutFull(queued int) {
	s.outFullOnce.Do(func() {
		s.log.Debug("peer does not keep up with what it is sent; frames wait for room",
			zap.Int("queued_bytes", queued), zap.Int("max_outbound_bytes", s.agent.cfg.MaxOutboundBytes))
		close(s.outFull)
	})
}

func (s *Session) push(op string, body any) error {
	enc := s.encoders.Get().(*protocol.Encoder)
	defer s.encoders.Put(enc)
	frame, err := enc.Push(op, body)
	if err != nil {
		return err
	}
	return s.send(frame, true)
}

func (s *Session) reply(id uint64, body any, perr *protocol.Error) {
	s.withReply(id, body, perr, func(frame []byte) { _ = s.send(frame, false) })
}

// withReply calls use with the frame of a reply: body, or perr when it is
// set (counted by its code). The frame is the encoder's, valid only during
// use.
func (s *Session) withReply(id uint64, body any, perr *protocol.Error, use func(frame []byte)) {
	enc := s.encoders.Get().(*protocol.Encoder)
	defer s.encoders.Put(enc)
	var frame []byte
	var err error
	if perr != nil {
		s.agent.counters.countError(perr.Code)
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
	use(frame)
}

// errorReply is err's protocol error for op, or nil for no error.
func (s *Session) errorReply(op string, err error) *protocol.Error {
	if err == nil {
		return nil
	}
	return s.protocolError(op, err)
}

// HandleFrame processes one frame body from the peer. The frame may be
// reused by the caller once HandleFrame returns. It returns an error only
// when the connection must close (the error has been sent to the peer when
// possible).
func (s *Session) HandleFrame(frame []byte) error {
	read := time.Now()
	s.agent.counters.framesIn.Add(1)
	s.agent.counters.bytesIn.Add(uint64(len(frame)))
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
		if err := decode(env, &m); err != nil {
			s.reply(env.ID, nil, s.protocolError(env.Op, err))
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
	// Requests run concurrently, at most MaxInFlight of them, and of those
	// at most MaxRunning that are not waits: at a bound this waits, and so
	// does the reading of this peer's frames, until a reply is queued.
	// Only waits can be cancelled, so only they pay for a context of their
	// own (a step checkpoint does not).
	wait := cancellableOps[env.Op]
	if !wait {
		if err := s.acquire(s.running); err != nil {
			return err
		}
	}
	if err := s.acquire(s.slots); err != nil {
		if !wait {
			<-s.running
		}
		return err
	}
	release := func() {
		<-s.slots
		if !wait {
			<-s.running
		}
	}
	select {
	case <-s.done:
		release()
		return ErrSessionClosed
	default:
	}
	if env.Op == protocol.OpRecordStep {
		s.recordStep(env, read, release)
		return nil
	}
	var req *inflightRequest
	if wait {
		req = s.track(env.ID)
	}
	started := s.agent.sup.goFn("request", func() {
		defer release()
		if req != nil {
			defer s.untrack(env.ID, req)
		}
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("request handler panicked", zap.String("op", env.Op), zap.Any("panic", r))
				s.reply(env.ID, nil, protocol.Errorf(protocol.CodeInternal, "the agent failed handling %s", env.Op))
			}
		}()
		body, err := handler(s, env)
		var perr *protocol.Error
		switch {
		case err == nil:
		case req != nil && errors.Is(context.Cause(req.ctx), errRequestCancelled):
			// It failed because the peer gave up on it; a request that
			// finished anyway answers as it would have.
			perr = protocol.Errorf(protocol.CodeRequestCancelled, "%s was cancelled by the peer", env.Op)
		default:
			perr = s.protocolError(env.Op, err)
		}
		s.reply(env.ID, body, perr)
		s.agent.requestStats.observe(env.Op, time.Since(read))
	})
	if !started {
		if req != nil {
			s.untrack(env.ID, req)
		}
		s.reply(env.ID, nil, protocol.Errorf(protocol.CodeShuttingDown, "the agent is shutting down"))
		release()
	}
	return nil
}

// recordStep answers record_step, the hot path, without a goroutine of its
// own: the record is decoded here and queued for a commit, and the commit
// that makes it durable queues the reply (see Agent.RecordStepThen). A
// reply that finds the out-queue full must wait for room, which a commit
// shared by every session cannot: that one is sent from a goroutine of its
// own. release frees the request's places once its reply is queued, as for
// any request.
func (s *Session) recordStep(env protocol.Envelope, read time.Time, release func()) {
	answered := func() {
		s.agent.requestStats.observe(env.Op, time.Since(read))
		release()
	}
	var m protocol.RecordStep
	err := decode(env, &m)
	if err == nil {
		err = s.agent.RecordStepThen(s.ctx, s.caller(), RecordStepParams{
			WorkflowID: m.WorkflowID, OwnerXID: m.OwnerXID, FunctionID: m.FunctionID, Name: m.Name,
			Output: m.Output, Error: m.Error, Serialization: m.Serialization, ChildWorkflowID: m.ChildWorkflowID,
			StartedAt: epochMillis(m.StartedAtMS), CompletedAt: epochMillis(m.CompletedAtMS),
		}, func(err error) {
			s.withReply(env.ID, protocol.Empty{}, s.errorReply(env.Op, err), func(frame []byte) {
				if s.offer(frame) {
					answered()
					return
				}
				frame = bytes.Clone(frame)
				if !s.agent.sup.goFn("record_step reply", func() {
					_ = s.send(frame, false)
					answered()
				}) {
					answered() // shutting down: the session closes with the agent
				}
			})
		})
	}
	if err != nil {
		s.reply(env.ID, nil, s.protocolError(env.Op, err))
		answered()
	}
}

// acquire takes a place in sem, waiting for one while the session is open.
func (s *Session) acquire(sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	s.throttleOnce.Do(func() {
		s.log.Debug("peer has the most requests in flight; reading from it waits for replies",
			zap.Int("max_in_flight", cap(s.slots)), zap.Int("max_running", cap(s.running)))
		close(s.throttled)
	})
	select {
	case sem <- struct{}{}:
		return nil
	case <-s.done:
		return ErrSessionClosed
	}
}

// handleHello opens the session. The hello is checked whole (every field,
// every registration, the counts: protocol's Hello.Validate) before
// anything is written, so a bad one leaves the shared tables as they were.
func (s *Session) handleHello(env protocol.Envelope) error {
	a := s.agent
	var h protocol.Hello
	if err := protocol.DecodeBody(env.Body, &h); err != nil {
		s.reply(env.ID, nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s", bodyError(env.Op, err)))
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
		if err := a.refuseWhileDraining(); err != nil {
			s.reply(env.ID, nil, s.protocolError(env.Op, err))
			return nil
		}
		w = newWorker(s, &h)
		if err := a.registerQueues(s.ctx, h.AppName, h.Queues); err != nil {
			perr := s.protocolError(env.Op, err)
			perr.Message = "hello: " + perr.Message
			s.reply(env.ID, nil, perr)
			return nil
		}
		if err := a.announceVersion(s.ctx, s.log, h.AppName, h.AppVersion); err != nil {
			s.reply(env.ID, nil, s.protocolError(env.Op, err))
			return nil
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
	s.log.Debug("session opened", zap.Int("workflows", len(h.Workflows)), zap.Int("queues", len(h.Queues)),
		zap.Int("max_concurrency", h.MaxConcurrency))
	s.reply(env.ID, &protocol.HelloReply{
		Version:      version,
		AgentVersion: a.cfg.AgentVersion,
		MaxFrameSize: uint32(a.cfg.MaxFrameSize),
		SessionID:    s.id,
		ExecutorID:   a.cfg.ExecutorID,
		AppVersion:   h.AppVersion,
		MaxInFlight:  uint32(a.cfg.MaxInFlight),
	}, nil)
	return nil
}
