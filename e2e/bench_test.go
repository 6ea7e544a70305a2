package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// stepsPerWorkflow is the benchmark workload: workflows of 10 steps.
const stepsPerWorkflow = 10

// benchResults keeps each variant's time per workflow so the ratio can be
// printed once all variants ran (in the same run, on the same database).
var benchResults sync.Map

// BenchmarkStepRecord runs workflows of 10 steps through the real agent and
// Postgres, with 1 and 64 workflows in flight, once with the agent's
// group commit and once with one commit per step (the baseline), and prints
// the throughput ratio.
func BenchmarkStepRecord(b *testing.B) {
	for _, concurrency := range []int{1, 64} {
		for _, variant := range []struct {
			name string
			args []string
		}{
			// One commit per step, with as many commits in flight as a
			// process with a 16-connection pool would have.
			{"one-commit-per-step", []string{"--step-batch-max", "1", "--step-committers", "16"}},
			{"group-commit", nil},
		} {
			name := fmt.Sprintf("concurrency=%d/%s", concurrency, variant.name)
			b.Run(name, func(b *testing.B) {
				benchStepRecord(b, concurrency, variant.args)
				benchResults.Store(name, float64(b.Elapsed())/float64(b.N))
			})
		}
		base, ok1 := benchResults.Load(fmt.Sprintf("concurrency=%d/one-commit-per-step", concurrency))
		group, ok2 := benchResults.Load(fmt.Sprintf("concurrency=%d/group-commit", concurrency))
		if ok1 && ok2 {
			fmt.Printf("BenchmarkStepRecord concurrency=%d: group commit is %.2fx the throughput of one commit per step\n",
				concurrency, base.(float64)/group.(float64))
		}
	}
}

func benchStepRecord(b *testing.B, concurrency int, agentArgs []string) {
	e := newEnv(b)
	agent := e.startAgent(agentOptions{extraArgs: agentArgs})
	ctx := context.Background()
	payload := "x"
	w, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{
		AppName: "bench",
		Workflows: map[string]client.WorkflowFunc{"ten_steps": func(wf *client.Workflow, _ *string) (*string, error) {
			for i := 0; i < stepsPerWorkflow; i++ {
				if _, err := wf.Step("s"+strconv.Itoa(i), func(context.Context) (*string, error) { return &payload, nil }); err != nil {
					return nil, err
				}
			}
			return &payload, nil
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()

	var next atomic.Int64
	prefix := fmt.Sprintf("b%d-", time.Now().UnixNano())
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for g := 0; g < concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				id := prefix + strconv.FormatInt(n, 10)
				if _, err := w.Start(ctx, protocol.StartWorkflow{WorkflowID: id, Name: "ten_steps", Serialization: "portable_json"}); err != nil {
					errs <- err
					return
				}
				var res protocol.WorkflowResult
				if err := w.Client.Call(ctx, protocol.OpGetResult, &protocol.GetResult{WorkflowID: id}, &res); err != nil {
					errs <- err
					return
				}
				if res.Status != "SUCCESS" {
					errs <- fmt.Errorf("workflow %s ended %s", id, res.Status)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*stepsPerWorkflow)/b.Elapsed().Seconds(), "steps/s")
}
