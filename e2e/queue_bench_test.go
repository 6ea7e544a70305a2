package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// BenchmarkQueue puts the agent beside the official DBOS Go SDK on the same
// Postgres, each on a fresh schema, in one run, and prints the ratios:
//
//   - latency: enqueue-to-start at low load. One workflow at a time is
//     enqueued; the time is from the enqueue call returning to the workflow
//     function starting (a signal sent from inside it). Three variants: the
//     agent with the enqueue through a client connection (start_workflow
//     with queue_name: the agent wakes its poller at once), the agent with
//     the enqueue written by the Go SDK's client (no notification: the agent
//     finds it by polling), and the Go SDK enqueuing with its own API
//     (RunWorkflow WithQueue on a launched context: found by polling). Both
//     poll every benchQueuePollInterval (the DBOS default, 1s): the agent's
//     --poll-interval and the SDK queue's base polling interval. A random
//     pause of up to one interval before each enqueue keeps the samples from
//     locking onto the pollers' phase.
//   - drain: benchQueueDrainCount no-op workflows are enqueued first (not
//     timed), then the worker starts (a Go worker connected to the agent, with
//     no concurrency limit; a launched DBOS context with the queue, no
//     limit) and the time runs until a counter inside the workflow reached
//     the count and SQL shows every one SUCCESS.
//     The enqueue rate of the untimed enqueues (64 concurrent callers: the
//     agent's start_workflow, the Go SDK client's Enqueue) is reported too.
//   - postgres-commit-rate: the same number of single-row UPDATE commits from
//     16 connections, the database's own ceiling for a design that commits
//     each workflow's outcome on its own (both do); -with-notify: the same
//     with a pg_notify in each statement, as the agent's finish has.
//
// Ratios are printed so that above 1 means the agent is better: Go SDK /
// agent for latencies, agent / Go SDK for rates.
//
// Run it with -benchtime 1x (each sub-benchmark measures once; its ns/op is
// the measured phase, the figures are the reported metrics):
//
//	go test ./e2e -run '^$' -bench BenchmarkQueue -benchtime 1x
//
// DBOS_BENCH_QUEUE_DRAIN (default 10000) and DBOS_BENCH_QUEUE_SAMPLES
// (default 30) make quicker runs.
func BenchmarkQueue(b *testing.B) {
	results := map[string]map[string]float64{}
	record := func(name string, metrics map[string]float64) { results[name] = metrics }

	for _, v := range []struct {
		name string
		fn   func(b *testing.B) latencyStats
	}{
		{"latency/agent", benchLatencyAgent},
		{"latency/agent-sdk-client-enqueue", benchLatencyAgentSDKClient},
		{"latency/go-sdk", benchLatencyGoSDK},
	} {
		b.Run(v.name, func(b *testing.B) {
			s := v.fn(b)
			b.ReportMetric(s.p50Ms, "p50-ms")
			b.ReportMetric(s.meanMs, "mean-ms")
			b.ReportMetric(s.p90Ms, "p90-ms")
			b.ReportMetric(s.enqueueMs, "enqueue-call-ms")
			record(v.name, map[string]float64{"p50": s.p50Ms, "mean": s.meanMs, "p90": s.p90Ms, "enqueue": s.enqueueMs})
		})
	}
	agent, okA := results["latency/agent"]
	agentSDK, okB := results["latency/agent-sdk-client-enqueue"]
	sdk, okC := results["latency/go-sdk"]
	if okA && okB && okC {
		fmt.Printf("BenchmarkQueue latency (poll interval %s, %d samples each): enqueue-to-start p50/mean: "+
			"agent %.2f/%.2f ms, agent with Go SDK client enqueues %.1f/%.1f ms, Go SDK %.1f/%.1f ms; "+
			"ratio of means (Go SDK / agent) %.1fx, (Go SDK / agent with SDK-client enqueues) %.2fx\n",
			benchQueuePollInterval, benchQueueSamples(), agent["p50"], agent["mean"], agentSDK["p50"], agentSDK["mean"],
			sdk["p50"], sdk["mean"], sdk["mean"]/agent["mean"], sdk["mean"]/agentSDK["mean"])
	}

	n := benchQueueDrainCount()
	for _, v := range []struct {
		name string
		fn   func(b *testing.B, n int) drainResult
	}{
		{"drain/agent", benchDrainAgent},
		{"drain/go-sdk", benchDrainGoSDK},
		{"drain/postgres-commit-rate", benchPostgresCommitRate},
		{"drain/postgres-commit-rate-with-notify", benchPostgresNotifyCommitRate},
	} {
		b.Run(v.name, func(b *testing.B) {
			r := v.fn(b, n)
			rate := float64(n) / r.drain.Seconds()
			b.ReportMetric(rate, "wf/s")
			metrics := map[string]float64{"rate": rate}
			if r.enqueue > 0 {
				metrics["enqueue"] = float64(n) / r.enqueue.Seconds()
				b.ReportMetric(metrics["enqueue"], "enqueue-wf/s")
			}
			record(v.name, metrics)
		})
	}
	da, ok1 := results["drain/agent"]
	ds, ok2 := results["drain/go-sdk"]
	dp, ok3 := results["drain/postgres-commit-rate"]
	dn, ok4 := results["drain/postgres-commit-rate-with-notify"]
	if ok1 && ok2 {
		fmt.Printf("BenchmarkQueue drain of %d: agent %.0f wf/s, Go SDK %.0f wf/s, ratio (agent / Go SDK) %.2fx\n",
			n, da["rate"], ds["rate"], da["rate"]/ds["rate"])
		fmt.Printf("BenchmarkQueue enqueue of %d (64 concurrent callers, not part of the drain): agent %.0f wf/s, Go SDK client %.0f wf/s, ratio (agent / Go SDK) %.2fx\n",
			n, da["enqueue"], ds["enqueue"], da["enqueue"]/ds["enqueue"])
	}
	if ok1 && ok3 && ok4 {
		fmt.Printf("BenchmarkQueue drain of %d: Postgres single-row commits from 16 connections %.0f/s, with a pg_notify in each %.0f/s; agent at %.0f%% and %.0f%% of them\n",
			n, dp["rate"], dn["rate"], 100*da["rate"]/dp["rate"], 100*da["rate"]/dn["rate"])
	}
}

// benchQueuePollInterval is both sides' polling interval: the DBOS default.
const benchQueuePollInterval = time.Second

const benchQueueName = "bench_queue"

func benchQueueDrainCount() int { return envInt("DBOS_BENCH_QUEUE_DRAIN", 10000) }
func benchQueueSamples() int    { return envInt("DBOS_BENCH_QUEUE_SAMPLES", 30) }

// benchAgentArgs start the agent as users run it: info logs and the DBOS
// default polling interval (the harness defaults are for tests).
// benchAgentArgs are the benchmark agents' flags, and DBOS_BENCH_AGENT_ARGS
// (space-separated) after them, to measure a setting against the default.
func benchAgentArgs() []string {
	return append([]string{"--poll-interval", benchQueuePollInterval.String(), "--log-level", "info"},
		strings.Fields(os.Getenv("DBOS_BENCH_AGENT_ARGS"))...)
}

type latencyStats struct {
	p50Ms, meanMs, p90Ms, enqueueMs float64
}

// measureLatency runs one warm-up and then samples enqueues one at a time.
// enqueue returns once the enqueue call returned, with the instant it
// returned; started delivers the instant each workflow function began.
func measureLatency(b *testing.B, enqueue func(id string) (called, returned time.Time), started <-chan time.Time) latencyStats {
	b.Helper()
	samples := benchQueueSamples()
	wait := func(id string) time.Time {
		select {
		case at := <-started:
			return at
		case <-time.After(30 * time.Second):
			b.Fatalf("workflow %s did not start within 30s", id)
			return time.Time{}
		}
	}
	prefix := fmt.Sprintf("lat-%d-", time.Now().UnixNano())
	// Warm-up: pollers running, connections and statements prepared.
	enqueue(prefix + "warmup")
	wait(prefix + "warmup")

	lat := make([]time.Duration, 0, samples)
	var enqueueTotal time.Duration
	b.StartTimer()
	for i := 0; i < samples; i++ {
		// Decorrelate from the pollers' phase: enqueue at a random point of
		// their interval (the previous no-op has long finished by then).
		time.Sleep(20*time.Millisecond + rand.N(benchQueuePollInterval))
		id := prefix + strconv.Itoa(i)
		called, returned := enqueue(id)
		at := wait(id)
		lat = append(lat, at.Sub(returned))
		enqueueTotal += returned.Sub(called)
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return latencyStats{
		p50Ms:     ms(percentile(lat, 0.5)),
		meanMs:    ms(sum / time.Duration(len(lat))),
		p90Ms:     ms(percentile(lat, 0.9)),
		enqueueMs: ms(enqueueTotal / time.Duration(len(lat))),
	}
}

// benchAgentWorker connects a Go worker serving benchQueueName with no
// concurrency limit; fn is the no-op workflow "noop".
func benchAgentWorker(b *testing.B, socket string, fn func()) *client.Worker {
	b.Helper()
	w, err := client.NewWorker(context.Background(), socket, client.WorkerConfig{
		AppName: "bench",
		Queues:  []protocol.QueueRegistration{{Name: benchQueueName}},
		Workflows: map[string]client.WorkflowFunc{"noop": func(_ *client.Workflow, _ *string) (*string, error) {
			fn()
			return nil, nil
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return w
}

func benchAgentClient(b *testing.B, socket string) *client.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, protocol.Hello{Role: protocol.RoleClient, AppName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func agentEnqueue(ctx context.Context, c *client.Client, id string) error {
	var reply protocol.StartWorkflowReply
	return c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: id, Name: "noop", QueueName: benchQueueName, Serialization: "portable_json",
	}, &reply)
}

// benchLatencyAgent: enqueues through a client connection of the agent.
func benchLatencyAgent(b *testing.B) latencyStats {
	b.StopTimer()
	e := newEnv(b)
	agent := e.startAgent(agentOptions{extraArgs: benchAgentArgs()})
	started := make(chan time.Time, 16)
	benchAgentWorker(b, agent.socket, func() { started <- time.Now() })
	c := benchAgentClient(b, agent.socket)
	stats := measureLatency(b, func(id string) (time.Time, time.Time) {
		called := time.Now()
		if err := agentEnqueue(context.Background(), c, id); err != nil {
			b.Fatal(err)
		}
		return called, time.Now()
	}, started)
	waitAllSucceeded(b, e.url, e.schema, benchQueueSamples()+1)
	return stats
}

// benchLatencyAgentSDKClient: the Go SDK's client writes the enqueue into
// the agent's schema; nothing notifies the agent, whose poller finds it.
func benchLatencyAgentSDKClient(b *testing.B) latencyStats {
	b.StopTimer()
	e := newEnv(b)
	agent := e.startAgent(agentOptions{extraArgs: benchAgentArgs()})
	started := make(chan time.Time, 16)
	benchAgentWorker(b, agent.socket, func() { started <- time.Now() })
	sdkClient := newSDKClient(b, e.url, e.schema)
	stats := measureLatency(b, func(id string) (time.Time, time.Time) {
		called := time.Now()
		if _, err := dbos.Enqueue[string](sdkClient, benchQueueName, "noop", "x", dbos.WithEnqueueWorkflowID(id)); err != nil {
			b.Fatal(err)
		}
		return called, time.Now()
	}, started)
	waitAllSucceeded(b, e.url, e.schema, benchQueueSamples()+1)
	return stats
}

// benchLatencyGoSDK: a launched DBOS context enqueues with RunWorkflow
// WithQueue onto its own queue.
func benchLatencyGoSDK(b *testing.B) latencyStats {
	b.StopTimer()
	url, schema := newSDKSchema(b)
	started := make(chan time.Time, 16)
	noop := func(_ dbos.Context, _ string) (string, error) {
		started <- time.Now()
		return "", nil
	}
	sdkCtx := newSDKContext(b, url, schema)
	dbos.RegisterWorkflow(sdkCtx, noop, dbos.WithWorkflowName("noop"))
	if err := dbos.Launch(sdkCtx); err != nil {
		b.Fatal(err)
	}
	q, err := dbos.RegisterQueue(sdkCtx, benchQueueName, dbos.WithQueueBasePollingInterval(benchQueuePollInterval))
	if err != nil {
		b.Fatal(err)
	}
	stats := measureLatency(b, func(id string) (time.Time, time.Time) {
		called := time.Now()
		if _, err := dbos.RunWorkflow(sdkCtx, noop, "x", dbos.WithQueue(q), dbos.WithWorkflowID(id)); err != nil {
			b.Fatal(err)
		}
		return called, time.Now()
	}, started)
	waitAllSucceeded(b, url, schema, benchQueueSamples()+1)
	return stats
}

// enqueueConcurrently runs enqueue for ids 0..n-1 from 64 goroutines.
func enqueueConcurrently(b *testing.B, n int, enqueue func(i int) error) time.Duration {
	b.Helper()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := enqueue(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return took
}

// drainResult is a drain's time and the time its enqueues took before it.
type drainResult struct {
	drain, enqueue time.Duration
}

// drainCounter counts workflow starts and closes done at n.
type drainCounter struct {
	n     int64
	count atomic.Int64
	done  chan struct{}
}

func newDrainCounter(n int) *drainCounter {
	return &drainCounter{n: int64(n), done: make(chan struct{})}
}

func (c *drainCounter) started() {
	if c.count.Add(1) == c.n {
		close(c.done)
	}
}

func (c *drainCounter) wait(b *testing.B, within time.Duration) {
	b.Helper()
	select {
	case <-c.done:
	case <-time.After(within):
		b.Fatalf("only %d of %d workflows started within %s", c.count.Load(), c.n, within)
	}
}

func benchDrainAgent(b *testing.B, n int) drainResult {
	b.StopTimer()
	e := newEnv(b)
	agent := e.startAgent(agentOptions{extraArgs: benchAgentArgs()})
	c := benchAgentClient(b, agent.socket)
	enqueued := enqueueConcurrently(b, n, func(i int) error {
		return agentEnqueue(context.Background(), c, "d-"+strconv.Itoa(i))
	})
	requireCount(b, e.url, e.schema, "ENQUEUED", n)
	counter := newDrainCounter(n)

	b.StartTimer()
	start := time.Now()
	benchAgentWorker(b, agent.socket, counter.started)
	counter.wait(b, 10*time.Minute)
	waitAllSucceeded(b, e.url, e.schema, n)
	elapsed := time.Since(start)
	b.StopTimer()
	return drainResult{drain: elapsed, enqueue: enqueued}
}

func benchDrainGoSDK(b *testing.B, n int) drainResult {
	b.StopTimer()
	url, schema := newSDKSchema(b)
	counter := newDrainCounter(n)
	sdkCtx := newSDKContext(b, url, schema)
	dbos.RegisterWorkflow(sdkCtx, func(_ dbos.Context, _ string) (string, error) {
		counter.started()
		return "", nil
	}, dbos.WithWorkflowName("noop"))
	if _, err := dbos.RegisterQueue(sdkCtx, benchQueueName, dbos.WithQueueBasePollingInterval(benchQueuePollInterval)); err != nil {
		b.Fatal(err)
	}
	// Enqueued before the context is launched: nothing dequeues yet.
	sdkClient := newSDKClient(b, url, schema)
	enqueued := enqueueConcurrently(b, n, func(i int) error {
		_, err := dbos.Enqueue[string](sdkClient, benchQueueName, "noop", "x", dbos.WithEnqueueWorkflowID("d-"+strconv.Itoa(i)))
		return err
	})
	requireCount(b, url, schema, "ENQUEUED", n)

	b.StartTimer()
	start := time.Now()
	if err := dbos.Launch(sdkCtx); err != nil {
		b.Fatal(err)
	}
	counter.wait(b, 10*time.Minute)
	waitAllSucceeded(b, url, schema, n)
	elapsed := time.Since(start)
	b.StopTimer()
	return drainResult{drain: elapsed, enqueue: enqueued}
}
