package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// dbosAdminReferencePython is the interpreter of a virtualenv with DBOS
// Python 2.31.1, the last release with DBOS's admin server
// (scripts/dbos-python.sh 2.31.1).
var dbosAdminReferencePython = sync.OnceValues(func() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "dbos-python.sh"), "2.31.1")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/dbos-python.sh 2.31.1: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// adminPair asks the same of DBOS's admin server and of the agent's.
type adminPair struct {
	t               *testing.T
	dbos, agentBase string
}

type adminAnswer struct {
	status      int
	contentType string
	body        []byte
}

func (p adminPair) call(base, method, path, body string) adminAnswer {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	require.NoError(p.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.t, err, "%s %s%s", method, base, path)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	return adminAnswer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: raw}
}

// both makes the request of each server and requires the same status.
func (p adminPair) both(method, path, body string) (dbos, agent adminAnswer) {
	p.t.Helper()
	dbos = p.call(p.dbos, method, path, body)
	agent = p.call(p.agentBase, method, path, body)
	require.Equal(p.t, dbos.status, agent.status, "%s %s: DBOS answered %d (%s), the agent %d (%s)",
		method, path, dbos.status, dbos.body, agent.status, agent.body)
	return dbos, agent
}

// sameJSON requires both servers to answer the request with equal JSON.
func (p adminPair) sameJSON(method, path, body string) any {
	p.t.Helper()
	dbos, agent := p.both(method, path, body)
	var want, got any
	require.NoError(p.t, json.Unmarshal(dbos.body, &want), "DBOS: %s", dbos.body)
	require.NoError(p.t, json.Unmarshal(agent.body, &got), "agent: %s", agent.body)
	require.Equal(p.t, want, got, "%s %s %s", method, path, body)
	return got
}

func (p adminPair) workflow(base, id string) map[string]any {
	p.t.Helper()
	a := p.call(base, "GET", "/workflows/"+id, "")
	require.Equal(p.t, http.StatusOK, a.status, "%s: %s", id, a.body)
	var wf map[string]any
	require.NoError(p.t, json.Unmarshal(a.body, &wf))
	return wf
}

// awaitStatus waits, reading DBOS's server, for a workflow to reach status.
func (p adminPair) awaitStatus(id, status string) map[string]any {
	p.t.Helper()
	var wf map[string]any
	require.Eventually(p.t, func() bool {
		a := p.call(p.dbos, "GET", "/workflows/"+id, "")
		if a.status != http.StatusOK {
			return false
		}
		wf = nil
		_ = json.Unmarshal(a.body, &wf)
		return wf["Status"] == status
	}, 60*time.Second, 50*time.Millisecond, "%s never reached %s: %v", id, status, wf)
	return wf
}

// The agent's admin server answers as DBOS's own did, request for request,
// on the same rows: DBOS Python 2.31.1 (the last release with an admin
// server) runs an application with its admin server on one database, the
// agent serves the same database, and every endpoint is asked of both.
func TestAdminAnswersAsDBOSAdminServerDoes(t *testing.T) {
	t.Parallel()
	python, err := dbosAdminReferencePython()
	require.NoError(t, err)
	e := newEnv(t)
	e.url = pgtest.Database(t)
	e.schema = "dbos"
	agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
	agentBase := adminURL(t, agent)

	port := freeLoopbackPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app := exec.CommandContext(ctx, python, filepath.Join("testdata", "dbos_admin_reference.py"), e.url, fmt.Sprint(port))
	stdin, err := app.StdinPipe()
	require.NoError(t, err)
	stdout, err := app.StdoutPipe()
	require.NoError(t, err)
	var appLog bytes.Buffer
	app.Stderr = &appLog
	require.NoError(t, app.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = app.Wait()
		if t.Failed() {
			t.Logf("DBOS Python 2.31.1 application log:\n%s", appLog.String())
		}
	})
	newLineWaiter(stdout).waitFor(t, "READY")
	p := adminPair{t: t, dbos: fmt.Sprintf("http://127.0.0.1:%d", port), agentBase: agentBase}

	// The queues: DBOS lists those its application declared, the agent
	// those its applications registered (here by a client, with the same
	// limits), and each its internal queue.
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{
		{Name: "refq", Concurrency: intp(3), WorkerConcurrency: intp(2)},
	}}, nil))
	dbosQueues, agentQueues := p.both("GET", "/dbos-workflow-queues-metadata", "")
	byName := func(raw []byte) map[string]any {
		var list []map[string]any
		require.NoError(t, json.Unmarshal(raw, &list), "%s", raw)
		named := map[string]any{}
		for _, q := range list {
			named[q["name"].(string)] = q
		}
		require.Len(t, named, len(list), "a queue listed twice: %s", raw)
		return named
	}
	require.Equal(t, byName(dbosQueues.body), byName(agentQueues.body))

	// Health and recovery.
	dbosHealth, agentHealth := p.both("GET", "/dbos-healthz", "")
	require.Equal(t, string(dbosHealth.body), string(agentHealth.body))
	require.Equal(t, dbosHealth.contentType, agentHealth.contentType)
	p.sameJSON("POST", "/dbos-workflow-recovery", `["no-such-executor"]`)

	// A workflow, each kind of value: inputs with kwargs, a nested output,
	// a bare string, an exception, a child, a step's error.
	for _, id := range []string{"ref-parent", "ref-child", "ref-fails", "ref-plain", "ref-queued", "ref-waiting"} {
		p.sameJSON("GET", "/workflows/"+id, "")
		p.sameJSON("GET", "/workflows/"+id+"/steps", "")
	}
	parent := p.workflow(agentBase, "ref-parent")
	require.Equal(t, "{'args': (1, 2), 'kwargs': {'label': 'lbl'}}", parent["Input"])
	require.Equal(t, "it broke", p.workflow(agentBase, "ref-fails")["Error"])
	require.Equal(t, "just text", p.workflow(agentBase, "ref-plain")["Output"])
	dbosMissing, agentMissing := p.both("GET", "/workflows/no-such-workflow", "")
	require.Equal(t, string(dbosMissing.body), string(agentMissing.body))

	// The listings, under DBOS's filters.
	for _, filters := range []string{
		``, `{}`, `{"load_input":true,"load_output":true}`, `{"sort_desc":true,"limit":2,"offset":1}`,
		`{"workflow_uuids":["ref-fails","ref-plain"],"load_output":true}`, `{"status":"ERROR","load_input":true}`,
		`{"status":["SUCCESS","ERROR"],"workflow_name":"plain"}`, `{"workflow_id_prefix":"ref-p"}`,
		`{"parent_workflow_id":"ref-parent"}`, `{"application_version":"ref-v1","sort_desc":true}`,
		`{"start_time":"2000-01-01T00:00:00","end_time":"2999-01-01T00:00:00"}`,
	} {
		p.sameJSON("POST", "/workflows", filters)
	}
	for _, filters := range []string{``, `{}`, `{"queue_name":"refq","load_input":true}`, `{"status":"PENDING"}`, `{"queue_name":"other"}`} {
		p.sameJSON("POST", "/queues", filters)
	}
	dbosBad, agentBad := p.both("POST", "/workflows", `{"limit":`)
	require.Contains(t, string(dbosBad.body), "Invalid JSON input")
	require.Contains(t, string(agentBad.body), "Invalid JSON input")

	// Fork, from each server, with a chosen id: the same answer and the same
	// new row. DBOS 2.31.1 runs only its own fork: it reads a workflow's
	// inputs from workflow_status.inputs, where DBOS 3.4's layout (the
	// agent's) keeps them in workflow_input, so the agent's fork is
	// compared by what was written when it was made (2.31.1 dequeues it and
	// fails it for want of inputs).
	for _, server := range []struct{ base, id string }{{p.dbos, "fork-by-dbos"}, {agentBase, "fork-by-agent"}} {
		a := p.call(server.base, "POST", "/workflows/ref-parent/fork", fmt.Sprintf(`{"start_step":3,"new_workflow_id":%q}`, server.id))
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		require.JSONEq(t, fmt.Sprintf(`{"workflow_id":%q}`, server.id), string(a.body))
	}
	p.awaitStatus("fork-by-dbos", "SUCCESS")
	forkedByDBOS, forkedByAgent := p.workflow(agentBase, "fork-by-dbos"), p.workflow(agentBase, "fork-by-agent")
	for _, perRun := range []string{"WorkflowUUID", "Status", "CreatedAt", "UpdatedAt", "DequeuedAt", "CompletedAt", "ExecutorID", "Output", "Error"} {
		delete(forkedByDBOS, perRun)
		delete(forkedByAgent, perRun)
	}
	require.Equal(t, forkedByDBOS, forkedByAgent)
	require.Equal(t, "ref-parent", forkedByAgent["ForkedFrom"])
	p.sameJSON("GET", "/workflows/fork-by-dbos", "")
	// Both forks copied the steps below the start step, alike.
	copied := func(id string) []any {
		var steps []any
		require.NoError(t, json.Unmarshal(p.call(agentBase, "GET", "/workflows/"+id+"/steps", "").body, &steps))
		for _, s := range steps {
			step := s.(map[string]any)
			delete(step, "started_at_epoch_ms")
			delete(step, "completed_at_epoch_ms")
		}
		return steps
	}
	require.Len(t, copied("fork-by-agent"), 2)
	require.Equal(t, copied("fork-by-agent"), copied("fork-by-dbos")[:2])

	// Restart: a new workflow id either way, in the same shape.
	for _, base := range []string{p.dbos, agentBase} {
		a := p.call(base, "POST", "/workflows/ref-plain/restart", "")
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		var body map[string]string
		require.NoError(t, json.Unmarshal(a.body, &body))
		require.Len(t, body, 1)
		require.NotEmpty(t, body["workflow_id"])
		restarted := p.workflow(agentBase, body["workflow_id"])
		require.Equal(t, "ref-plain", restarted["ForkedFrom"])
		require.Equal(t, "{'args': ('just text',), 'kwargs': {}}", restarted["Input"])
	}

	// Cancel on the agent's server is seen on DBOS's, resume on DBOS's is
	// seen on the agent's, and both answer 204 with no body.
	cancelled := p.call(agentBase, "POST", "/workflows/ref-waiting/cancel", "")
	require.Equal(t, http.StatusNoContent, cancelled.status, "%s", cancelled.body)
	p.awaitStatus("ref-waiting", "CANCELLED")
	resumed := p.call(p.dbos, "POST", "/workflows/ref-waiting/resume", "")
	require.Equal(t, http.StatusNoContent, resumed.status)
	require.Contains(t, []any{"ENQUEUED", "PENDING"}, p.workflow(agentBase, "ref-waiting")["Status"])
	require.Equal(t, http.StatusNoContent, p.call(p.dbos, "POST", "/workflows/ref-waiting/cancel", "").status)
	require.Equal(t, http.StatusNoContent, p.call(agentBase, "POST", "/workflows/ref-waiting/resume", "").status)
	p.sameJSON("GET", "/workflows/ref-waiting", "")

	// Sweeps that change nothing here answer alike.
	past := time.Now().Add(-24 * time.Hour).UnixMilli()
	p.both("POST", "/dbos-global-timeout", fmt.Sprintf(`{"cutoff_epoch_timestamp_ms":%d}`, past))
	p.both("POST", "/dbos-garbage-collect", fmt.Sprintf(`{"cutoff_epoch_timestamp_ms":%d}`, past))
	// (The agent's forks are left out: DBOS 2.31.1 cannot read their inputs.)
	p.sameJSON("POST", "/workflows", `{"workflow_uuids":["ref-parent","ref-child","ref-fails","ref-plain","ref-queued","ref-waiting","fork-by-dbos"],"load_input":true,"load_output":true}`)

	dbosOff, agentOff := p.both("GET", "/deactivate", "")
	require.Equal(t, string(dbosOff.body), string(agentOff.body))
}
