package libdbos

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
)

var (
	agentOnce sync.Once
	agentBin  string
	agentErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if agentBin != "" {
		os.RemoveAll(filepath.Dir(agentBin))
	}
	os.Exit(code)
}

// agentBinary builds the dbos-agent the sidecar tests run as the child.
func agentBinary(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "libdbos-agent-")
		if err != nil {
			agentErr = err
			return
		}
		agentBin = filepath.Join(dir, "dbos-agent")
		out, err := exec.Command("go", "build", "-o", agentBin, "../../cmd/dbos-agent").CombinedOutput()
		if err != nil {
			agentErr = err
			t.Logf("%s", out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentBin
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestSidecarReattachInProcess: a host whose handles vanish without a close
// (as in a crash) leaves its child to the next host of the same config,
// which reattaches to it rather than start another, and stops it on close.
// (cgo/test does the same with a real host SIGKILLed.)
func TestSidecarReattachInProcess(t *testing.T) {
	runtimeDir := t.TempDir()
	cfg := jsonConfig(t, map[string]any{"mode": "sidecar", "database_url": pgtest.URL(t), "schema": pgtest.Schema(t),
		"agent_path": agentBinary(t), "runtime_dir": runtimeDir, "orphan_grace_sec": 5})
	first := New()
	h, err := first.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	handshake(t, first, h)
	var child *sidecarChild
	for _, e := range first.engines {
		child = e.child
	}
	pid := child.info.PID
	// The first host "crashes": its frames' connection and heartbeats end,
	// nothing is stopped or forgotten.
	close(child.stopBeat)
	<-child.beatDone
	c, _ := first.lookup(h)
	c.(*socketConn).conn.Close()

	second := New()
	h2, err := second.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	handshake(t, second, h2)
	var again *sidecarChild
	for _, e := range second.engines {
		again = e.child
	}
	if !again.reattached || again.info.PID != pid {
		t.Fatalf("the second host runs pid %d (reattached %v), not the first's child %d", again.info.PID, again.reattached, pid)
	}
	if err := second.Close(h2); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		// The child is the first host's (this process's) to reap: go-plugin
		// waits for it.
		if time.Now().After(deadline) {
			t.Fatalf("the child pid %d still runs after the last close", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(child.record); !os.IsNotExist(err) {
		t.Fatalf("the reattach record remains: %v", err)
	}
	// What the first host left is released without a child to stop.
	first.mu.Lock()
	delete(first.handles, h)
	first.mu.Unlock()
}
