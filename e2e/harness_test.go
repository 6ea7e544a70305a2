// Package e2e drives the real dbos-agent binary over its real socket, with
// workers that are real processes where a test kills them.
package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

var agentBinary string

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
	case impostorHelper:
		os.Exit(runImpostor())
	default:
		os.Exit(runHelper())
	}
	dir, err := os.MkdirTemp("", "dbos-agent-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBinary = filepath.Join(dir, "dbos-agent")
	// Tests run the agent with the race detector; benchmarks measure the
	// binary users run.
	flag.Parse()
	buildArgs := []string{"build", "-race", "-o", agentBinary, "../cmd/dbos-agent"}
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		buildArgs = []string{"build", "-o", agentBinary, "../cmd/dbos-agent"}
	}
	build := exec.Command("go", buildArgs...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's database schema and socket directory.
type env struct {
	t      testing.TB
	url    string
	schema string
	dir    string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// Socket paths are limited to about 100 bytes: keep them short.
	dir, err := os.MkdirTemp("", "e2e")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &env{t: t, url: pgtest.URL(t), schema: pgtest.Schema(t), dir: dir}
}

// agentProc is a running agent binary.
type agentProc struct {
	cmd    *exec.Cmd
	socket string
	exited chan struct{}
	mu     sync.Mutex
	logs   strings.Builder
	logged chan struct{} // signalled after each log line
}

type agentOptions struct {
	executorID string
	socketName string
	extraArgs  []string
	// noWait returns as soon as the process started; the caller waits for
	// the "dbos-agent listening" line itself (waitForLog).
	noWait bool
	// databaseURL replaces the test database's URL (one without its
	// password, say).
	databaseURL string
	// env is added to the agent's environment.
	env []string
	// defaultSocket, when set, is where the agent is expected to listen
	// when given no --socket.
	defaultSocket string
	// binary runs instead of agentBinary (the race-detector build).
	binary string
}

// startAgent starts the agent and returns once its log says it listens.
func (e *env) startAgent(o agentOptions) *agentProc {
	t := e.t
	t.Helper()
	if o.executorID == "" {
		o.executorID = "local"
	}
	if o.socketName == "" {
		o.socketName = "agent.sock"
	}
	if o.databaseURL == "" {
		o.databaseURL = e.url
	}
	socket := filepath.Join(e.dir, o.socketName)
	args := []string{"serve", "--database-url", o.databaseURL, "--schema", e.schema}
	if o.defaultSocket != "" {
		socket = o.defaultSocket
	} else {
		args = append(args, "--socket", socket)
	}
	args = append(append(args, "--executor-id", o.executorID, "--poll-interval", "200ms", "--grace-period", "2s",
		"--log-level", "debug"), o.extraArgs...)
	binary := agentBinary
	if o.binary != "" {
		binary = o.binary
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), o.env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &agentProc{cmd: cmd, socket: socket, exited: make(chan struct{}), logged: make(chan struct{}, 1)}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			select {
			case p.logged <- struct{}{}:
			default:
			}
			if !signalled && strings.Contains(line, "dbos-agent listening") {
				signalled = true
				close(listening)
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("agent log:\n%s", p.log())
		}
	})
	if o.noWait {
		return p
	}
	select {
	case <-listening:
	case <-p.exited:
		t.Fatalf("agent exited before listening:\n%s", p.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("agent did not listen within 60s:\n%s", p.log())
	}
	return p
}

func (p *agentProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// syscallSIGTERM is the signal of a graceful stop.
var syscallSIGTERM = syscall.SIGTERM

// waitForLog waits until the agent's log has a line containing text.
func (p *agentProc) waitForLog(t testing.TB, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.log(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("agent never logged %q:\n%s", text, p.log())
		}
		select {
		case <-p.logged:
		case <-time.After(time.Second):
		}
	}
}

func (p *agentProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// terminate sends SIGTERM and waits for the exit.
func (p *agentProc) terminate(t *testing.T) {
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not stop after SIGTERM:\n%s", p.log())
	}
}

// dialClient opens a client connection.
func dialClient(t *testing.T, socket string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, protocol.Hello{Role: protocol.RoleClient, AppName: "e2e"})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func str(s string) *string { return &s }

// awaitResult waits for a workflow's outcome through the agent.
func awaitResult(t *testing.T, c *client.Client, workflowID string) protocol.WorkflowResult {
	t.Helper()
	return awaitResultWithin(t, c, workflowID, 60*time.Second)
}

func awaitResultWithin(t *testing.T, c *client.Client, workflowID string, within time.Duration) protocol.WorkflowResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var res protocol.WorkflowResult
	require.NoError(t, c.Call(ctx, protocol.OpGetResult, &protocol.GetResult{WorkflowID: workflowID}, &res))
	return res
}

// lineWaiter reads a process's output and lets a test wait for a line.
type lineWaiter struct {
	mu    sync.Mutex
	lines []string
	cond  chan struct{}
	eof   bool
}

func newLineWaiter(r io.Reader) *lineWaiter {
	lw := &lineWaiter{cond: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lw.mu.Lock()
			lw.lines = append(lw.lines, sc.Text())
			close(lw.cond)
			lw.cond = make(chan struct{})
			lw.mu.Unlock()
		}
		lw.mu.Lock()
		lw.eof = true
		close(lw.cond)
		lw.mu.Unlock()
	}()
	return lw
}

// waitFor blocks until a line equal to want has been read.
func (lw *lineWaiter) waitFor(t testing.TB, want string) {
	t.Helper()
	lw.waitUntil(t, fmt.Sprintf("%q", want), func(l string) bool { return l == want })
}

// waitForContaining blocks until a line containing part has been read (a
// JSON log line, whose other fields vary).
func (lw *lineWaiter) waitForContaining(t testing.TB, part string) {
	t.Helper()
	lw.waitUntil(t, fmt.Sprintf("a line containing %q", part), func(l string) bool { return strings.Contains(l, part) })
}

func (lw *lineWaiter) waitUntil(t testing.TB, what string, match func(string) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		lw.mu.Lock()
		for _, l := range lw.lines {
			if match(l) {
				lw.mu.Unlock()
				return
			}
		}
		eof, cond := lw.eof, lw.cond
		lw.mu.Unlock()
		if eof {
			t.Fatalf("output ended before %s; got %q", what, lw.all())
		}
		select {
		case <-cond:
		case <-deadline:
			t.Fatalf("no %s within 60s; got %q", what, lw.all())
		}
	}
}

func (lw *lineWaiter) all() []string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return append([]string(nil), lw.lines...)
}

// newSQLiteEnv is newEnv on a SQLite file of the test's own.
func newSQLiteEnv(t testing.TB) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "e2e")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &env{t: t, url: sysdb.SQLiteURL(filepath.Join(dir, "dbos.sqlite")), schema: sysdb.DefaultSchema, dir: dir}
}

// onEachBackend runs body as two parallel subtests, on Postgres and on
// SQLite: behaviour the engine owes whatever its system database.
func onEachBackend(t *testing.T, body func(t *testing.T, e *env)) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		body(t, newEnv(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		body(t, newSQLiteEnv(t))
	})
}
