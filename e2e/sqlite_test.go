package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// withoutDatabaseEnv is the environment with no system database chosen, and
// the user's data directory at dataHome.
func withoutDatabaseEnv(dataHome string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DBOS_SYSTEM_DATABASE_") && !strings.HasPrefix(kv, "XDG_DATA_HOME=") {
			out = append(out, kv)
		}
	}
	return append(out, "XDG_DATA_HOME="+dataHome)
}

// TestServeDefaultsToASQLiteFile: serve given no database keeps its system
// database in a SQLite file in the user's data directory, says so in its
// first log line, runs workflows on it, and the CLI, given no database
// either, reads them there.
func TestServeDefaultsToASQLiteFile(t *testing.T) {
	t.Parallel()
	e := newSQLiteEnv(t)
	dataHome := filepath.Join(e.dir, "data")
	socket := filepath.Join(e.dir, "agent.sock")
	cmd := exec.Command(agentBinary, "serve", "--socket", socket, "--grace-period", "1s")
	cmd.Env = withoutDatabaseEnv(dataHome)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := newLineWaiter(stderr)
	lines.waitForContaining(t, `"msg":"dbos-agent listening"`)
	var first struct {
		Msg  string `json:"msg"`
		Path string `json:"path"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines.all()[0]), &first), lines.all()[0])
	want := filepath.Join(dataHome, "dbos-agent", "dbos.sqlite")
	require.Contains(t, first.Msg, "the default SQLite file")
	require.Equal(t, want, first.Path)
	require.FileExists(t, want)

	effects := filepath.Join(e.dir, "effects")
	e.startWorkerProcess(socket, effects, false)
	c := dialClient(t, socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "wf-default-file", Name: "steps_wf", Inputs: stepsInputs(t, 3, 0), Serialization: "portable_json",
	}, nil))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-default-file").Status)

	list := exec.Command(agentBinary, "workflow", "list", "--json")
	list.Env = withoutDatabaseEnv(dataHome)
	out, err := list.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), `"wf-default-file"`)
	require.Contains(t, string(out), `"SUCCESS"`)
}

// TestSecondAgentOnASQLiteFileRefuses: one agent serves a file; a second
// one on it exits at once with a line that names the first, and the first
// goes on serving.
func TestSecondAgentOnASQLiteFileRefuses(t *testing.T) {
	t.Parallel()
	e := newSQLiteEnv(t)
	first := e.startAgent(agentOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second := exec.CommandContext(ctx, agentBinary, "serve", "--database-url", e.url,
		"--socket", filepath.Join(e.dir, "second.sock"))
	out, err := second.CombinedOutput()
	require.Error(t, err, "a second agent on the file started:\n%s", out)
	require.Contains(t, string(out), "already serves the SQLite system database")
	require.Contains(t, string(out), "pid "+strconv.Itoa(first.cmd.Process.Pid))

	effects := filepath.Join(e.dir, "effects")
	e.startWorkerProcess(first.socket, effects, false)
	c := dialClient(t, first.socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "wf-first-serves", Name: "steps_wf", Inputs: stepsInputs(t, 2, 0), Serialization: "portable_json",
	}, nil))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-first-serves").Status)
}
