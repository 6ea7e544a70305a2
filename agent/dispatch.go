package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// defaultMaxRecoveryAttempts is DBOS's default before dead-lettering.
const defaultMaxRecoveryAttempts = 100

// groupKey identifies the workers that may run a workflow: only workers of
// its application and version do.
type groupKey struct {
	app     string
	version string
}

// workerGroup is the connected workers of one application version and the
// queue pollers serving them. Its fields are guarded by Agent.mu.
type workerGroup struct {
	key     groupKey
	agent   *Agent
	workers map[*Session]*worker
	pollers map[string]*poller
}

// worker is a connected worker process. Its maps are guarded by Agent.mu.
type worker struct {
	session        *Session
	functions      map[string]protocol.WorkflowRegistration
	queues         map[string]protocol.QueueRegistration
	maxConcurrency int
	running        map[string]*run
	// registering serializes the worker's register and register_queues,
	// which count its functions and queues before they write (taken
	// before Agent.mu, never inside).
	registering sync.Mutex
}

// workerOfLocked returns the registered worker of session s, or nil.
// Caller holds a.mu.
func (a *Agent) workerOfLocked(s *Session) *worker {
	if g := a.groups[s.group]; g != nil {
		return g.workers[s]
	}
	return nil
}

// run is one workflow running in a worker of this agent.
type run struct {
	workflowID   string
	ownerXID     string
	queue        string
	partitionKey string
	worker       *worker
	// ended is closed when the run ends here (finished, cancelled, fenced),
	// so that its waits stop at once.
	ended chan struct{}
}

// runningOn counts this worker's runs of queue (of one partition when
// partition is not empty).
func (w *worker) runningOn(queue, partition string) int {
	n := 0
	for _, r := range w.running {
		if r.queue == queue && (partition == "" || r.partitionKey == partition) {
			n++
		}
	}
	return n
}

// workerLimits are the per-worker-process limits of one queue: the worker's
// own registration, else the queue's stored configuration.
type workerLimits struct {
	queue     *int // runs of the queue at once
	partition *int // runs of one partition at once
}

func (w *worker) limitsFor(queue string, cfg sysdb.QueueConfig) workerLimits {
	reg := w.queues[queue]
	first := func(a, b *int) *int {
		if a != nil {
			return a
		}
		return b
	}
	// On a queue flagged partitioned without partition limits, its worker
	// concurrency applies to each partition, as the DBOS SDKs have it.
	if cfg.LegacyPartitioned() {
		return workerLimits{partition: first(reg.WorkerConcurrency, cfg.WorkerConcurrency)}
	}
	return workerLimits{
		queue:     first(reg.WorkerConcurrency, cfg.WorkerConcurrency),
		partition: first(reg.PartitionWorkerConcurrency, cfg.PartitionWorkerConcurrency),
	}
}

// freeSlots is how many more workflows of queue (and partition, when not
// empty) w takes now; -1 = no cap.
func (w *worker) freeSlots(queue, partition string, lim workerLimits) int {
	free := -1
	bound := func(n int) {
		n = max(n, 0)
		if free < 0 || n < free {
			free = n
		}
	}
	if w.maxConcurrency > 0 {
		bound(w.maxConcurrency - len(w.running))
	}
	if lim.queue != nil {
		bound(*lim.queue - w.runningOn(queue, ""))
	}
	if lim.partition != nil && partition != "" {
		bound(*lim.partition - w.runningOn(queue, partition))
	}
	return free
}

func (w *worker) serves(queue string) bool {
	if queue == sysdb.InternalQueueName {
		return true
	}
	_, ok := w.queues[queue]
	return ok
}

// addWorker registers a worker session and starts pollers for its queues.
// Caller holds a.mu.
func (a *Agent) addWorkerLocked(s *Session, w *worker) *workerGroup {
	g := a.groups[s.group]
	if g == nil {
		g = &workerGroup{key: s.group, agent: a, workers: map[*Session]*worker{}, pollers: map[string]*poller{}}
		a.groups[s.group] = g
	}
	g.workers[s] = w
	a.startPollersLocked(g, w)
	a.schedules.reconcileSoon() // its workflows may have schedules
	return g
}

// startPollersLocked starts (or wakes) the group's pollers of every queue w
// serves. Caller holds a.mu.
func (a *Agent) startPollersLocked(g *workerGroup, w *worker) {
	if a.draining.Load() {
		return
	}
	queues := []string{sysdb.InternalQueueName}
	for name := range w.queues {
		queues = append(queues, name)
	}
	for _, q := range queues {
		p := g.pollers[q]
		if p == nil {
			p = newPoller(g, q)
			g.pollers[q] = p
			a.sup.goCtx("queue poller", p.loop)
		}
		p.refreshConfig()
		p.wakeUp()
	}
}

// removeWorkerLocked unregisters a worker and returns its runs, which the
// caller hands back to their queues. Caller holds a.mu.
func (a *Agent) removeWorkerLocked(s *Session) []*run {
	g := a.groups[s.group]
	if g == nil {
		return nil
	}
	w := g.workers[s]
	if w == nil {
		return nil
	}
	delete(g.workers, s)
	runs := make([]*run, 0, len(w.running))
	for id, r := range w.running {
		runs = append(runs, r)
		// The workflow may already run again elsewhere (a new claim made
		// before this close was processed): forget only this run.
		if a.runs[id] == r {
			delete(a.runs, id)
		}
	}
	g.stopUnservedPollersLocked()
	if len(g.workers) == 0 {
		delete(a.groups, s.group)
	}
	a.signalRunsDone()
	a.schedules.reconcileSoon() // its schedules may have no runner here now
	return runs
}

// endRun forgets a run (finished, fenced or cancelled) and wakes the pollers
// of its group, since a slot is free.
func (a *Agent) endRun(workflowID, ownerXID string) {
	a.mu.Lock()
	r := a.runs[workflowID]
	if r == nil || (ownerXID != "" && r.ownerXID != ownerXID) {
		a.mu.Unlock()
		return
	}
	delete(a.runs, workflowID)
	delete(r.worker.running, workflowID)
	close(r.ended)
	if g := a.groups[r.worker.session.group]; g != nil {
		if p := g.pollers[r.queue]; p != nil && p.slotFreedMatters() {
			p.wakeUp()
		}
		if r.queue != sysdb.InternalQueueName {
			if p := g.pollers[sysdb.InternalQueueName]; p != nil && p.slotBound {
				p.wakeUp() // max_concurrency is shared by all queues
			}
		}
	}
	a.signalRunsDone()
	a.mu.Unlock()
}

// markClaiming adds delta to the in-progress count of each claimed id.
func (a *Agent) markClaiming(ids []string, delta int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if a.claiming[id] += delta; a.claiming[id] <= 0 {
			delete(a.claiming, id)
		}
	}
}

func (a *Agent) signalRunsDone() {
	select {
	case a.runsDone <- struct{}{}:
	default:
	}
}

// wakePoller wakes this agent's poller of queue for a group, if it has one.
func (a *Agent) wakePoller(key groupKey, queue string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.groups[key]; g != nil {
		if p := g.pollers[queue]; p != nil {
			p.wakeUp()
		}
	}
}

// wakeQueue wakes every group's poller of queue (a workflow of unknown
// version was enqueued or resumed).
func (a *Agent) wakeQueue(queue string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.wakeQueueLocked(queue)
}

// wakeQueueLocked is wakeQueue for a caller holding a.mu.
func (a *Agent) wakeQueueLocked(queue string) {
	for _, g := range a.groups {
		if p := g.pollers[queue]; p != nil {
			p.wakeUp()
		}
	}
}

// poller claims work from one queue for one worker group.
type poller struct {
	group *workerGroup
	queue string
	wake  chan struct{}
	done  chan struct{}

	// config is the queue's stored configuration (shared limits), read
	// again every configTTL so that a change made elsewhere applies;
	// guarded by Agent.mu.
	config   sysdb.QueueConfig
	configAt time.Time
	// slotBound says the last poll was held back by the workers' free
	// slots (none, or it took as many as there were): only then can a
	// run's end let it claim more. Without it, every workflow's end woke
	// the internal queue's poller for a claim that found nothing (half
	// the polls of a busy agent). Guarded by Agent.mu.
	slotBound bool
}

// configTTL bounds how stale a poller's view of its queue's configuration
// may be.
const configTTL = 5 * time.Second

func newPoller(g *workerGroup, queue string) *poller {
	return &poller{group: g, queue: queue, wake: make(chan struct{}, 1), done: make(chan struct{}),
		config: sysdb.QueueConfig{Name: queue}}
}

// refreshConfig makes the next poll read the queue's configuration again;
// caller holds Agent.mu.
func (p *poller) refreshConfig() { p.configAt = time.Time{} }

// slotFreedMatters says whether a run of the queue ending may let the
// poller claim what it could not: its last poll was held back by the
// workers' slots, or the queue caps its running workflows across executors
// (a cap the database counts, which this run's end lowers). Caller holds
// Agent.mu.
func (p *poller) slotFreedMatters() bool {
	return p.slotBound || p.config.Concurrency != nil || p.config.PartitionConcurrency != nil
}

func (p *poller) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop ends the loop; caller holds Agent.mu.
func (p *poller) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
}

// stopUnservedPollersLocked stops the pollers of queues no worker of the
// group serves any more and wakes the others (a slot or a queue changed).
// Caller holds Agent.mu.
func (g *workerGroup) stopUnservedPollersLocked() {
	for q, p := range g.pollers {
		served := false
		for _, w := range g.workers {
			if w.serves(q) {
				served = true
				break
			}
		}
		if !served {
			p.stop()
			delete(g.pollers, q)
		} else {
			p.wakeUp()
		}
	}
}

func (g *workerGroup) stopPollers() {
	for q, p := range g.pollers {
		p.stop()
		delete(g.pollers, q)
	}
}

func (p *poller) loop(ctx context.Context) {
	a := p.group.agent
	interval := a.cfg.PollInterval
	timer := time.NewTimer(0)
	defer timer.Stop()
	backoff := interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.done:
			return
		case <-p.wake:
		case <-timer.C:
		}
		// A wake and a stop may be ready at once; a stopped poller must
		// not claim for workers that are gone.
		select {
		case <-p.done:
			return
		default:
		}
		claimed, full, err := p.pollOnce(ctx)
		next := interval
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("queue poll failed", zap.String("queue", p.queue), zap.Error(err))
			backoff = min(backoff*2, 30*time.Second)
			next = backoff
		case claimed > 0 && full:
			next = 0 // more is likely waiting
			backoff = interval
		default:
			backoff = interval
		}
		// Jitter keeps many agents on one database from polling in step.
		if next > 0 {
			next += time.Duration(rand.Int64N(int64(next)/5 + 1))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// pollOnce claims what the group's free slots allow and dispatches it. It
// reports how many it claimed and whether a claim was cut by its bound.
func (p *poller) pollOnce(ctx context.Context) (int, bool, error) {
	a := p.group.agent
	if a.draining.Load() {
		return 0, false, nil
	}
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		return 0, false, err
	}
	partitions := []string{""}
	if cfg.Partitioned() {
		if partitions, err = a.db.QueuePartitions(ctx, p.queue); err != nil {
			return 0, false, err
		}
		// Partitions come sorted; served in that order, the first ones would
		// take every free slot and take it back the moment it frees, starving
		// the rest. A fresh order at each poll, as the DBOS SDKs shuffle
		// theirs, gives every partition its turn.
		rand.Shuffle(len(partitions), func(i, j int) { partitions[i], partitions[j] = partitions[j], partitions[i] })
	}
	claimedTotal, full, slotBound := 0, false, false
	defer func() {
		a.mu.Lock()
		p.slotBound = slotBound
		a.mu.Unlock()
	}()
	for _, partition := range partitions {
		n, cut, bound, err := p.pollPartition(ctx, cfg, partition)
		if err != nil {
			slotBound = true // a slot's end may as well try again
			return claimedTotal, full, err
		}
		claimedTotal += n
		full = full || cut
		slotBound = slotBound || bound
	}
	return claimedTotal, full, nil
}

// currentConfig returns the queue's configuration, reading it again when
// it is older than configTTL. The internal queue has none.
func (p *poller) currentConfig(ctx context.Context) (sysdb.QueueConfig, error) {
	a := p.group.agent
	a.mu.Lock()
	cfg, fresh := p.config, time.Since(p.configAt) < configTTL
	a.mu.Unlock()
	if fresh || p.queue == sysdb.InternalQueueName {
		return cfg, nil
	}
	stored, err := a.db.QueueGet(ctx, p.queue)
	var missing *sysdb.QueueNotFoundError
	switch {
	case errors.As(err, &missing):
		stored = sysdb.QueueConfig{Name: p.queue}
	case err != nil:
		return cfg, err
	}
	a.mu.Lock()
	previous := p.config
	p.config, p.configAt = stored, time.Now()
	a.mu.Unlock()
	if zero := zeroLimit(stored); zero != "" && zero != zeroLimit(previous) {
		// The agent refuses such a registration, but an SDK may have
		// written it: say why the queue runs nothing rather than let it
		// stall silently.
		a.log.Warn("the queue's stored configuration sets a limit to 0, which lets none of its workflows start",
			zap.String("queue", p.queue), zap.String("limit", zero))
	}
	return stored, nil
}

// zeroLimit names the first limit of cfg that is 0, which lets nothing
// run; "" when none is. A worker_concurrency of 0 is not one of them: it
// is a setting (DBOS's pause of dequeuing, accepted in a registration).
func zeroLimit(cfg sysdb.QueueConfig) string {
	for _, l := range []struct {
		name  string
		value *int
	}{
		{"concurrency", cfg.Concurrency},
		{"rate_limit_max", cfg.RateLimitMax},
		{"partition_concurrency", cfg.PartitionConcurrency},
		{"partition_worker_concurrency", cfg.PartitionWorkerConcurrency},
		{"partition_rate_limit_max", cfg.PartitionRateLimitMax},
	} {
		if l.value != nil && *l.value <= 0 {
			return l.name
		}
	}
	return ""
}

// pollPartition claims work of one partition (or of the whole queue when
// partition is empty). It reports how many it claimed, whether the claim
// was cut by its bound, and whether the workers' free slots held it back.
func (p *poller) pollPartition(ctx context.Context, cfg sysdb.QueueConfig, partition string) (int, bool, bool, error) {
	a := p.group.agent
	a.mu.Lock()
	capacity := 0
	unbounded := false
	names := map[string]bool{}
	for _, w := range p.group.workers {
		if !w.serves(p.queue) {
			continue
		}
		free := w.freeSlots(p.queue, partition, w.limitsFor(p.queue, cfg))
		if free < 0 {
			unbounded = true
		} else {
			capacity += free
		}
		for n := range w.functions {
			names[n] = true
		}
	}
	key := p.group.key
	a.mu.Unlock()
	// Nothing to claim for: no capacity, or no function to run what it
	// would claim (an empty name filter would claim anything).
	if len(names) == 0 {
		return 0, false, false, nil
	}
	if !unbounded && capacity == 0 {
		return 0, false, true, nil
	}
	bound := a.cfg.MaxClaim
	if !unbounded {
		bound = min(bound, capacity)
	}
	functionNames := make([]string, 0, len(names))
	for n := range names {
		functionNames = append(functionNames, n)
	}
	sort.Strings(functionNames)

	// Per-worker limits are already folded into the bound; the shared ones
	// are counted by the database.
	limits := cfg.Limits()
	limits.WorkerConcurrency, limits.LocalRunning = nil, 0
	limits.PartitionWorkerConcurrency, limits.PartitionLocalRunning = nil, 0
	params := sysdb.QueueDequeueParams{
		QueueName:          p.queue,
		ExecutorID:         a.cfg.ExecutorID,
		ApplicationVersion: key.version,
		Limits:             limits,
		PartitionKey:       partition,
		MaxClaim:           bound,
		WorkflowNames:      functionNames,
		OwnerPrefix:        a.ownerPrefix,
	}
	if key.app != "" {
		app := key.app
		params.ApplicationName = &app
	}
	claimed, err := a.db.QueueDequeue(ctx, params)
	if err != nil {
		return 0, false, false, err
	}
	if len(claimed) == 0 {
		return 0, false, false, nil
	}
	// Histories ship with the runs; one read for the whole claim.
	ids := make([]string, len(claimed))
	for i, wf := range claimed {
		ids[i] = wf.ID
	}
	// Until dispatched (the read below may wait out an outage), the
	// claims are this poller's, not the rescuer's.
	a.markClaiming(ids, 1)
	defer a.markClaiming(ids, -1)
	histories, err := a.db.StepListMany(ctx, ids)
	if err != nil {
		a.log.Error("could not read the claimed workflows' histories; handing them back", zap.Error(err))
		claims := make([]sysdb.WorkflowClaim, len(claimed))
		for i, wf := range claimed {
			claims[i] = sysdb.WorkflowClaim{WorkflowID: wf.ID, OwnerXID: deref(wf.OwnerXID), PreClaim: wf.PreClaim}
		}
		if _, uerr := a.db.WorkflowUnclaim(ctx, claims); uerr != nil {
			a.log.Warn("could not hand back claimed workflows; the rescuer will", zap.Error(uerr))
		}
		return 0, false, false, err
	}
	for _, wf := range claimed {
		a.dispatch(ctx, p.group, p.queue, cfg, wf, histories[wf.ID])
	}
	return len(claimed), len(claimed) >= bound, !unbounded && len(claimed) >= capacity, nil
}

// dispatch hands a claimed workflow to a worker of the group, or back to
// its queue when none can take it any more (the worker left meanwhile).
func (a *Agent) dispatch(ctx context.Context, g *workerGroup, queue string, cfg sysdb.QueueConfig, wf sysdb.Workflow, history []sysdb.Step) {
	owner := deref(wf.OwnerXID)
	partition := deref(wf.QueuePartitionKey)
	a.mu.Lock()
	var chosen *worker
	best := -1
	for _, w := range g.workers {
		if _, ok := w.functions[wf.Name]; !ok || !w.serves(queue) {
			continue
		}
		free := w.freeSlots(queue, partition, w.limitsFor(queue, cfg))
		if free == 0 {
			continue
		}
		if free < 0 {
			free = 1 << 30
		}
		if free > best {
			best, chosen = free, w
		}
	}
	maxAttempts := int64(defaultMaxRecoveryAttempts)
	if chosen != nil {
		maxAttempts = chosen.maxAttempts(wf.Name)
	}
	if chosen != nil && wf.RecoveryAttempts <= maxAttempts+1 {
		a.trackRunLocked(wf.ID, owner, queue, partition, chosen)
	}
	a.mu.Unlock()

	if chosen == nil {
		a.unclaim(ctx, wf, "could not hand an undispatchable workflow back to its queue; the rescuer will")
		return
	}
	if wf.RecoveryAttempts > maxAttempts+1 {
		a.deadLetter(ctx, wf, maxAttempts)
		return
	}
	msg := runMessage(wf, owner, queue, history)
	a.log.Debug("dispatching a run", zap.String("workflow_id", wf.ID), zap.String("queue", queue),
		zap.String("worker_session", chosen.session.id[:8]), zap.Int("history", len(history)))
	if err := chosen.session.push(protocol.PushRun, msg); err != nil {
		// The session is closing: its close hands its runs back.
		a.log.Debug("run push failed", zap.String("workflow_id", wf.ID), zap.Error(err))
	}
}

// maxAttempts is the recovery attempts w allows a workflow of function name
// before it is dead-lettered.
func (w *worker) maxAttempts(name string) int64 {
	if reg := w.functions[name]; reg.MaxRecoveryAttempts > 0 {
		return int64(reg.MaxRecoveryAttempts)
	}
	return defaultMaxRecoveryAttempts
}

// trackRunLocked records a run handed to w, so that its slot counts and its
// worker's disconnect hands it back. Caller holds a.mu.
func (a *Agent) trackRunLocked(workflowID, owner, queue, partition string, w *worker) {
	r := &run{workflowID: workflowID, ownerXID: owner, queue: queue, partitionKey: partition, worker: w, ended: make(chan struct{})}
	w.running[workflowID] = r
	a.runs[workflowID] = r
}

// unclaim returns a claimed workflow to its queue as it was before the
// claim: claimed for a group whose workers left, an unversioned row must
// not become that group's version.
func (a *Agent) unclaim(ctx context.Context, wf sysdb.Workflow, failure string) {
	claim := sysdb.WorkflowClaim{WorkflowID: wf.ID, OwnerXID: deref(wf.OwnerXID), PreClaim: wf.PreClaim}
	if _, err := a.db.WorkflowUnclaim(ctx, []sysdb.WorkflowClaim{claim}); err != nil {
		a.log.Warn(failure, zap.String("workflow_id", wf.ID), zap.Error(err))
	}
}

// deadLetter moves a claimed workflow past its recovery attempts to
// MAX_RECOVERY_ATTEMPTS_EXCEEDED instead of running it.
func (a *Agent) deadLetter(ctx context.Context, wf sysdb.Workflow, maxAttempts int64) {
	moved, err := a.db.WorkflowDeadLetter(ctx, []string{wf.ID}, maxAttempts+2)
	if err != nil {
		a.log.Error("dead-lettering failed", zap.String("workflow_id", wf.ID), zap.Error(err))
	} else if len(moved) > 0 {
		a.counters.workflowsDeadLettered.Add(uint64(len(moved)))
		a.log.Warn("workflow exceeded its maximum recovery attempts",
			zap.String("workflow_id", wf.ID), zap.Int64("attempts", wf.RecoveryAttempts-1), zap.Int64("max", maxAttempts))
		a.waiters.wake(wf.ID)
	}
}

// claimForCaller claims workflowID, if it is ENQUEUED on the internal
// queue, for the worker of session s, which asked to run it itself
// (run_here) and gets the run in its reply, not as a push. This is how a
// recovered parent's call of its child goes: the child was recovered onto
// the internal queue too, and waiting there for a slot while the parent
// holds one could wait for ever (every slot held by a parent waiting on
// its child). The child runs in its caller's thread instead, as it did the
// first time. nil when there is nothing to claim here (a poller took it
// first, it is on another queue, another version's, or the worker left).
func (a *Agent) claimForCaller(ctx context.Context, s *Session, key groupKey, workflowID, name string) *protocol.Run {
	a.mu.Lock()
	w := a.workerOfLocked(s)
	a.mu.Unlock()
	if w == nil {
		return nil
	}
	ids := []string{workflowID}
	a.markClaiming(ids, 1) // until tracked, the claim is not the rescuer's
	defer a.markClaiming(ids, -1)
	params := sysdb.QueueDequeueParams{
		QueueName:          sysdb.InternalQueueName,
		ExecutorID:         a.cfg.ExecutorID,
		ApplicationVersion: key.version,
		MaxClaim:           1,
		WorkflowNames:      []string{name},
		WorkflowIDs:        ids,
		OwnerPrefix:        a.ownerPrefix,
	}
	if key.app != "" {
		app := key.app
		params.ApplicationName = &app
	}
	claimed, err := a.db.QueueDequeue(ctx, params)
	if err != nil || len(claimed) == 0 {
		if err != nil {
			a.log.Warn("could not claim a workflow its caller runs; it waits on its queue", zap.String("workflow_id", workflowID), zap.Error(err))
		}
		return nil
	}
	wf := claimed[0]
	if wf.RecoveryAttempts > w.maxAttempts(name)+1 {
		a.deadLetter(ctx, wf, w.maxAttempts(name))
		return nil
	}
	history, err := a.db.StepList(ctx, wf.ID)
	if err != nil {
		a.unclaim(ctx, wf, "could not hand back a workflow whose history could not be read; the rescuer will")
		return nil
	}
	owner := deref(wf.OwnerXID)
	a.mu.Lock()
	live := a.workerOfLocked(s) == w
	if live {
		a.trackRunLocked(wf.ID, owner, sysdb.InternalQueueName, "", w)
	}
	a.mu.Unlock()
	if !live {
		a.unclaim(ctx, wf, "could not hand back a workflow whose caller left; the rescuer will")
		return nil
	}
	return runMessage(wf, owner, sysdb.InternalQueueName, history)
}

func runMessage(wf sysdb.Workflow, owner, queue string, history []sysdb.Step) *protocol.Run {
	msg := &protocol.Run{
		WorkflowID:        wf.ID,
		Name:              wf.Name,
		ClassName:         deref(wf.ClassName),
		ConfigName:        deref(wf.ConfigName),
		Inputs:            wf.Inputs,
		Serialization:     deref(wf.Serialization),
		OwnerXID:          owner,
		QueueName:         queue,
		DeadlineEpochMS:   derefInt(wf.DeadlineEpochMS),
		RecoveryAttempts:  wf.RecoveryAttempts,
		AuthenticatedUser: deref(wf.AuthenticatedUser),
		History:           make([]protocol.Step, len(history)),
	}
	msg.AssumedRole = deref(wf.AssumedRole)
	msg.AuthenticatedRoles = rolesOf(wf.AuthenticatedRoles)
	msg.Attributes = wf.Attributes
	for i, s := range history {
		msg.History[i] = stepMessage(s)
	}
	return msg
}

func stepMessage(s sysdb.Step) protocol.Step {
	return protocol.Step{
		FunctionID:      s.FunctionID,
		Name:            s.Name,
		Output:          s.Output,
		Error:           s.Error,
		Serialization:   deref(s.Serialization),
		ChildWorkflowID: deref(s.ChildWorkflowID),
		StartedAtMS:     derefInt(s.StartedAt),
		CompletedAtMS:   derefInt(s.CompletedAt),
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
