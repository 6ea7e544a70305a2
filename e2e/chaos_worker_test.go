package e2e

// The fault suite's worker: a real process (the test binary run again, as
// helper_test.go's workers are) that runs the chaos workflow and writes what
// it does to a side-effect log of its own, and the supervisor that keeps a
// fixed number of them running while the suite kills them.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

const (
	chaosWorkerEnv      = "DBOS_CHAOS_WORKER" // the agent's socket
	chaosEffectsEnv     = "DBOS_CHAOS_EFFECTS"
	chaosConcurrencyEnv = "DBOS_CHAOS_CONCURRENCY"

	chaosApp      = "chaos"
	chaosQueue    = "chaos"
	chaosWorkflow = "chaos_wf"
	chaosTopic    = "never-sent"
)

// The test binary becomes a chaos worker before TestMain runs: TestMain
// belongs to the harness, and this keeps the worker in the suite's files.
func init() {
	if socket := os.Getenv(chaosWorkerEnv); socket != "" {
		os.Exit(runChaosWorker(socket))
	}
}

// chaosInput is the chaos workflow's input.
type chaosInput struct {
	Seed   int `json:"seed"`
	Steps  int `json:"steps"`
	StepMS int `json:"step_ms"`
	// WaitAfter puts a recv (a wait with a deadline, which times out)
	// after that step.
	WaitAfter int `json:"wait_after"`
	WaitMS    int `json:"wait_ms"`
}

// chaosStepOutput is what step k of the workflow with seed returns; the
// workflow returns the JSON list of its steps' outputs.
func chaosStepOutput(seed, k int) string {
	return strconv.Quote(fmt.Sprintf("%d:%d", seed, k*k))
}

func chaosExpectedOutput(seed, steps int) string {
	outs := make([]json.RawMessage, steps)
	for k := 1; k <= steps; k++ {
		outs[k-1] = json.RawMessage(chaosStepOutput(seed, k))
	}
	raw, _ := json.Marshal(outs)
	return string(raw)
}

// effectLog is a worker process's side-effect log, one line per event,
// each written and fsynced before the code goes on:
//
//	run   <workflow> 0 <run> <unix ns>            a run of the workflow began here
//	start <workflow> <k> <run> <unix ns>          step k's body began (its side effect)
//	ack   <workflow> <k> <run> <unix ns>          the agent acknowledged step k's checkpoint
//	fail  <workflow> <k> <run> <unix ns> <error>  step k's checkpoint was refused or failed
//	wait  <workflow> <k> <run> <unix ns> <error>  the wait after step k failed
//
// A start of step k in a run that began after step k was acknowledged is a
// re-run of an acknowledged step; a start with no ack before it is the
// at-least-once re-execution a crash allows.
type effectLog struct {
	mu   sync.Mutex
	f    *os.File
	pid  int
	runs int
}

func openEffectLog(dir string) (*effectLog, error) {
	pid := os.Getpid()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("effects-%d.log", pid)), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open side-effect log: %w", err)
	}
	return &effectLog{f: f, pid: pid}, nil
}

func (l *effectLog) begin(workflowID string) string {
	l.mu.Lock()
	l.runs++
	run := fmt.Sprintf("%d.%d", l.pid, l.runs)
	l.mu.Unlock()
	l.record("run", workflowID, 0, run, "")
	return run
}

// record appends one line and makes it durable. A log that cannot be
// written makes the suite's counts meaningless: the process stops, loudly.
func (l *effectLog) record(kind, workflowID string, step int, run, detail string) {
	line := fmt.Sprintf("%s %s %d %s %d", kind, workflowID, step, run, time.Now().UnixNano())
	if detail != "" {
		line += " " + strings.ReplaceAll(detail, "\n", " ")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(line + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker: write side-effect log:", err)
		os.Exit(3)
	}
	if err := l.f.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker: fsync side-effect log:", err)
		os.Exit(3)
	}
}

// workflow is the chaos workflow: Steps steps, each logging its start and
// its acknowledged checkpoint, with a timed-out recv after step WaitAfter.
// Any failure is returned, as application code would: the Go client then
// finishes the workflow with it, or leaves it when the run was fenced.
func (l *effectLog) workflow(wf *client.Workflow, inputs *string) (*string, error) {
	var in chaosInput
	if err := json.Unmarshal([]byte(*inputs), &in); err != nil {
		return nil, err
	}
	run := l.begin(wf.ID())
	outs := make([]json.RawMessage, 0, in.Steps)
	for k := 1; k <= in.Steps; k++ {
		executed := false
		out, err := wf.Step(fmt.Sprintf("step-%d", k), func(context.Context) (*string, error) {
			executed = true
			l.record("start", wf.ID(), k, run, "")
			time.Sleep(time.Duration(in.StepMS) * time.Millisecond) // the step's work
			v := chaosStepOutput(in.Seed, k)
			return &v, nil
		})
		if err != nil {
			if executed {
				l.record("fail", wf.ID(), k, run, err.Error())
			}
			return nil, err
		}
		if executed {
			l.record("ack", wf.ID(), k, run, "")
			fmt.Printf("ack %s %d\n", wf.ID(), k)
		}
		outs = append(outs, json.RawMessage(*out))
		if k == in.WaitAfter {
			if _, err := wf.Recv(str(chaosTopic), time.Duration(in.WaitMS)*time.Millisecond); err != nil {
				l.record("wait", wf.ID(), k, run, err.Error())
				return nil, err
			}
		}
	}
	raw, err := json.Marshal(outs)
	if err != nil {
		return nil, err
	}
	s := string(raw)
	return &s, nil
}

// runChaosWorker connects, prints "ready", serves until the connection
// ends (the agent died or the worker is killed first) and exits.
func runChaosWorker(socket string) int {
	log, err := openEffectLog(os.Getenv(chaosEffectsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker:", err)
		return 1
	}
	concurrency, err := strconv.Atoi(os.Getenv(chaosConcurrencyEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker: concurrency:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := client.NewWorker(ctx, socket, client.WorkerConfig{
		AppName:   chaosApp,
		Workflows: map[string]client.WorkflowFunc{chaosWorkflow: log.workflow},
		Queues:    []protocol.QueueRegistration{{Name: chaosQueue, WorkerConcurrency: &concurrency}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker: connect:", err)
		return 1
	}
	fmt.Println("ready")
	<-w.Client.Done()
	return 0
}

// chaosWorkerProc is one running worker process.
type chaosWorkerProc struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	exited chan struct{}
}

// chaosWorkers keeps `slots` worker processes running: each slot starts a
// new process whenever its last one ended (killed, or its agent died),
// once an agent listens.
type chaosWorkers struct {
	h        *chaosHarness
	stderr   *os.File
	stopping chan struct{}
	wg       sync.WaitGroup

	mu      sync.Mutex
	live    map[int]*chaosWorkerProc // slot -> a process that said ready
	spawned int
}

func (h *chaosHarness) startWorkers(slots int) *chaosWorkers {
	stderr, err := os.OpenFile(filepath.Join(h.logDir, "workers.stderr"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		h.t.Fatalf("worker stderr: %v", err)
	}
	ws := &chaosWorkers{h: h, stderr: stderr, stopping: make(chan struct{}), live: map[int]*chaosWorkerProc{}}
	h.t.Cleanup(ws.stop)
	for slot := range slots {
		ws.wg.Add(1)
		go ws.supervise(slot)
	}
	return ws
}

func (ws *chaosWorkers) stop() {
	select {
	case <-ws.stopping:
		return
	default:
	}
	close(ws.stopping)
	ws.wg.Wait()
	ws.stderr.Close()
}

// started is how many worker processes were started.
func (ws *chaosWorkers) started() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.spawned
}

func (ws *chaosWorkers) supervise(slot int) {
	defer ws.wg.Done()
	for {
		select {
		case <-ws.stopping:
			return
		case <-ws.h.agentListening():
		}
		if p := ws.spawn(); p != nil {
			select {
			case <-p.ready:
				ws.mu.Lock()
				ws.live[slot] = p
				ws.mu.Unlock()
			case <-p.exited:
			case <-ws.stopping:
			}
			select {
			case <-p.exited:
			case <-ws.stopping:
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				<-p.exited
			}
			ws.mu.Lock()
			if ws.live[slot] == p {
				delete(ws.live, slot)
			}
			ws.mu.Unlock()
		}
		// Pace restarts: a worker that cannot connect (the database is
		// away and hello waits for it) is not respawned in a tight loop.
		select {
		case <-ws.stopping:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (ws *chaosWorkers) spawn() *chaosWorkerProc {
	h := ws.h
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), chaosWorkerEnv+"="+h.socket(), chaosEffectsEnv+"="+h.logDir,
		chaosConcurrencyEnv+"="+strconv.Itoa(h.s.concurrency))
	cmd.Stderr = ws.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Errorf("worker stdout: %v", err)
		return nil
	}
	if err := cmd.Start(); err != nil {
		h.t.Errorf("start worker: %v", err)
		return nil
	}
	ws.mu.Lock()
	ws.spawned++
	ws.mu.Unlock()
	p := &chaosWorkerProc{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		ready := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "ready" && !ready:
				ready = true
				close(p.ready)
			case strings.HasPrefix(line, "ack "):
				h.progress.ack(strings.Fields(line)[1])
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// kill SIGKILLs one live worker chosen at random, other than the worker
// of slot spare (-1: any), and returns its pid, or 0 when none is live.
func (ws *chaosWorkers) kill(spare int) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	slots := make([]int, 0, len(ws.live))
	for slot := range ws.live {
		if slot != spare {
			slots = append(slots, slot)
		}
	}
	if len(slots) == 0 {
		return 0
	}
	slot := slots[rand.IntN(len(slots))]
	p := ws.live[slot]
	delete(ws.live, slot)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	return p.cmd.Process.Pid
}
