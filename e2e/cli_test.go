package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// cli runs the agent binary's operator CLI and returns stdout, stderr and
// the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return cliWithEnv(t, nil, args...)
}

// cliWithEnv runs the CLI with env (os.Environ's form) as its whole
// environment; nil means the test's.
func cliWithEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(agentBinary, args...)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

func TestCLIShowsWorkflowsOfTheAgentAndTheGoSDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	effects := filepath.Join(e.dir, "effects")
	e.startWorkerProcess(agent.socket, effects, false)
	c := dialClient(t, agent.socket)
	ctx := context.Background()
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "cli-agent-wf", Name: "steps_wf", Inputs: stepsInputs(t, 3, 0), Serialization: "portable_json",
	}, nil))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "cli-agent-wf").Status)

	// The official Go SDK's client, on the database the agent migrated,
	// enqueues a workflow for an application that is not running.
	sdkCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sdk, err := dbos.NewClient(sdkCtx, dbos.ClientConfig{DatabaseURL: e.url, DatabaseSchema: e.schema})
	require.NoError(t, err)
	defer func() { _ = dbos.Shutdown(sdk, 10*time.Second) }()
	_, err = dbos.Enqueue[any](sdk, "sdk-queue", "SDKWorkflow", dbos.PortableWorkflowArgs{PositionalArgs: []any{"hi", 7}},
		dbos.WithEnqueueWorkflowID("cli-sdk-wf"))
	require.NoError(t, err)

	db := []string{"--database-url", e.url, "--schema", e.schema}
	out, stderr, code := cli(t, append([]string{"workflow", "list", "--json", "--payloads"}, db...)...)
	require.Equal(t, 0, code, stderr)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	byID := map[string]map[string]any{}
	for _, w := range listed {
		byID[w["workflow_id"].(string)] = w
	}
	require.Contains(t, byID, "cli-agent-wf")
	require.Contains(t, byID, "cli-sdk-wf")
	require.Equal(t, "SUCCESS", byID["cli-agent-wf"]["status"])
	require.Equal(t, `{"steps":3}`, byID["cli-agent-wf"]["output"])
	require.Equal(t, "ENQUEUED", byID["cli-sdk-wf"]["status"])
	require.Equal(t, "SDKWorkflow", byID["cli-sdk-wf"]["name"])
	require.Equal(t, "sdk-queue", byID["cli-sdk-wf"]["queue_name"])

	out, stderr, code = cli(t, append([]string{"workflow", "list", "--status", "success"}, db...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "cli-agent-wf")
	require.NotContains(t, out, "cli-sdk-wf")

	out, stderr, code = cli(t, append([]string{"workflow", "get", "cli-agent-wf"}, db...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "SUCCESS")
	require.Contains(t, out, "steps_wf")

	out, stderr, code = cli(t, append([]string{"workflow", "steps", "cli-agent-wf", "--json"}, db...)...)
	require.Equal(t, 0, code, stderr)
	var steps []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &steps))
	require.Len(t, steps, 3)
	require.Equal(t, "step-2", steps[1]["name"])
	require.Equal(t, "4", steps[1]["output"])

	out, stderr, code = cli(t, append([]string{"queue", "list", "--json"}, db...)...)
	require.Equal(t, 0, code, stderr)
	var queues []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &queues))
	require.Contains(t, queues, map[string]any{"name": "sdk-queue", "registered": false, "priority_enabled": false,
		"partition_queue": false, "enqueued": float64(1), "pending": float64(0), "delayed": float64(0)})

	out, stderr, code = cli(t, append([]string{"workflow", "cancel", "cli-sdk-wf"}, db...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "CANCELLED")
	out, stderr, code = cli(t, append([]string{"workflow", "resume", "cli-sdk-wf", "--queue", "sdk-queue"}, db...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "ENQUEUED")

	// The Go SDK reads the cancel/resume the CLI made.
	status, err := dbos.RetrieveWorkflow[any](sdk, "cli-sdk-wf")
	require.NoError(t, err)
	st, err := status.GetStatus()
	require.NoError(t, err)
	require.Equal(t, dbos.WorkflowStatusEnqueued, st.Status)

	_, stderr, code = cli(t, append([]string{"workflow", "get", "nope"}, db...)...)
	require.Equal(t, 1, code)
	require.Equal(t, "dbos-agent: workflow nope does not exist\n", stderr)
}

func TestCLIErrorsAreOneLineWithoutPassword(t *testing.T) {
	t.Parallel()
	_, stderr, code := cli(t, "workflow", "list", "--database-url", "postgres://u:hunter2@localhost:1/x?sslmode=disable")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	require.Contains(t, stderr, "cannot reach the system database")
	require.NotContains(t, stderr, "hunter2")

	_, stderr, code = cli(t, "workflow", "list", "--database-url", "postgres://u:hunter2@local host/x")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	require.Contains(t, stderr, "invalid database URL")
	require.NotContains(t, stderr, "hunter2")

	out, _, code := cli(t, "version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "system schema 125")
}

func TestServeRefusesSocketInUseAndShutsDownOnSIGTERM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	running := e.startAgent(agentOptions{})

	cmd := exec.Command(agentBinary, "serve", "--database-url", e.url, "--schema", e.schema, "--socket", running.socket)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "in use")

	info, err := os.Stat(running.socket)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	running.terminate(t)
	require.Contains(t, running.log(), "dbos-agent stopped")
	_, err = os.Stat(running.socket)
	require.True(t, os.IsNotExist(err), "the socket file is removed at shutdown")
}
