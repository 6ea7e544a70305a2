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
	pending map[uint64]chan protocol.Envelope
	err     error

	pushes chan Push
	done   chan struct{}
}

// ErrClosed is returned for requests on a closed client.
var ErrClosed = errors.New("client closed")

// Dial connects to the agent at socketPath and performs the handshake.
func Dial(ctx context.Context, socketPath string, hello protocol.Hello) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, err
	}
	c := &Client{
		conn:    conn,
		enc:     protocol.NewEncoder(),
		w:       bufio.NewWriter(conn),
		pending: map[uint64]chan protocol.Envelope{},
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
	return c, nil
}

// Pushes delivers the agent's pushes in order. It is closed when the
// connection ends.
func (c *Client) Pushes() <-chan Push { return c.pushes }

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

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
	ch := make(chan protocol.Envelope, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return protocol.Envelope{}, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

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
		return protocol.Envelope{}, fmt.Errorf("send %s: %w", op, err)
	}
	select {
	case env, ok := <-ch:
		if !ok {
			return protocol.Envelope{}, c.closedErr()
		}
		return env, nil
	case <-ctx.Done():
		if op != protocol.OpCancelRequest {
			// The agent need not keep waiting for an answer nobody reads.
			go c.cancelRequest(id)
		}
		return protocol.Envelope{}, ctx.Err()
	}
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
			ch := c.pending[env.ID]
			c.mu.Unlock()
			if ch != nil {
				ch <- env
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
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}
