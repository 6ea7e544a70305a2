// Package server is the agent's Unix-socket transport: it owns the socket
// file, checks each peer's credentials, reads frames into an agent session
// and writes the session's frames back.
package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/peercred"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// Config configures a Server.
type Config struct {
	SocketPath string
	Agent      *agent.Agent
	// AllowedUIDs may connect besides the agent's own user and root.
	AllowedUIDs []uint32
	// MaxConnections bounds the sessions served at once (default
	// DefaultMaxConnections); MaxConnectionsPerUID those of one user
	// (default: MaxConnections, i.e. no bound of its own). A connection
	// past either is refused with resource_exhausted.
	MaxConnections       int
	MaxConnectionsPerUID int
	Logger               *zap.Logger
}

// DefaultMaxConnections is far more processes than one host runs against
// one agent, and few enough that each can hold its per-session bounds.
const DefaultMaxConnections = 1024

const (
	// writeChunk is the most written to a peer in one call: a peer must
	// take that much every stall timeout to be making progress.
	writeChunk = 64 << 10
	// drainTimeout is how long the frames queued before a session closed
	// (the reply that made it close, for instance) may take to go out.
	drainTimeout = time.Second
)

// Server accepts connections on a Unix socket.
type Server struct {
	cfg      Config
	ln       *net.UnixListener
	log      *zap.Logger
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	allowUID map[uint32]bool
	// sessions counts the connections being served, all and by uid
	// (guarded by mu); refused counts those refused since the last log of
	// a refusal, which is at most one a second.
	sessions      int
	sessionsByUID map[uint32]int
	refused       int
	refusedLogged time.Time
}

// ErrSocketInUse says another live process listens on the socket path.
var ErrSocketInUse = errors.New("socket path is in use by a running process")

// Listen creates the socket (mode 0600) at cfg.SocketPath, in a directory
// only the agent's user may write (see PrepareSocketPath; it is created
// 0700 when missing). A stale socket file left by a dead agent is replaced;
// a live one is an error.
func Listen(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	// Listen where the checks were made, even if a symlink on the way
	// were to change later.
	path, err := PrepareSocketPath(cfg.SocketPath)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		// An existing socket of this user (PrepareSocketPath checked it).
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", path, ErrSocketInUse)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	// The umask makes the socket 0600 from the moment it exists, so no
	// other user can connect in the window before a chmod.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	allow := map[uint32]bool{0: true, uint32(os.Getuid()): true}
	for _, u := range cfg.AllowedUIDs {
		allow[u] = true
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxConnectionsPerUID <= 0 || cfg.MaxConnectionsPerUID > cfg.MaxConnections {
		cfg.MaxConnectionsPerUID = cfg.MaxConnections
	}
	return &Server{cfg: cfg, ln: ln, log: cfg.Logger, conns: map[net.Conn]struct{}{}, allowUID: allow,
		sessionsByUID: map[uint32]int{}}, nil
}

// Addr is the socket path.
func (s *Server) Addr() string { return s.cfg.SocketPath }

// Serve accepts connections until Close.
func (s *Server) Serve() error {
	var backoff time.Duration
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if acceptRetryable(err) {
				// Out of file descriptors, or a peer gone before its
				// accept: the listener is fine, and connections that close
				// free what the next accept needs.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", zap.Error(err), zap.Duration("retry_in", backoff))
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		backoff = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return nil
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
	}
}

func acceptRetryable(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED)
}

// Close stops accepting, closes every connection and removes the socket.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close() // also removes the socket file
	s.wg.Wait()
}

func (s *Server) serveConn(conn *net.UnixConn) {
	defer conn.Close()
	cred, err := peercred.Of(conn)
	if err != nil {
		s.log.Warn("could not read peer credentials; refusing", zap.Error(err))
		return
	}
	label := "pid " + strconv.Itoa(int(cred.Pid))
	if !s.allowUID[cred.Uid] {
		s.log.Warn("refusing a peer of another user", zap.Uint32("uid", cred.Uid), zap.Int32("pid", cred.Pid))
		refuse(conn, protocol.Errorf(protocol.CodePermissionDenied, "uid %d may not use this agent", cred.Uid))
		return
	}
	if perr := s.admit(cred); perr != nil {
		refuse(conn, perr)
		return
	}
	// The connection's place is free before its session is gone: once the
	// agent counts one session less, another connection is admitted.
	release := sync.OnceFunc(func() { s.release(cred.Uid) })
	defer release()
	session := s.cfg.Agent.NewSession(label)
	defer session.Close()

	// The reader sets a deadline while a frame is half read; once the
	// session is over the writer ends any read at once. readDeadlineMu
	// keeps the reader from clearing the writer's deadline.
	var readDeadlineMu sync.Mutex
	readEnded := false
	setReadDeadline := func(t time.Time) {
		readDeadlineMu.Lock()
		defer readDeadlineMu.Unlock()
		if !readEnded {
			_ = conn.SetReadDeadline(t)
		}
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeLoop(conn, session, label)
		// The session is over: a read waiting for the peer ends too.
		readDeadlineMu.Lock()
		readEnded = true
		_ = conn.SetReadDeadline(time.Now())
		readDeadlineMu.Unlock()
	}()
	finish := func() {
		release()
		session.Close()
		select {
		case <-writerDone:
		case <-time.After(2 * drainTimeout):
			conn.Close() // ends a write still waiting for the peer
			<-writerDone
		}
	}

	buffered := bufio.NewReaderSize(conn, 64<<10)
	reader := protocol.NewFrameReader(buffered, session.MaxFrameSize())
	for {
		frame, err := s.nextFrame(buffered, reader, session.StallTimeout(), setReadDeadline)
		if err != nil {
			switch {
			case errors.Is(err, protocol.ErrFrameTooLarge):
				// The stream cannot be resynchronised: say why, then close.
				s.log.Warn("closing a connection that sent an oversize frame", zap.String("peer", label), zap.Error(err))
				finish()
				refuse(conn, protocol.Errorf(protocol.CodeFrameTooLarge, "%v", err))
				return
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded):
			case errors.Is(err, io.ErrUnexpectedEOF):
				s.log.Debug("peer closed mid-frame", zap.String("peer", label))
			case errors.Is(err, errFrameStalled):
				select {
				case <-session.Done(): // the writer ended the read: the session was over
				default:
					s.log.Warn("peer sent part of a frame and stopped; closing the connection",
						zap.String("peer", label), zap.Duration("stall_timeout", session.StallTimeout()))
				}
			default:
				s.log.Debug("read failed", zap.String("peer", label), zap.Error(err))
			}
			finish()
			return
		}
		if err := session.HandleFrame(frame); err != nil {
			finish()
			return
		}
	}
}

// errFrameStalled says a peer began a frame and sent no more of it for the
// stall timeout.
var errFrameStalled = errors.New("frame stalled")

// nextFrame reads the next frame. A peer may stay idle between frames as
// long as it likes, but once it has begun one it must finish it within
// stall: otherwise a peer sending a byte at a time, or half a frame and
// nothing more, would hold its connection (and its place under the
// connection limit) for ever. A frame already buffered whole costs no
// deadline, which keeps the busy path free of timer updates.
func (s *Server) nextFrame(buffered *bufio.Reader, reader *protocol.FrameReader, stall time.Duration,
	setReadDeadline func(time.Time)) ([]byte, error) {
	if _, err := buffered.Peek(1); err != nil {
		return nil, err
	}
	whole := false
	if header, err := buffered.Peek(min(4, buffered.Buffered())); err == nil && len(header) == 4 {
		n := int(header[0])<<24 | int(header[1])<<16 | int(header[2])<<8 | int(header[3])
		whole = buffered.Buffered() >= 4+n
	}
	if whole {
		return reader.Next()
	}
	setReadDeadline(time.Now().Add(stall))
	frame, err := reader.Next()
	setReadDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, errFrameStalled
	}
	return frame, err
}

// refuse sends a connection-level error (id 0), giving the peer a second to
// take it; the caller closes the connection.
func refuse(conn net.Conn, perr *protocol.Error) {
	enc := protocol.NewEncoder()
	frame, _ := enc.ErrorResponse(0, perr)
	_ = conn.SetWriteDeadline(time.Now().Add(drainTimeout))
	_, _ = conn.Write(frame)
}

// admit counts a new session against the connection bounds, or says why it
// is refused.
func (s *Server) admit(cred *syscall.Ucred) *protocol.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var perr *protocol.Error
	switch {
	case s.sessions >= s.cfg.MaxConnections:
		perr = protocol.Errorf(protocol.CodeResourceExhausted, "the agent serves its maximum of %d connections", s.cfg.MaxConnections)
	case s.sessionsByUID[cred.Uid] >= s.cfg.MaxConnectionsPerUID:
		perr = protocol.Errorf(protocol.CodeResourceExhausted, "uid %d has its maximum of %d connections to this agent", cred.Uid, s.cfg.MaxConnectionsPerUID)
	default:
		s.sessions++
		s.sessionsByUID[cred.Uid]++
		return nil
	}
	// A peer that keeps reconnecting must not flood the log either.
	s.refused++
	if time.Since(s.refusedLogged) >= time.Second {
		s.log.Warn("refusing connections past the limit", zap.String("reason", perr.Message),
			zap.Int32("pid", cred.Pid), zap.Uint32("uid", cred.Uid), zap.Int("refused", s.refused))
		s.refused = 0
		s.refusedLogged = time.Now()
	}
	return perr
}

func (s *Server) release(uid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions--
	if s.sessionsByUID[uid]--; s.sessionsByUID[uid] <= 0 {
		delete(s.sessionsByUID, uid)
	}
}

// writeLoop writes the session's frames until the session closes and what
// was queued before is written. Each write of at most writeChunk bytes must
// complete within the stall timeout: a peer that stops reading is
// disconnected, its session closed.
func (s *Server) writeLoop(conn net.Conn, session *agent.Session, label string) {
	buf := make([]byte, writeChunk)
	stall := session.StallTimeout()
	var drainBy time.Time
	for {
		n, err := session.TakeOutbound(buf)
		if err != nil {
			return
		}
		deadline := time.Now().Add(stall)
		select {
		case <-session.Done():
			if drainBy.IsZero() {
				drainBy = time.Now().Add(drainTimeout)
			}
			deadline = drainBy
		default:
		}
		_ = conn.SetWriteDeadline(deadline)
		if _, err := conn.Write(buf[:n]); err != nil {
			select {
			case <-session.Done():
			default:
				if errors.Is(err, os.ErrDeadlineExceeded) {
					s.log.Warn("peer does not read what it is sent; disconnecting it",
						zap.String("peer", label), zap.Duration("stall_timeout", stall))
				} else {
					s.log.Debug("write failed", zap.String("peer", label), zap.Error(err))
				}
			}
			session.Close()
			return
		}
	}
}

// ServeContext runs Serve until ctx ends, then closes.
func (s *Server) ServeContext(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.Serve() }()
	select {
	case <-ctx.Done():
		s.Close()
		<-errc
		return nil
	case err := <-errc:
		return err
	}
}
