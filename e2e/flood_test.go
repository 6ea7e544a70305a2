package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

var (
	plainBinaryOnce sync.Once
	plainBinary     string
	plainBinaryErr  error
)

// plainAgentBinary is the agent built as users run it, without the race
// detector, whose shadow memory would swamp what a memory bound measures.
func plainAgentBinary(t *testing.T) string {
	t.Helper()
	plainBinaryOnce.Do(func() {
		plainBinary = filepath.Join(filepath.Dir(agentBinary), "dbos-agent-plain")
		out, err := exec.Command("go", "build", "-o", plainBinary, "../cmd/dbos-agent").CombinedOutput()
		if err != nil {
			plainBinaryErr = fmt.Errorf("build the agent: %v\n%s", err, out)
		}
	})
	require.NoError(t, plainBinaryErr)
	return plainBinary
}

// readProcStatus reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func readProcStatus(pid int, field string) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	kb, err := readProcStatus(pid, field)
	require.NoError(t, err)
	return kb
}

func agentStats(t *testing.T, c *client.Client, free bool) protocol.StatsReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st protocol.StatsReply
	require.NoError(t, c.Call(ctx, protocol.OpStats, &protocol.Stats{FreeMemory: free}, &st))
	return st
}

// floodResult is what one flooding client saw.
type floodResult struct {
	requests    int64 // sent whole
	throttled   int64 // writes that made no progress for a second: the agent stopped reading
	disconnects int64 // connections the agent closed
}

// flood pipelines op as fast as it can on a connection whose replies it
// never reads, until ctx ends; when the agent disconnects it, it connects
// again and goes on.
func flood(ctx context.Context, socket, op string, body any) (floodResult, error) {
	var res floodResult
	for ctx.Err() == nil {
		if err := floodOnce(ctx, socket, op, body, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// floodOnce floods one connection until ctx ends or the agent closes it.
func floodOnce(ctx context.Context, socket, op string, body any, res *floodResult) error {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	enc := protocol.NewEncoder()
	hello, _ := enc.Request(1, protocol.OpHello, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Role: protocol.RoleClient, AppName: "flood"})
	if _, err := conn.Write(hello); err != nil {
		return err
	}
	// The hello reply, the last frame this connection reads.
	if _, err := protocol.NewFrameReader(bufio.NewReader(conn), 1<<20).Next(); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	// Batches of requests, written whole across write timeouts so that the
	// stream stays framed.
	var batch []byte
	for id := uint64(2); ctx.Err() == nil; {
		batch = batch[:0]
		for range 256 {
			frame, err := enc.Request(id, op, body)
			if err != nil {
				return err
			}
			batch = append(batch, frame...)
			id++
		}
		for len(batch) > 0 {
			if ctx.Err() != nil {
				return nil
			}
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			n, err := conn.Write(batch)
			batch = batch[n:]
			switch {
			case err == nil:
			case errors.Is(err, os.ErrDeadlineExceeded):
				res.throttled++
			default:
				res.disconnects++
				return nil
			}
		}
		res.requests += 256
	}
	return nil
}

// TestFloodingClientIsBoundedAndOthersAreServed is issue 10's flood: clients
// of the agent's own user pipeline ping and list_workflows as fast as they
// can without reading a reply, for 20 s. The agent (as users build it, with
// its default bounds but a 3 s stall timeout) stays under 256 MB, keeps
// answering another client, disconnects the flooders (stops reading them
// first when it makes their replies fast enough to fill its bounds), and
// once they leave has the goroutines and memory it had before.
func TestFloodingClientIsBoundedAndOthersAreServed(t *testing.T) {
	e := newEnv(t)
	agent := e.startAgent(agentOptions{binary: plainAgentBinary(t), extraArgs: []string{"--stall-timeout", "3s"}})
	pid := agent.cmd.Process.Pid
	c := dialClient(t, agent.socket)
	require.EqualValues(t, 4096, c.Hello.MaxInFlight)

	// Workflows for list_workflows to list: each reply is about 60 KiB.
	ctx := context.Background()
	inputs := `"` + strings.Repeat("x", 500) + `"`
	for i := range 100 {
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: fmt.Sprintf("listed-%03d", i), Name: "never_runs", QueueName: "no_worker",
			Inputs: &inputs, Serialization: "portable_json",
		}, nil))
	}
	before := agentStats(t, c, true)
	rssBefore := procStatus(t, pid, "VmRSS")

	// Another client, served all along: a ping every 50 ms.
	floodCtx, stopFlood := context.WithTimeout(ctx, 20*time.Second)
	defer stopFlood()
	var pings, pingFailures atomic.Int64
	var slowest atomic.Int64
	bystanderDone := make(chan struct{})
	go func() {
		defer close(bystanderDone)
		for floodCtx.Err() == nil {
			start := time.Now()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Call(pctx, protocol.OpPing, protocol.Empty{}, nil)
			cancel()
			if err != nil {
				pingFailures.Add(1)
			} else {
				pings.Add(1)
			}
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
			select {
			case <-floodCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// RSS, sampled while the flood lasts.
	var peakRSS atomic.Int64
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		for floodCtx.Err() == nil {
			if kb, err := readProcStatus(pid, "VmRSS"); err == nil && kb > peakRSS.Load() {
				peakRSS.Store(kb)
			}
			select {
			case <-floodCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	type outcome struct {
		op  string
		res floodResult
		err error
	}
	outcomes := make(chan outcome, 2)
	for _, f := range []struct {
		op   string
		body any
	}{
		{protocol.OpPing, protocol.Empty{}},
		{protocol.OpListWorkflows, &protocol.ListWorkflows{IDPrefix: "listed-", LoadInputs: true}},
	} {
		go func() {
			res, err := flood(floodCtx, agent.socket, f.op, f.body)
			outcomes <- outcome{f.op, res, err}
		}()
	}
	for range 2 {
		o := <-outcomes
		require.NoError(t, o.err, o.op)
		t.Logf("%s flooder: %d requests sent, %d writes throttled (1 s without progress), %d disconnects",
			o.op, o.res.requests, o.res.throttled, o.res.disconnects)
		// Whether the agent's bounds stopped it reading before the stall
		// timeout closed the connection depends on how fast it made the
		// replies (the machine's load): the disconnect comes either way.
		// The in-process tests (agent/) show the reading stop.
		require.Positive(t, o.res.disconnects, "%s: the agent disconnected the flooder", o.op)
	}
	<-bystanderDone
	<-samplerDone
	hwm := procStatus(t, pid, "VmHWM")
	t.Logf("agent RSS %d KiB before, peak %d KiB during the flood (VmHWM %d KiB); bystander: %d pings, %d failed, slowest %s",
		rssBefore, peakRSS.Load(), hwm, pings.Load(), pingFailures.Load(), time.Duration(slowest.Load()))
	require.Less(t, hwm, int64(256<<10), "the agent's RSS stays under 256 MB")
	require.Zero(t, pingFailures.Load(), "the other client is served during the flood")
	require.Positive(t, pings.Load())
	require.Contains(t, agent.log(), "peer does not read what it is sent")

	// The flooders gone, what they held is released: the engine's
	// goroutines go back to what they were (nothing signals that: look for
	// a while; the process's total may stay higher by the database
	// connections the pool opened for the flood's queries, which it keeps
	// idle), and
	// the agent returns the memory to the system by itself (it collects
	// shortly after a session that hit its bounds closes).
	var after protocol.StatsReply
	deadline := time.Now().Add(30 * time.Second)
	for {
		after = agentStats(t, c, false)
		if after.Sessions == before.Sessions && after.EngineGoroutines <= before.EngineGoroutines {
			break
		}
		if time.Now().After(deadline) {
			// SIGQUIT makes the agent print every goroutine's stack into
			// its log, which the harness shows for a failed test.
			_ = agent.cmd.Process.Signal(syscall.SIGQUIT)
			<-agent.exited
			t.Fatalf("after the flood: %d sessions, %d engine goroutines; before: %d sessions, %d engine goroutines (stacks in the agent log)",
				after.Sessions, after.EngineGoroutines, before.Sessions, before.EngineGoroutines)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rssLeft := procStatus(t, pid, "VmRSS")
	left := time.Now()
	rssFreed := rssLeft
	for rssFreed >= rssBefore+32<<10 {
		if time.Since(left) > 30*time.Second {
			t.Fatalf("the agent still holds %d KiB 30 s after the flooders left (%d KiB before the flood)", rssFreed, rssBefore)
		}
		time.Sleep(100 * time.Millisecond)
		rssFreed = procStatus(t, pid, "VmRSS")
	}
	after = agentStats(t, c, false)
	t.Logf("after the flood: engine goroutines %d (before %d), all goroutines %d (before %d), heap %d KiB (before %d KiB); RSS %d KiB once the flooders left, %d KiB %s later with no request",
		after.EngineGoroutines, before.EngineGoroutines, after.Goroutines, before.Goroutines, after.HeapAllocBytes>>10, before.HeapAllocBytes>>10, rssLeft, rssFreed,
		time.Since(left).Round(100*time.Millisecond))
	require.Less(t, after.HeapAllocBytes, before.HeapAllocBytes+8<<20, "the heap returns to what it was")
}
