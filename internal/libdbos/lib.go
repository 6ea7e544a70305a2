package libdbos

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// Version is the agent's version, set at build time (-ldflags -X).
var Version = "dev"

// VersionString is what dbos_version returns.
func VersionString() string {
	v := fmt.Sprint(protocol.Version)
	if protocol.MinVersion != protocol.Version {
		v = fmt.Sprintf("%d-%d", protocol.MinVersion, protocol.Version)
	}
	return "libdbos " + Version + " protocol " + v
}

// conn is what a handle's mode provides: frames to the agent, and an inbox
// of the agent's frames.
type conn interface {
	// send hands the agent whole frames as they go on a socket
	// (checkFrames checked them).
	send(raw []byte) error
	inbox() *inbox
	// maxFrame is the largest payload the agent accepts.
	maxFrame() int
	// close ends the session and waits for the handle's goroutines.
	close()
}

// Library holds the handles of one process.
type Library struct {
	pid int

	mu      sync.Mutex
	handles map[uint64]conn
	seq     uint32

	// engines are the embedded engines and sidecar children, shared by the
	// handles of the same settings; engineMu serialises their starts and
	// stops (held across a start, which may wait for the database).
	engineMu sync.Mutex
	engines  map[engineKey]*sharedEngine

	// tune, when set (by tests), adjusts an embedded engine's settings
	// before it starts (smaller bounds, shorter timeouts).
	tune func(*agent.Config)
}

// New is a library for this process.
func New() *Library {
	return &Library{pid: os.Getpid(), handles: map[uint64]conn{}, engines: map[engineKey]*sharedEngine{}}
}

// Default is the process's library, which the cgo exports use.
var Default = New()

// Open opens a handle. Its id carries the opening pid in its high 32 bits
// (the C side refuses a call from another process before entering Go) and a
// sequence number in its low ones.
func (l *Library) Open(raw []byte) (uint64, error) {
	cfg, err := ParseConfig(raw)
	if err != nil {
		return 0, err
	}
	var c conn
	switch cfg.Mode {
	case ModeEmbedded:
		c, err = l.openEmbedded(cfg)
	case ModeConnect:
		c, err = openConnect(cfg)
	case ModeSidecar:
		c, err = l.openSidecar(cfg)
	}
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		l.seq++
		id := uint64(l.pid)<<32 | uint64(l.seq)
		if _, taken := l.handles[id]; !taken && l.seq != 0 {
			l.handles[id] = c
			return id, nil
		}
	}
}

func (l *Library) lookup(h uint64) (conn, error) {
	l.mu.Lock()
	c := l.handles[h]
	l.mu.Unlock()
	if c == nil {
		if h>>32 != 0 && int(h>>32) != l.pid {
			return nil, errorf(ErrForked, "handle %#x was opened by process %d, not this one (%d): open handles after fork()", h, h>>32, l.pid)
		}
		return nil, errorf(ErrInvalid, "unknown or closed handle %#x", h)
	}
	return c, nil
}

// Send hands the agent one or more whole frames.
func (l *Library) Send(h uint64, raw []byte) error {
	c, err := l.lookup(h)
	if err != nil {
		return err
	}
	if err := checkFrames(raw, c.maxFrame()); err != nil {
		return err
	}
	return c.send(raw)
}

// Recv returns the agent's next whole frames, waiting up to timeout
// (negative: no bound; 0: not at all).
func (l *Library) Recv(h uint64, timeout time.Duration) ([]byte, error) {
	c, err := l.lookup(h)
	if err != nil {
		return nil, err
	}
	return c.inbox().recv(timeout)
}

// Close ends a handle: a recv blocked on it returns Closed; the last handle
// of an embedded engine stops it.
func (l *Library) Close(h uint64) error {
	l.mu.Lock()
	c := l.handles[h]
	delete(l.handles, h)
	l.mu.Unlock()
	if c == nil {
		_, err := l.lookup(h)
		return err
	}
	c.close()
	return nil
}

// Guard runs f, turning a panic into ErrInternal (and closing handle h, when
// it names one): no Go panic may cross into C.
func (l *Library) Guard(h uint64, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errorf(ErrInternal, "libdbos: internal failure (the handle is closed): %v\n%s", r, debug.Stack())
			if h != 0 {
				l.mu.Lock()
				c := l.handles[h]
				delete(l.handles, h)
				l.mu.Unlock()
				if c != nil {
					func() {
						defer func() { _ = recover() }()
						c.close()
					}()
				}
			}
		}
	}()
	return f()
}
