// Package agent is the engine: sessions of connected applications, the
// registry of workers, dispatch of workflows to them, the step-record
// batcher, waiters woken by notifications, queue pollers, recovery and
// shutdown.
//
// Its operations are typed methods of Agent, params in, result and typed
// error out (engine.go and the engine_*.go files: StartWorkflow,
// RecordStep, Finish, Cancel, ...): they hold the policy, and whoever calls
// says who it is with a Caller. A Session is the adapter for one
// connection: it takes protocol frames in (Session.HandleFrame), calls the
// methods (ops.go and the handlers beside it) and hands frames out
// (Session.TakeOutbound), mapping every error to the catalog in one place;
// sockets and C belong to its callers. The operator CLI calls the same
// methods on an engine that runs no services (NewOneShot). It reaches the
// database only through sysdb.SystemDatabase and sysdb.Notifications.
//
// Every goroutine starts through the agent's supervisor (supervisor.go),
// which Shutdown stops within a hard deadline.
//
// Lock order (a lock may be taken while holding those before it, never
// the reverse):
//
//  1. Session.helloMu, Session.inflightMu, Session.outMu (each held only
//     briefly, never while taking another lock: leaves)
//  2. Agent.mu (sessions, groups, workers, runs, claims in progress)
//  3. waiters.mu, signals.mu, scheduler's own lock
//  4. supervisor.mu (read-locked by every goroutine start; stop takes it
//     alone)
//
// Nothing is sent to a session while Agent.mu is held (sends may block on a
// slow peer), and no database call is made under any of these locks.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// Config configures an Agent.
type Config struct {
	// DB is the system database; Notifications its change feed (optional:
	// without it waits rely on the fallback poll).
	DB            sysdb.SystemDatabase
	Notifications sysdb.Notifications
	// ExecutorID is what this agent's rows carry (env DBOS__VMID; default
	// "local").
	ExecutorID string
	// DefaultAppVersion is used for workers that announce none.
	DefaultAppVersion string
	// AgentVersion is reported in the handshake.
	AgentVersion string
	// MaxFrameSize is the largest frame body a session accepts, announced
	// in the handshake; 0 = protocol default (16 MiB).
	MaxFrameSize int
	// MaxInFlight bounds the requests one session handles at once (default
	// DefaultMaxInFlight): a peer with that many unanswered is no longer
	// read from until one is answered. Waits (get_result, recv, ...) hold
	// their place while they wait.
	MaxInFlight int
	// MaxRunning bounds the requests other than waits a session handles at
	// once (default DefaultMaxRunning, at most MaxInFlight): they end by
	// themselves, and each holds its reply until there is room for it.
	MaxRunning int
	// MaxOutboundBytes bounds the frames queued for one peer (default
	// DefaultMaxOutboundBytes): replies wait for room, pushes may use as much
	// again before they wait (see Session.send).
	MaxOutboundBytes int
	// StallTimeout is how long a peer may leave its frames unread (no
	// progress writing to it) before its session is closed (default
	// DefaultStallTimeout).
	StallTimeout time.Duration
	// PollInterval is the queue pollers' idle interval (default 1s); a
	// local enqueue or freed capacity wakes a poller at once.
	PollInterval time.Duration
	// ResultPollInterval bounds how late a waiter learns of an outcome
	// written by someone that does not notify (default 1s).
	ResultPollInterval time.Duration
	// MessagePollInterval is how often waits for messages, events and
	// stream values re-check without a notification (default 5s): only a
	// writer that does not notify, or a lost notification, needs it.
	MessagePollInterval time.Duration
	// GracePeriod is how long shutdown lets running workflows finish
	// (default 10s).
	GracePeriod time.Duration
	// StepBatchers is the most step-record commits (and, apart, workflow
	// outcome commits) in flight at once (default 2). One commits whatever
	// waits when it starts; each other starts one only while the one before
	// it has had a commit in flight for over 10ms, so that a commit waiting
	// on a locked workflow row does not stall every step (see batcher).
	StepBatchers int
	// MaxStepBatch caps the records of one commit (default 512; 1 means
	// one commit per step, the benchmarks' baseline).
	MaxStepBatch int
	// MaxClaim bounds one dequeue (default 64).
	MaxClaim int
	// SweepInterval is how often delayed workflows are released and
	// timed-out ones cancelled (default 1s).
	SweepInterval time.Duration
	// ScheduleInterval is how often schedules are re-read from the
	// database (default 10s); changes made through this agent apply at
	// once.
	ScheduleInterval time.Duration
	// ShutdownTimeout is how long shutdown waits, after the grace period,
	// for the engine's goroutines to end (default 5s); past it Shutdown
	// returns and names what still runs.
	ShutdownTimeout time.Duration
	// RescueInterval is how often the rescuer looks for rows this agent
	// claimed that no live run holds (default 30s); RescueHorizon how long
	// such a row must have been unchanged first (default 1 min), so that a
	// claim being dispatched is never taken back.
	RescueInterval time.Duration
	RescueHorizon  time.Duration
	Logger         *zap.Logger

	// testSignals, when set (by this package's tests), receives events of
	// the background services instead of a test sleeping for them.
	testSignals *testSignals
}

func (c *Config) setDefaults() {
	if c.ExecutorID == "" {
		c.ExecutorID = "local"
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.ResultPollInterval <= 0 {
		c.ResultPollInterval = time.Second
	}
	if c.MessagePollInterval <= 0 {
		c.MessagePollInterval = 5 * time.Second
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = 10 * time.Second
	}
	if c.StepBatchers <= 0 {
		c.StepBatchers = 2
	}
	if c.MaxStepBatch <= 0 {
		c.MaxStepBatch = defaultMaxStepBatch
	}
	if c.MaxClaim <= 0 {
		c.MaxClaim = 64
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Second
	}
	if c.ScheduleInterval <= 0 {
		c.ScheduleInterval = 10 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	if c.RescueInterval <= 0 {
		c.RescueInterval = 30 * time.Second
	}
	if c.RescueHorizon <= 0 {
		c.RescueHorizon = time.Minute
	}
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = protocol.DefaultMaxFrameSize
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxRunning <= 0 {
		c.MaxRunning = DefaultMaxRunning
	}
	if c.MaxOutboundBytes <= 0 {
		c.MaxOutboundBytes = DefaultMaxOutboundBytes
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.AgentVersion == "" {
		c.AgentVersion = "dev"
	}
}

// Agent serves the sessions of one host's applications.
type Agent struct {
	cfg Config
	db  sysdb.SystemDatabase
	log *zap.Logger

	// sup owns every goroutine; its context ends when Shutdown stops the
	// services.
	sup *supervisor
	// handbackCtx ends at shutdown's hard deadline: hand-backs retry
	// through an outage until then, past the end of ctx.
	handbackCtx    context.Context
	handbackCancel context.CancelFunc
	// ownerPrefix starts every owner token this agent process issues, so
	// the rescuer recognises its own claims (an SDK process on the same
	// executor id has others).
	ownerPrefix string
	rescuer     *rescuer

	draining atomic.Bool
	// listenerConnected is set once the notification listener has
	// connected (readiness reports it).
	listenerConnected atomic.Bool
	// deactivated is set by Deactivate: no new workflows are created here.
	deactivated atomic.Bool
	// oneShot is set for an engine that runs no services (NewOneShot).
	oneShot bool
	// lastFreeMemory is when stats last returned memory to the system
	// (unix nanoseconds).
	lastFreeMemory atomic.Int64
	// memoryReleasePending is set while a release after a bounded
	// session's close is scheduled (releaseMemorySoon).
	memoryReleasePending atomic.Bool
	// counters, stepStats, finishStats and requestStats are read by Metrics.
	counters     counters
	stepStats    *batchStats
	finishStats  *batchStats
	requestStats requestStats
	steps        *batcher[sysdb.StepRecordParams, struct{}]
	finishes     *batcher[sysdb.WorkflowFinishParams, sysdb.WorkflowFinishResult]
	waiters      *waiters
	signals      *signals
	schedules    *scheduler

	mu       sync.Mutex
	sessions map[*Session]struct{}
	groups   map[groupKey]*workerGroup
	// runs maps a workflow running in this agent's workers to its run.
	runs map[string]*run
	// runsDone is signalled whenever a run ends (shutdown waits on it).
	runsDone chan struct{}
	// claiming counts, by workflow id, claims made by a poller and not yet
	// dispatched (the rescuer leaves them alone).
	claiming map[string]int
}

// New returns an Agent; Start begins its background work.
func New(cfg Config) (*Agent, error) {
	if cfg.DB == nil {
		return nil, errors.New("agent: a system database is required")
	}
	cfg.setDefaults()
	sup := newSupervisor()
	handbackCtx, handbackCancel := context.WithCancel(context.Background())
	a := &Agent{
		cfg:            cfg,
		db:             cfg.DB,
		log:            cfg.Logger,
		sup:            sup,
		handbackCtx:    handbackCtx,
		handbackCancel: handbackCancel,
		ownerPrefix:    newToken()[:12] + ":",
		sessions:       map[*Session]struct{}{},
		groups:         map[groupKey]*workerGroup{},
		runs:           map[string]*run{},
		runsDone:       make(chan struct{}, 1),
		claiming:       map[string]int{},
	}
	a.stepStats, a.finishStats, a.requestStats = newBatchStats(), newBatchStats(), newRequestStats()
	a.steps = newStepBatcher(a.db, cfg.StepBatchers, cfg.MaxStepBatch)
	a.steps.stats = a.stepStats
	a.finishes = newFinishBatcher(a.db, cfg.StepBatchers, cfg.MaxStepBatch)
	a.finishes.stats = a.finishStats
	a.waiters = newWaiters(a.db, cfg.ResultPollInterval, a.log)
	a.signals = newSignals(cfg.MessagePollInterval)
	a.schedules = newScheduler(a)
	a.rescuer = newRescuer(a)
	return a, nil
}

// ExecutorID is the executor id this agent's rows carry.
func (a *Agent) ExecutorID() string { return a.cfg.ExecutorID }

// Start recovers this executor's unfinished workflows and starts the
// background services. It returns once recovery is done.
func (a *Agent) Start(ctx context.Context) error {
	if a.oneShot {
		return errors.New("agent: a one-shot engine runs no services")
	}
	// Whatever this executor was running when it stopped goes back to its
	// queue; workers of the right application and version pick it up.
	ids, err := a.db.WorkflowRecover(ctx, sysdb.WorkflowRecoverParams{ExecutorIDs: []string{a.cfg.ExecutorID}})
	if err != nil {
		return err
	}
	a.counters.workflowsRecovered.Add(uint64(len(ids)))
	if len(ids) > 0 {
		a.log.Info("recovered pending workflows", zap.Int("count", len(ids)), zap.String("executor_id", a.cfg.ExecutorID))
	}
	a.steps.start(a.sup, "step batcher")
	a.finishes.start(a.sup, "finish batcher")
	a.waiters.start(a.sup)
	a.signals.start(a.sup)
	a.sup.goCtx("sweeper", a.sweeper)
	a.sup.goCtx("scheduler", a.schedules.loop)
	a.sup.goCtx("rescuer", a.rescuer.loop)
	if notes := a.cfg.Notifications; notes != nil {
		a.sup.goCtx("listener", func(ctx context.Context) {
			_ = notes.Listen(ctx, []string{
				sysdb.ChannelWorkflowStatus, sysdb.ChannelQueue,
				sysdb.ChannelNotifications, sysdb.ChannelWorkflowEvents, sysdb.ChannelStreams,
			}, a.onNotification, a.onNotificationGap)
		})
	}
	return nil
}

// Goroutines reports the engine's live goroutines by service name (for
// operators' debug output and for tests that check nothing is left).
func (a *Agent) Goroutines() map[string]int { return a.sup.snapshot() }

// onNotification routes a database notification: an outcome wakes its
// waiters, new work on a queue wakes that queue's pollers.
func (a *Agent) onNotification(channel, payload string) {
	switch channel {
	case sysdb.ChannelWorkflowStatus:
		a.waiters.wake(payload)
		// A workflow one of our workers runs may have been cancelled (or
		// timed out) through another agent: tell the run now rather than at
		// its next record_step.
		a.mu.Lock()
		_, local := a.runs[payload]
		a.mu.Unlock()
		if local {
			a.sup.goFn("local run check", func() { a.checkLocalRun(payload) })
		}
	case sysdb.ChannelQueue:
		a.wakeQueue(payload)
	case sysdb.ChannelNotifications:
		a.signals.wake("m:" + payload)
	case sysdb.ChannelWorkflowEvents:
		a.signals.wake("e:" + payload)
	case sysdb.ChannelStreams:
		a.signals.wake("s:" + payload)
	}
}

// checkLocalRun pushes cancel to a local run whose workflow was cancelled
// elsewhere.
func (a *Agent) checkLocalRun(workflowID string) {
	wf, err := a.db.WorkflowGet(a.sup.ctx, workflowID)
	if err != nil {
		return // the run learns at its next record_step
	}
	if wf.Status == sysdb.StatusCancelled || wf.Status == sysdb.StatusMaxRecoveryAttemptsExceeded {
		a.cancelLocalRun(workflowID)
	}
}

// onNotificationGap runs after the listener (re)connects: whatever was
// notified meanwhile is lost, so everything re-checks.
func (a *Agent) onNotificationGap() {
	if a.listenerConnected.CompareAndSwap(false, true) {
		// Readiness waits for this: said once, for operators and tests.
		a.log.Info("notification listener connected")
	}
	a.waiters.wakeAll()
	a.signals.wakeAll()
	a.wakeAllPollers()
}

// Shutdown stops taking work, lets running workflows finish for the grace
// period (or until ctx ends), hands what still runs back to its queue, and
// stops every service; what has not ended ShutdownTimeout after that is
// logged by name and left behind (the process is about to exit). It
// returns within GracePeriod + ShutdownTimeout.
func (a *Agent) Shutdown(ctx context.Context) {
	hard := time.AfterFunc(a.cfg.GracePeriod+a.cfg.ShutdownTimeout, a.handbackCancel)
	defer hard.Stop()
	defer a.handbackCancel()
	a.draining.Store(true)
	a.log.Info("draining: no new work is taken", zap.Duration("grace_period", a.cfg.GracePeriod))
	a.mu.Lock()
	for _, g := range a.groups {
		g.stopPollers()
	}
	a.mu.Unlock()

	grace := time.NewTimer(a.cfg.GracePeriod)
	defer grace.Stop()
wait:
	for {
		a.mu.Lock()
		n := len(a.runs)
		a.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-a.runsDone:
		case <-grace.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}

	a.mu.Lock()
	sessions := make([]*Session, 0, len(a.sessions))
	for s := range a.sessions {
		sessions = append(sessions, s)
	}
	a.mu.Unlock()
	for _, s := range sessions {
		s.Close()
	}
	if left := a.sup.stop(a.cfg.ShutdownTimeout); len(left) > 0 {
		a.log.Warn("shutdown deadline passed; these did not stop", zap.Strings("goroutines", left),
			zap.Duration("shutdown_timeout", a.cfg.ShutdownTimeout))
	}
}

// newOwnerToken returns an owner token of this agent process: the rescuer
// recognises its own claims by the prefix.
func (a *Agent) newOwnerToken() string { return a.ownerPrefix + newToken() }

// newToken returns a random hex token (owner tokens, session ids).
func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// newUUID returns a random RFC 4122 version 4 UUID, the shape of the ids the
// DBOS SDKs generate.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
