package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
)

// The test binary doubles as a worker process (the go-plugin
// TestHelperProcess pattern): with helperEnv set, TestMain runs runHelper
// instead of the tests.
const (
	helperEnv        = "DBOS_E2E_HELPER"
	helperSocketEnv  = "DBOS_E2E_SOCKET"
	helperEffectsEnv = "DBOS_E2E_EFFECTS"
	helperBlockEnv   = "DBOS_E2E_BLOCK"
)

// stepsInput is the input of the helper's workflow "steps_wf".
type stepsInput struct {
	Steps int `json:"steps"`
	// BlockAfter makes a blocking helper hang after recording that step.
	BlockAfter int `json:"block_after"`
}

// runHelper is a worker process: it runs "steps_wf", whose every step
// appends "<workflow id> <step>" to the side-effects file, so that the test
// counts executions outside the process. It prints "ready" once connected,
// "recorded <workflow id> <step>" after each step it ran is durable and
// "replayed <workflow id> <step>" for a step taken from the history.
func runHelper() int {
	socket := os.Getenv(helperSocketEnv)
	effects := os.Getenv(helperEffectsEnv)
	block := os.Getenv(helperBlockEnv) == "1"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var w *client.Worker
	stepsWF := func(wf *client.Workflow, inputs *string) (*string, error) {
		var in stepsInput
		if err := json.Unmarshal([]byte(*inputs), &in); err != nil {
			return nil, err
		}
		for i := 1; i <= in.Steps; i++ {
			step := i
			executed := false
			_, err := wf.Step(fmt.Sprintf("step-%d", step), func(context.Context) (*string, error) {
				executed = true
				f, err := os.OpenFile(effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					return nil, err
				}
				defer f.Close()
				if _, err := fmt.Fprintf(f, "%s %d\n", wf.ID(), step); err != nil {
					return nil, err
				}
				out := strconv.Itoa(step * step)
				return &out, nil
			})
			if err != nil {
				return nil, err
			}
			if executed {
				fmt.Printf("recorded %s %d\n", wf.ID(), step)
			} else {
				fmt.Printf("replayed %s %d\n", wf.ID(), step)
			}
			if block && step == in.BlockAfter {
				select {} // hang here until killed
			}
		}
		out := fmt.Sprintf(`{"steps":%d}`, in.Steps)
		return &out, nil
	}
	var err error
	w, err = client.NewWorker(ctx, socket, client.WorkerConfig{
		AppName:   "e2e",
		Workflows: map[string]client.WorkflowFunc{"steps_wf": stepsWF},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: connect:", err)
		return 1
	}
	fmt.Println("ready")
	<-w.Client.Done()
	return 0
}

// workerProc is a helper worker process.
type workerProc struct {
	cmd    *exec.Cmd
	out    *lineWaiter
	exited chan struct{}
}

func (e *env) startWorkerProcess(socket, effects string, block bool) *workerProc {
	t := e.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperSocketEnv+"="+socket, helperEffectsEnv+"="+effects)
	if block {
		cmd.Env = append(cmd.Env, helperBlockEnv+"=1")
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &workerProc{cmd: cmd, out: newLineWaiter(stdout), exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	p.out.waitFor(t, "ready")
	return p
}

func (p *workerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// effectCounts reads the side-effects file: how often each step ran.
func effectCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]int{}
	}
	require.NoError(t, err)
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line != "" {
			counts[line]++
		}
	}
	return counts
}
