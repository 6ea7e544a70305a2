package agent

// The per-session bounds, driven in-process: a session fed frames through
// HandleFrame, its outbound queue read (or not) through TakeOutbound, over a
// real PostgreSQL, without a socket.

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// boundsAgent starts an agent on a fresh schema with cfg's bounds.
func boundsAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	ctx := context.Background()
	db, err := sysdb.OpenPostgres(ctx, pgtest.URL(t), sysdb.PostgresOptions{Schema: pgtest.Schema(t), MaxConns: 8})
	require.NoError(t, err)
	cfg.DB = db
	cfg.Notifications = db
	cfg.PollInterval = 50 * time.Millisecond
	cfg.GracePeriod = 100 * time.Millisecond
	a, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	t.Cleanup(func() {
		a.Shutdown(context.Background())
		db.Close()
	})
	return a
}

// peer drives one session as a connection's read loop would.
type peer struct {
	t   *testing.T
	s   *Session
	enc *protocol.Encoder
	id  uint64
	// in is what was taken from the session's outbound queue, not yet read
	// as frames.
	in []byte
	// early are frames read before the hello reply (a worker's runs may be
	// pushed before it), for next to return first.
	early []protocol.Envelope
	// taken, once pump has started, carries what a writer loop takes.
	taken chan []byte
}

// pump takes the session's frames as fast as they come, as a connection's
// writer does; next then reads them from what it took.
func (p *peer) pump() {
	p.taken = make(chan []byte, 1<<16)
	go func() {
		defer close(p.taken)
		for {
			buf := make([]byte, 4096)
			n, err := p.s.TakeOutbound(buf)
			if err != nil {
				return
			}
			p.taken <- buf[:n]
		}
	}()
}

func newPeer(t *testing.T, a *Agent, hello protocol.Hello) *peer {
	t.Helper()
	p := &peer{t: t, s: a.NewSession(t.Name()), enc: protocol.NewEncoder()}
	t.Cleanup(p.s.Close)
	hello.MinVersion, hello.MaxVersion = protocol.MinVersion, protocol.Version
	id := p.send(protocol.OpHello, &hello)
	// A worker's pollers start with its hello: work waiting for it may be
	// pushed before the reply.
	for {
		env := p.next()
		if env.Kind == protocol.KindResponse && env.ID == id {
			require.Nil(t, env.Error)
			return p
		}
		p.early = append(p.early, env)
	}
}

// send hands the session one request and returns its id.
func (p *peer) send(op string, body any) uint64 {
	p.t.Helper()
	require.NoError(p.t, p.handle(op, body))
	return p.id
}

func (p *peer) handle(op string, body any) error {
	p.id++
	frame, err := p.enc.Request(p.id, op, body)
	require.NoError(p.t, err)
	return p.s.HandleFrame(frame[4:])
}

// queued is the bytes counting against the outbound bound now.
func (p *peer) queued() int {
	p.s.outMu.Lock()
	defer p.s.outMu.Unlock()
	return p.s.outBuf.len() + p.s.outTaken
}

// stall makes it as if the session's writer had last come back the stall
// timeout ago: a frame that finds the queue full, or waits for room in it,
// closes the session. It does what the clock would, without the wait.
func (p *peer) stall() {
	s := p.s
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.outProgress = time.Now().Add(-s.agent.cfg.StallTimeout)
	if s.outWaiters > 0 {
		close(s.outRoom) // they look again
		s.outRoom = make(chan struct{})
	}
}

// next takes frames from the session until one is whole and returns it.
func (p *peer) next() protocol.Envelope {
	p.t.Helper()
	if len(p.early) > 0 {
		env := p.early[0]
		p.early = p.early[1:]
		return env
	}
	buf := make([]byte, 4096)
	for {
		if len(p.in) >= 4 {
			r := protocol.NewFrameReader(bytes.NewReader(p.in), 1<<30)
			if body, err := r.Next(); err == nil {
				p.in = p.in[4+len(body):]
				env, err := protocol.DecodeEnvelope(append([]byte(nil), body...))
				require.NoError(p.t, err)
				return env
			}
		}
		if p.taken != nil {
			chunk, ok := <-p.taken
			require.True(p.t, ok, "the session closed")
			p.in = append(p.in, chunk...)
			continue
		}
		n, err := p.s.TakeOutbound(buf)
		require.NoError(p.t, err)
		p.in = append(p.in, buf[:n]...)
	}
}

func TestSessionStopsReadingAtTheInFlightBound(t *testing.T) {
	const bound = 4
	a := boundsAgent(t, Config{MaxInFlight: bound})
	p := newPeer(t, a, protocol.Hello{Role: protocol.RoleClient, AppName: "bounds"})
	require.EqualValues(t, bound, cap(p.s.slots))

	// Waits hold their place: get_result of workflows queued where no
	// worker takes them. Another session starts them: a request's place is
	// freed after its reply is queued, so a start of p's could still hold
	// one when the waits come, and throttle p before the bound.
	other := newPeer(t, a, protocol.Hello{Role: protocol.RoleClient, AppName: "bounds"})
	var waits []string
	for i := range bound {
		id := "wait-" + string(rune('a'+i))
		other.send(protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: id, Name: "never", QueueName: "nobody", Serialization: "portable_json"})
		require.Nil(t, other.next().Error)
		waits = append(waits, id)
	}
	for _, id := range waits {
		p.send(protocol.OpGetResult, &protocol.GetResult{WorkflowID: id})
	}
	require.Len(t, p.s.slots, bound)
	select {
	case <-p.s.throttled:
		t.Fatal("throttled below the bound")
	default:
	}

	// One more request is not read: HandleFrame, the read loop, waits.
	handled := make(chan error, 1)
	go func() { handled <- p.handle(protocol.OpPing, protocol.Empty{}) }()
	select {
	case <-p.s.throttled:
	case err := <-handled:
		t.Fatalf("a request past the bound was read (%v)", err)
	}
	select {
	case err := <-handled:
		t.Fatalf("a request past the bound was read (%v)", err)
	default:
	}

	// An answer frees a place: the ping is read, and answered.
	other.send(protocol.OpCancel, &protocol.CancelWorkflow{WorkflowID: waits[0]})
	require.Nil(t, other.next().Error)
	require.NoError(t, <-handled)
	seen := map[uint64]bool{}
	for len(seen) < 2 {
		env := p.next()
		seen[env.ID] = true
	}
	require.True(t, seen[p.id], "the ping past the bound is answered once a place is free")
}

func TestSessionOutboundQueueIsBoundedInBytes(t *testing.T) {
	const bound = 8 << 10
	a := boundsAgent(t, Config{MaxOutboundBytes: bound, MaxInFlight: 16, MaxRunning: 4, StallTimeout: time.Hour})
	p := newPeer(t, a, protocol.Hello{Role: protocol.RoleClient, AppName: "bounds"})

	// A peer that reads nothing: replies fill the queue to its bound, then
	// wait with their requests' places held, then the read loop waits.
	const pings = 2000 // their replies are many times the bound
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for range pings {
			if p.handle(protocol.OpPing, protocol.Empty{}) != nil {
				return
			}
		}
	}()
	<-p.s.outFull
	<-p.s.throttled
	require.LessOrEqual(t, p.queued(), bound, "the queue holds no more than its bound")
	require.Greater(t, p.queued(), bound-64, "the queue filled up to its bound")

	// Reading drains it: every ping is answered, none dropped.
	for range pings {
		env := p.next()
		require.Nil(t, env.Error)
	}
	<-flooded
	require.Empty(t, p.in, "nothing but the replies")

	// A frame larger than the whole bound still goes, alone.
	big := make([]byte, 3*bound)
	for i := range big {
		big[i] = 'x'
	}
	inputs := `"` + string(big) + `"`
	p.send(protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "big", Name: "never", QueueName: "nobody",
		Inputs: &inputs, Serialization: "portable_json"})
	require.Nil(t, p.next().Error)
	p.send(protocol.OpListWorkflows, &protocol.ListWorkflows{WorkflowIDs: []string{"big"}, LoadInputs: true})
	env := p.next()
	require.Nil(t, env.Error)
	var list protocol.ListWorkflowsReply
	require.NoError(t, protocol.DecodeBody(env.Body, &list))
	require.Len(t, list.Workflows, 1)
	require.Equal(t, inputs, *list.Workflows[0].Inputs)
}

func TestSessionThatDoesNotReadIsClosedAndReleased(t *testing.T) {
	a := boundsAgent(t, Config{MaxOutboundBytes: 4 << 10, MaxInFlight: 64, StallTimeout: 200 * time.Millisecond})
	base := runtime.NumGoroutine()

	s := a.NewSession("flooder")
	finalized := make(chan struct{})
	runtime.SetFinalizer(s, func(*Session) { close(finalized) })
	flood := func(s *Session) {
		enc := protocol.NewEncoder()
		frame, err := enc.Request(1, protocol.OpHello, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Role: protocol.RoleClient})
		require.NoError(t, err)
		require.NoError(t, s.HandleFrame(frame[4:]))
		for id := uint64(2); ; id++ {
			frame, err := enc.Request(id, protocol.OpPing, protocol.Empty{})
			require.NoError(t, err)
			if s.HandleFrame(frame[4:]) != nil {
				return // the session closed: the read loop stops
			}
		}
	}
	flood(s)
	<-s.Done()
	s.Close() // returns once the close the stall started has finished
	a.mu.Lock()
	_, registered := a.sessions[s]
	a.mu.Unlock()
	require.False(t, registered)
	s = nil // dropped, so that only a leak can keep it

	// Every goroutine the session started ends, and nothing keeps the
	// session (with its queue) reachable. Nothing signals either: look
	// after each collection, for a while.
	gone := false
	for range 500 {
		runtime.GC()
		select {
		case <-finalized:
			gone = true
		default:
		}
		if gone && runtime.NumGoroutine() <= base {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("finalized: %v; goroutines: %d, %d before the session", gone, runtime.NumGoroutine(), base)
}

func TestPushesToAWorkerThatDoesNotReadAreHandedBack(t *testing.T) {
	// The stuck worker's writer takes the hello reply and never comes back
	// for more. Its runs' pushes fill the queue to twice the bound, then
	// wait; past the stall timeout the session is closed, its runs handed
	// back, none dropped. The timeout may also pass before the queue fills
	// (a writer stuck long before a burst, or a loaded machine): then the
	// first push that finds the queue full closes the session, and the
	// queue did reach its bound all the same.
	//
	// The stall timeout is an hour, and the test moves the stuck writer's
	// last progress back instead (stall): the writer that reads is then
	// never taken for stalled, however loaded the machine.
	t.Run("filled, then stalled", func(t *testing.T) { testPushesHandedBack(t, false) })
	t.Run("stalled, then filled", func(t *testing.T) { testPushesHandedBack(t, true) })
}

func testPushesHandedBack(t *testing.T, stalledFirst bool) {
	const bound = 4 << 10
	a := boundsAgent(t, Config{MaxOutboundBytes: bound, StallTimeout: time.Hour})
	worker := protocol.Hello{Role: protocol.RoleWorker, AppName: "bounds", Workflows: []protocol.WorkflowRegistration{{Name: "f"}},
		Queues: []protocol.QueueRegistration{{Name: "q"}}}
	stuck := newPeer(t, a, worker)
	if stalledFirst {
		stuck.stall()
	}
	client := newPeer(t, a, protocol.Hello{Role: protocol.RoleClient, AppName: "bounds"})

	const n = 40
	for i := range n {
		inputs := `"` + string(bytes.Repeat([]byte{'i'}, 200)) + `"`
		client.send(protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: "run-" + string(rune('A'+i)), Name: "f",
			QueueName: "q", Inputs: &inputs, Serialization: "portable_json"})
		require.Nil(t, client.next().Error)
	}
	if !stalledFirst {
		<-stuck.s.outFull // a push waits for room
		stuck.stall()
	}
	<-stuck.s.Done()
	// Nothing takes from the queue since: it holds what it held at the
	// close, its bound for pushes, which counts as a bound hit.
	require.LessOrEqual(t, stuck.queued(), 2*bound)
	require.Greater(t, stuck.queued(), bound)
	require.True(t, stuck.s.hitBounds(), "the queue reached its bound")

	// A worker that reads gets every one of them.
	reader := newPeer(t, a, worker)
	reader.pump()
	runs := map[string]bool{}
	for len(runs) < n {
		env := reader.next()
		if env.Kind != protocol.KindPush || env.Op != protocol.PushRun {
			continue
		}
		var run protocol.Run
		require.NoError(t, protocol.DecodeBody(env.Body, &run))
		runs[run.WorkflowID] = true
	}
	require.Len(t, runs, n)
}

// A step's reply is queued by the commit that made it durable, a commit
// that every session shares. When that reply finds its session's queue
// full, it waits on a goroutine of its own: the commit goes on to answer
// the other sessions, and the reply comes once the peer reads.
func TestAStepReplyThatMustWaitForRoomHoldsNoOtherSessionsCommit(t *testing.T) {
	const bound = 1 << 10
	a := boundsAgent(t, Config{MaxOutboundBytes: bound, StallTimeout: time.Hour, StepBatchers: 1})
	hello := protocol.Hello{Role: protocol.RoleWorker, AppName: "bounds", AppVersion: "v1",
		Workflows: []protocol.WorkflowRegistration{{Name: "wf"}}}
	start := func(p *peer, id string) string {
		t.Helper()
		p.send(protocol.OpStartWorkflow, &protocol.StartWorkflow{WorkflowID: id, Name: "wf", Serialization: "portable_json", RunHere: true})
		env := p.next()
		require.Nil(t, env.Error)
		var started protocol.StartWorkflowReply
		require.NoError(t, protocol.DecodeBody(env.Body, &started))
		require.NotNil(t, started.Run, "the worker runs its own start")
		return started.Run.OwnerXID
	}
	record := func(p *peer, id, owner string) uint64 {
		out := `"done"`
		return p.send(protocol.OpRecordStep, &protocol.RecordStep{WorkflowID: id, OwnerXID: owner,
			Step: protocol.Step{FunctionID: 1, Name: "step", Output: &out, Serialization: "portable_json"}})
	}
	stalled, other := newPeer(t, a, hello), newPeer(t, a, hello)
	stalledOwner, otherOwner := start(stalled, "stalled-run"), start(other, "other-run")

	// The queue is past its bound, as a frame larger than the bound leaves
	// it (it goes alone, into an empty queue): put there as send would.
	filler, err := protocol.NewEncoder().Response(1<<40, map[string]string{"pad": strings.Repeat("x", 2*bound)})
	require.NoError(t, err)
	stalled.s.outMu.Lock()
	stalled.s.outBuf.write(filler)
	stalled.s.outMu.Unlock()
	require.Greater(t, stalled.queued(), bound)

	stalledStep := record(stalled, "stalled-run", stalledOwner)
	<-stalled.s.outFull
	// The one committer is not held by the reply that waits.
	otherStep := record(other, "other-run", otherOwner)
	env := other.next()
	require.Equal(t, otherStep, env.ID)
	require.Nil(t, env.Error)

	// The stalled peer reads: its step's reply comes, after what filled the
	// queue, and the step is durable.
	answered := map[uint64]*protocol.Error{}
	for {
		env := stalled.next()
		answered[env.ID] = env.Error
		if _, ok := answered[stalledStep]; ok {
			break
		}
	}
	require.Contains(t, answered, uint64(1<<40), "what filled the queue came first")
	require.Nil(t, answered[stalledStep])
	steps, err := a.db.StepList(context.Background(), "stalled-run")
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, 1, steps[0].FunctionID)
}
