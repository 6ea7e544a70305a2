package e2e

// The fault suite (`make chaos`; a short form runs in `make test`): queued
// workflows of several steps run on real worker processes through the real
// agent binary while the suite SIGKILLs workers and the agent, drops every
// database connection at once (what a Postgres restart does to the agent)
// and takes the database away, through a TCP proxy of its own, for shorter
// and longer than sysdb's retry window. Every step writes its start and its
// acknowledged checkpoint to a side-effect log; at the end the database
// and the logs say how many workflows were lost, wrong, stranded, and how
// many acknowledged steps ran again. Each must be zero.
//
// CHAOS=long selects the long form's defaults; CHAOS_* variables (see
// chaosSettingsFromEnv) scale either form.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// sysdbRetryWindow is sysdb's library default retry window
// (PostgresOptions.RetryFor). serve retries until the database returns
// instead; an outage at least this long proves it no longer gives up there.
const sysdbRetryWindow = time.Minute

// The suite's agents rescue orphaned claims (a dequeue whose commit
// acknowledgement a dropped connection lost) within seconds rather than the
// default minute, so the suite's bounded drain sees them finish.
var chaosAgentArgs = []string{"--rescue-interval", "1s", "--rescue-horizon", "3s"}

const chaosExecutor = "chaos"

type chaosSettings struct {
	form        string
	workflows   int // in all, split evenly into one wave per phase
	steps       int
	workers     int // worker processes kept running
	concurrency int // each worker's worker_concurrency on the queue
	stepTime    time.Duration
	waitTime    time.Duration // the recv's timeout
	killEvery   time.Duration // background worker SIGKILLs, through every phase
	workerKills int           // extra worker SIGKILLs at progress marks in the first phase
	agentKills  int
	drops       int           // "Postgres restarts": every connection dropped at once
	dropDown    time.Duration // how long a restart refuses connections
	outages     []time.Duration
	phaseDrain  time.Duration // how long a phase waits for its wave after its faults
	drain       time.Duration // how long the end waits, with no fault, for everything
	markWait    time.Duration // how long a fault waits for its progress mark
}

func chaosSettingsFromEnv(t *testing.T) chaosSettings {
	s := chaosSettings{
		form: "short", workflows: 80, steps: 4, workers: 3, concurrency: 4,
		stepTime: 10 * time.Millisecond, waitTime: 50 * time.Millisecond,
		killEvery: time.Second, workerKills: 2, agentKills: 1, drops: 1, dropDown: time.Second,
		outages: []time.Duration{5 * time.Second}, phaseDrain: 30 * time.Second, drain: 30 * time.Second,
		markWait: 30 * time.Second,
	}
	if os.Getenv("CHAOS") == "long" {
		s = chaosSettings{
			form: "long", workflows: 2000, steps: 5, workers: 4, concurrency: 8,
			stepTime: 20 * time.Millisecond, waitTime: 50 * time.Millisecond,
			killEvery: 2 * time.Second, workerKills: 3, agentKills: 3, drops: 2, dropDown: 2 * time.Second,
			outages: []time.Duration{20 * time.Second, 2 * time.Minute}, phaseDrain: time.Minute, drain: 2 * time.Minute,
			markWait: time.Minute,
		}
	}
	ints := map[string]*int{
		"CHAOS_WORKFLOWS": &s.workflows, "CHAOS_STEPS": &s.steps, "CHAOS_WORKERS": &s.workers,
		"CHAOS_CONCURRENCY": &s.concurrency, "CHAOS_WORKER_KILLS": &s.workerKills,
		"CHAOS_AGENT_KILLS": &s.agentKills, "CHAOS_DROPS": &s.drops,
	}
	for name, p := range ints {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a count", name, v)
			}
			*p = n
		}
	}
	durations := map[string]*time.Duration{
		"CHAOS_STEP_TIME": &s.stepTime, "CHAOS_KILL_EVERY": &s.killEvery, "CHAOS_DROP_DOWN": &s.dropDown,
		"CHAOS_PHASE_DRAIN": &s.phaseDrain, "CHAOS_DRAIN": &s.drain,
	}
	for name, p := range durations {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a duration such as 2s", name, v)
			}
			*p = d
		}
	}
	if v, ok := os.LookupEnv("CHAOS_OUTAGES"); ok {
		s.outages = nil
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			d, err := time.ParseDuration(f)
			if err != nil || d <= 0 {
				t.Fatalf("CHAOS_OUTAGES=%q: want durations such as 5s,2m", v)
			}
			s.outages = append(s.outages, d)
		}
	}
	if s.steps < 1 || s.workers < 1 || s.concurrency < 1 {
		t.Fatalf("CHAOS_STEPS, CHAOS_WORKERS and CHAOS_CONCURRENCY must be at least 1")
	}
	return s
}

// chaosPhase is one fault phase: its wave of workflows is enqueued, its
// fault injected while they run, then it waits (bounded) for the wave.
type chaosPhase struct {
	name  string
	fault func(h *chaosHarness, p *chaosPhase)

	index       int
	wave        []string
	start, end  time.Time
	outage      time.Duration
	missedMarks int           // faults fired before the wave got as far as planned
	drainedIn   time.Duration // 0: the wave did not finish within phaseDrain
}

func (p *chaosPhase) prefix() string { return fmt.Sprintf("w%d-", p.index) }

// chaosFault is one fault injected, for the report.
type chaosFault struct {
	at   time.Time
	kind string // worker_kill, agent_kill, drop, cut, restore
	pid  int
}

// chaosProgress counts acknowledged steps per wave, as the workers report
// them, so that faults can wait until a wave is under way.
type chaosProgress struct {
	mu      sync.Mutex
	acks    map[string]int // wave prefix -> acks
	changed chan struct{}
}

func (p *chaosProgress) ack(workflowID string) {
	wave, _, _ := strings.Cut(workflowID, "-")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acks[wave+"-"]++
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitFor waits until the wave has n acks; false when within passed first.
func (p *chaosProgress) waitFor(prefix string, n int, within time.Duration) bool {
	deadline := time.After(within)
	for {
		p.mu.Lock()
		got, changed := p.acks[prefix], p.changed
		p.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

type chaosHarness struct {
	t        *testing.T
	s        chaosSettings
	e        *env
	proxy    *tcpProxy
	db       chaosDB // direct, not through the proxy
	logDir   string
	began    time.Time
	progress *chaosProgress
	workers  *chaosWorkers
	seeds    map[string]int
	phases   []*chaosPhase

	mu      sync.Mutex
	agent   *agentProc
	agents  []*agentProc
	agentUp chan struct{} // closed while an agent listens, open while it restarts
	faults  []chaosFault
}

func TestChaos(t *testing.T) {
	t.Parallel()
	runChaos(t, newEnv(t), false)
}

// TestChaosSQLite is the fault suite on a SQLite system database: the worker
// and agent SIGKILLs (a kill -9 of the agent mid-batch, with checkpoints
// acknowledged just before); the connection drops and outages are a
// network's, which a file does not have.
func TestChaosSQLite(t *testing.T) {
	t.Parallel()
	runChaos(t, newSQLiteEnv(t), true)
}

func runChaos(t *testing.T, e *env, onSQLite bool) {
	s := chaosSettingsFromEnv(t)
	if onSQLite {
		s.drops, s.outages = 0, nil
	}
	h := &chaosHarness{t: t, s: s, began: time.Now(), seeds: map[string]int{},
		progress: &chaosProgress{acks: map[string]int{}, changed: make(chan struct{})}}
	// Registered first, so it runs last: the report comes after the agent
	// logs the harness prints when a test fails.
	var report string
	t.Cleanup(func() {
		if report != "" {
			t.Log("\n" + report)
		}
	})

	h.e = e
	h.logDir = h.e.dir
	if dir := os.Getenv("CHAOS_LOG_DIR"); dir != "" {
		h.logDir = dir
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if onSQLite {
		h.db = openChaosSQLite(t, h.e.url)
	} else {
		h.db = chaosPostgres{conn: pgtest.Connect(t, h.e.url), schema: h.e.schema}
		var proxied string
		proxied, h.proxy = h.e.proxiedURL()
		h.e.url = proxied // every agent reaches Postgres through the proxy
	}
	h.startAgent()
	h.workers = h.startWorkers(s.workers)

	h.phases = []*chaosPhase{{name: "worker SIGKILLs", fault: (*chaosHarness).killWorkers}}
	if s.agentKills > 0 {
		h.phases = append(h.phases, &chaosPhase{name: fmt.Sprintf("agent SIGKILL x%d", s.agentKills), fault: (*chaosHarness).killAgent})
	}
	if s.drops > 0 {
		h.phases = append(h.phases, &chaosPhase{name: fmt.Sprintf("Postgres restart x%d", s.drops), fault: (*chaosHarness).dropConnections})
	}
	for _, d := range s.outages {
		name := fmt.Sprintf("outage %s", d)
		if d >= sysdbRetryWindow {
			name += " (> retry window)"
		}
		h.phases = append(h.phases, &chaosPhase{name: name, outage: d, fault: (*chaosHarness).outage})
	}
	perWave := max(1, s.workflows/len(h.phases))

	stopKiller, killerDone := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	stopKilling := func() {
		stopOnce.Do(func() { close(stopKiller) })
		<-killerDone
	}
	t.Cleanup(stopKilling) // when a phase fails the test
	go h.killPeriodically(stopKiller, killerDone)
	for i, p := range h.phases {
		p.index = i + 1
		p.start = time.Now()
		h.enqueueWave(p, perWave)
		p.fault(h, p)
		if d, ok := h.waitFor(p.prefix(), s.phaseDrain); ok {
			p.drainedIn = d
		}
		p.end = time.Now()
	}
	stopKilling()
	drain := &chaosPhase{name: "drain (no faults)", start: time.Now()}
	if d, ok := h.waitFor("w", s.drain); ok {
		drain.drainedIn = d
	}
	drain.end = time.Now()

	res := h.tally(drain)
	report = res.report
	if res.failed() {
		t.Errorf("fault suite (%s form): %s", s.form, res.verdict)
	}
}

func (h *chaosHarness) socket() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agent.socket
}

func (h *chaosHarness) agentListening() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agentUp
}

func (h *chaosHarness) note(kind string, pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, chaosFault{at: time.Now(), kind: kind, pid: pid})
}

// startAgent starts an agent with the suite's executor id, so that a
// restarted one recovers what the killed one owned.
func (h *chaosHarness) startAgent() {
	a := h.e.startAgent(agentOptions{executorID: chaosExecutor, extraArgs: chaosAgentArgs})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.agent = a
	h.agents = append(h.agents, a)
	if h.agentUp == nil {
		h.agentUp = make(chan struct{})
	}
	close(h.agentUp) // killAgent left it open: the waiting workers go on
}

// enqueueWave enqueues the phase's workflows through the agent, as an
// application's client would, retrying an enqueue that fails (the same id:
// enqueues are idempotent).
func (h *chaosHarness) enqueueWave(p *chaosPhase, n int) {
	t := h.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, h.socket(), protocol.Hello{Role: protocol.RoleClient, AppName: chaosApp})
	if err != nil {
		t.Fatalf("phase %q: connect to enqueue: %v", p.name, err)
	}
	defer c.Close()
	first := len(h.seeds)
	for i := range n {
		id := fmt.Sprintf("%s%05d", p.prefix(), i)
		p.wave = append(p.wave, id)
		h.seeds[id] = first + i
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, id := range p.wave {
		raw, err := json.Marshal(chaosInput{Seed: h.seeds[id], Steps: h.s.steps, StepMS: int(h.s.stepTime.Milliseconds()),
			WaitAfter: (h.s.steps + 1) / 2, WaitMS: int(h.s.waitTime.Milliseconds())})
		if err != nil {
			t.Fatal(err)
		}
		req := protocol.StartWorkflow{WorkflowID: id, Name: chaosWorkflow, Inputs: str(string(raw)),
			Serialization: "portable_json", QueueName: chaosQueue}
		g.Go(func() error {
			var err error
			for range 3 {
				if err = c.Call(gctx, protocol.OpStartWorkflow, &req, nil); err == nil {
					return nil
				}
			}
			return fmt.Errorf("enqueue %s: %w", id, err)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("phase %q: %v", p.name, err)
	}
}

// mark waits until the wave has acknowledged the fraction i/n of its steps,
// so that the next fault lands mid-flight.
func (h *chaosHarness) mark(p *chaosPhase, i, n int) {
	if !h.progress.waitFor(p.prefix(), len(p.wave)*h.s.steps*i/n, h.s.markWait) {
		p.missedMarks++
	}
}

// survivorSlot's worker is never killed while the database is away: its
// runs meet the outage in their checkpoints and waits, where the killed
// workers' runs meet it in their hand-back.
const survivorSlot = 0

func (h *chaosHarness) killWorker() {
	spare := -1
	if h.duringOutage(time.Now()) {
		spare = survivorSlot
	}
	if pid := h.workers.kill(spare); pid != 0 {
		h.note("worker_kill", pid)
	}
}

func (h *chaosHarness) killPeriodically(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(h.s.killEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			h.killWorker()
		}
	}
}

func (h *chaosHarness) killWorkers(p *chaosPhase) {
	for i := 1; i <= h.s.workerKills; i++ {
		h.mark(p, i, h.s.workerKills+1)
		h.killWorker()
	}
}

// killAgent SIGKILLs the agent (its workers lose their connection and
// exit) and starts another with the same executor id.
func (h *chaosHarness) killAgent(p *chaosPhase) {
	for i := 1; i <= h.s.agentKills; i++ {
		h.mark(p, i, h.s.agentKills+1)
		h.mu.Lock()
		a := h.agent
		h.agentUp = make(chan struct{})
		h.mu.Unlock()
		a.kill()
		h.note("agent_kill", a.cmd.Process.Pid)
		h.startAgent()
	}
}

// dropConnections does to the agent what a Postgres restart does: every
// connection closes at once mid-flight, and new ones are refused a moment.
func (h *chaosHarness) dropConnections(p *chaosPhase) {
	for i := 1; i <= h.s.drops; i++ {
		h.mark(p, i, h.s.drops+1)
		h.proxy.cut()
		h.note("drop", 0)
		time.Sleep(h.s.dropDown) // the restart's downtime
		h.proxy.restore()
		h.note("restore", 0)
	}
}

// outage takes the database away for the phase's duration. A worker is
// killed as soon as the database is gone, so that its runs must be handed
// back across the outage; the periodic kills go on meanwhile, sparing one
// worker, whose runs wait through the outage in their checkpoints and
// waits.
func (h *chaosHarness) outage(p *chaosPhase) {
	h.mark(p, 1, 3)
	h.proxy.cut()
	h.note("cut", 0)
	h.killWorker()
	time.Sleep(p.outage) // the outage itself
	h.proxy.restore()
	h.note("restore", 0)
}

// waitFor waits until no workflow whose id starts with prefix is PENDING or
// ENQUEUED. It polls the database directly: the database is the ground
// truth, and the agent, whose notifications a wait would rely on, is what
// is under test.
func (h *chaosHarness) waitFor(prefix string, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	deadline := start.Add(within)
	// The prefix is the suite's own ("w", "w1-", ...): quoted inline, the
	// statement reads the same on both backends.
	q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE workflow_uuid LIKE '%s%%' AND status IN ('PENDING', 'ENQUEUED')`,
		h.db.table("workflow_status"), prefix)
	for {
		var open int
		if err := h.db.queryRow(q, &open); err != nil {
			h.t.Fatalf("count open workflows: %v", err)
		}
		if open == 0 {
			return time.Since(start), true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
