package libdbos

import (
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
)

// TestSidecarDoesNotNotifySystemd: a host that is itself a Type=notify
// service ($NOTIFY_SOCKET set) says READY=1 when it is ready; its sidecar
// child, which inherits the variable, must not say it first. The child's
// READY would be sent before the go-plugin handshake that Open waits for,
// so once Open returns a datagram would already be queued.
func TestSidecarDoesNotNotifySystemd(t *testing.T) {
	runtimeDir := t.TempDir()
	notifyPath := filepath.Join(runtimeDir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	t.Setenv("NOTIFY_SOCKET", notifyPath)

	cfg := jsonConfig(t, map[string]any{"mode": "sidecar", "database_url": pgtest.URL(t), "schema": pgtest.Schema(t),
		"agent_path": agentBinary(t), "runtime_dir": runtimeDir, "orphan_grace_sec": 5})
	host := New()
	h, err := host.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	handshake(t, host, h)
	// Whatever is queued, without waiting: EAGAIN means nothing was sent.
	raw, err := notify.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var n int
	var recvErr error
	if err := raw.Control(func(fd uintptr) {
		n, _, recvErr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
	}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(recvErr, syscall.EAGAIN) {
		t.Fatalf("the sidecar child sent %q on the host's NOTIFY_SOCKET (recv error %v)", buf[:max(n, 0)], recvErr)
	}
	if err := host.Close(h); err != nil {
		t.Fatal(err)
	}
}
