package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// BenchmarkComm puts the agent beside the official DBOS Go SDK on the same
// Postgres, each on a fresh schema, in one run:
//
//   - roundtrip: two workflows play ping-pong with messages. The pinger
//     sends a message to the ponger and waits for the reply; the ponger
//     waits for a message and sends it back. One op is one round (two
//     sends, two recvs, each a durable step); p50 and mean per round are
//     reported. Agent: Go workflows in a worker connected to the agent,
//     Workflow.Send/Recv. Go SDK: dbos.Send/dbos.Recv in SDK workflows.
//   - set-event and write-stream: commBenchInFlight workflows at once, each
//     making its share of b.N set_event (write_stream) calls; the rate is
//     calls per second from the first start to the last result.
//
// The go-sdk variant of each runs after the agent's and reports the ratio
// (above 1: the agent is better) as a metric, and a summary line is
// printed. Run it with a benchtime of a few seconds at most, e.g.
//
//	go test ./e2e -run '^$' -bench BenchmarkComm -benchtime 2s
func BenchmarkComm(b *testing.B) {
	var mu sync.Mutex
	results := map[string]commBenchResult{}
	for _, pattern := range []struct {
		name       string
		agent, sdk func(b *testing.B) commBenchResult
		// ratio is "how many times better the agent is".
		ratio func(agent, sdk commBenchResult) float64
	}{
		{"roundtrip", benchRoundTripAgent, benchRoundTripGoSDK, func(a, s commBenchResult) float64 { return s.meanMs / a.meanMs }},
		{"set-event", benchCallsAgent(commSetEvent), benchCallsGoSDK(commSetEvent), func(a, s commBenchResult) float64 { return a.rate / s.rate }},
		{"write-stream", benchCallsAgent(commWriteStream), benchCallsGoSDK(commWriteStream), func(a, s commBenchResult) float64 { return a.rate / s.rate }},
	} {
		for _, v := range []struct {
			name string
			fn   func(b *testing.B) commBenchResult
		}{{"agent", pattern.agent}, {"go-sdk", pattern.sdk}} {
			b.Run(pattern.name+"/"+v.name, func(b *testing.B) {
				r := v.fn(b)
				r.report(b)
				mu.Lock()
				defer mu.Unlock()
				results[pattern.name+"/"+v.name] = r
				if agent, ok := results[pattern.name+"/agent"]; ok && v.name == "go-sdk" {
					b.ReportMetric(pattern.ratio(agent, r), "agent-x")
				}
			})
		}
		agent, okA := results[pattern.name+"/agent"]
		sdk, okS := results[pattern.name+"/go-sdk"]
		if okA && okS {
			fmt.Printf("BenchmarkComm %s: agent %s, Go SDK %s; the agent is %.2fx\n", pattern.name, agent, sdk, pattern.ratio(agent, sdk))
		}
	}
}

// commBenchInFlight is how many workflows make calls at once in the
// throughput benchmarks.
const commBenchInFlight = 64

// commBenchResult is one variant's figures: per-round latencies, or a rate.
type commBenchResult struct {
	rounds        int
	p50Ms, meanMs float64
	calls         int
	rate          float64
}

func (r commBenchResult) report(b *testing.B) {
	if r.rounds > 0 {
		b.ReportMetric(r.p50Ms, "p50-ms")
		b.ReportMetric(r.meanMs, "mean-ms")
		return
	}
	b.ReportMetric(r.rate, "calls/s")
}

func (r commBenchResult) String() string {
	if r.rounds > 0 {
		return fmt.Sprintf("p50 %.2f ms mean %.2f ms per round (%d rounds)", r.p50Ms, r.meanMs, r.rounds)
	}
	return fmt.Sprintf("%.0f calls/s (%d calls)", r.rate, r.calls)
}

// latencyResult summarises per-round durations.
func latencyResult(rounds []time.Duration) commBenchResult {
	sort.Slice(rounds, func(i, j int) bool { return rounds[i] < rounds[j] })
	var sum time.Duration
	for _, d := range rounds {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return commBenchResult{rounds: len(rounds), p50Ms: ms(percentile(rounds, 0.5)), meanMs: ms(sum / time.Duration(len(rounds)))}
}

// commBenchAgent starts an agent as users run it and a worker of workflows.
func commBenchAgent(b *testing.B, workflows map[string]client.WorkflowFunc) *client.Worker {
	b.Helper()
	e := newEnv(b)
	agent := e.startAgent(agentOptions{extraArgs: benchAgentArgs()})
	w, err := client.NewWorker(context.Background(), agent.socket, client.WorkerConfig{AppName: "bench", Workflows: workflows})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return w
}

// commBenchAwait waits for workflows to succeed through the agent.
func commBenchAwait(b *testing.B, c *client.Client, ids ...string) {
	b.Helper()
	for _, id := range ids {
		var res protocol.WorkflowResult
		if err := c.Call(context.Background(), protocol.OpGetResult, &protocol.GetResult{WorkflowID: id}, &res); err != nil {
			b.Fatal(err)
		}
		if res.Status != "SUCCESS" {
			b.Fatalf("workflow %s ended %s: %v", id, res.Status, res.Error)
		}
	}
}

const commStop = `"stop"`

func benchRoundTripAgent(b *testing.B) commBenchResult {
	b.StopTimer()
	measured := make(chan []time.Duration, 1)
	w := commBenchAgent(b, map[string]client.WorkflowFunc{
		"ponger": func(wf *client.Workflow, _ *string) (*string, error) {
			for {
				r, err := wf.Recv(str("ping"), time.Minute)
				if err != nil {
					return nil, err
				}
				if !r.Received || *r.Message == commStop {
					return nil, nil
				}
				if err := wf.Send(protocol.Message{DestinationID: "pinger", Topic: str("pong"), Message: *r.Message}); err != nil {
					return nil, err
				}
			}
		},
		"pinger": func(wf *client.Workflow, _ *string) (*string, error) {
			rounds := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if err := wf.Send(protocol.Message{DestinationID: "ponger", Topic: str("ping"), Message: strconv.Itoa(i)}); err != nil {
					return nil, err
				}
				r, err := wf.Recv(str("pong"), time.Minute)
				if err != nil {
					return nil, err
				}
				if !r.Received || *r.Message != strconv.Itoa(i) {
					return nil, fmt.Errorf("round %d: got %v", i, r.Message)
				}
				rounds = append(rounds, time.Since(start))
			}
			measured <- rounds
			return nil, wf.Send(protocol.Message{DestinationID: "ponger", Topic: str("ping"), Message: commStop})
		},
	})
	ctx := context.Background()
	if _, err := w.Start(ctx, protocol.StartWorkflow{WorkflowID: "ponger", Name: "ponger", Serialization: "portable_json"}); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	if _, err := w.Start(ctx, protocol.StartWorkflow{WorkflowID: "pinger", Name: "pinger", Serialization: "portable_json"}); err != nil {
		b.Fatal(err)
	}
	commBenchAwait(b, w.Client, "pinger")
	b.StopTimer()
	commBenchAwait(b, w.Client, "ponger")
	return latencyResult(<-measured)
}

func benchRoundTripGoSDK(b *testing.B) commBenchResult {
	b.StopTimer()
	measured := make(chan []time.Duration, 1)
	ponger := func(ctx dbos.Context, _ string) (string, error) {
		for {
			msg, err := dbos.Recv[string](ctx, "ping", time.Minute)
			if err != nil || msg == commStop {
				return "", err
			}
			if err := dbos.Send(ctx, "pinger", msg, "pong"); err != nil {
				return "", err
			}
		}
	}
	pinger := func(ctx dbos.Context, _ string) (string, error) {
		rounds := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := dbos.Send(ctx, "ponger", strconv.Itoa(i), "ping"); err != nil {
				return "", err
			}
			msg, err := dbos.Recv[string](ctx, "pong", time.Minute)
			if err != nil {
				return "", err
			}
			if msg != strconv.Itoa(i) {
				return "", fmt.Errorf("round %d: got %q", i, msg)
			}
			rounds = append(rounds, time.Since(start))
		}
		measured <- rounds
		return "", dbos.Send(ctx, "ponger", commStop, "ping")
	}
	url, schema := newSDKSchema(b)
	sdk := launchSDK(b, url, schema, "bench", func(ctx dbos.Context) {
		dbos.RegisterWorkflow(ctx, ponger, dbos.WithWorkflowName("ponger"))
		dbos.RegisterWorkflow(ctx, pinger, dbos.WithWorkflowName("pinger"))
	})
	pong, err := dbos.RunWorkflow(sdk, ponger, "", dbos.WithWorkflowID("ponger"))
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	ping, err := dbos.RunWorkflow(sdk, pinger, "", dbos.WithWorkflowID("pinger"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ping.GetResult(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if _, err := pong.GetResult(); err != nil {
		b.Fatal(err)
	}
	return latencyResult(<-measured)
}

// commCall is the call a throughput benchmark makes.
type commCall int

const (
	commSetEvent commCall = iota
	commWriteStream
)

// commShares splits n calls among commBenchInFlight workflows.
func commShares(n int) []int {
	shares := make([]int, min(n, commBenchInFlight))
	for i := 0; i < n; i++ {
		shares[i%len(shares)]++
	}
	return shares
}

func benchCallsAgent(what commCall) func(b *testing.B) commBenchResult {
	return func(b *testing.B) commBenchResult {
		b.StopTimer()
		w := commBenchAgent(b, map[string]client.WorkflowFunc{"caller": func(wf *client.Workflow, in *string) (*string, error) {
			n, err := strconv.Atoi(*in)
			if err != nil {
				return nil, err
			}
			for i := 0; i < n; i++ {
				value := strconv.Itoa(i)
				if what == commSetEvent {
					err = wf.SetEvent("progress", value)
				} else {
					err = wf.WriteStream("progress", value)
				}
				if err != nil {
					return nil, err
				}
			}
			return nil, nil
		}})
		ctx := context.Background()
		shares := commShares(b.N)
		ids := make([]string, len(shares))
		b.StartTimer()
		start := time.Now()
		for i, n := range shares {
			ids[i] = fmt.Sprintf("caller-%d", i)
			if _, err := w.Start(ctx, protocol.StartWorkflow{WorkflowID: ids[i], Name: "caller", Inputs: str(strconv.Itoa(n)), Serialization: "portable_json"}); err != nil {
				b.Fatal(err)
			}
		}
		commBenchAwait(b, w.Client, ids...)
		elapsed := time.Since(start)
		b.StopTimer()
		return commBenchResult{calls: b.N, rate: float64(b.N) / elapsed.Seconds()}
	}
}

func benchCallsGoSDK(what commCall) func(b *testing.B) commBenchResult {
	return func(b *testing.B) commBenchResult {
		b.StopTimer()
		caller := func(ctx dbos.Context, n int) (string, error) {
			for i := 0; i < n; i++ {
				var err error
				if what == commSetEvent {
					err = dbos.SetEvent(ctx, "progress", i)
				} else {
					err = dbos.WriteStream(ctx, "progress", i)
				}
				if err != nil {
					return "", err
				}
			}
			return "", nil
		}
		url, schema := newSDKSchema(b)
		sdk := launchSDK(b, url, schema, "bench", func(ctx dbos.Context) {
			dbos.RegisterWorkflow(ctx, caller, dbos.WithWorkflowName("caller"))
		})
		shares := commShares(b.N)
		handles := make([]dbos.WorkflowHandle[string], len(shares))
		b.StartTimer()
		start := time.Now()
		for i, n := range shares {
			h, err := dbos.RunWorkflow(sdk, caller, n, dbos.WithWorkflowID(fmt.Sprintf("caller-%d", i)))
			if err != nil {
				b.Fatal(err)
			}
			handles[i] = h
		}
		for _, h := range handles {
			if _, err := h.GetResult(); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		return commBenchResult{calls: b.N, rate: float64(b.N) / elapsed.Seconds()}
	}
}
