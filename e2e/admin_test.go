package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// adminAddrLine is the agent's log line naming the admin server's bound
// address (the tests ask for port 0).
var adminAddrLine = regexp.MustCompile(`"msg":"admin HTTP listening","addr":"([^"]+)"`)

// adminURL waits for the admin server's log line and returns its base URL
// (on loopback, whatever interface it bound).
func adminURL(t *testing.T, p *agentProc) string {
	t.Helper()
	p.waitForLog(t, "admin HTTP listening")
	m := adminAddrLine.FindStringSubmatch(p.log())
	require.NotNil(t, m, "no admin address in the log")
	_, port, err := net.SplitHostPort(m[1])
	require.NoError(t, err)
	// Readiness needs the notification listener, which connects just after
	// the engine starts.
	p.waitForLog(t, "notification listener connected")
	return "http://127.0.0.1:" + port
}

type adminResponse struct {
	status int
	body   []byte
}

// adminCall makes one admin request; token "" sends none.
func adminCall(t *testing.T, method, url, token, body string) adminResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return adminResponse{status: resp.StatusCode, body: raw}
}

func decodeAdmin[T any](t *testing.T, r adminResponse) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

func TestAdminHealthAndReadiness(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, agent)

		live := adminCall(t, "GET", base+"/livez", "", "")
		require.Equal(t, http.StatusOK, live.status)
		require.Equal(t, "alive", decodeAdmin[map[string]any](t, live)["status"])

		ready := adminCall(t, "GET", base+"/readyz", "", "")
		require.Equal(t, http.StatusOK, ready.status, "body: %s", ready.body)
		body := decodeAdmin[map[string]any](t, ready)
		require.Equal(t, "ready", body["status"])
		require.Equal(t, true, body["database_reachable"])
		require.Equal(t, true, body["listener_connected"])
		require.Equal(t, true, body["migrations_done"])

		health := adminCall(t, "GET", base+"/dbos-healthz", "", "")
		require.Equal(t, http.StatusOK, health.status)
		require.Equal(t, "healthy", string(health.body))

		// No pprof unless asked for.
		require.Equal(t, http.StatusNotFound, adminCall(t, "GET", base+"/debug/pprof/", "", "").status)
	})
}

func TestAdminListsWorkflowsAndStepsInDBOSShapes(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, agent)
		e.startWorkerProcess(agent.socket, filepath.Join(e.dir, "effects"), false)
		c := dialClient(t, agent.socket)
		ctx := context.Background()
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-admin", Name: "steps_wf", Inputs: stepsInputs(t, 3, 0), Serialization: "portable_json",
		}, nil))
		require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-admin").Status)

		listed := adminCall(t, "POST", base+"/workflows", "", `{"workflow_uuids":["wf-admin"],"sort_desc":true,"load_input":true,"load_output":true}`)
		require.Equal(t, http.StatusOK, listed.status, "body: %s", listed.body)
		wfs := decodeAdmin[[]map[string]any](t, listed)
		require.Len(t, wfs, 1)
		wf := wfs[0]
		require.Equal(t, "wf-admin", wf["WorkflowUUID"])
		require.Equal(t, "SUCCESS", wf["Status"])
		require.Equal(t, "steps_wf", wf["WorkflowName"])
		// str() of the portable output, as DBOS Python shows it.
		require.Equal(t, `{'steps': 3}`, wf["Output"])
		require.Equal(t, "local", wf["ExecutorID"])
		require.Equal(t, "0", wf["Priority"])
		for _, field := range []string{"WorkflowClassName", "WorkflowConfigName", "AuthenticatedUser", "AssumedRole",
			"AuthenticatedRoles", "Input", "Error", "CreatedAt", "UpdatedAt", "QueueName", "ApplicationVersion",
			"WorkflowTimeoutMS", "WorkflowDeadlineEpochMS", "DeduplicationID", "QueuePartitionKey", "ForkedFrom",
			"WasForkedFrom", "ParentWorkflowID", "DequeuedAt", "DelayUntilEpochMS", "CompletedAt", "Attributes",
			"ScheduleName", "ApplicationName"} {
			require.Contains(t, wf, field, "DBOS's WorkflowsOutput has %s", field)
		}
		created, ok := wf["CreatedAt"].(string)
		require.True(t, ok, "instants are epoch milliseconds as text: %v", wf["CreatedAt"])
		_, err := strconv.ParseInt(created, 10, 64)
		require.NoError(t, err)
		// Without load_input and load_output a listing carries no payloads.
		bare := decodeAdmin[[]map[string]any](t, adminCall(t, "POST", base+"/workflows", "", `{"workflow_uuids":["wf-admin"]}`))
		require.Len(t, bare, 1)
		require.Nil(t, bare[0]["Output"])
		require.Nil(t, bare[0]["Input"])

		// The name and status filters, as DBOS takes them (a string or a list).
		byName := decodeAdmin[[]map[string]any](t, adminCall(t, "POST", base+"/workflows", "", `{"workflow_name":"steps_wf","status":["SUCCESS"]}`))
		require.Len(t, byName, 1)
		none := decodeAdmin[[]map[string]any](t, adminCall(t, "POST", base+"/workflows", "", `{"status":"ERROR"}`))
		require.Empty(t, none)
		// One listing is bounded: past the bound, a clear 400 (page with offset).
		tooMany := adminCall(t, "POST", base+"/workflows", "", `{"limit":10001}`)
		require.Equal(t, http.StatusBadRequest, tooMany.status, "body: %s", tooMany.body)
		require.Contains(t, string(tooMany.body), "at most 10000")
		require.Equal(t, http.StatusBadRequest, adminCall(t, "POST", base+"/workflows", "", `{"limit":`).status)

		got := adminCall(t, "GET", base+"/workflows/wf-admin", "", "")
		require.Equal(t, http.StatusOK, got.status)
		require.Equal(t, "wf-admin", decodeAdmin[map[string]any](t, got)["WorkflowUUID"])
		require.Equal(t, http.StatusNotFound, adminCall(t, "GET", base+"/workflows/no-such-workflow", "", "").status)

		stepsResp := adminCall(t, "GET", base+"/workflows/wf-admin/steps", "", "")
		require.Equal(t, http.StatusOK, stepsResp.status)
		steps := decodeAdmin[[]map[string]any](t, stepsResp)
		require.Len(t, steps, 3)
		for i, s := range steps {
			require.Equal(t, float64(i+1), s["function_id"])
			require.Equal(t, fmt.Sprintf("step-%d", i+1), s["function_name"])
			require.Equal(t, fmt.Sprint((i+1)*(i+1)), s["output"])
			_, isText := s["started_at_epoch_ms"].(string)
			require.True(t, isText, "step instants are epoch milliseconds as text: %v", s["started_at_epoch_ms"])
			for _, field := range []string{"error", "child_workflow_id", "started_at_epoch_ms", "completed_at_epoch_ms"} {
				require.Contains(t, s, field, "DBOS's StepInfo has %s", field)
			}
		}

		// A fork from step 3 copies steps 1 and 2 and runs the third again.
		forked := adminCall(t, "POST", base+"/workflows/wf-admin/fork", "", `{"start_step":3,"new_workflow_id":"wf-admin-fork"}`)
		require.Equal(t, http.StatusOK, forked.status, "body: %s", forked.body)
		require.Equal(t, "wf-admin-fork", decodeAdmin[map[string]any](t, forked)["workflow_id"])
		require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-admin-fork").Status)
		forkWF := decodeAdmin[map[string]any](t, adminCall(t, "GET", base+"/workflows/wf-admin-fork", "", ""))
		require.Equal(t, "wf-admin", forkWF["ForkedFrom"])

		restarted := adminCall(t, "POST", base+"/workflows/wf-admin/restart", "", "")
		require.Equal(t, http.StatusOK, restarted.status, "body: %s", restarted.body)
		restartID, _ := decodeAdmin[map[string]any](t, restarted)["workflow_id"].(string)
		require.NotEmpty(t, restartID)
		require.NotEqual(t, "wf-admin", restartID)
		require.Equal(t, "SUCCESS", awaitResult(t, c, restartID).Status)
	})
}

func TestAdminCancelAndResumeTakeEffect(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, agent)
		c := dialClient(t, agent.socket)
		ctx := context.Background()
		// No worker serves it: it stays ENQUEUED until cancelled.
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-admin-cancel", Name: "nobody_serves", QueueName: "admin_q",
		}, nil))

		queued := decodeAdmin[[]map[string]any](t, adminCall(t, "POST", base+"/queues", "", `{"queue_name":"admin_q"}`))
		require.Len(t, queued, 1)
		require.Equal(t, "wf-admin-cancel", queued[0]["WorkflowUUID"])

		cancelled := adminCall(t, "POST", base+"/workflows/wf-admin-cancel/cancel", "", "")
		require.Equal(t, http.StatusNoContent, cancelled.status, "body: %s", cancelled.body)
		require.Equal(t, "CANCELLED", awaitResult(t, c, "wf-admin-cancel").Status)
		require.Empty(t, decodeAdmin[[]map[string]any](t, adminCall(t, "POST", base+"/queues", "", `{"queue_name":"admin_q"}`)))

		resumed := adminCall(t, "POST", base+"/workflows/wf-admin-cancel/resume", "", "")
		require.Equal(t, http.StatusNoContent, resumed.status, "body: %s", resumed.body)
		wf := decodeAdmin[map[string]any](t, adminCall(t, "GET", base+"/workflows/wf-admin-cancel", "", ""))
		require.Equal(t, "ENQUEUED", wf["Status"])

		require.Equal(t, http.StatusNotFound, adminCall(t, "POST", base+"/workflows/no-such-workflow/cancel", "", "").status)

		recovered := adminCall(t, "POST", base+"/dbos-workflow-recovery", "", `["some-dead-executor"]`)
		require.Equal(t, http.StatusOK, recovered.status, "body: %s", recovered.body)
		require.Equal(t, "[]\n", string(recovered.body))
	})
}

func TestAdminBeyondLoopbackWithoutTokenRefusesToStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{noWait: true, extraArgs: []string{"--admin-addr", "0.0.0.0:0"}})
	select {
	case <-agent.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent kept running without an admin token:\n%s", agent.log())
	}
	require.NotEqual(t, 0, agent.cmd.ProcessState.ExitCode())
	require.Contains(t, agent.log(), "needs a bearer token")
	require.NotContains(t, agent.log(), "dbos-agent listening")
}

func TestAdminTokenGuardsEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tokenFile := filepath.Join(e.dir, "admin-token")
	const token = "s3cret-admin-token"
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "0.0.0.0:0", "--admin-token-file", tokenFile, "--pprof"}})
	base := adminURL(t, agent)
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "wf-admin-token", Name: "nobody_serves", QueueName: "admin_q",
	}, nil))

	// Health stays open for load balancers.
	require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/dbos-healthz", "", "").status)
	require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/readyz", "", "").status)

	for _, tok := range []string{"", "wrong"} {
		r := adminCall(t, "POST", base+"/workflows/wf-admin-token/cancel", tok, "")
		require.Equal(t, http.StatusUnauthorized, r.status, "token %q", tok)
		require.Equal(t, http.StatusUnauthorized, adminCall(t, "POST", base+"/workflows", tok, "{}").status)
		require.Equal(t, http.StatusUnauthorized, adminCall(t, "GET", base+"/debug/pprof/", tok, "").status)
	}
	wf := decodeAdmin[map[string]any](t, adminCall(t, "GET", base+"/workflows/wf-admin-token", token, ""))
	require.Equal(t, "ENQUEUED", wf["Status"], "a refused cancel must not cancel")

	require.Equal(t, http.StatusNoContent, adminCall(t, "POST", base+"/workflows/wf-admin-token/cancel", token, "").status)
	require.Equal(t, "CANCELLED", awaitResult(t, c, "wf-admin-token").Status)
	require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/debug/pprof/", token, "").status)
}

func TestAdminGlobalTimeoutGarbageCollectAndDeactivate(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, agent)
		c := dialClient(t, agent.socket)
		ctx := context.Background()
		start := func(id string) {
			require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
				WorkflowID: id, Name: "nobody_serves", QueueName: "admin_q",
			}, nil))
		}
		start("wf-admin-old")
		cutoff := fmt.Sprintf(`{"cutoff_epoch_timestamp_ms":%d}`, time.Now().Add(time.Minute).UnixMilli())
		timedOut := adminCall(t, "POST", base+"/dbos-global-timeout", "", cutoff)
		require.Equal(t, http.StatusNoContent, timedOut.status, "body: %s", timedOut.body)
		require.Equal(t, "CANCELLED", awaitResult(t, c, "wf-admin-old").Status)
		require.Equal(t, http.StatusBadRequest, adminCall(t, "POST", base+"/dbos-global-timeout", "", `{}`).status)

		// The newest row stays; the older finished one is collected.
		start("wf-admin-new")
		collected := adminCall(t, "POST", base+"/dbos-garbage-collect", "", `{"rows_threshold":1}`)
		require.Equal(t, http.StatusNoContent, collected.status, "body: %s", collected.body)
		require.Equal(t, http.StatusNotFound, adminCall(t, "GET", base+"/workflows/wf-admin-old", "", "").status)
		require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/workflows/wf-admin-new", "", "").status)

		deactivated := adminCall(t, "GET", base+"/deactivate", "", "")
		require.Equal(t, http.StatusOK, deactivated.status)
		require.Equal(t, "deactivated", string(deactivated.body))
		ready := adminCall(t, "GET", base+"/readyz", "", "")
		require.Equal(t, http.StatusServiceUnavailable, ready.status)
		require.Equal(t, true, decodeAdmin[map[string]any](t, ready)["deactivated"])
		require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/livez", "", "").status)
	})
}

func TestAdminReadinessFailsWhileDraining(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
	base := adminURL(t, agent)
	worker := e.startWorkerProcess(agent.socket, filepath.Join(e.dir, "effects"), true)
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "wf-admin-drain", Name: "steps_wf", Inputs: stepsInputs(t, 3, 1), Serialization: "portable_json",
	}, nil))
	worker.out.waitFor(t, "recorded wf-admin-drain 1")
	require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/readyz", "", "").status)

	// The blocked run holds the drain for the whole grace period, and the
	// admin server answers through it.
	require.NoError(t, agent.cmd.Process.Signal(syscallSIGTERM))
	agent.waitForLog(t, "draining: no new work is taken")
	ready := adminCall(t, "GET", base+"/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, ready.status)
	require.Equal(t, true, decodeAdmin[map[string]any](t, ready)["draining"])
	require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/livez", "", "").status)
	select {
	case <-agent.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not stop after SIGTERM:\n%s", agent.log())
	}
	require.Equal(t, 0, agent.cmd.ProcessState.ExitCode())
}

// metricValue is the value of the sample named exactly series (name and
// labels as the text exposition prints them) in a /metrics scrape.
func metricValue(t *testing.T, scrape, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(scrape, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err, line)
			return v
		}
	}
	t.Fatalf("no %s in the scrape:\n%s", series, scrape)
	return 0
}

// TestAdminMetricsCountARun: /metrics on the admin server, scraped before
// and after a workflow of 3 steps, shows the step counter up by 3 and one
// more SUCCESS, on each backend.
func TestAdminMetricsCountARun(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, agent)
		scrape := func() string {
			r := adminCall(t, "GET", base+"/metrics", "", "")
			require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
			return string(r.body)
		}
		before := scrape()
		e.startWorkerProcess(agent.socket, filepath.Join(e.dir, "effects"), false)
		c := dialClient(t, agent.socket)
		require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-metrics", Name: "steps_wf", Inputs: stepsInputs(t, 3, 0), Serialization: "portable_json",
		}, nil))
		require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-metrics").Status)
		after := scrape()
		for series, rise := range map[string]float64{
			"dbos_agent_steps_recorded_total":                       3,
			`dbos_agent_workflows_finished_total{status="SUCCESS"}`: 1,
			"dbos_agent_workflows_started_total":                    1,
		} {
			require.Equal(t, rise, metricValue(t, after, series)-metricValue(t, before, series), series)
		}
		require.Equal(t, 1.0, metricValue(t, after, "dbos_agent_workers_connected"))
		// The pool's series, on either backend: its size, and acquires that
		// rose with the run.
		require.Positive(t, metricValue(t, after, "dbos_agent_db_pool_max_connections"))
		require.Greater(t, metricValue(t, after, "dbos_agent_db_pool_acquires_total"), metricValue(t, before, "dbos_agent_db_pool_acquires_total"))
		require.GreaterOrEqual(t, metricValue(t, after, "dbos_agent_db_retries_total"), 0.0)
	})
}

// TestAdminRecoveryOfAnotherExecutorIsCounted: a workflow left PENDING by
// an agent killed mid-run is put back on its queue by another agent's
// POST /dbos-workflow-recovery naming the dead executor, and counted in
// dbos_agent_workflows_recovered_total, on each backend.
func TestAdminRecoveryOfAnotherExecutorIsCounted(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		dead := e.startAgent(agentOptions{executorID: "dead-exec", socketName: "dead.sock"})
		worker := e.startWorkerProcess(dead.socket, filepath.Join(e.dir, "effects"), true)
		c := dialClient(t, dead.socket)
		require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-admin-orphan", Name: "steps_wf", Inputs: stepsInputs(t, 3, 1), Serialization: "portable_json",
		}, nil))
		worker.out.waitFor(t, "recorded wf-admin-orphan 1")
		dead.kill()
		<-dead.exited

		survivor := e.startAgent(agentOptions{executorID: "survivor", socketName: "survivor.sock",
			extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, survivor)
		recovered := adminCall(t, "POST", base+"/dbos-workflow-recovery", "", `["dead-exec"]`)
		require.Equal(t, http.StatusOK, recovered.status, "body: %s", recovered.body)
		require.Equal(t, []string{"wf-admin-orphan"}, decodeAdmin[[]string](t, recovered))
		wf := decodeAdmin[map[string]any](t, adminCall(t, "GET", base+"/workflows/wf-admin-orphan", "", ""))
		require.Equal(t, "ENQUEUED", wf["Status"])
		scrape := adminCall(t, "GET", base+"/metrics", "", "")
		require.Equal(t, 1.0, metricValue(t, string(scrape.body), "dbos_agent_workflows_recovered_total"))
	})
}
