package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// requireRoot fails, never skips, a test that makes files and processes of
// another user: the machine and CI run the tests as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatalf("this test must run as root (uid %d): it chowns files to nobody and runs a process as nobody", os.Getuid())
	}
}

// nobody is the uid and gid of the user "nobody".
func nobody(t *testing.T) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup("nobody")
	require.NoError(t, err, "the user nobody must exist")
	uid, err = strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err = strconv.Atoi(u.Gid)
	require.NoError(t, err)
	return uid, gid
}

// mkdir makes dir with exactly mode (whatever the umask).
func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, mode))
}

// serveRefused runs serve (with --socket unless socket is "") and returns
// its stderr: the agent must exit non-zero, with one line, before it opens
// the database or listens.
func serveRefused(t *testing.T, e *env, socket string, extraEnv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"serve", "--database-url", e.url, "--schema", e.schema}
	if socket != "" {
		args = append(args, "--socket", socket)
	}
	cmd := exec.CommandContext(ctx, agentBinary, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, stderr.String())
	require.NotEqual(t, 0, exit.ExitCode())
	require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line:\n%s", stderr.String())
	return stderr.String()
}

func TestServeRefusesASocketPathOthersCouldTamperWith(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	uid, gid := nobody(t)
	who := fmt.Sprintf("uid %d (nobody)", uid)
	e := newEnv(t)

	t.Run("directory of another user", func(t *testing.T) {
		dir := filepath.Join(e.dir, "foreign")
		mkdir(t, dir, 0o700)
		require.NoError(t, os.Chown(dir, uid, gid))
		line := serveRefused(t, e, filepath.Join(dir, "agent.sock"))
		require.Contains(t, line, "unsafe socket directory "+dir+" (owner "+who+", mode 0700)")
		require.Contains(t, line, "it must be owned by uid 0 (root) and not writable by group or others")
		require.Contains(t, line, "remove it")
		require.Contains(t, line, "--socket")
		_, err := os.Lstat(filepath.Join(dir, "agent.sock"))
		require.ErrorIs(t, err, os.ErrNotExist, "nothing is created in it")
	})

	t.Run("world-writable directory of its own", func(t *testing.T) {
		dir := filepath.Join(e.dir, "open")
		mkdir(t, dir, 0o777)
		line := serveRefused(t, e, filepath.Join(dir, "agent.sock"))
		require.Contains(t, line, "unsafe socket directory "+dir+" (owner uid 0 (root), mode 0777)")
	})

	t.Run("default directory made in advance by another user", func(t *testing.T) {
		// The hijack of the issue: /tmp/dbos-agent-<uid> created by
		// someone else before the agent first runs.
		tmp := filepath.Join(e.dir, "tmp")
		mkdir(t, tmp, 0o777|os.ModeSticky)
		planted := filepath.Join(tmp, "dbos-agent-0")
		mkdir(t, planted, 0o777)
		require.NoError(t, os.Chown(planted, uid, gid))
		line := serveRefused(t, e, "", "TMPDIR="+tmp, "XDG_RUNTIME_DIR=", "DBOS_AGENT_SOCKET=")
		require.Contains(t, line, "unsafe socket directory "+planted+" (owner "+who+", mode 0777)")
	})

	t.Run("symlink of another user", func(t *testing.T) {
		private := filepath.Join(e.dir, "private")
		mkdir(t, private, 0o700)
		link := filepath.Join(e.dir, "link")
		require.NoError(t, os.Symlink(private, link))
		require.NoError(t, os.Lchown(link, uid, gid))
		line := serveRefused(t, e, filepath.Join(link, "agent.sock"))
		require.Contains(t, line, "unsafe symlink "+link+" (owner "+who+")")
	})

	t.Run("writable directory above it", func(t *testing.T) {
		// Whoever may write "shared" may rename "mine" and put their own
		// directory in its place.
		shared := filepath.Join(e.dir, "shared")
		mkdir(t, shared, 0o777)
		mine := filepath.Join(shared, "mine")
		mkdir(t, mine, 0o700)
		line := serveRefused(t, e, filepath.Join(mine, "agent.sock"))
		require.Contains(t, line, "unsafe directory "+shared+" (owner uid 0 (root), mode 0777)")
		require.Contains(t, line, "not writable by group or others unless sticky")
	})

	t.Run("socket file of another user", func(t *testing.T) {
		dir := filepath.Join(e.dir, "theirs")
		mkdir(t, dir, 0o700)
		socket := filepath.Join(dir, "agent.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
		require.NoError(t, err)
		ln.SetUnlinkOnClose(false)
		require.NoError(t, ln.Close())
		require.NoError(t, os.Lchown(socket, uid, gid))
		line := serveRefused(t, e, socket)
		require.Contains(t, line, "unsafe socket "+socket+" (owner "+who)
	})
}

func TestServeMakesItsDefaultSocketDirectoryPrivate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A temp directory like /tmp: anyone may write it, the sticky bit
	// keeps them from removing what is not theirs.
	tmp := filepath.Join(e.dir, "tmp")
	mkdir(t, tmp, 0o777|os.ModeSticky)
	dir := filepath.Join(tmp, "dbos-agent-"+strconv.Itoa(os.Getuid()))
	socket := filepath.Join(dir, "agent.sock")
	// A runtime directory that others may write is not used.
	runtime := filepath.Join(e.dir, "run")
	mkdir(t, runtime, 0o777)
	agent := e.startAgent(agentOptions{defaultSocket: socket,
		env: []string{"TMPDIR=" + tmp, "XDG_RUNTIME_DIR=" + runtime, "DBOS_AGENT_SOCKET="}})

	info, err := os.Lstat(dir)
	require.NoError(t, err)
	require.True(t, info.IsDir())
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "made 0700")
	require.Equal(t, uint32(os.Getuid()), info.Sys().(*syscall.Stat_t).Uid)
	info, err = os.Lstat(socket)
	require.NoError(t, err)
	require.NotZero(t, info.Mode()&os.ModeSocket)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpPing, protocol.Empty{}, nil))

	// A private runtime directory is where the socket goes; a symlink of
	// this user on the way is followed.
	e2 := newEnv(t)
	runtime2 := filepath.Join(e2.dir, "run")
	mkdir(t, runtime2, 0o700)
	link := filepath.Join(e2.dir, "link")
	require.NoError(t, os.Symlink(runtime2, link))
	agent2 := e2.startAgent(agentOptions{defaultSocket: filepath.Join(link, "dbos-agent.sock"),
		env: []string{"XDG_RUNTIME_DIR=" + link, "DBOS_AGENT_SOCKET="}})
	info, err = os.Lstat(filepath.Join(runtime2, "dbos-agent.sock"))
	require.NoError(t, err)
	require.NotZero(t, info.Mode()&os.ModeSocket)
	c2 := dialClient(t, agent2.socket)
	require.NoError(t, c2.Call(context.Background(), protocol.OpPing, protocol.Empty{}, nil))
}

// impostorHelper makes the test binary a process that listens where an
// agent would (run as another user by the test): it reports each
// connection as "received nothing", "received <op>" (the op of its first
// frame) or "received <n> bytes" (not a frame), and closes it after one
// frame or when the peer closes.
const (
	impostorHelper    = "impostor"
	impostorSocketEnv = "DBOS_E2E_IMPOSTOR_SOCKET"
)

func runImpostor() int {
	ln, err := net.Listen("unix", os.Getenv(impostorSocketEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "impostor:", err)
		return 1
	}
	fmt.Println("ready")
	for {
		conn, err := ln.Accept()
		if err != nil {
			return 0
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(conn)
		report := "received nothing"
		var header [4]byte
		n, err := io.ReadFull(r, header[:])
		if err == nil {
			body := make([]byte, binary.BigEndian.Uint32(header[:]))
			k, err := io.ReadFull(r, body)
			n += k
			env, decodeErr := protocol.DecodeEnvelope(body)
			if err == nil && decodeErr == nil {
				report = "received " + env.Op
			}
		}
		if n > 0 && report == "received nothing" {
			report = fmt.Sprintf("received %d bytes", n)
		}
		conn.Close()
		fmt.Println(report)
	}
}

func TestClientRefusesAnAgentOfAnotherUser(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	uid, gid := nobody(t)
	// nobody must reach the binary and the socket's directory.
	top, err := os.MkdirTemp("", "e2e")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(top) })
	require.NoError(t, os.Chmod(top, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	binary := filepath.Join(top, "impostor")
	copyFile(t, self, binary, 0o755)
	dir := filepath.Join(top, "sock")
	mkdir(t, dir, 0o700)
	require.NoError(t, os.Chown(dir, uid, gid))
	socket := filepath.Join(dir, "agent.sock")

	cmd := exec.Command(binary, "-test.run=^$")
	cmd.Dir = top
	cmd.Env = append(os.Environ(), helperEnv+"="+impostorHelper, impostorSocketEnv+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	out := newLineWaiter(stdout)
	out.waitFor(t, "ready")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hello := protocol.Hello{Role: protocol.RoleClient, AppName: "e2e"}
	_, err = client.Dial(ctx, socket, hello)
	var untrusted *client.UntrustedAgentError
	require.ErrorAs(t, err, &untrusted)
	require.Equal(t, uint32(uid), untrusted.UID)
	require.Contains(t, err.Error(), "refusing the dbos-agent socket "+socket+": it is served by uid "+strconv.Itoa(uid))
	out.waitFor(t, "received nothing")

	// A trusted user's socket passes the check: the hello goes out.
	_, err = client.Dial(ctx, socket, hello, client.TrustUIDs(uint32(uid)))
	require.Error(t, err, "the impostor closes without answering")
	require.NotErrorAs(t, err, &untrusted)
	out.waitFor(t, "received hello")
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
