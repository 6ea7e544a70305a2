// Package ctest runs the C programs of c/ against libdbos.so: they are
// compiled with gcc against libdbos.h alone (the header is the contract) and
// linked to, or dlopen, the library built from ../ as `make lib` builds it.
package ctest

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

var (
	// dir holds the library, the header alone (include/), the programs and
	// the agent binary.
	dir        string
	libPath    string
	agentPath  string
	testProg   string
	dlopenProg string
)

func TestMain(m *testing.M) {
	var err error
	dir, err = os.MkdirTemp("", "libdbos-ctest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = build()
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

func build() error {
	libPath = filepath.Join(dir, "libdbos.so")
	agentPath = filepath.Join(dir, "dbos-agent")
	testProg = filepath.Join(dir, "libdbos_test")
	dlopenProg = filepath.Join(dir, "dlopen_test")
	include := filepath.Join(dir, "include")
	header, err := os.ReadFile("../libdbos.h")
	if err != nil {
		return err
	}
	if err := os.Mkdir(include, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(include, "libdbos.h"), header, 0o644); err != nil {
		return err
	}
	// The library's own generated header goes beside it in dir/, which the
	// programs are not compiled against.
	if err := run("go", "build", "-buildmode=c-shared", "-o", libPath, ".."); err != nil {
		return err
	}
	if err := run("go", "build", "-o", agentPath, "../../cmd/dbos-agent"); err != nil {
		return err
	}
	cflags := []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-I", include}
	if err := run("gcc", append(cflags, "-o", testProg, "c/libdbos_test.c", "-L", dir, "-ldbos", "-lpthread")...); err != nil {
		return err
	}
	// POSIX for sigaction.
	return run("gcc", append(cflags, "-D_POSIX_C_SOURCE=200809L", "-o", dlopenProg, "c/dlopen_test.c", "-ldl")...)
}

// vectors are the golden frames the programs send and expect, as hex.
func vectors(t *testing.T) map[string]string {
	raw, err := os.ReadFile("../../protocol/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct {
		Name string `json:"name"`
		Hex  string `json:"hex"`
	}
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, v := range vs {
		byName[v.Name] = v.Hex
	}
	// A successful reply to id 1 begins as the golden one does after its
	// length prefix, up to its body (its fields carry this agent's version
	// and session).
	head, _ := hex.DecodeString(byName["hello_reply"])
	end := strings.Index(string(head), "body") + len("body")
	return map[string]string{
		"DBOS_TEST_HELLO":       byName["hello_client"],
		"DBOS_TEST_HELLO_REPLY": hex.EncodeToString(head[4:end]),
		"DBOS_TEST_PING":        byName["ping"],
		"DBOS_TEST_PING_REPLY":  byName["ping_reply"],
	}
}

func programEnv(t *testing.T, config map[string]any) []string {
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LD_LIBRARY_PATH="+dir, "DBOS_TEST_CONFIG="+string(raw))
	for k, v := range vectors(t) {
		env = append(env, k+"="+v)
	}
	return env
}

// runProgram runs a C program to its end and checks it passed.
func runProgram(t *testing.T, config map[string]any, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = programEnv(t, config)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", filepath.Base(prog), out)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(prog), err)
	}
	if !strings.Contains(string(out), " passed, 0 failed") {
		t.Fatalf("%s did not report its checks passed", filepath.Base(prog))
	}
	return string(out)
}

func embeddedConfig(t *testing.T) map[string]any {
	return map[string]any{"mode": "embedded", "database_url": pgtest.URL(t), "schema": pgtest.Schema(t)}
}

// embeddedSQLiteConfig is embeddedConfig on a SQLite file of the test's own:
// the engine and SQLite (modernc.org/sqlite, pure Go) in the host process.
func embeddedSQLiteConfig(t *testing.T) map[string]any {
	return map[string]any{"mode": "embedded", "database_url": sysdb.SQLiteURL(filepath.Join(t.TempDir(), "dbos.sqlite"))}
}

func TestCEmbedded(t *testing.T) {
	for name, config := range map[string]func(*testing.T) map[string]any{"postgres": embeddedConfig, "sqlite": embeddedSQLiteConfig} {
		t.Run(name, func(t *testing.T) {
			out := runProgram(t, config(t), testProg)
			if !strings.Contains(out, "dbos_version: libdbos ") {
				t.Fatal("the program did not print dbos_version")
			}
		})
	}
}

func TestCDlopenTwice(t *testing.T) {
	out := runProgram(t, embeddedConfig(t), dlopenProg, libPath)
	if strings.Count(out, ": libdbos ") != 2 {
		t.Fatal("the library was not loaded twice")
	}
}

// privateDir is a directory for sockets that only this user may use (the
// agent refuses others).
func privateDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "libdbos-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startServe runs `dbos-agent serve` on a socket of its own and waits until
// it listens.
func startServe(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	socket := filepath.Join(privateDir(t), "agent.sock")
	cmd := exec.Command(agentPath, "serve", "--socket", socket, "--database-url", pgtest.URL(t),
		"--schema", pgtest.Schema(t), "--grace-period", "1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "dbos-agent listening") {
				once = true
				close(listening)
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(60 * time.Second):
		t.Fatal("the agent did not start listening")
	}
	return cmd, socket
}

func TestCConnect(t *testing.T) {
	_, socket := startServe(t)
	runProgram(t, map[string]any{"mode": "connect", "socket": socket}, testProg)
}

// TestCConnectAgentGone: the agent a handle is connected to stops; the
// handle says so (DBOS_CLOSED) and a send to its socket fails rather than
// kill the host with SIGPIPE.
func TestCConnectAgentGone(t *testing.T) {
	agent, socket := startServe(t)
	host := exec.Command(testProg)
	host.Env = append(programEnv(t, map[string]any{"mode": "connect", "socket": socket}), "DBOS_TEST_AGENT_GONE=1")
	stdin, err := host.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	host.Stderr = os.Stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "ready" {
	}
	if lines.Text() != "ready" {
		_ = host.Process.Kill()
		t.Fatal("the host did not open its handle")
	}
	if err := agent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = agent.Wait()
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for lines.Scan() {
		out = append(out, lines.Text())
	}
	err = host.Wait()
	t.Logf("host: %v", out)
	if err != nil {
		t.Fatalf("the host ended with %v once its agent was gone", err)
	}
	if len(out) == 0 || !strings.HasSuffix(out[len(out)-1], " passed, 0 failed") {
		t.Fatal("the host did not report its checks passed")
	}
}

// TestCHostSignals: with the library loaded and an engine running, SIGTERM
// and SIGINT still have their default actions on the host (the library
// installs no handler for them).
func TestCHostSignals(t *testing.T) {
	// On SQLite too: its driver's libc links os/signal (see
	// TestNoSignalHandlers), and the engine must still leave these be.
	for backend, config := range map[string]func(*testing.T) map[string]any{"postgres": embeddedConfig, "sqlite": embeddedSQLiteConfig} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			t.Run(backend+"/"+sig.String(), func(t *testing.T) {
				cmd := startHost(t, config(t))
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				var err error
				select {
				case err = <-done:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-done
					t.Fatalf("%v did not stop the host", sig)
				}
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatalf("the host exited with %v, not killed by %v", err, sig)
				}
				ws := exit.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != sig {
					t.Fatalf("the host ended with %v, not by %v", ws, sig)
				}
			})
		}
	}
}

func sidecarConfig(t *testing.T, runtimeDir string) map[string]any {
	return map[string]any{"mode": "sidecar", "database_url": pgtest.URL(t), "schema": pgtest.Schema(t),
		"agent_path": agentPath, "runtime_dir": runtimeDir, "orphan_grace_sec": 3, "log_level": "info"}
}

func TestCSidecar(t *testing.T) {
	runtimeDir := privateDir(t)
	runProgram(t, sidecarConfig(t, runtimeDir), testProg)
	// Its last handle closed, the host stopped its child and forgot it.
	records, _ := filepath.Glob(filepath.Join(runtimeDir, "sidecar-*.json"))
	if len(records) != 0 {
		t.Fatalf("reattach records remain after the host closed: %v", records)
	}
}

// startHost runs the C program as a host that opens its handle, says
// "ready" and waits to be killed.
func startHost(t *testing.T, config map[string]any) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testProg)
	cmd.Env = append(programEnv(t, config), "DBOS_TEST_SIGTERM=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the host did not open its handle")
	}
	return cmd
}

// crash SIGKILLs a host and waits for it to be gone.
func crash(t *testing.T, host *exec.Cmd) {
	t.Helper()
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
}

// childPID is the pid of the sidecar child of record in runtimeDir.
func childPID(t *testing.T, runtimeDir string) int {
	t.Helper()
	records, _ := filepath.Glob(filepath.Join(runtimeDir, "sidecar-*.json"))
	if len(records) != 1 {
		t.Fatalf("%d reattach records in the runtime dir, want 1", len(records))
	}
	raw, err := os.ReadFile(records[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.PID
}

// running says whether pid is a live process (not gone, not a zombie
// nobody reaped).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitGone waits up to within for pid to end; the child is not the test's
// to wait for (its host was), so its state is read from /proc.
func waitGone(t *testing.T, pid int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for running(pid) {
		if time.Since(start) > within {
			t.Fatalf("the sidecar pid %d still runs %s on", pid, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// TestCSidecarReattach: a host SIGKILLed leaves its child running; the next
// host of the same config reattaches to it (no second child), and stops it
// when it closes. A child whose host crashed and that nobody reattaches to
// stops on its own after its orphan grace.
func TestCSidecarReattach(t *testing.T) {
	runtimeDir := privateDir(t)
	config := sidecarConfig(t, runtimeDir)
	crash(t, startHost(t, config))
	pid := childPID(t, runtimeDir)
	if !running(pid) {
		t.Fatalf("the sidecar pid %d died with its host", pid)
	}
	out := runProgram(t, config, testProg)
	if !strings.Contains(out, "reattached to the sidecar") || !strings.Contains(out, fmt.Sprintf(`"pid":%d`, pid)) {
		t.Fatalf("the second host did not reattach to the sidecar pid %d", pid)
	}
	waitGone(t, pid, 10*time.Second)

	crash(t, startHost(t, config))
	orphan := childPID(t, runtimeDir)
	if orphan == pid {
		t.Fatal("a stopped child was reattached to")
	}
	took := waitGone(t, orphan, 30*time.Second)
	t.Logf("the orphaned sidecar stopped %s after its host was killed (orphan grace 3s)", took)
}

// TestNoSignalHandlers: the library installs no signal handler (the C runs
// check the host's SIGINT and SIGTERM still work). os/signal is linked only
// through the packages allowed below, none of which calls it on the
// library's paths.
func TestNoSignalHandlers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "..").Output()
	if err != nil {
		t.Fatal(err)
	}
	// These import os/signal but install a handler only from code the
	// library never runs: go-plugin and oklog/run in a plugin's serve loop,
	// modernc.org/libc in its signal(3) (SQLite's C code never calls it;
	// TestCHostSignals checks the library's hosts keep their defaults).
	allowed := map[string]bool{"github.com/hashicorp/go-plugin": true, "github.com/oklog/run": true, "modernc.org/libc": true}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || !slices.Contains(fields[1:], "os/signal") {
			continue
		}
		if !allowed[fields[0]] {
			t.Errorf("%s imports os/signal and is linked into libdbos.so", fields[0])
		}
	}
}
