package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// rawConn is a connection that writes bytes as they are and reads frames.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *protocol.FrameReader
	enc  *protocol.Encoder
	id   uint64
}

func dialRaw(t *testing.T, socket string) *rawConn {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn, r: protocol.NewFrameReader(bufio.NewReader(conn), 1<<24), enc: protocol.NewEncoder()}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_, err := c.conn.Write(b)
	require.NoError(c.t, err)
}

// request sends a well-formed request and returns the response envelope.
func (c *rawConn) request(op string, body any) protocol.Envelope {
	c.t.Helper()
	c.id++
	frame, err := c.enc.Request(c.id, op, body)
	require.NoError(c.t, err)
	c.write(frame)
	env := c.next()
	require.Equal(c.t, c.id, env.ID)
	return env
}

func (c *rawConn) next() protocol.Envelope {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	frame, err := c.r.Next()
	require.NoError(c.t, err)
	env, err := protocol.DecodeEnvelope(append([]byte(nil), frame...))
	require.NoError(c.t, err)
	require.Equal(c.t, protocol.KindResponse, env.Kind)
	return env
}

// closed reports whether the agent closed the connection.
func (c *rawConn) closed() bool {
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err := c.r.Next()
	return err != nil
}

func (c *rawConn) hello() {
	c.t.Helper()
	env := c.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Role: protocol.RoleClient, AppName: "e2e"})
	require.Nil(c.t, env.Error)
}

func requireCode(t *testing.T, env protocol.Envelope, code protocol.Code) {
	t.Helper()
	require.NotNil(t, env.Error, "expected error %s", code)
	require.Equal(t, code, env.Error.Code, env.Error.Message)
	require.Equal(t, code.String(), env.Error.Name)
}

func TestBadInputGetsErrorsAndAgentKeepsServing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	bystander := dialClient(t, agent.socket)
	ping := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, bystander.Call(ctx, protocol.OpPing, protocol.Empty{}, nil))
	}

	t.Run("request before hello", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		requireCode(t, c.request(protocol.OpPing, protocol.Empty{}), protocol.CodeHandshakeNeeded)
		c.hello()
		requireCode(t, c.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, MaxVersion: 1}), protocol.CodeHandshakeNeeded)
	})

	t.Run("no common version closes", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		requireCode(t, c.request(protocol.OpHello, &protocol.Hello{MinVersion: 7, MaxVersion: 9}), protocol.CodeVersionMismatch)
		require.True(t, c.closed())
	})

	t.Run("malformed frames", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		for _, body := range [][]byte{
			{0xc1},                   // never-used msgpack byte
			{0x93, 0x01, 0x02, 0x03}, // an array, not a map
			{0x81, 0xa4, 'k', 'i', 'n', 'd', 0xa3, 'b', 'a', 'd'}, // kind of the wrong type
			{0x80}, // an empty map: no kind, no id
			{},     // an empty frame
		} {
			c.write(protocol.AppendFrame(nil, body))
			env := c.next()
			requireCode(t, env, protocol.CodeMalformedFrame)
			require.Equal(t, uint64(0), env.ID)
		}
		// The connection still works.
		require.Nil(t, c.request(protocol.OpPing, protocol.Empty{}).Error)
	})

	t.Run("malformed frames answered with their id", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		s := func(v string) []byte { return append([]byte{0xa0 | byte(len(v))}, v...) }
		cat := func(parts ...[]byte) []byte {
			var b []byte
			for _, p := range parts {
				b = append(b, p...)
			}
			return b
		}
		for _, tc := range []struct {
			name string
			body []byte
			id   uint64
		}{
			// A body announcing 4 GB in a small frame, after the id.
			{"truncated body", cat([]byte{0x84}, s("kind"), []byte{0x01}, s("id"), []byte{0x29}, s("op"), s("ping"), s("body"), []byte{0xdb, 0xff, 0xff, 0xff, 0xff}), 41},
			// The id first, then a kind of the wrong type.
			{"bad kind after the id", cat([]byte{0x83}, s("id"), []byte{0x2a}, s("kind"), s("x"), s("op"), s("ping")), 42},
			// A request without an op.
			{"no op", cat([]byte{0x82}, s("kind"), []byte{0x01}, s("id"), []byte{0x2b}), 43},
			// Trailing bytes after a whole envelope.
			{"trailing bytes", cat([]byte{0x83}, s("kind"), []byte{0x01}, s("id"), []byte{0x2c}, s("op"), s("ping"), []byte{0xc0}), 44},
		} {
			c.write(protocol.AppendFrame(nil, tc.body))
			env := c.next()
			requireCode(t, env, protocol.CodeMalformedFrame)
			require.Equal(t, tc.id, env.ID, tc.name)
		}
		require.Nil(t, c.request(protocol.OpPing, protocol.Empty{}).Error)
	})

	t.Run("request id 0 is refused", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		frame, err := protocol.NewEncoder().Request(0, protocol.OpPing, protocol.Empty{})
		require.NoError(t, err)
		c.write(frame)
		env := c.next()
		requireCode(t, env, protocol.CodeMalformedFrame)
		require.Equal(t, uint64(0), env.ID)
		require.Contains(t, env.Error.Message, "0 is reserved")
		// Before hello too, and it is not taken for one.
		c2 := dialRaw(t, agent.socket)
		frame, err = protocol.NewEncoder().Request(0, protocol.OpHello, &protocol.Hello{MinVersion: 1})
		require.NoError(t, err)
		c2.write(frame)
		requireCode(t, c2.next(), protocol.CodeMalformedFrame)
		requireCode(t, c2.request(protocol.OpPing, protocol.Empty{}), protocol.CodeHandshakeNeeded)
		require.Nil(t, c.request(protocol.OpPing, protocol.Empty{}).Error)
	})

	t.Run("kinds reserved for the agent are refused", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		enc := protocol.NewEncoder()
		response, err := enc.Response(7, protocol.Empty{})
		require.NoError(t, err)
		c.write(response)
		env := c.next()
		requireCode(t, env, protocol.CodeMalformedFrame)
		require.Equal(t, uint64(0), env.ID, "a response's id names no request of the peer")
		require.Contains(t, env.Error.Message, "kind 2")
		push, err := enc.Push(protocol.PushRun, &protocol.Run{WorkflowID: "x"})
		require.NoError(t, err)
		c.write(push)
		env = c.next()
		requireCode(t, env, protocol.CodeMalformedFrame)
		require.Contains(t, env.Error.Message, "kind 3")
		require.Nil(t, c.request(protocol.OpPing, protocol.Empty{}).Error)
	})

	t.Run("unknown op", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		requireCode(t, c.request("launch_missiles", protocol.Empty{}), protocol.CodeUnknownOp)
		require.Nil(t, c.request(protocol.OpPing, protocol.Empty{}).Error)
	})

	t.Run("wrong field types and missing fields", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		requireCode(t, c.request(protocol.OpStartWorkflow, map[string]any{"name": 42}), protocol.CodeInvalidArgument)
		requireCode(t, c.request(protocol.OpStartWorkflow, map[string]any{"workflow_id": "x"}), protocol.CodeInvalidArgument)
		requireCode(t, c.request(protocol.OpGetResult, map[string]any{"workflow_id": []int{1}}), protocol.CodeInvalidArgument)
		requireCode(t, c.request(protocol.OpRecordStep, map[string]any{"workflow_id": "x", "owner_xid": "y", "name": "s", "function_id": "one"}), protocol.CodeInvalidArgument)
		requireCode(t, c.request(protocol.OpFinish, map[string]any{"workflow_id": "x", "owner_xid": "y", "status": "DONE"}), protocol.CodeInvalidArgument)
		requireCode(t, c.request(protocol.OpListWorkflows, map[string]any{"limit": -1}), protocol.CodeInvalidArgument)
		requireCode(t, c.request(protocol.OpStartWorkflow, "not a map"), protocol.CodeInvalidArgument)
		require.Nil(t, c.request(protocol.OpPing, protocol.Empty{}).Error)
	})

	t.Run("oversize frame closes", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(protocol.DefaultMaxFrameSize+1))
		c.write(hdr[:])
		env := c.next()
		requireCode(t, env, protocol.CodeFrameTooLarge)
		require.True(t, c.closed())
	})

	t.Run("disconnect mid-frame", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		frame, err := protocol.NewEncoder().Request(9, protocol.OpPing, protocol.Empty{})
		require.NoError(t, err)
		c.write(frame[:len(frame)-2])
		require.NoError(t, c.conn.Close())
	})

	t.Run("not msgpack at all", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		// "GET " announces a frame of 1.19 GB: refused, closed.
		env := c.next()
		requireCode(t, env, protocol.CodeFrameTooLarge)
		require.True(t, c.closed())
	})

	t.Run("large valid payload", func(t *testing.T) {
		c := dialRaw(t, agent.socket)
		c.hello()
		big := make([]byte, 4<<20)
		for i := range big {
			big[i] = 'a' + byte(i%26)
		}
		env := c.request(protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "big", Name: "n", QueueName: "q", Inputs: str(string(big))})
		require.Nil(t, env.Error)
		env = c.request(protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: "big", LoadPayloads: true})
		require.Nil(t, env.Error)
		var info protocol.WorkflowInfo
		require.NoError(t, msgpack.Unmarshal(env.Body, &info))
		require.Equal(t, string(big), *info.Inputs)
	})

	// Through all of it, another client was served.
	ping()
}
