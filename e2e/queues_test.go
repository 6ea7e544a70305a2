package e2e

// End-to-end tests of issue 5's queues on the real agent binary and
// Postgres: every limit is observed from the outside, by in-process Go
// workers that count what runs at once, with two agents sharing one
// database where the limit is a shared one.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// signalWait bounds every wait on a signal; none of them should come near it.
const signalWait = 30 * time.Second

func intp(n int) *int           { return &n }
func floatp(f float64) *float64 { return &f }

// qWorker connects an in-process worker that is closed when the test ends.
func qWorker(t *testing.T, socket string, cfg client.WorkerConfig) *client.Worker {
	t.Helper()
	if cfg.AppName == "" {
		cfg.AppName = "e2e"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := client.NewWorker(ctx, socket, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

// enqueue starts a workflow and returns the agent's reply.
func enqueue(t *testing.T, c *client.Client, req protocol.StartWorkflow) protocol.StartWorkflowReply {
	t.Helper()
	var reply protocol.StartWorkflowReply
	require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &req, &reply), "start %s", req.WorkflowID)
	return reply
}

// getWorkflow reads a workflow's status through the agent.
func getWorkflow(t *testing.T, c *client.Client, id string) protocol.WorkflowInfo {
	t.Helper()
	var info protocol.WorkflowInfo
	require.NoError(t, c.Call(context.Background(), protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: id, LoadPayloads: true}, &info))
	return info
}

// listIDs lists the ids of the workflows whose id starts with prefix.
func listIDs(t *testing.T, c *client.Client, prefix string) []string {
	t.Helper()
	var reply protocol.ListWorkflowsReply
	require.NoError(t, c.Call(context.Background(), protocol.OpListWorkflows, &protocol.ListWorkflows{IDPrefix: prefix}, &reply))
	ids := make([]string, len(reply.Workflows))
	for i, w := range reply.Workflows {
		ids[i] = w.WorkflowID
	}
	sort.Strings(ids)
	return ids
}

// requireErrCode checks that err is a protocol error with code.
func requireErrCode(t *testing.T, err error, code protocol.Code) *protocol.Error {
	t.Helper()
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, code, perr.Code, "%v", perr)
	return perr
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(signalWait):
		t.Fatalf("no %s within %s", what, signalWait)
		panic("unreachable")
	}
}

// gate runs workflows that hold inside their one step until the test
// releases them, counting how many hold at once by key: "all", the worker
// ("worker:<label>") and the workflow's input ("key:<input>", the partition
// in the partition test).
type gate struct {
	mu      sync.Mutex
	running map[string]int
	peak    map[string]int
	runs    map[string]int // workflow id -> executions of the step
	entered chan string
	release chan struct{}
	stop    chan struct{}
}

func newGate(t *testing.T) *gate {
	g := &gate{
		running: map[string]int{}, peak: map[string]int{}, runs: map[string]int{},
		entered: make(chan string, 1024), release: make(chan struct{}, 1024), stop: make(chan struct{}),
	}
	t.Cleanup(func() { close(g.stop) })
	return g
}

func (g *gate) workflow(label string) client.WorkflowFunc {
	return func(wf *client.Workflow, in *string) (*string, error) {
		keys := []string{"all", "worker:" + label}
		if in != nil && *in != "" {
			keys = append(keys, "key:"+*in)
		}
		_, err := wf.Step("hold", func(ctx context.Context) (*string, error) {
			g.mu.Lock()
			for _, k := range keys {
				g.running[k]++
				g.peak[k] = max(g.peak[k], g.running[k])
			}
			g.runs[wf.ID()]++
			g.mu.Unlock()
			defer func() {
				g.mu.Lock()
				for _, k := range keys {
					g.running[k]--
				}
				g.mu.Unlock()
			}()
			g.entered <- wf.ID()
			select {
			case <-g.release:
				return str("released"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-g.stop:
				return nil, errors.New("test over")
			}
		})
		if err != nil {
			return nil, err
		}
		return str(label), nil
	}
}

// waitEntered waits for n more workflows to enter their step.
func (g *gate) waitEntered(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = recv(t, g.entered, "workflow entering its step")
	}
	return ids
}

func (g *gate) now(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running[key]
}

func (g *gate) max(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak[key]
}

// requireRanOnce checks that each workflow's step ran exactly once.
func (g *gate) requireRanOnce(t *testing.T, ids ...string) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		require.Equal(t, 1, g.runs[id], "%s ran %d times", id, g.runs[id])
	}
}

// drain releases the held workflows one at a time; each release frees one
// slot, which the agents race to fill. held is how many hold now, total how
// many will have entered in all.
func (g *gate) drain(t *testing.T, held, total int) {
	t.Helper()
	entered := held
	for released := 0; released < total; released++ {
		g.release <- struct{}{}
		if entered < total {
			g.waitEntered(t, 1)
			entered++
		}
	}
}

// agentClock is a per-second schedule of its own application ("clock") on
// an agent: waiting for its ticks is waiting on the agent's clock, which is
// how a test checks that something does NOT happen over time without
// sleeping. Its ticks run on the internal queue of another application, so
// they neither use nor see the queues under test.
type agentClock struct {
	mu      sync.Mutex
	ticks   int
	changed chan struct{}
}

func startClock(t *testing.T, socket string) *agentClock {
	t.Helper()
	ck := &agentClock{changed: make(chan struct{})}
	qWorker(t, socket, client.WorkerConfig{AppName: "clock", Workflows: map[string]client.WorkflowFunc{
		"clock_tick": func(wf *client.Workflow, _ *string) (*string, error) {
			ck.mu.Lock()
			ck.ticks++
			close(ck.changed)
			ck.changed = make(chan struct{})
			ck.mu.Unlock()
			return str("tick"), nil
		},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, protocol.Hello{Role: protocol.RoleClient, AppName: "clock"})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{
		ScheduleName: "clock", WorkflowName: "clock_tick", Cron: "* * * * * *",
	}, nil))
	return ck
}

// waitTicks waits for n more ticks; n = 2 spans at least about a second of
// the agent's life (several poll, sweep and schedule intervals).
func (ck *agentClock) waitTicks(t *testing.T, n int) {
	t.Helper()
	ck.mu.Lock()
	target := ck.ticks + n
	ck.mu.Unlock()
	deadline := time.After(signalWait)
	for {
		ck.mu.Lock()
		done, changed := ck.ticks >= target, ck.changed
		ck.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the agent's clock schedule did not tick %d times within %s", n, signalWait)
		}
	}
}

// TestQueueGlobalConcurrencyAcrossAgents: a queue's global concurrency
// holds across two agents on one database. Each agent's worker may run 2
// at once (4 in all) but the queue allows 3, so when 3 run both agents are
// running some: the limit is shared, not per agent.
func TestQueueGlobalConcurrencyAcrossAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
	clock := startClock(t, a.socket)
	g := newGate(t)
	const limit, perWorker, total = 3, 2, 12
	queue := protocol.QueueRegistration{Name: "global", Concurrency: intp(limit), WorkerConcurrency: intp(perWorker)}
	for label, socket := range map[string]string{"a": a.socket, "b": b.socket} {
		qWorker(t, socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{queue},
			Workflows: map[string]client.WorkflowFunc{"gated": g.workflow(label)}})
	}
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	ids := make([]string, total)
	for i := range ids {
		ids[i] = fmt.Sprintf("global-%02d", i)
		c := ca
		if i%2 == 1 {
			c = cb
		}
		require.Equal(t, "ENQUEUED", enqueue(t, c, protocol.StartWorkflow{WorkflowID: ids[i], Name: "gated", QueueName: "global"}).Status)
	}

	g.waitEntered(t, limit)
	// Both agents keep polling with free worker slots for a while: nothing
	// more may start.
	clock.waitTicks(t, 2)
	require.Equal(t, limit, g.now("all"))
	require.Empty(t, g.entered, "a workflow started past the global limit")
	require.GreaterOrEqual(t, g.now("worker:a"), 1)
	require.GreaterOrEqual(t, g.now("worker:b"), 1)
	var q protocol.QueueInfo
	require.NoError(t, cb.Call(context.Background(), protocol.OpGetQueue, &protocol.QueueRef{Name: "global"}, &q))
	require.True(t, q.Registered)
	require.Equal(t, intp(limit), q.Concurrency)
	require.Equal(t, intp(perWorker), q.WorkerConcurrency)
	require.Equal(t, int64(limit), q.Pending)
	require.Equal(t, int64(total-limit), q.Enqueued)

	g.drain(t, limit, total)
	executors := map[string]bool{}
	for _, id := range ids {
		require.Equal(t, "SUCCESS", awaitResult(t, ca, id).Status)
		executors[getWorkflow(t, ca, id).ExecutorID] = true
	}
	g.requireRanOnce(t, ids...)
	require.Equal(t, limit, g.max("all"), "never more than the global concurrency at once")
	require.LessOrEqual(t, g.max("worker:a"), perWorker)
	require.LessOrEqual(t, g.max("worker:b"), perWorker)
	require.Equal(t, map[string]bool{"a": true, "b": true}, executors)
}

// TestQueueGlobalConcurrencyWithDifferentWorkflowsPerAgent: the global
// limit also holds when the agents' workers run different workflows of the
// queue, so that their claims pick disjoint rows: agent A's worker runs only
// "wf_x", B's only "wf_y", and with a global concurrency of 1 one runs at a
// time although each agent is woken by the same enqueues at once. (At
// REPEATABLE READ both agents counted no running workflow and each claimed
// its own: both ran, in most rounds.)
func TestQueueGlobalConcurrencyWithDifferentWorkflowsPerAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
	clock := startClock(t, a.socket)
	g := newGate(t)
	queue := []protocol.QueueRegistration{{Name: "one-at-a-time", Concurrency: intp(1)}}
	qWorker(t, a.socket, client.WorkerConfig{Queues: queue, Workflows: map[string]client.WorkflowFunc{"wf_x": g.workflow("a")}})
	qWorker(t, b.socket, client.WorkerConfig{Queues: queue, Workflows: map[string]client.WorkflowFunc{"wf_y": g.workflow("b")}})
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	const rounds = 8
	for r := 0; r < rounds; r++ {
		// Both enqueues at once: each notifies both agents.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			enqueue(t, cb, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("y-%d", r), Name: "wf_y", QueueName: "one-at-a-time"})
		}()
		enqueue(t, ca, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("x-%d", r), Name: "wf_x", QueueName: "one-at-a-time"})
		wg.Wait()
		g.waitEntered(t, 1)
		// Both claims would have been concurrent: the database shows a
		// second one by now. The last round also gives the agents a
		// while of polling.
		if r == rounds-1 {
			clock.waitTicks(t, 2)
		}
		require.Equal(t, 1, g.now("all"), "round %d: both agents ran a workflow of the queue at once", r)
		var q protocol.QueueInfo
		require.NoError(t, ca.Call(context.Background(), protocol.OpGetQueue, &protocol.QueueRef{Name: "one-at-a-time"}, &q))
		require.Equal(t, int64(1), q.Pending, "round %d", r)
		g.drain(t, 1, 2)
		for _, id := range []string{fmt.Sprintf("x-%d", r), fmt.Sprintf("y-%d", r)} {
			require.Equal(t, "SUCCESS", awaitResult(t, ca, id).Status)
		}
	}
	for r := 0; r < rounds; r++ {
		g.requireRanOnce(t, fmt.Sprintf("x-%d", r), fmt.Sprintf("y-%d", r))
	}
	require.Equal(t, 1, g.max("all"))
	require.Equal(t, 1, g.max("worker:a"))
	require.Equal(t, 1, g.max("worker:b"))
}

// TestQueueWorkerConcurrencyPerWorkerProcess: worker concurrency caps each
// connected worker process, not each agent: agent A with two workers runs
// two at once, agent B with one runs one, and no worker ever runs two.
func TestQueueWorkerConcurrencyPerWorkerProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
	clock := startClock(t, a.socket)
	g := newGate(t)
	queue := protocol.QueueRegistration{Name: "per-worker", WorkerConcurrency: intp(1)}
	workers := map[string]string{"a1": a.socket, "a2": a.socket, "b1": b.socket}
	for label, socket := range workers {
		qWorker(t, socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{queue},
			Workflows: map[string]client.WorkflowFunc{"gated": g.workflow(label)}})
	}
	c := dialClient(t, b.socket)
	const total = 9
	for i := 0; i < total; i++ {
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("pw-%d", i), Name: "gated", QueueName: "per-worker"})
	}
	g.waitEntered(t, len(workers))
	clock.waitTicks(t, 2)
	require.Empty(t, g.entered, "a worker took more than its worker concurrency")
	for label := range workers {
		require.Equal(t, 1, g.now("worker:"+label), label)
	}
	g.drain(t, len(workers), total)
	for i := 0; i < total; i++ {
		require.Equal(t, "SUCCESS", awaitResult(t, c, fmt.Sprintf("pw-%d", i)).Status)
	}
	for i := 0; i < total; i++ {
		g.requireRanOnce(t, fmt.Sprintf("pw-%d", i))
	}
	for label := range workers {
		require.Equal(t, 1, g.max("worker:"+label), "worker %s ran more than one at once", label)
	}
	require.Equal(t, len(workers), g.max("all"))
}

// TestQueueRateLimitAcrossAgents: a rate limit of 2 per second shared by two
// agents: in every one-second window at most 2 workflows start, on the
// database clock (the rows' started_at, what the limit counts) and as the
// workers saw them.
func TestQueueRateLimitAcrossAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
	const maxPerPeriod, total = 2, 8
	const period = time.Second
	queue := protocol.QueueRegistration{Name: "rated", RateLimitMax: intp(maxPerPeriod), RateLimitPeriodSec: floatp(period.Seconds())}
	var mu sync.Mutex
	seenAt := map[string]time.Time{}
	stamp := func(wf *client.Workflow, _ *string) (*string, error) {
		return wf.Step("stamp", func(context.Context) (*string, error) {
			mu.Lock()
			seenAt[wf.ID()] = time.Now()
			mu.Unlock()
			return str("ok"), nil
		})
	}
	for _, socket := range []string{a.socket, b.socket} {
		qWorker(t, socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{queue},
			Workflows: map[string]client.WorkflowFunc{"stamp": stamp}})
	}
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	for i := 0; i < total; i++ {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("rated-%d", i), Name: "stamp", QueueName: "rated"})
	}
	var dbStarts, workerStarts, skew []int64
	for i := 0; i < total; i++ {
		id := fmt.Sprintf("rated-%d", i)
		require.Equal(t, "SUCCESS", awaitResult(t, ca, id).Status)
		started := getWorkflow(t, ca, id).StartedAtMS
		require.NotZero(t, started)
		mu.Lock()
		seen := seenAt[id].UnixMilli()
		mu.Unlock()
		dbStarts = append(dbStarts, started)
		workerStarts = append(workerStarts, seen)
		skew = append(skew, seen-started)
	}
	// A window [t, t+period) starting at each start holds at most the max.
	requireRate := func(what string, starts []int64, window int64) {
		t.Helper()
		sorted := append([]int64(nil), starts...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		for i, s := range sorted {
			n := 0
			for _, o := range sorted[i:] {
				if o < s+window {
					n++
				}
			}
			require.LessOrEqual(t, n, maxPerPeriod, "%s: %d starts in the %dms from %d: %v", what, n, window, s, sorted)
		}
		// 8 starts at 2 per second need at least 3 periods: the limit bit.
		require.GreaterOrEqual(t, sorted[len(sorted)-1]-sorted[0], int64(total/maxPerPeriod-1)*window, what)
	}
	requireRate("database clock", dbStarts, period.Milliseconds())
	// The workers learn of a start a little after it: their view holds to
	// within the spread of that dispatch delay.
	spread := int64(0)
	for _, s := range skew {
		for _, o := range skew {
			spread = max(spread, s-o)
		}
	}
	t.Logf("dispatch delays (worker clock - started_at): %v", skew)
	requireRate("workers' clock", workerStarts, period.Milliseconds()-spread)
}

// TestQueuePriorityOrder: workflows enqueued with priorities while no worker
// is connected run lowest priority first (ties in enqueue order) on one
// worker with worker concurrency 1.
func TestQueuePriorityOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	queue := protocol.QueueRegistration{Name: "prio", PriorityEnabled: true, WorkerConcurrency: intp(1)}
	// Register the queue, then leave: nobody serves it while we enqueue.
	registrar := qWorker(t, a.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{queue}})
	registrar.Close()
	<-registrar.Client.Done()
	c := dialClient(t, a.socket)
	order := []struct {
		id       string
		priority int
	}{{"p3", 3}, {"p1-first", 1}, {"p10", 10}, {"p0", 0}, {"p1-second", 1}, {"p2", 2}}
	for _, w := range order {
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: w.id, Name: "ordered", QueueName: "prio", Priority: w.priority})
	}
	var q protocol.QueueInfo
	require.NoError(t, c.Call(context.Background(), protocol.OpGetQueue, &protocol.QueueRef{Name: "prio"}, &q))
	require.True(t, q.PriorityEnabled)
	require.Equal(t, int64(len(order)), q.Enqueued)

	var mu sync.Mutex
	var ran []string
	qWorker(t, a.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{queue},
		Workflows: map[string]client.WorkflowFunc{"ordered": func(wf *client.Workflow, _ *string) (*string, error) {
			return wf.Step("run", func(context.Context) (*string, error) {
				mu.Lock()
				ran = append(ran, wf.ID())
				mu.Unlock()
				return str("ok"), nil
			})
		}}})
	for _, w := range order {
		require.Equal(t, "SUCCESS", awaitResult(t, c, w.id).Status)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"p0", "p1-first", "p1-second", "p2", "p3", "p10"}, ran)
}

// TestQueueDeduplication: an active workflow (ENQUEUED, then PENDING) holds
// its deduplication id on its queue across agents: a duplicate is refused
// with code deduplicated, or answered with the holder under the
// return_existing policy; the id is free again once the holder finished.
func TestQueueDeduplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	ctx := context.Background()
	start := func(id, policy string) protocol.StartWorkflow {
		return protocol.StartWorkflow{WorkflowID: id, Name: "gated", QueueName: "dedup", DeduplicationID: "order-7", DeduplicationPolicy: policy}
	}

	first := enqueue(t, ca, start("dedup-1", ""))
	require.True(t, first.Created)
	require.Equal(t, "ENQUEUED", first.Status)
	requireErrCode(t, cb.Call(ctx, protocol.OpStartWorkflow, ptr(start("dedup-2", "")), nil), protocol.CodeDeduplicated)
	requireErrCode(t, ca.Call(ctx, protocol.OpStartWorkflow, ptr(start("dedup-2", protocol.DedupReject)), nil), protocol.CodeDeduplicated)
	existing := enqueue(t, cb, start("dedup-3", protocol.DedupReturnExisting))
	require.Equal(t, protocol.StartWorkflowReply{WorkflowID: "dedup-1", Status: "ENQUEUED", Created: false}, existing)
	for _, id := range []string{"dedup-2", "dedup-3"} {
		requireErrCode(t, ca.Call(ctx, protocol.OpGetWorkflow, &protocol.GetWorkflow{WorkflowID: id}, nil), protocol.CodeWorkflowNotFound)
	}
	// The id is unique per queue: another queue takes it.
	other := start("dedup-other-queue", "")
	other.QueueName = "dedup-elsewhere"
	require.True(t, enqueue(t, cb, other).Created)

	// Running, the holder still holds it.
	g := newGate(t)
	qWorker(t, b.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{{Name: "dedup"}},
		Workflows: map[string]client.WorkflowFunc{"gated": g.workflow("b")}})
	require.Equal(t, []string{"dedup-1"}, g.waitEntered(t, 1))
	requireErrCode(t, ca.Call(ctx, protocol.OpStartWorkflow, ptr(start("dedup-4", "")), nil), protocol.CodeDeduplicated)
	existing = enqueue(t, ca, start("dedup-5", protocol.DedupReturnExisting))
	require.Equal(t, protocol.StartWorkflowReply{WorkflowID: "dedup-1", Status: "PENDING", Created: false}, existing)

	// Finished, it lets go.
	g.release <- struct{}{}
	require.Equal(t, "SUCCESS", awaitResult(t, ca, "dedup-1").Status)
	again := enqueue(t, ca, start("dedup-6", ""))
	require.True(t, again.Created)
	require.Equal(t, []string{"dedup-6"}, g.waitEntered(t, 1))
	g.release <- struct{}{}
	require.Equal(t, "SUCCESS", awaitResult(t, cb, "dedup-6").Status)
	require.Equal(t, 1, g.max("all"))
}

func ptr[T any](v T) *T { return &v }

// TestQueuePartitionsAreIsolated: with a per-partition concurrency of 1 on
// two agents, two partitions run side by side and no partition ever runs two
// at once.
func TestQueuePartitionsAreIsolated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
	clock := startClock(t, a.socket)
	g := newGate(t)
	queue := protocol.QueueRegistration{Name: "parts", PartitionConcurrency: intp(1)}
	for label, socket := range map[string]string{"a": a.socket, "b": b.socket} {
		qWorker(t, socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{queue},
			Workflows: map[string]client.WorkflowFunc{"gated": g.workflow(label)}})
	}
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	var ids []string
	for i := 0; i < 3; i++ {
		for _, part := range []string{"p1", "p2"} {
			id := fmt.Sprintf("%s-%d", part, i)
			ids = append(ids, id)
			c := ca
			if part == "p2" {
				c = cb
			}
			// The input names the partition, so the gate counts by it.
			enqueue(t, c, protocol.StartWorkflow{WorkflowID: id, Name: "gated", QueueName: "parts", PartitionKey: part, Inputs: str(part)})
		}
	}
	g.waitEntered(t, 2)
	clock.waitTicks(t, 2)
	require.Empty(t, g.entered, "a partition ran two at once")
	require.Equal(t, 1, g.now("key:p1"), "the partitions run side by side")
	require.Equal(t, 1, g.now("key:p2"), "the partitions run side by side")
	g.drain(t, 2, len(ids))
	for _, id := range ids {
		require.Equal(t, "SUCCESS", awaitResult(t, ca, id).Status)
		require.Equal(t, id[:2], getWorkflow(t, ca, id).PartitionKey)
	}
	g.requireRanOnce(t, ids...)
	require.Equal(t, 1, g.max("key:p1"))
	require.Equal(t, 1, g.max("key:p2"))
	require.Equal(t, 2, g.max("all"))
}

// stamps runs "stamp" workflows, whose step records when it ran and with
// which input.
type stamps struct {
	mu sync.Mutex
	at map[string]time.Time
	in map[string]string
	ch chan string
}

func newStamps() *stamps {
	return &stamps{at: map[string]time.Time{}, in: map[string]string{}, ch: make(chan string, 1024)}
}

func (s *stamps) workflow(wf *client.Workflow, in *string) (*string, error) {
	return wf.Step("stamp", func(context.Context) (*string, error) {
		s.mu.Lock()
		s.at[wf.ID()] = time.Now()
		if in != nil {
			s.in[wf.ID()] = *in
		}
		s.mu.Unlock()
		s.ch <- wf.ID()
		return str("ok"), nil
	})
}

func (s *stamps) get(id string) (time.Time, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[id], s.in[id]
}

// TestQueueDelayedWorkflowStartsAtItsTime: a workflow enqueued with a delay
// is DELAYED, is released by an agent's sweeper once the delay passed (the
// worker is on the other agent), and does not start before enqueue time +
// delay; the queue's other work does not wait for it.
func TestQueueDelayedWorkflowStartsAtItsTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sweep := []string{"--sweep-interval", "100ms"}
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock", extraArgs: sweep})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock", extraArgs: sweep})
	s := newStamps()
	qWorker(t, b.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{{Name: "later"}},
		Workflows: map[string]client.WorkflowFunc{"stamp": s.workflow}})
	c := dialClient(t, a.socket)
	const delay = time.Second

	before := time.Now()
	r := enqueue(t, c, protocol.StartWorkflow{WorkflowID: "delayed", Name: "stamp", QueueName: "later", DelayMS: delay.Milliseconds()})
	require.Equal(t, "DELAYED", r.Status)
	require.Equal(t, "DELAYED", getWorkflow(t, c, "delayed").Status)
	var q protocol.QueueInfo
	require.NoError(t, c.Call(context.Background(), protocol.OpGetQueue, &protocol.QueueRef{Name: "later"}, &q))
	require.Equal(t, int64(1), q.Delayed)
	// A direct start with a delay waits on the internal queue.
	direct := enqueue(t, c, protocol.StartWorkflow{WorkflowID: "delayed-direct", Name: "stamp", DelayMS: delay.Milliseconds()})
	require.Equal(t, "DELAYED", direct.Status)
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "prompt", Name: "stamp", QueueName: "later"})

	require.Equal(t, "SUCCESS", awaitResult(t, c, "prompt").Status)
	for _, id := range []string{"delayed", "delayed-direct"} {
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status)
		info := getWorkflow(t, c, id)
		require.GreaterOrEqual(t, info.StartedAtMS, before.Add(delay).UnixMilli(), "%s started early (database clock)", id)
		ranAt, _ := s.get(id)
		require.False(t, ranAt.Before(before.Add(delay)), "%s ran early: %s after enqueue", id, ranAt.Sub(before))
	}
	promptAt, _ := s.get("prompt")
	delayedAt, _ := s.get("delayed")
	require.True(t, promptAt.Before(delayedAt), "the queue waited for its delayed workflow")
}

// TestSetWorkflowDelay: set_workflow_delay moves a DELAYED workflow's
// release both earlier and later, and is refused for one that is not
// DELAYED.
func TestSetWorkflowDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: []string{"--sweep-interval", "100ms"}})
	clock := startClock(t, a.socket)
	s := newStamps()
	qWorker(t, a.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{{Name: "moved"}},
		Workflows: map[string]client.WorkflowFunc{"stamp": s.workflow}})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	setDelay := func(id string, until time.Time) error {
		return c.Call(ctx, protocol.OpSetWorkflowDelay, &protocol.SetWorkflowDelay{WorkflowID: id, DelayUntilEpochMS: until.UnixMilli()}, nil)
	}

	// Earlier: an hour's delay becomes 300ms.
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "sooner", Name: "stamp", QueueName: "moved", DelayMS: time.Hour.Milliseconds()})
	until := time.Now().Add(300 * time.Millisecond)
	require.NoError(t, setDelay("sooner", until))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "sooner").Status)
	require.GreaterOrEqual(t, getWorkflow(t, c, "sooner").StartedAtMS, until.UnixMilli())

	// Later: a 200ms delay becomes an hour; it has not started a second
	// (of the agent's clock) after its first release time.
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "postponed", Name: "stamp", QueueName: "moved", DelayMS: 200})
	require.NoError(t, setDelay("postponed", time.Now().Add(time.Hour)))
	clock.waitTicks(t, 2)
	require.Equal(t, "DELAYED", getWorkflow(t, c, "postponed").Status)
	released := time.Now()
	require.NoError(t, setDelay("postponed", released))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "postponed").Status)
	require.GreaterOrEqual(t, getWorkflow(t, c, "postponed").StartedAtMS, released.UnixMilli())

	requireErrCode(t, setDelay("sooner", time.Now()), protocol.CodeInvalidArgument)
	requireErrCode(t, setDelay("no-such-workflow", time.Now()), protocol.CodeWorkflowNotFound)
}

// TestDebounceCoalescesAndIsCappedByItsTimeout: debounce calls with one key
// make one workflow, started with the last inputs after the quiet period;
// with a timeout, calls that never stop only push it back until the
// timeout.
func TestDebounceCoalescesAndIsCappedByItsTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: []string{"--sweep-interval", "100ms"}})
	s := newStamps()
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"deb": s.workflow}})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	debounce := func(key, input string, timeout time.Duration) protocol.DebounceWorkflowReply {
		t.Helper()
		var r protocol.DebounceWorkflowReply
		require.NoError(t, c.Call(ctx, protocol.OpDebounceWorkflow, &protocol.DebounceWorkflow{
			Key: key, Name: "deb", DelayMS: 1000, TimeoutMS: timeout.Milliseconds(), Inputs: str(input),
		}, &r))
		return r
	}

	// Quiet period: three calls, one workflow, the last inputs.
	first := debounce("quiet", "1", 0)
	require.False(t, first.Bounced)
	require.Equal(t, protocol.DebounceWorkflowReply{WorkflowID: first.WorkflowID, Bounced: true}, debounce("quiet", "2", 0))
	lastCall := time.Now()
	require.Equal(t, protocol.DebounceWorkflowReply{WorkflowID: first.WorkflowID, Bounced: true}, debounce("quiet", "3", 0))
	require.Equal(t, "DELAYED", getWorkflow(t, c, first.WorkflowID).Status)
	require.Equal(t, first.WorkflowID, recv(t, s.ch, "the debounced workflow"))
	require.Equal(t, "SUCCESS", awaitResult(t, c, first.WorkflowID).Status)
	_, input := s.get(first.WorkflowID)
	require.Equal(t, "3", input)
	require.GreaterOrEqual(t, getWorkflow(t, c, first.WorkflowID).StartedAtMS, lastCall.Add(time.Second).UnixMilli())
	var listed protocol.ListWorkflowsReply
	require.NoError(t, c.Call(ctx, protocol.OpListWorkflows, &protocol.ListWorkflows{Names: []string{"deb"}}, &listed))
	require.Len(t, listed.Workflows, 1)

	// Capped: calls that keep coming (each would push the start a second
	// on) until it starts; the timeout after the first call releases it.
	const timeout = 1500 * time.Millisecond
	firstCall := time.Now()
	capped := debounce("busy", "0", timeout)
	require.False(t, capped.Bounced)
	lastBounce, lastInput := time.Time{}, "0"
loop:
	for i := 1; ; i++ {
		select {
		case id := <-s.ch:
			require.Equal(t, capped.WorkflowID, id)
			break loop
		default:
		}
		// Uncapped, the calls would hold it back for ever.
		require.Less(t, time.Since(firstCall), 10*time.Second, "the debounce timeout never released the workflow")
		input := fmt.Sprint(i)
		at := time.Now()
		r := debounce("busy", input, timeout)
		if r.WorkflowID != capped.WorkflowID {
			// Released meanwhile: the key is free, a new debounce began.
			require.False(t, r.Bounced)
			id := recv(t, s.ch, "the capped debounced workflow")
			require.Equal(t, capped.WorkflowID, id)
			break
		}
		require.True(t, r.Bounced)
		lastBounce, lastInput = at, input
	}
	require.Equal(t, "SUCCESS", awaitResult(t, c, capped.WorkflowID).Status)
	_, input = s.get(capped.WorkflowID)
	require.Equal(t, lastInput, input, "the run has the last inputs it was bounced with")
	started := getWorkflow(t, c, capped.WorkflowID).StartedAtMS
	require.GreaterOrEqual(t, started, firstCall.Add(timeout).UnixMilli(), "released before its debounce timeout")
	require.Less(t, started, lastBounce.Add(time.Second).UnixMilli(), "the debounce timeout did not cap the push-back")
}

// TestWorkflowTimeoutCancelledBySweeperOfAnyAgent: workflows whose deadline
// passes are CANCELLED by an agent's sweeper on the database clock, and
// their runs stop at the next step: a run under the sweeping agent is told
// at once, a run under another agent (whose own sweeper is off) learns when
// it records its next step. A deadline also cancels a workflow still
// ENQUEUED.
func TestWorkflowTimeoutCancelledBySweeperOfAnyAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock", extraArgs: []string{"--sweep-interval", "100ms"}})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock", extraArgs: []string{"--sweep-interval", "1h"}})
	entered := make(chan string, 8)
	ctxDone := make(chan string, 8)
	proceed := make(chan struct{})
	stepErr := make(chan error, 8)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	var mu sync.Mutex
	ranAfter := map[string]bool{}
	ranLast := map[string]bool{}
	slow := func(wf *client.Workflow, _ *string) (*string, error) {
		if _, err := wf.Step("enter", func(context.Context) (*string, error) { return str("in"), nil }); err != nil {
			return nil, err
		}
		go func() {
			select {
			case <-wf.Context().Done():
				ctxDone <- wf.ID()
			case <-stop:
			}
		}()
		entered <- wf.ID()
		select { // deliberately deaf to cancellation: the next step must stop it
		case <-proceed:
		case <-stop:
			return nil, errors.New("test over")
		}
		_, err := wf.Step("after", func(context.Context) (*string, error) {
			mu.Lock()
			ranAfter[wf.ID()] = true
			mu.Unlock()
			return str("after"), nil
		})
		stepErr <- err
		if err != nil {
			return nil, err
		}
		_, err = wf.Step("last", func(context.Context) (*string, error) {
			mu.Lock()
			ranLast[wf.ID()] = true
			mu.Unlock()
			return str("last"), nil
		})
		return str("done"), err
	}
	qWorker(t, a.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{{Name: "on-a"}},
		Workflows: map[string]client.WorkflowFunc{"slow": slow}})
	qWorker(t, b.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{{Name: "on-b"}},
		Workflows: map[string]client.WorkflowFunc{"slow": slow}})
	ca, cb := dialClient(t, a.socket), dialClient(t, b.socket)
	enqueue(t, ca, protocol.StartWorkflow{WorkflowID: "timeout-a", Name: "slow", QueueName: "on-a", TimeoutMS: 1000})
	enqueue(t, cb, protocol.StartWorkflow{WorkflowID: "timeout-b", Name: "slow", QueueName: "on-b", TimeoutMS: 1000})
	deadline := time.Now().Add(time.Second).UnixMilli()
	enqueue(t, cb, protocol.StartWorkflow{WorkflowID: "deadline-enqueued", Name: "slow", QueueName: "nobody-serves", DeadlineEpochMS: deadline})
	require.ElementsMatch(t, []string{"timeout-a", "timeout-b"}, []string{recv(t, entered, "a run"), recv(t, entered, "a run")})

	for _, id := range []string{"timeout-a", "timeout-b", "deadline-enqueued"} {
		require.Equal(t, "CANCELLED", awaitResult(t, cb, id).Status, id)
		info := getWorkflow(t, ca, id)
		require.NotZero(t, info.DeadlineEpochMS, id)
		require.GreaterOrEqual(t, info.CompletedAtMS, info.DeadlineEpochMS, "%s cancelled before its deadline", id)
	}
	require.Equal(t, deadline, getWorkflow(t, ca, "deadline-enqueued").DeadlineEpochMS)
	for _, id := range []string{"timeout-a", "timeout-b"} {
		info := getWorkflow(t, ca, id)
		require.GreaterOrEqual(t, info.DeadlineEpochMS, info.CreatedAtMS+1000, "%s: the deadline counts from its start", id)
	}
	// Both runs are told at once: the sweeping agent's own worker by that
	// agent, the other's by its agent when the cancel's notification
	// arrives (in either order).
	require.ElementsMatch(t, []string{"timeout-a", "timeout-b"},
		[]string{recv(t, ctxDone, "a cancel push"), recv(t, ctxDone, "a cancel push")})

	close(proceed)
	for i := 0; i < 2; i++ {
		require.ErrorIs(t, recv(t, stepErr, "the next step's outcome"), client.ErrStopped)
	}
	mu.Lock()
	require.False(t, ranAfter["timeout-a"], "the cancelled run executed its next step")
	require.False(t, ranLast["timeout-a"])
	require.False(t, ranLast["timeout-b"], "the run went on past the step that was refused")
	mu.Unlock()
	for _, id := range []string{"timeout-a", "timeout-b"} {
		var steps protocol.ListStepsReply
		require.NoError(t, ca.Call(context.Background(), protocol.OpListSteps, &protocol.WorkflowRef{WorkflowID: id}, &steps))
		require.Len(t, steps.Steps, 1, id)
		require.Equal(t, "enter", steps.Steps[0].Name)
		require.Equal(t, "CANCELLED", getWorkflow(t, cb, id).Status)
	}
}

// TestApplicationVersionsTakeUnversionedWork: unversioned work goes only to
// the latest version's workers; promote_version switches who takes it; a
// workflow of a version is never run by another.
func TestApplicationVersionsTakeUnversionedWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	clock := startClock(t, a.socket)
	ranBy := make(chan [2]string, 64)
	worker := func(version string) *client.Worker {
		return qWorker(t, a.socket, client.WorkerConfig{AppVersion: version, Queues: []protocol.QueueRegistration{{Name: "vq"}},
			Workflows: map[string]client.WorkflowFunc{"versioned": func(wf *client.Workflow, _ *string) (*string, error) {
				ranBy <- [2]string{version, wf.ID()}
				return str(version), nil
			}}})
	}
	c := dialClient(t, a.socket)
	ctx := context.Background()
	latest := func() string {
		var versions protocol.ListVersionsReply
		require.NoError(t, c.Call(ctx, protocol.OpListVersions, &protocol.Empty{}, &versions))
		require.Len(t, versions.Versions, 2)
		return versions.Versions[0].VersionName
	}
	run := func(id, version string) {
		t.Helper()
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: id, Name: "versioned", QueueName: "vq", AppVersion: version})
	}
	requireRanBy := func(id, version string) {
		t.Helper()
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status)
		require.Equal(t, [2]string{version, id}, recv(t, ranBy, "a run"))
		require.Equal(t, version, getWorkflow(t, c, id).AppVersion)
	}

	worker("v1")
	v2 := worker("v2") // registered last: the latest
	require.Equal(t, "v2", latest())
	run("u-1", "")
	requireRanBy("u-1", "v2")

	// Only v1 is connected, and it is not the latest: it takes neither the
	// unversioned workflow nor v2's.
	v2.Close()
	<-v2.Client.Done()
	run("u-2", "")
	run("x-v2", "v2")
	clock.waitTicks(t, 2)
	require.Equal(t, "ENQUEUED", getWorkflow(t, c, "u-2").Status)
	require.Equal(t, "ENQUEUED", getWorkflow(t, c, "x-v2").Status)
	require.Empty(t, ranBy)

	// Promoted, v1 takes the unversioned workflow (not v2's).
	require.NoError(t, c.Call(ctx, protocol.OpPromoteVersion, &protocol.VersionRef{VersionName: "v1"}, nil))
	require.Equal(t, "v1", latest())
	requireRanBy("u-2", "v1")
	// v2 back (not the latest any more): it runs its own workflow, while
	// unversioned work stays with v1.
	worker("v2")
	requireRanBy("x-v2", "v2")
	require.Equal(t, "v1", latest(), "reconnecting does not make a version the latest again")
	run("u-3", "")
	requireRanBy("u-3", "v1")
	// Rolled forward again.
	require.NoError(t, c.Call(ctx, protocol.OpPromoteVersion, &protocol.VersionRef{VersionName: "v2"}, nil))
	run("u-4", "")
	requireRanBy("u-4", "v2")
	requireErrCode(t, c.Call(ctx, protocol.OpPromoteVersion, &protocol.VersionRef{VersionName: "v9"}, nil), protocol.CodeInvalidArgument)
}

// TestRegisterQueuesAfterHello: a worker that declares a queue after its
// hello starts serving it then, with the limits it declared, which the
// agent stores and reports.
func TestRegisterQueuesAfterHello(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	clock := startClock(t, a.socket)
	g := newGate(t)
	w := qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"gated": g.workflow("w")}})
	c := dialClient(t, a.socket)
	ctx := context.Background()
	const total = 3
	for i := 0; i < total; i++ {
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("late-%d", i), Name: "gated", QueueName: "late"})
	}
	var q protocol.QueueInfo
	require.NoError(t, c.Call(ctx, protocol.OpGetQueue, &protocol.QueueRef{Name: "late"}, &q))
	require.Equal(t, protocol.QueueInfo{Name: "late", Enqueued: total}, q)
	clock.waitTicks(t, 2)
	require.Empty(t, g.entered, "the worker ran a queue it does not serve")

	require.NoError(t, w.Client.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{
		{Name: "late", Concurrency: intp(1)},
	}}, nil))
	g.waitEntered(t, 1)
	clock.waitTicks(t, 2)
	require.Empty(t, g.entered, "the registered concurrency was not applied")
	g.drain(t, 1, total)
	for i := 0; i < total; i++ {
		require.Equal(t, "SUCCESS", awaitResult(t, c, fmt.Sprintf("late-%d", i)).Status)
		g.requireRanOnce(t, fmt.Sprintf("late-%d", i))
	}
	require.Equal(t, 1, g.max("all"))

	var registered protocol.QueueInfo
	require.NoError(t, c.Call(ctx, protocol.OpGetQueue, &protocol.QueueRef{Name: "late"}, &registered))
	require.Equal(t, protocol.QueueInfo{Name: "late", Registered: true, Concurrency: intp(1), PollingIntervalSec: 1, ApplicationName: "e2e"}, registered, "the registering worker's application owns it")
	var list protocol.ListQueuesReply
	require.NoError(t, c.Call(ctx, protocol.OpListQueues, &protocol.Empty{}, &list))
	// The internal queue is listed too while a clock tick is on it.
	require.Contains(t, list.Queues, protocol.QueueInfo{Name: "late", Registered: true, Concurrency: intp(1), ApplicationName: "e2e"})
	requireErrCode(t, c.Call(ctx, protocol.OpGetQueue, &protocol.QueueRef{Name: "unknown"}, nil), protocol.CodeInvalidArgument)

	// A client's registration writes the row and serves nothing (see
	// TestClientRegistersQueuesWithoutServingThem); malformed ones are
	// refused.
	require.NoError(t, c.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{{Name: "x"}}}, nil))
	requireErrCode(t, c.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{{Name: ""}}}, nil), protocol.CodeInvalidArgument)
	for _, bad := range []protocol.QueueRegistration{
		{Name: ""},
		{Name: "_dbos_internal_queue"},
		{Name: "half-rate", RateLimitMax: intp(2)},
	} {
		requireErrCode(t, w.Client.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{Queues: []protocol.QueueRegistration{bad}}, nil), protocol.CodeInvalidArgument)
	}
}

// sdkClient connects the official Go SDK's client (application "e2e") to
// the schema the agents migrated.
func sdkClient(t *testing.T, e *env) dbos.Client {
	t.Helper()
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	c, err := dbos.NewClient(context.Background(), dbos.ClientConfig{
		DatabaseURL: e.url, DatabaseSchema: e.schema, AppName: "e2e",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dbos.Shutdown(c, 10*time.Second) })
	return c
}

// TestInteropGoSDKQueueLimitsApplyToAgentWorkers: a queue registered by the
// official Go SDK is served by agent workers that only name it, with the
// SDK's stored limits: its global concurrency across two agents and its
// worker concurrency per worker.
func TestInteropGoSDKQueueLimitsApplyToAgentWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock"})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock"})
	sdk := sdkClient(t, e)
	const limit, total = 3, 10
	_, err := dbos.RegisterQueue(sdk, "sdk-queue", dbos.WithGlobalConcurrency(limit), dbos.WithWorkerConcurrency(1))
	require.NoError(t, err)

	clock := startClock(t, a.socket)
	g := newGate(t)
	workers := map[string]string{"a1": a.socket, "a2": a.socket, "b1": b.socket, "b2": b.socket}
	for label, socket := range workers {
		qWorker(t, socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{{Name: "sdk-queue"}},
			Workflows: map[string]client.WorkflowFunc{"gated": g.workflow(label)}})
	}
	// Naming the queue did not overwrite the SDK's row.
	theirs, err := dbos.RetrieveQueue(sdk, "sdk-queue")
	require.NoError(t, err)
	require.Equal(t, intp(limit), theirs.GetGlobalConcurrency())
	require.Equal(t, intp(1), theirs.GetWorkerConcurrency())
	ca := dialClient(t, a.socket)
	var q protocol.QueueInfo
	require.NoError(t, ca.Call(context.Background(), protocol.OpGetQueue, &protocol.QueueRef{Name: "sdk-queue"}, &q))
	require.True(t, q.Registered)
	require.Equal(t, intp(limit), q.Concurrency)
	require.Equal(t, intp(1), q.WorkerConcurrency)

	for i := 0; i < total; i++ {
		enqueue(t, ca, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("sdkq-%d", i), Name: "gated", QueueName: "sdk-queue"})
	}
	g.waitEntered(t, limit)
	clock.waitTicks(t, 2)
	require.Empty(t, g.entered, "a workflow started past the SDK's global concurrency")
	g.drain(t, limit, total)
	for i := 0; i < total; i++ {
		require.Equal(t, "SUCCESS", awaitResult(t, ca, fmt.Sprintf("sdkq-%d", i)).Status)
		g.requireRanOnce(t, fmt.Sprintf("sdkq-%d", i))
	}
	require.Equal(t, limit, g.max("all"))
	for label := range workers {
		require.LessOrEqual(t, g.max("worker:"+label), 1, "worker %s", label)
	}
}

// TestInteropGoSDKReadsAgentQueueAndSharesDeduplication: a queue a worker
// declared in its hello reads back through the Go SDK with the same limits;
// a deduplication id held by a workflow the SDK's client enqueued blocks an
// agent enqueue, and the reverse.
func TestInteropGoSDKReadsAgentQueueAndSharesDeduplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	qWorker(t, a.socket, client.WorkerConfig{Queues: []protocol.QueueRegistration{{
		Name: "agent-queue", Concurrency: intp(4), WorkerConcurrency: intp(2),
		RateLimitMax: intp(6), RateLimitPeriodSec: floatp(2.5), PriorityEnabled: true,
		PartitionConcurrency: intp(2), PartitionRateLimitMax: intp(3), PartitionRateLimitPeriodSec: floatp(0.5),
		PollingIntervalSec: 0.25,
	}}})
	sdk := sdkClient(t, e)
	theirs, err := dbos.RetrieveQueue(sdk, "agent-queue")
	require.NoError(t, err)
	require.Equal(t, intp(4), theirs.GetGlobalConcurrency())
	require.Equal(t, intp(2), theirs.GetWorkerConcurrency())
	require.Equal(t, &dbos.RateLimiter{Limit: 6, Period: 2500 * time.Millisecond}, theirs.GetRateLimit())
	require.True(t, theirs.GetPriorityEnabled())
	require.True(t, theirs.GetPartitionQueue())
	require.Equal(t, intp(2), theirs.GetPartitionConcurrency())
	require.Nil(t, theirs.GetPartitionWorkerConcurrency())
	require.Equal(t, &dbos.RateLimiter{Limit: 3, Period: 500 * time.Millisecond}, theirs.GetPartitionRateLimit())
	require.Equal(t, 250*time.Millisecond, theirs.GetPollingInterval())
	require.Equal(t, "e2e", theirs.GetApplicationName())

	c := dialClient(t, a.socket)
	ctx := context.Background()
	held, err := dbos.Enqueue[string](sdk, "shared-dedup", "gated", "x",
		dbos.WithEnqueueWorkflowID("sdk-holder"), dbos.WithEnqueueDeduplicationID("shared"))
	require.NoError(t, err)
	require.Equal(t, "sdk-holder", held.GetWorkflowID())
	start := protocol.StartWorkflow{WorkflowID: "agent-dup", Name: "gated", QueueName: "shared-dedup", DeduplicationID: "shared"}
	requireErrCode(t, c.Call(ctx, protocol.OpStartWorkflow, &start, nil), protocol.CodeDeduplicated)
	start.DeduplicationPolicy = protocol.DedupReturnExisting
	require.Equal(t, protocol.StartWorkflowReply{WorkflowID: "sdk-holder", Status: "ENQUEUED"}, enqueue(t, c, start))

	require.True(t, enqueue(t, c, protocol.StartWorkflow{WorkflowID: "agent-holder", Name: "gated", QueueName: "shared-dedup", DeduplicationID: "ours"}).Created)
	_, err = dbos.Enqueue[string](sdk, "shared-dedup", "gated", "x",
		dbos.WithEnqueueWorkflowID("sdk-dup"), dbos.WithEnqueueDeduplicationID("ours"))
	require.ErrorIs(t, err, dbos.ErrQueueDeduplicated)
}

// A debounce from workflow code is the workflow's step, recorded with the
// bounce (and the workflow it creates, its child, at the next step); the same
// step again, as a request retried after a lost reply sends it, is answered
// from the record and bounces nothing. The debounced workflow's own timeout
// starts when it is dequeued.
func TestDebounceFromWorkflowIsItsStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: []string{"--sweep-interval", "100ms"}})
	s := newStamps()
	type seen struct {
		created, retried, bounced, again protocol.DebounceWorkflowReply
	}
	out := make(chan seen, 1)
	parent := func(wf *client.Workflow, _ *string) (*string, error) {
		var got seen
		var err error
		req := protocol.DebounceWorkflow{Key: "k", Name: "deb", DelayMS: 60_000, WorkflowTimeoutMS: 30_000, Inputs: str("1")}
		if got.created, err = wf.Debounce(req); err != nil { // steps 1 and 2
			return nil, err
		}
		c := wf.NextCaller() // step 3
		retry := req
		retry.Inputs, retry.Caller = str("retried"), &protocol.Caller{WorkflowID: c.WorkflowID, OwnerXID: c.OwnerXID, FunctionID: 1}
		if err := wf.Client().Call(wf.Context(), protocol.OpDebounceWorkflow, &retry, &got.retried); err != nil {
			return nil, err
		}
		bounce := protocol.DebounceWorkflow{Key: "k", Name: "deb", DelayMS: 60_000, Inputs: str("2"), Caller: &c}
		if err := wf.Client().Call(wf.Context(), protocol.OpDebounceWorkflow, &bounce, &got.bounced); err != nil {
			return nil, err
		}
		if got.again, err = wf.Debounce(protocol.DebounceWorkflow{Key: "k", Name: "deb", DelayMS: 200, Inputs: str("3")}); err != nil { // step 4
			return nil, err
		}
		out <- got
		return str(got.created.WorkflowID), nil
	}
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"deb": s.workflow, "parent": parent}})
	c := dialClient(t, a.socket)
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "dparent", Name: "parent"})
	got := recv(t, out, "the parent's debounces")
	require.Equal(t, protocol.DebounceWorkflowReply{WorkflowID: "dparent-2"}, got.created, "created as the child at the next step")
	require.Equal(t, got.created, got.retried, "the recorded step is the answer")
	require.Equal(t, protocol.DebounceWorkflowReply{WorkflowID: "dparent-2", Bounced: true}, got.bounced)
	require.Equal(t, protocol.DebounceWorkflowReply{WorkflowID: "dparent-2", Bounced: true}, got.again)
	require.Equal(t, "SUCCESS", awaitResult(t, c, "dparent").Status)

	steps := listSteps(t, c, "dparent")
	require.Len(t, steps, 4)
	for i, name := range []string{protocol.StepDebounce, "deb", protocol.StepDebounce, protocol.StepDebounce} {
		require.Equal(t, i+1, steps[i].FunctionID)
		require.Equal(t, name, steps[i].Name)
	}
	require.Equal(t, "dparent-2", steps[1].ChildWorkflowID)
	require.JSONEq(t, `{"bounced_workflow_id":null,"holder_workflow_id":null,"holder_is_debounced":false,"holder_workflow_name":null,"holder_application_name":null}`, *steps[0].Output)
	require.Equal(t, "portable_json", steps[0].Serialization)
	require.JSONEq(t, `{"bounced_workflow_id":"dparent-2","holder_workflow_id":null,"holder_is_debounced":false,"holder_workflow_name":null,"holder_application_name":null}`, *steps[3].Output)

	require.Equal(t, "dparent-2", recv(t, s.ch, "the debounced workflow"))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "dparent-2").Status)
	_, input := s.get("dparent-2")
	require.Equal(t, "3", input, "the last bounce's inputs; the retried request replaced nothing")
	child := getWorkflow(t, c, "dparent-2")
	require.Equal(t, "dparent", child.ParentWorkflowID)
	require.Equal(t, int64(30_000), child.TimeoutMS)
	require.GreaterOrEqual(t, child.DeadlineEpochMS, child.StartedAtMS+30_000, "the deadline is set at dequeue")
	var listed protocol.ListWorkflowsReply
	require.NoError(t, c.Call(context.Background(), protocol.OpListWorkflows, &protocol.ListWorkflows{Names: []string{"deb"}}, &listed))
	require.Len(t, listed.Workflows, 1)
}

// TestDebounceAsDBOSTypeScript: a binding that mirrors DBOS TypeScript names
// the caller's step and forms the key's deduplication id as that SDK does, so
// a bounce from DBOS TypeScript's side meets the same pending workflow, and a
// replay finds the step under its name.
func TestDebounceAsDBOSTypeScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: []string{"--sweep-interval", "100ms"}})
	s := newStamps()
	const stepName, dedupID = "DBOS.debounceDelayedWorkflow", ".deb-k"
	out := make(chan [2]protocol.DebounceWorkflowReply, 1)
	parent := func(wf *client.Workflow, _ *string) (*string, error) {
		c := wf.NextCaller()
		req := protocol.DebounceWorkflow{Key: "k", Name: "deb", DelayMS: 60_000, Inputs: str("1"), Caller: &c,
			DeduplicationID: dedupID, StepName: stepName}
		var first, retried protocol.DebounceWorkflowReply
		if err := wf.Client().Call(wf.Context(), protocol.OpDebounceWorkflow, &req, &first); err != nil {
			return nil, err
		}
		if err := wf.Client().Call(wf.Context(), protocol.OpDebounceWorkflow, &req, &retried); err != nil {
			return nil, err
		}
		out <- [2]protocol.DebounceWorkflowReply{first, retried}
		return str(first.WorkflowID), nil
	}
	qWorker(t, a.socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"deb": s.workflow, "parent": parent}})
	c := dialClient(t, a.socket)
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "tsparent", Name: "parent"})
	got := recv(t, out, "the parent's debounce")
	require.Equal(t, got[0], got[1], "a replay answers from the step recorded under its name")
	require.False(t, got[0].Bounced)
	require.Equal(t, "SUCCESS", awaitResult(t, c, "tsparent").Status)
	steps := listSteps(t, c, "tsparent")
	require.Equal(t, stepName, steps[0].Name)

	// A call from outside, with the same deduplication id, bounces it.
	var bounced protocol.DebounceWorkflowReply
	require.NoError(t, c.Call(context.Background(), protocol.OpDebounceWorkflow,
		&protocol.DebounceWorkflow{Key: "k", Name: "deb", DelayMS: 100, Inputs: str("2"), DeduplicationID: dedupID}, &bounced))
	require.Equal(t, protocol.DebounceWorkflowReply{WorkflowID: got[0].WorkflowID, Bounced: true}, bounced)
	require.Equal(t, dedupID, getWorkflow(t, c, got[0].WorkflowID).DeduplicationID)
	require.Equal(t, got[0].WorkflowID, recv(t, s.ch, "the debounced workflow"))
	_, input := s.get(got[0].WorkflowID)
	require.Equal(t, "2", input)
}
