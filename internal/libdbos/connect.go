package libdbos

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/dbos-agent/dbos-agent/internal/hosting"
	"github.com/dbos-agent/dbos-agent/internal/peercred"
)

// dialTimeout bounds connecting to an agent's socket.
const dialTimeout = 5 * time.Second

// socketConn is a connection to an agent's socket: connect mode, and the
// frames of sidecar mode (the child's own socket).
type socketConn struct {
	conn    *net.UnixConn
	in      *inbox
	writeMu sync.Mutex
	// onClose runs after the connection is closed (sidecar: release the
	// child).
	onClose func()
}

func openConnect(cfg Config) (conn, error) {
	path := cfg.Socket
	if path == "" {
		path = hosting.DefaultSocketPath()
	}
	return dialAgent(path, cfg.TrustedUIDs, nil)
}

// dialAgent connects to the agent at path, refusing one run by a user not
// trusted (SO_PEERCRED, as the client and the bindings check).
func dialAgent(path string, trusted []uint32, onClose func()) (*socketConn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	raw, err := d.Dial("unix", path)
	if err != nil {
		return nil, errorf(ErrUnavailable, "connect to the dbos-agent socket %s: %v (is `dbos-agent serve` running?)", path, err)
	}
	uc := raw.(*net.UnixConn)
	cred, err := peercred.Of(uc)
	if err != nil {
		uc.Close()
		return nil, errorf(ErrUnavailable, "check who serves the dbos-agent socket %s: %v", path, err)
	}
	if !peercred.Trusted(cred, trusted) {
		uc.Close()
		// "served by uid <N>" is part of the contract (cgo/README.md): the
		// bindings match it to raise their untrusted-agent error.
		return nil, errorf(ErrUnavailable, "the dbos-agent socket %s is served by uid %d (pid %d), not this user, root or a trusted_uids one: refusing it",
			path, cred.Uid, cred.Pid)
	}
	c := &socketConn{conn: uc, in: newInbox(), onClose: onClose}
	go func() {
		c.in.pump(uc.Read)
		_ = uc.Close()
	}()
	return c, nil
}

func (c *socketConn) send(raw []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.conn.Write(raw); err != nil {
		if errors.Is(err, net.ErrClosed) {
			return errClosed
		}
		return errorf(Closed, "the agent's socket failed: %v", err)
	}
	return nil
}

func (c *socketConn) inbox() *inbox { return c.in }

// maxFrame is the protocol's default: the agent announces its own in the
// hello reply, and refuses (and closes on) a larger frame itself.
func (c *socketConn) maxFrame() int { return maxInboundFrame }

func (c *socketConn) close() {
	c.conn.Close()
	c.in.close()
	<-c.in.ended
	if c.onClose != nil {
		c.onClose()
	}
}
