package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The engine's tests drive it in-process: sessions fed frames directly, no
// socket and no binary, against a real PostgreSQL. goleak checks that every
// goroutine the engine started (and the tests' own) has ended.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	agent   *Agent
	db      *sysdb.Postgres
	signals *testSignals
}

// setup starts an agent on a fresh schema; it is shut down (and checked to
// have stopped every goroutine) when the test ends.
func setup(t testing.TB, mods ...func(*Config)) *testBundle {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	db, err := sysdb.OpenPostgres(t.Context(), url, sysdb.PostgresOptions{Schema: schema, MaxConns: 8})
	require.NoError(t, err)
	signals := newTestSignals()
	cfg := Config{DB: db, Notifications: db, ExecutorID: "engine-test", PollInterval: 50 * time.Millisecond,
		GracePeriod: time.Second, ShutdownTimeout: 5 * time.Second, testSignals: signals}
	for _, m := range mods {
		m(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, a.Start(t.Context()))
	t.Cleanup(func() {
		a.Shutdown(context.Background())
		require.Empty(t, a.Goroutines(), "every engine goroutine ends at shutdown")
		db.Close()
	})
	return &testBundle{agent: a, db: db, signals: signals}
}

// enginePeer is an in-process connection: it feeds a session frames and reads
// what the session writes, as the socket server would.
type enginePeer struct {
	t       testing.TB
	s       *Session
	enc     *protocol.Encoder
	mu      sync.Mutex
	nextID  uint64
	replies map[uint64]chan protocol.Envelope
	pushes  chan protocol.Envelope
	done    chan struct{}
}

func connect(t testing.TB, a *Agent, hello protocol.Hello) *enginePeer {
	t.Helper()
	p := openSession(t, a)
	hello.MinVersion, hello.MaxVersion = protocol.MinVersion, protocol.Version
	var reply protocol.HelloReply
	p.call(protocol.OpHello, hello, &reply)
	return p
}

// openSession is an in-process connection that has not said hello yet.
func openSession(t testing.TB, a *Agent) *enginePeer {
	p := &enginePeer{t: t, s: a.NewSession("test"), enc: protocol.NewEncoder(),
		replies: map[uint64]chan protocol.Envelope{}, pushes: make(chan protocol.Envelope, 64), done: make(chan struct{})}
	go p.readLoop()
	t.Cleanup(p.close)
	return p
}

func (p *enginePeer) close() {
	p.s.Close()
	<-p.done
}

// outboundReader reads a session's outbound frames as a connection's
// writer takes them.
type outboundReader struct{ s *Session }

func (r outboundReader) Read(buf []byte) (int, error) { return r.s.TakeOutbound(buf) }

func (p *enginePeer) readLoop() {
	defer close(p.done)
	frames := protocol.NewFrameReader(outboundReader{p.s}, 1<<30)
	for {
		body, err := frames.Next()
		if err != nil {
			return // the session closed
		}
		// The reader reuses its buffer; envelopes outlive this iteration.
		env, err := protocol.DecodeEnvelope(append([]byte(nil), body...))
		if err != nil {
			p.t.Errorf("the agent wrote a malformed frame: %v", err)
			return
		}
		if env.Kind == protocol.KindPush {
			p.pushes <- env
			continue
		}
		p.mu.Lock()
		ch := p.replies[env.ID]
		delete(p.replies, env.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- env
		}
	}
}

// send issues a request and returns the channel its reply arrives on.
func (p *enginePeer) send(op string, body any) <-chan protocol.Envelope {
	p.t.Helper()
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	ch := make(chan protocol.Envelope, 1)
	p.replies[id] = ch
	frame, err := p.enc.Request(id, op, body)
	require.NoError(p.t, err)
	body2 := append([]byte(nil), frame[4:]...)
	p.mu.Unlock()
	require.NoError(p.t, p.s.HandleFrame(body2))
	return ch
}

// call issues a request and decodes its successful reply into out.
func (p *enginePeer) call(op string, body, out any) {
	p.t.Helper()
	env := p.await(p.send(op, body))
	require.Nil(p.t, env.Error, "%s answered an error", op)
	if out != nil {
		require.NoError(p.t, protocol.DecodeBody(env.Body, out))
	}
}

func (p *enginePeer) await(ch <-chan protocol.Envelope) protocol.Envelope {
	p.t.Helper()
	select {
	case env := <-ch:
		return env
	case <-time.After(30 * time.Second):
		p.t.Fatal("no reply within 30s")
		return protocol.Envelope{}
	}
}

func (p *enginePeer) nextRun() protocol.Run {
	p.t.Helper()
	select {
	case env := <-p.pushes:
		require.Equal(p.t, protocol.PushRun, env.Op)
		var run protocol.Run
		require.NoError(p.t, protocol.DecodeBody(env.Body, &run))
		return run
	case <-time.After(30 * time.Second):
		p.t.Fatal("no run pushed within 30s")
		return protocol.Run{}
	}
}

func (p *enginePeer) noRunPushed() {
	p.t.Helper()
	select {
	case env := <-p.pushes:
		p.t.Fatalf("unexpected push %s", env.Op)
	default:
	}
}

func str(s string) *string { return &s }

func workerHello(name string, queues ...protocol.QueueRegistration) protocol.Hello {
	return protocol.Hello{Role: protocol.RoleWorker, AppName: "engine", AppVersion: "v1",
		Workflows: []protocol.WorkflowRegistration{{Name: name}}, Queues: queues}
}

func clientHello() protocol.Hello {
	return protocol.Hello{Role: protocol.RoleClient, AppName: "engine", AppVersion: "v1"}
}

func enqueue(t *testing.T, c *enginePeer, id, name, queue string) {
	t.Helper()
	var reply protocol.StartWorkflowReply
	c.call(protocol.OpStartWorkflow, protocol.StartWorkflow{WorkflowID: id, Name: name, Inputs: str(`[]`),
		Serialization: "portable_json", QueueName: queue}, &reply)
	require.True(t, reply.Created)
	require.Nil(t, reply.Run, "an enqueue is not run by its caller")
}

func TestEngineDispatchesAQueuedWorkflowAndAnswersItsResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := connect(t, b.agent, workerHello("wf", protocol.QueueRegistration{Name: "q"}))
	c := connect(t, b.agent, clientHello())

	enqueue(t, c, "wf-1", "wf", "q")
	result := c.send(protocol.OpGetResult, protocol.GetResult{WorkflowID: "wf-1"})

	run := w.nextRun()
	require.Equal(t, "wf-1", run.WorkflowID)
	require.Equal(t, "q", run.QueueName)
	require.Empty(t, run.History)
	require.Contains(t, run.OwnerXID, b.agent.ownerPrefix, "claims carry this agent's token prefix")
	w.call(protocol.OpRecordStep, protocol.RecordStep{WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID,
		Step: protocol.Step{FunctionID: 1, Name: "step", Output: str(`1`), Serialization: "portable_json"}}, nil)
	var fin protocol.FinishReply
	w.call(protocol.OpFinish, protocol.Finish{WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID,
		Status: sysdb.StatusSuccess, Output: str(`"done"`), Serialization: "portable_json"}, &fin)
	require.True(t, fin.Applied)

	env := c.await(result)
	require.Nil(t, env.Error)
	var res protocol.WorkflowResult
	require.NoError(t, protocol.DecodeBody(env.Body, &res))
	require.Equal(t, sysdb.StatusSuccess, res.Status)
	require.Equal(t, `"done"`, *res.Output)
	steps, err := b.db.StepList(t.Context(), "wf-1")
	require.NoError(t, err)
	require.Len(t, steps, 1)
}

func TestEngineHonoursAWorkersConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := 1
	w := connect(t, b.agent, workerHello("wf", protocol.QueueRegistration{Name: "q", WorkerConcurrency: &one}))
	c := connect(t, b.agent, clientHello())
	enqueue(t, c, "a", "wf", "q")
	enqueue(t, c, "b", "wf", "q")

	first := w.nextRun()
	// Without the limit both would be claimed by the poll that found the
	// first: the other is still queued, and nothing else was pushed.
	wf, err := b.db.WorkflowGet(t.Context(), map[string]string{"a": "b", "b": "a"}[first.WorkflowID])
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, wf.Status, "a worker with concurrency 1 holds one run")
	w.noRunPushed()

	w.call(protocol.OpFinish, protocol.Finish{WorkflowID: first.WorkflowID, OwnerXID: first.OwnerXID,
		Status: sysdb.StatusSuccess, Output: str(`1`), Serialization: "portable_json"}, nil)
	second := w.nextRun()
	require.NotEqual(t, first.WorkflowID, second.WorkflowID)
}

// countingDB counts the step-record commits of the real database, and can
// hold the first one so a test sees what queues up behind it.
type countingDB struct {
	sysdb.SystemDatabase
	commits atomic.Int32
	records atomic.Int32
	hold    chan struct{} // closed to let the first commit through
	held    atomic.Bool
	first   atomic.Int32 // the held commit's records
}

func (c *countingDB) StepRecordMany(ctx context.Context, steps []sysdb.StepRecordParams) ([]error, error) {
	if c.held.CompareAndSwap(false, true) {
		c.first.Store(int32(len(steps)))
		<-c.hold
	}
	c.commits.Add(1)
	c.records.Add(int32(len(steps)))
	return c.SystemDatabase.StepRecordMany(ctx, steps)
}

func TestEngineGroupCommitsStepsWaitingForACommitter(t *testing.T) {
	t.Parallel()
	counting := &countingDB{hold: make(chan struct{})}
	b := setup(t, func(c *Config) {
		counting.SystemDatabase = c.DB
		c.DB = counting
		c.StepBatchers = 1
	})
	const n = 40
	w := connect(t, b.agent, workerHello("wf"))
	runs := make([]*protocol.Run, n)
	for i := range runs {
		var reply protocol.StartWorkflowReply
		w.call(protocol.OpStartWorkflow, protocol.StartWorkflow{Name: "wf", Inputs: str(`[]`), Serialization: "portable_json", RunHere: true}, &reply)
		require.NotNil(t, reply.Run, "a worker's direct start runs in the worker")
		runs[i] = reply.Run
	}
	acks := make([]<-chan protocol.Envelope, n)
	for i, run := range runs {
		acks[i] = w.send(protocol.OpRecordStep, protocol.RecordStep{WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID,
			Step: protocol.Step{FunctionID: 1, Name: "step", Output: str(`1`), Serialization: "portable_json"}})
	}
	// The first commit is held; the others queue behind the one committer.
	released := false
	defer func() {
		if !released {
			close(counting.hold)
		}
	}()
	require.Eventually(t, func() bool { return int(counting.first.Load())+len(b.agent.steps.in) == n }, 10*time.Second, time.Millisecond,
		"every record reaches the batcher")
	released = true
	close(counting.hold)
	for i, ack := range acks {
		env := w.await(ack)
		require.Nil(t, env.Error, "record %d", i)
	}
	require.Equal(t, int32(n), counting.records.Load())
	want := int32(2) // the held commit, then one for everything that waited
	if counting.first.Load() == n {
		want = 1
	}
	require.Equal(t, want, counting.commits.Load())
	for _, run := range runs {
		steps, err := b.db.StepList(t.Context(), run.WorkflowID)
		require.NoError(t, err)
		require.Len(t, steps, 1, "an acknowledgement means durable")
	}
}

func TestEngineRescuerReturnsClaimsNoRunHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.RescueInterval = 20 * time.Millisecond
		// Longer than the two claims below take: a round between them would
		// return the first (the oldest row) before the second is claimed.
		c.RescueHorizon = time.Second
	})
	ctx := t.Context()
	a := b.agent
	c := connect(t, a, clientHello())
	// Three rows on a queue no worker here serves: one claimed under this
	// agent's prefix as a lost dequeue acknowledgement leaves it, one
	// claimed by another process on the same executor id (an SDK), and a
	// live run of a connected worker.
	enqueue(t, c, "orphan", "wf", "nobody")
	enqueue(t, c, "theirs", "wf", "nobody")
	claim := func(id, prefix string) string {
		t.Helper()
		ws, err := b.db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: "nobody", ExecutorID: a.ExecutorID(),
			ApplicationVersion: "v1", MaxClaim: 1, OwnerPrefix: prefix})
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.Equal(t, id, ws[0].ID)
		return *ws[0].OwnerXID
	}
	claim("orphan", a.ownerPrefix)
	theirToken := claim("theirs", "sdk-process:")
	w := connect(t, a, workerHello("live"))
	var live protocol.StartWorkflowReply
	w.call(protocol.OpStartWorkflow, protocol.StartWorkflow{WorkflowID: "live", Name: "live", Inputs: str(`[]`),
		Serialization: "portable_json", RunHere: true}, &live)
	require.NotNil(t, live.Run)

	// Rounds until the orphan is back; none may touch the others.
	deadline := time.After(30 * time.Second)
	for rescued := 0; rescued == 0; {
		select {
		case round := <-b.signals.rescue:
			require.NoError(t, round.err)
			rescued = round.rescued
		case <-deadline:
			t.Fatal("the rescuer did not return the orphaned claim")
		}
	}
	orphan, err := b.db.WorkflowGet(ctx, "orphan")
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, orphan.Status)
	require.Nil(t, orphan.OwnerXID)

	// Another round after that leaves the live run and the SDK's claim be.
	select {
	case round := <-b.signals.rescue:
		require.NoError(t, round.err)
		require.Zero(t, round.rescued)
	case <-time.After(30 * time.Second):
		t.Fatal("no further rescue round")
	}
	theirs, err := b.db.WorkflowGet(ctx, "theirs")
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusPending, theirs.Status)
	require.Equal(t, theirToken, *theirs.OwnerXID, "another process's claim is never rescued")
	still, err := b.db.WorkflowGet(ctx, "live")
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusPending, still.Status)
	require.Equal(t, live.Run.OwnerXID, *still.OwnerXID, "a live run keeps its row")
}

func TestEngineHandsAClosedWorkersRunsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := connect(t, b.agent, workerHello("wf", protocol.QueueRegistration{Name: "q"}))
	c := connect(t, b.agent, clientHello())
	enqueue(t, c, "x", "wf", "q")
	run := w.nextRun()
	w.close()

	// Another worker of the same version gets it, with a new token.
	w2 := connect(t, b.agent, workerHello("wf", protocol.QueueRegistration{Name: "q"}))
	again := w2.nextRun()
	require.Equal(t, "x", again.WorkflowID)
	require.NotEqual(t, run.OwnerXID, again.OwnerXID)
	require.Equal(t, int64(2), again.RecoveryAttempts)
}

func TestEngineShutdownEndsWithinItsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.GracePeriod = 100 * time.Millisecond
		c.ShutdownTimeout = 2 * time.Second
	})
	w := connect(t, b.agent, workerHello("wf"))
	var reply protocol.StartWorkflowReply
	w.call(protocol.OpStartWorkflow, protocol.StartWorkflow{Name: "wf", Inputs: str(`[]`), Serialization: "portable_json", RunHere: true}, &reply)
	require.NotNil(t, reply.Run)
	// A wait that would last an hour, and a run that never finishes.
	pending := w.send(protocol.OpGetResult, protocol.GetResult{WorkflowID: reply.Run.WorkflowID, TimeoutMS: 3_600_000})

	start := time.Now()
	b.agent.Shutdown(context.Background())
	require.Less(t, time.Since(start), 100*time.Millisecond+2*time.Second+time.Second,
		"shutdown returns within grace + shutdown timeout")
	require.Empty(t, b.agent.Goroutines())
	_ = pending // abandoned with its session
	wf, err := b.db.WorkflowGet(t.Context(), reply.Run.WorkflowID)
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, wf.Status, "the unfinished run went back to its queue")
}

// dequeueCounter counts the real database's dequeues, by queue.
type dequeueCounter struct {
	sysdb.SystemDatabase
	mu      sync.Mutex
	byQueue map[string]int
}

func (d *dequeueCounter) QueueDequeue(ctx context.Context, p sysdb.QueueDequeueParams) ([]sysdb.Workflow, error) {
	d.mu.Lock()
	d.byQueue[p.QueueName]++
	d.mu.Unlock()
	return d.SystemDatabase.QueueDequeue(ctx, p)
}

func (d *dequeueCounter) count(queue string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byQueue[queue]
}

// The pollers poll here only when woken (the interval is an hour), so what
// a run's end wakes shows.
func hourlyPolls(counter *dequeueCounter) func(*Config) {
	return func(c *Config) {
		counter.SystemDatabase = c.DB
		c.DB = counter
		c.PollInterval = time.Hour
	}
}

func TestARunsEndWakesAPollerHeldBackByTheWorkersSlots(t *testing.T) {
	t.Parallel()
	counter := &dequeueCounter{byQueue: map[string]int{}}
	b := setup(t, hourlyPolls(counter))
	one := 1
	w := connect(t, b.agent, workerHello("wf", protocol.QueueRegistration{Name: "q", WorkerConcurrency: &one}))
	c := connect(t, b.agent, clientHello())
	enqueue(t, c, "a", "wf", "q")
	first := w.nextRun()
	enqueue(t, c, "b", "wf", "q") // waits: the worker's one slot is taken
	w.noRunPushed()

	// Only the end's wake can claim b: the next interval poll is an hour off.
	w.call(protocol.OpFinish, protocol.Finish{WorkflowID: first.WorkflowID, OwnerXID: first.OwnerXID,
		Status: sysdb.StatusSuccess, Output: str(`1`), Serialization: "portable_json"}, nil)
	second := w.nextRun()
	require.Equal(t, "b", second.WorkflowID)
}

func TestARunsEndWakesNoPollerThatAFreedSlotCannotHelp(t *testing.T) {
	t.Parallel()
	counter := &dequeueCounter{byQueue: map[string]int{}}
	b := setup(t, hourlyPolls(counter))
	w := connect(t, b.agent, workerHello("wf"))
	c := connect(t, b.agent, clientHello())
	finish := func(run protocol.Run) {
		w.call(protocol.OpFinish, protocol.Finish{WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID,
			Status: sysdb.StatusSuccess, Output: str(`1`), Serialization: "portable_json"}, nil)
	}
	// The internal queue's poller is there, and claims when woken: an
	// enqueue wakes it, with room to spare in the worker.
	enqueue(t, c, "queued", "wf", "")
	finish(w.nextRun())
	polled := counter.count(sysdb.InternalQueueName)
	require.Positive(t, polled)

	// Runs ending leave it alone: its last poll was not held back by the
	// worker's slots, and the internal queue caps nothing across executors.
	const runs = 10
	for range runs {
		var reply protocol.StartWorkflowReply
		w.call(protocol.OpStartWorkflow, protocol.StartWorkflow{Name: "wf", Inputs: str(`[]`), Serialization: "portable_json", RunHere: true}, &reply)
		require.NotNil(t, reply.Run)
		finish(*reply.Run)
	}
	// At most one more: the enqueue's notification may come back through
	// the database after the wake that claimed it, and wake the poller once.
	require.LessOrEqual(t, counter.count(sysdb.InternalQueueName)-polled, 1,
		"%d runs ended; a dequeue each would be the old behaviour", runs)
}
