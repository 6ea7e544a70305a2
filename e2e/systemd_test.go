package e2e

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeNotifiesSystemd: under a Type=notify unit (NOTIFY_SOCKET set, as
// systemd sets it), serve sends READY=1 once it listens, not before, so
// units ordered after it can connect at once, and STOPPING=1 when SIGTERM
// starts the drain. The test plays systemd's part: a unixgram socket.
func TestServeNotifiesSystemd(t *testing.T) {
	t.Parallel()
	e := newSQLiteEnv(t)
	notifyPath := filepath.Join(e.dir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { notify.Close() })

	p := e.startAgent(agentOptions{noWait: true, env: []string{"NOTIFY_SOCKET=" + notifyPath}})
	ready := receiveNotification(t, notify)
	require.Equal(t, "READY=1", ready)
	// READY comes after the socket listens: a client connects at once,
	// with no retry.
	dialClient(t, p.socket)
	p.waitForLog(t, "dbos-agent listening")

	require.NoError(t, p.cmd.Process.Signal(syscallSIGTERM))
	require.Equal(t, "STOPPING=1", receiveNotification(t, notify))
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not stop after SIGTERM:\n%s", p.log())
	}
}

// receiveNotification is the next sd_notify datagram.
func receiveNotification(t *testing.T, notify *net.UnixConn) string {
	t.Helper()
	require.NoError(t, notify.SetReadDeadline(time.Now().Add(60*time.Second)))
	buf := make([]byte, 4096)
	n, err := notify.Read(buf)
	require.NoError(t, err, "no sd_notify datagram from the agent")
	return strings.TrimSpace(string(buf[:n]))
}
