package e2e

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// The connection and frame limits of serve, as flags, on the real binary.
func TestConnectionAndFrameLimitsAreConfigurable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{extraArgs: []string{"--max-connections", "2", "--max-frame-size", "64KiB"}})
	first := dialClient(t, agent.socket)
	require.EqualValues(t, 64<<10, first.Hello.MaxFrameSize)

	t.Run("a connection past the limit is refused", func(t *testing.T) {
		second := dialRaw(t, agent.socket)
		second.hello()
		third := dialRaw(t, agent.socket)
		env := third.next()
		requireCode(t, env, protocol.CodeResourceExhausted)
		require.Zero(t, env.ID)
		require.True(t, third.closed())

		// Once one goes, another comes in.
		require.NoError(t, second.conn.Close())
		waitForSessions(t, first, 1)
		again := dialRaw(t, agent.socket)
		again.hello()
		require.Nil(t, again.request(protocol.OpPing, protocol.Empty{}).Error)
		require.NoError(t, again.conn.Close())
	})

	t.Run("a frame past the configured size closes its connection", func(t *testing.T) {
		waitForSessions(t, first, 1) // the connection limit leaves room
		c := dialRaw(t, agent.socket)
		c.hello()
		var header [4]byte
		binary.BigEndian.PutUint32(header[:], 64<<10+1)
		c.write(header[:])
		env := c.next()
		requireCode(t, env, protocol.CodeFrameTooLarge)
		require.True(t, c.closed())
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, first.Call(ctx, protocol.OpPing, protocol.Empty{}, nil))
}

// waitForSessions waits until the agent has n sessions (those of closed
// connections end soon after; nothing signals it).
func waitForSessions(t *testing.T, c *client.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for agentStats(t, c, false).Sessions != n {
		require.True(t, time.Now().Before(deadline), "the agent never had %d sessions", n)
		time.Sleep(20 * time.Millisecond)
	}
}

// The Go client keeps to the max_in_flight the agent announces: a request
// past it waits for an answer.
func TestGoClientKeepsToTheInFlightBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{extraArgs: []string{"--max-in-flight", "2"}})
	c := dialClient(t, agent.socket)
	other := dialClient(t, agent.socket)
	require.EqualValues(t, 2, c.Hello.MaxInFlight)

	// Two waits for workflows that do not exist yet hold both places.
	ids := []string{"held-1", "held-2"}
	answered := make(chan error, len(ids))
	for _, id := range ids {
		go func() {
			answered <- c.Call(context.Background(), protocol.OpGetResult, &protocol.GetResult{WorkflowID: id, WaitForCreation: true}, nil)
		}()
	}
	// Nothing signals that both are sent: look.
	deadline := time.Now().Add(30 * time.Second)
	for c.InFlight() < len(ids) {
		require.True(t, time.Now().Before(deadline), "the waits were not sent")
		time.Sleep(10 * time.Millisecond)
	}
	// A third waits for a place, and is never sent while none is free.
	short, stop := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer stop()
	require.ErrorIs(t, c.Call(short, protocol.OpPing, protocol.Empty{}, nil), context.DeadlineExceeded)
	require.Equal(t, len(ids), c.InFlight())

	// One wait ends: a place is free.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, other.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: ids[0], Name: "never_runs", QueueName: "no_worker", Serialization: "portable_json"}, nil))
	require.NoError(t, other.Call(ctx, protocol.OpCancel, &protocol.CancelWorkflow{WorkflowID: ids[0]}, nil))
	<-answered
	require.NoError(t, c.Call(ctx, protocol.OpPing, protocol.Empty{}, nil))
}

// TestPeerThatStopsMidFrameIsDisconnected: a peer may idle between frames
// as long as it likes, but one that begins a frame (part of its header, or
// the header and part of the body) and sends no more is disconnected after
// the stall timeout, so it cannot hold its connection for ever.
func TestPeerThatStopsMidFrameIsDisconnected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{extraArgs: []string{"--stall-timeout", "1s"}})
	frame, err := protocol.NewEncoder().Request(2, protocol.OpPing, protocol.Empty{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		sent []byte
	}{
		{"part of a header", frame[:2]},
		{"a header and part of the body", frame[:len(frame)-2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, agent.socket)
			require.Nil(t, c.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, AppName: "e2e"}).Error)
			c.write(tc.sent)
			// The agent closes the connection: the read ends (EOF), well
			// before the generous deadline set here.
			require.NoError(t, c.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
			_, err := c.conn.Read(make([]byte, 64))
			require.ErrorIs(t, err, io.EOF, "the agent closed the connection")
		})
	}
	agent.waitForLog(t, "peer sent part of a frame and stopped; closing the connection")

	// An idle peer between frames is left alone past the stall timeout:
	// the agent still answers it once it speaks again. (The agent's log
	// tells when its stall clock would have run out.)
	idle := dialRaw(t, agent.socket)
	require.Nil(t, idle.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, AppName: "e2e"}).Error)
	other := dialRaw(t, agent.socket)
	require.Nil(t, other.request(protocol.OpHello, &protocol.Hello{MinVersion: 1, AppName: "e2e"}).Error)
	// Three stall timeouts pass, measured by the agent serving the other
	// connection, not by this test's clock alone.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		require.Nil(t, other.request(protocol.OpPing, protocol.Empty{}).Error)
		time.Sleep(100 * time.Millisecond)
	}
	require.Nil(t, idle.request(protocol.OpPing, protocol.Empty{}).Error, "an idle peer is not disconnected")
}
