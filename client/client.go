// Package client is a Go client of the agent's protocol: one connection,
// many requests in flight, pushes delivered on a channel. The tests and
// benchmarks drive the real agent with it, and it is the start of a Go
// binding.
package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/dbos-agent/dbos-agent/internal/peercred"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// Push is an unsolicited message from the agent.
type Push struct {
	Op   string
	Body []byte // msgpack; decode with protocol.DecodeBody
}

// Client is a connection to an agent. Safe for concurrent use.
type Client struct {
	conn  net.Conn
	Hello protocol.HelloReply

	writeMu sync.Mutex
	enc     *protocol.Encoder
	w       *bufio.Writer

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*pendingRequest
	err     error
	// slots bounds the requests in flight to the agent's max_in_flight
	// (nil before the handshake, or when the agent announces none). A
	// request abandoned by its caller keeps its slot until its answer
	// comes: the agent holds it until then, and a request past its bound
	// would stop the agent reading this connection, the cancel_request
	// behind it too.
	slots chan struct{}

	pushes chan Push
	done   chan struct{}
}

type pendingRequest struct {
	ch   chan protocol.Envelope
	slot bool // holds one of slots
}

// ErrClosed is returned for requests on a closed client.
var ErrClosed = errors.New("client closed")

// DialOption changes how Dial connects.
type DialOption func(*dialConfig)

type dialConfig struct {
	trusted []uint32
}

// TrustUIDs lets Dial talk to an agent run by these users, besides this
// process's own user and root.
func TrustUIDs(uids ...uint32) DialOption {
	return func(c *dialConfig) { c.trusted = append(c.trusted, uids...) }
}

// UntrustedAgentError refuses a socket served by a user this process does
// not trust: whoever could put a socket in the agent's place would read
// every request and answer them. Nothing was sent to it.
type UntrustedAgentError struct {
	Path string
	UID  uint32
	PID  int32
}

func (e *UntrustedAgentError) Error() string {
	return fmt.Sprintf("refusing the dbos-agent socket %s: it is served by uid %d (pid %d), not by this process's user (uid %d), root or a trusted user; nothing was sent to it",
		e.Path, e.UID, e.PID, os.Getuid())
}

// Dial connects to the agent at socketPath and performs the handshake,
// after checking that the socket is served by this process's user, root or
// a user of TrustUIDs (the kernel's record of who listens on it).
func Dial(ctx context.Context, socketPath string, hello protocol.Hello, opts ...DialOption) (*Client, error) {
	var cfg dialConfig
	for _, o := range opts {
		o(&cfg)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, err
	}
	if err := checkAgent(conn.(*net.UnixConn), socketPath, cfg.trusted); err != nil {
		conn.Close()
		return nil, err
	}
	c := &Client{
		conn:    conn,
		enc:     protocol.NewEncoder(),
		w:       bufio.NewWriter(conn),
		pending: map[uint64]*pendingRequest{},
		pushes:  make(chan Push, 4096),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	if hello.MinVersion == 0 {
		hello.MinVersion = protocol.MinVersion
	}
	if hello.MaxVersion == 0 {
		hello.MaxVersion = protocol.Version
	}
	if hello.PID == 0 {
		hello.PID = int64(os.Getpid())
	}
	if hello.Language == "" {
		hello.Language = "go"
	}
	if err := c.Call(ctx, protocol.OpHello, &hello, &c.Hello); err != nil {
		c.Close()
		return nil, err
	}
	if n := c.Hello.MaxInFlight; n > 0 {
		c.mu.Lock()
		c.slots = make(chan struct{}, n)
		c.mu.Unlock()
	}
	return c, nil
}

// checkAgent refuses a peer whose uid is not this process's, root's or a
// trusted one.
func checkAgent(conn *net.UnixConn, socketPath string, trusted []uint32) error {
	cred, err := peercred.Of(conn)
	if err != nil {
		return fmt.Errorf("check who serves the dbos-agent socket %s: %w", socketPath, err)
	}
	if peercred.Trusted(cred, trusted) {
		return nil
	}
	return &UntrustedAgentError{Path: socketPath, UID: cred.Uid, PID: cred.Pid}
}

// Pushes delivers the agent's pushes in order. It is closed when the
// connection ends.
func (c *Client) Pushes() <-chan Push { return c.pushes }

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// InFlight is how many requests await their answer (abandoned ones
// included, until it comes).
func (c *Client) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Call sends a request and decodes the reply into reply (may be nil). An
// error reply is returned as *protocol.Error.
func (c *Client) Call(ctx context.Context, op string, req, reply any) error {
	env, err := c.roundTrip(ctx, op, req)
	if err != nil {
		return err
	}
	if env.Error != nil {
		return env.Error
	}
	if reply == nil {
		return nil
	}
	return protocol.DecodeBody(env.Body, reply)
}

// SendRaw writes bytes as they are (tests of malformed input).
func (c *Client) SendRaw(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	return c.w.Flush()
}

func (c *Client) roundTrip(ctx context.Context, op string, req any) (protocol.Envelope, error) {
	c.mu.Lock()
	slots := c.slots
	c.mu.Unlock()
	// cancel_request takes no slot: the agent handles it as it reads it.
	slot := slots != nil && op != protocol.OpCancelRequest
	if slot {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return protocol.Envelope{}, ctx.Err()
		case <-c.done:
			return protocol.Envelope{}, c.closedErr()
		}
	}
	p := &pendingRequest{ch: make(chan protocol.Envelope, 1), slot: slot}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		if slot {
			<-slots
		}
		return protocol.Envelope{}, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = p
	c.mu.Unlock()

	c.writeMu.Lock()
	frame, err := c.enc.Request(id, op, req)
	if err == nil {
		_, err = c.w.Write(frame)
		if err == nil {
			err = c.w.Flush()
		}
	}
	c.writeMu.Unlock()
	if err != nil {
		c.forget(id)
		return protocol.Envelope{}, fmt.Errorf("send %s: %w", op, err)
	}
	select {
	case env, ok := <-p.ch:
		if !ok {
			return protocol.Envelope{}, c.closedErr()
		}
		return env, nil
	case <-ctx.Done():
		// The answer, when it comes, is dropped (and frees the slot).
		if op != protocol.OpCancelRequest {
			// The agent need not keep waiting for an answer nobody reads.
			go c.cancelRequest(id)
		}
		return protocol.Envelope{}, ctx.Err()
	}
}

// forget drops a pending request, freeing its slot.
func (c *Client) forget(id uint64) {
	c.mu.Lock()
	p := c.pending[id]
	delete(c.pending, id)
	if p != nil && p.slot {
		<-c.slots
	}
	c.mu.Unlock()
}

// cancelRequest tells the agent a request was abandoned. Best effort: its
// answer, and the abandoned request's, are dropped.
func (c *Client) cancelRequest(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = c.roundTrip(ctx, protocol.OpCancelRequest, &protocol.CancelRequest{RequestID: id})
}

func (c *Client) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}

func (c *Client) readLoop() {
	defer close(c.done)
	defer close(c.pushes)
	r := protocol.NewFrameReader(bufio.NewReader(c.conn), 1<<30)
	var readErr error
	for {
		frame, err := r.Next()
		if err != nil {
			readErr = err
			break
		}
		body := append([]byte(nil), frame...)
		env, err := protocol.DecodeEnvelope(body)
		if err != nil {
			readErr = fmt.Errorf("agent sent a malformed frame: %w", err)
			break
		}
		switch env.Kind {
		case protocol.KindResponse:
			c.mu.Lock()
			p := c.pending[env.ID]
			c.mu.Unlock()
			if p != nil {
				p.ch <- env // buffered: one answer per request
				c.forget(env.ID)
			} else if env.ID == 0 && env.Error != nil {
				// An error about the connection. One that closes it says
				// why it closed; the others (a frame the agent could not
				// read as a request) leave it open for later requests.
				if info, ok := env.Error.Code.Info(); ok && info.CloseConnection {
					c.mu.Lock()
					c.err = env.Error
					c.mu.Unlock()
				}
			}
		case protocol.KindPush:
			c.pushes <- Push{Op: env.Op, Body: env.Body}
		}
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %v", ErrClosed, readErr)
	}
	for id, p := range c.pending {
		close(p.ch)
		delete(c.pending, id)
		if p.slot {
			<-c.slots
		}
	}
	c.mu.Unlock()
}
