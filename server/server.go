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
	Logger      *zap.Logger
}

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
	return &Server{cfg: cfg, ln: ln, log: cfg.Logger, conns: map[net.Conn]struct{}{}, allowUID: allow}, nil
}

// Addr is the socket path.
func (s *Server) Addr() string { return s.cfg.SocketPath }

// Serve accepts connections until Close.
func (s *Server) Serve() error {
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
			return fmt.Errorf("accept: %w", err)
		}
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
		enc := protocol.NewEncoder()
		frame, _ := enc.ErrorResponse(0, protocol.Errorf(protocol.CodePermissionDenied, "uid %d may not use this agent", cred.Uid))
		_, _ = conn.Write(frame)
		return
	}
	session := s.cfg.Agent.NewSession(label)
	defer session.Close()

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		writeLoop(conn, session)
	}()

	reader := protocol.NewFrameReader(bufio.NewReaderSize(conn, 64<<10), session.MaxFrameSize())
	for {
		frame, err := reader.Next()
		if err != nil {
			switch {
			case errors.Is(err, protocol.ErrFrameTooLarge):
				// The stream cannot be resynchronised: say why, then close.
				enc := protocol.NewEncoder()
				f, _ := enc.ErrorResponse(0, protocol.Errorf(protocol.CodeFrameTooLarge, "%v", err))
				_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = conn.Write(f)
				s.log.Warn("closing a connection that sent an oversize frame", zap.String("peer", label), zap.Error(err))
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
			case errors.Is(err, io.ErrUnexpectedEOF):
				s.log.Debug("peer closed mid-frame", zap.String("peer", label))
			default:
				s.log.Debug("read failed", zap.String("peer", label), zap.Error(err))
			}
			session.Close()
			<-writerDone
			return
		}
		if err := session.HandleFrame(frame); err != nil {
			session.Close()
			<-writerDone
			return
		}
	}
}

// writeLoop writes the session's frames, batching what is queued into one
// write, until the session closes.
func writeLoop(conn net.Conn, session *agent.Session) {
	w := bufio.NewWriterSize(conn, 64<<10)
	out := session.Outbound()
	for {
		select {
		case frame := <-out:
			if _, err := w.Write(frame); err != nil {
				session.Close()
				return
			}
			// Take whatever else is ready before the syscall.
		more:
			for {
				select {
				case frame := <-out:
					if _, err := w.Write(frame); err != nil {
						session.Close()
						return
					}
				default:
					break more
				}
			}
			if err := w.Flush(); err != nil {
				session.Close()
				return
			}
		case <-session.Done():
			// Write what was queued before the close (the reply to the
			// request that made the agent close, for instance), briefly.
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			for {
				select {
				case frame := <-out:
					if _, err := w.Write(frame); err != nil {
						return
					}
				default:
					_ = w.Flush()
					return
				}
			}
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
