package e2e

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// tcpProxy stands between the agent and Postgres so a test can take the
// database away and bring it back.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func newTCPProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.down {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// cut drops every connection and refuses new ones.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// proxiedURL puts a proxy between the test's Postgres and whoever uses the
// returned URL (an agent, through agentOptions.databaseURL), so the test can
// take the database away and bring it back.
func (e *env) proxiedURL() (string, *tcpProxy) {
	e.t.Helper()
	u, err := url.Parse(e.url)
	require.NoError(e.t, err)
	proxy := newTCPProxy(e.t, u.Host)
	u.Host = proxy.ln.Addr().String()
	return u.String(), proxy
}

func TestDatabaseOutageMidRunLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxied, proxy := e.proxiedURL()
	agent := e.startAgent(agentOptions{databaseURL: proxied})

	ctx := context.Background()
	step1Done := make(chan struct{})
	resume := make(chan struct{})
	w, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{AppName: "e2e",
		Workflows: map[string]client.WorkflowFunc{"outage": func(wf *client.Workflow, _ *string) (*string, error) {
			if _, err := wf.Step("before", func(context.Context) (*string, error) { return str("1"), nil }); err != nil {
				return nil, err
			}
			close(step1Done)
			<-resume
			// Recorded while the database is away: the agent retries until
			// it is back, and only then acknowledges.
			if _, err := wf.Step("during", func(context.Context) (*string, error) { return str("2"), nil }); err != nil {
				return nil, err
			}
			return str("survived"), nil
		}}})
	require.NoError(t, err)
	defer w.Close()
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "outage-wf", Name: "outage"}, nil))
	<-step1Done

	proxy.cut()
	close(resume)
	// The agent keeps serving requests that need no database meanwhile.
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.Call(pingCtx, protocol.OpPing, protocol.Empty{}, nil))
	agent.waitForLog(t, "system database connection failed, retrying")
	proxy.restore()

	res := awaitResult(t, c, "outage-wf")
	require.Equal(t, "SUCCESS", res.Status)
	require.Equal(t, "survived", *res.Output)
	var steps protocol.ListStepsReply
	require.NoError(t, c.Call(ctx, protocol.OpListSteps, &protocol.WorkflowRef{WorkflowID: "outage-wf"}, &steps))
	require.Len(t, steps.Steps, 2)
	require.Equal(t, "during", steps.Steps[1].Name)
}

// TestDatabaseOutageDuringRecvLosesNoMessage: a workflow waits in recv while
// its agent loses the database; a message sent meanwhile (through another
// agent, whose notification the first one cannot hear) is received once the
// database is back, well before the recv's deadline.
func TestDatabaseOutageDuringRecvLosesNoMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxied, proxy := e.proxiedURL()
	// No fallback re-check within the test: only the listener's reconnection
	// can tell the waiting recv that the message came.
	cut := e.startAgent(agentOptions{databaseURL: proxied, extraArgs: []string{"--message-poll-interval", "1h"}})
	other := e.startAgent(agentOptions{executorID: "other", socketName: "other.sock"})

	ctx := context.Background()
	w, err := client.NewWorker(ctx, cut.socket, client.WorkerConfig{AppName: "e2e",
		Workflows: map[string]client.WorkflowFunc{"receiver": func(wf *client.Workflow, _ *string) (*string, error) {
			r, err := wf.Recv(str("during-outage"), 10*time.Minute)
			if err != nil {
				return nil, err
			}
			return r.Message, nil
		}}})
	require.NoError(t, err)
	defer w.Close()
	c := dialClient(t, cut.socket)
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "outage-recv", Name: "receiver"}, nil))
	waitForStep(t, c, "outage-recv", 2) // the recv's deadline: it waits now

	proxy.cut()
	cut.waitForLog(t, "notification listener disconnected")
	sendMessage(t, dialClient(t, other.socket), "outage-recv", "during-outage", `"sent while the database was away"`)
	proxy.restore()

	res := awaitResult(t, c, "outage-recv")
	require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
	require.Equal(t, `"sent while the database was away"`, *res.Output)
}

// TestOutageLongerThanTheRetryWindowStrandsNothing: a worker leaves while
// the database is away for longer than the agent's retry window (bounded
// here at 1 s so the test is short; the default is no bound). The hand-back
// keeps retrying past the window, and once the database is back another
// worker of the same agent finishes the workflow: no agent restart.
func TestOutageLongerThanTheRetryWindowStrandsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxied, proxy := e.proxiedURL()
	agent := e.startAgent(agentOptions{databaseURL: proxied, extraArgs: []string{"--database-retry", "1s",
		"--rescue-interval", "500ms", "--rescue-horizon", "1s"}})

	ctx := context.Background()
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	var secondRuns sync.WaitGroup
	workflows := func(first bool) map[string]client.WorkflowFunc {
		return map[string]client.WorkflowFunc{"stranded": func(wf *client.Workflow, _ *string) (*string, error) {
			if _, err := wf.Step("before", func(context.Context) (*string, error) { return str("1"), nil }); err != nil {
				return nil, err
			}
			if first {
				close(started)
				<-release // never finishes here: its worker leaves
				return nil, context.Canceled
			}
			secondRuns.Done()
			return str("finished elsewhere"), nil
		}}
	}
	first, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{AppName: "e2e", Workflows: workflows(true)})
	require.NoError(t, err)
	secondRuns.Add(1)
	second, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{AppName: "e2e", Workflows: workflows(false),
		MaxConcurrency: 1})
	require.NoError(t, err)
	defer second.Close()
	c := dialClient(t, agent.socket)
	// The run goes to the worker with more free slots: the first
	// (unbounded), not the second (one slot).
	require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "stranded-wf", Name: "stranded"}, nil))
	<-started

	proxy.cut()
	first.Close() // its run must go back, but the database is away
	agent.waitForLog(t, "could not hand a closed worker's workflows back yet; retrying")
	// Well past the retry window before the database returns.
	agent.waitForLog(t, "gave up after 1s")
	proxy.restore()

	res := awaitResult(t, c, "stranded-wf")
	require.Equal(t, "SUCCESS", res.Status)
	require.Equal(t, "finished elsewhere", *res.Output)
	secondRuns.Wait()
	var steps protocol.ListStepsReply
	require.NoError(t, c.Call(ctx, protocol.OpListSteps, &protocol.WorkflowRef{WorkflowID: "stranded-wf"}, &steps))
	require.Len(t, steps.Steps, 1, "the step recorded before the outage was replayed, not run again")
}

// TestAgentStartedBeforeItsDatabaseWaitsForIt: an agent whose database does
// not answer yet keeps trying (saying so) instead of exiting, and serves
// once the database is there.
func TestAgentStartedBeforeItsDatabaseWaitsForIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxied, proxy := e.proxiedURL()
	proxy.cut() // down before the agent starts
	agent := e.startAgent(agentOptions{databaseURL: proxied, noWait: true})

	agent.waitForLog(t, "system database unreachable, retrying")
	select {
	case <-agent.exited:
		t.Fatalf("the agent gave up on its database:\n%s", agent.log())
	default:
	}
	proxy.restore()
	agent.waitForLog(t, "dbos-agent listening")
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpPing, protocol.Empty{}, nil))
}
