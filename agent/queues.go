package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// hasOptions says whether a registration sets any limit; a bare name only
// subscribes the worker to a queue someone else configured.
func hasOptions(q protocol.QueueRegistration) bool {
	return q.Concurrency != nil || q.WorkerConcurrency != nil || q.RateLimitMax != nil ||
		q.PriorityEnabled || q.PartitionQueue || q.PartitionConcurrency != nil ||
		q.PartitionWorkerConcurrency != nil || q.PartitionRateLimitMax != nil || q.PollingIntervalSec > 0
}

func queueConfigOf(q protocol.QueueRegistration, app string) sysdb.QueueConfig {
	cfg := sysdb.QueueConfig{
		Name:                        q.Name,
		Concurrency:                 q.Concurrency,
		WorkerConcurrency:           q.WorkerConcurrency,
		RateLimitMax:                q.RateLimitMax,
		RateLimitPeriodSec:          q.RateLimitPeriodSec,
		PriorityEnabled:             q.PriorityEnabled,
		PartitionQueue:              q.PartitionQueue,
		PollingIntervalSec:          q.PollingIntervalSec,
		PartitionConcurrency:        q.PartitionConcurrency,
		PartitionWorkerConcurrency:  q.PartitionWorkerConcurrency,
		PartitionRateLimitMax:       q.PartitionRateLimitMax,
		PartitionRateLimitPeriodSec: q.PartitionRateLimitPeriodSec,
	}
	if app != "" {
		cfg.ApplicationName = &app
	}
	return cfg
}

// registerQueues stores the queues a worker declares, so that every agent
// and SDK sharing the database applies the same shared limits. A
// registration with options updates the stored row (the latest deploy
// wins); a bare name creates the row only when it is missing. The
// registrations were validated whole before (protocol's Validate), so a
// bad value writes nothing; what only the database knows (a queue another
// application registered) stops the registration at that queue.
//
// Each queue is one transaction of five round trips, before the reply: so
// a registration is bounded (protocol.MaxQueuesPerWorker) to be answered
// within seconds. Unbounded, a hello with 10,000 queues took 8 s on an idle
// agent and over 30 s on one already polling a thousand queues, past the
// Python binding's 10 s handshake timeout (after which it reconnects and
// sends the same hello again).
func (a *Agent) registerQueues(ctx context.Context, app string, queues []protocol.QueueRegistration) *protocol.Error {
	if len(queues) == 0 {
		return nil
	}
	// All or none, in one transaction: a queue another application owns
	// leaves the shared table as it was.
	params := make([]sysdb.QueueRegisterParams, len(queues))
	for i, q := range queues {
		params[i] = sysdb.QueueRegisterParams{Config: queueConfigOf(q, app), UpdateExisting: hasOptions(q)}
	}
	_, err := a.db.QueueRegisterMany(ctx, params)
	var owned *sysdb.NameOwnedError
	if errors.As(err, &owned) {
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s (no queue of this registration was written)", owned.Error())
	}
	if err != nil {
		return protocol.Errorf(protocol.CodeDatabaseDown, "register queues: %s", sysdb.Redact(err.Error()))
	}
	return nil
}

func handleRegisterQueues(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.RegisterQueues
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	hello, group := s.handshaken()
	if hello.Role != protocol.RoleWorker {
		// DBOS's DBOSClient.register_queue: a client writes the queue's
		// row for its application (or the one it names) and serves
		// nothing; the workers that serve the queue poll it again at once,
		// under its new limits.
		app := group.app
		if m.ApplicationName != "" {
			app = m.ApplicationName
		}
		if perr := s.agent.registerQueues(s.ctx, app, m.Queues); perr != nil {
			return nil, perr
		}
		for _, q := range m.Queues {
			s.agent.wakeQueue(q.Name)
		}
		return protocol.Empty{}, nil
	}
	if m.ApplicationName != "" && m.ApplicationName != group.app {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: a worker registers queues for its own application only", env.Op)
	}
	return s.register(env.Op, nil, m.Queues)
}

func handleRegister(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.Register
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	return s.register(env.Op, m.Workflows, m.Queues)
}

// register adds workflow functions and queues to this worker after its
// hello, all or none: the queues are written first (the one step that can
// fail on what only the database knows), then both join the worker's maps
// together, under Agent.mu, before the reply. So a run dispatched to the
// worker names a function it registered, and a poll that ran before this
// (it claimed nothing of the new names or queues) is woken to run again at
// once rather than at its next interval; the scheduler re-reads the
// schedules, since some may target the new functions. A name registered
// again replaces its registration for this worker (the latest declaration
// wins, as in a hello after a redeploy).
func (s *Session) register(op string, workflows []protocol.WorkflowRegistration, queues []protocol.QueueRegistration) (any, *protocol.Error) {
	a := s.agent
	hello, group := s.handshaken()
	if hello.Role != protocol.RoleWorker {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: only a worker registers workflows and serves queues (role is client)", op)
	}
	closing := protocol.Errorf(protocol.CodeShuttingDown, "%s: the session is closing", op)
	a.mu.Lock()
	w := a.workerOfLocked(s)
	a.mu.Unlock()
	if w == nil {
		return nil, closing
	}
	// One registration at a time per worker, so that the counts below
	// stay true until this one is served.
	w.registering.Lock()
	defer w.registering.Unlock()
	a.mu.Lock()
	functions, served := len(w.functions), len(w.queues)
	for _, f := range workflows {
		if _, ok := w.functions[f.Name]; !ok {
			functions++
		}
	}
	for _, q := range queues {
		if _, ok := w.queues[q.Name]; !ok && !q.ConfigureOnly {
			served++
		}
	}
	a.mu.Unlock()
	if functions > protocol.MaxWorkflowsPerWorker {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s.workflows: this worker would register %d workflow functions; a worker registers at most %d",
			op, functions, protocol.MaxWorkflowsPerWorker)
	}
	if served > protocol.MaxQueuesPerWorker {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s.queues: this worker would serve %d queues; a worker serves at most %d",
			op, served, protocol.MaxQueuesPerWorker)
	}
	if perr := a.registerQueues(s.ctx, group.app, queues); perr != nil {
		return nil, perr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.groups[group]
	if g == nil || g.workers[s] != w {
		return nil, closing
	}
	for _, f := range workflows {
		w.functions[f.Name] = f
	}
	for _, q := range queues {
		if q.ConfigureOnly {
			// Stored for the workers that serve it, not served here (and
			// no longer, if it was): they poll it again under its limits.
			delete(w.queues, q.Name)
			a.wakeQueueLocked(q.Name)
			continue
		}
		w.queues[q.Name] = q
	}
	// Every queue the worker serves is polled again now: work of the new
	// functions may wait on any of them (recovered work on the internal
	// queue), and a new queue on its own.
	a.startPollersLocked(g, w)
	if len(workflows) > 0 {
		a.schedules.reconcileSoon()
	}
	s.log.Debug("registered after hello", zap.Int("workflows", len(workflows)), zap.Int("queues", len(queues)))
	return protocol.Empty{}, nil
}

func queueInfo(q sysdb.QueueSummary, cfg *sysdb.QueueConfig) protocol.QueueInfo {
	info := protocol.QueueInfo{
		Name: q.Name, Registered: q.Registered, Concurrency: q.Concurrency, WorkerConcurrency: q.WorkerConcurrency,
		RateLimitMax: q.RateLimitMax, RateLimitPeriodSec: q.RateLimitPeriodSec, PriorityEnabled: q.PriorityEnabled,
		PartitionQueue: q.PartitionQueue, Enqueued: q.Enqueued, Pending: q.Pending, Delayed: q.Delayed,
		ApplicationName: deref(q.ApplicationName),
	}
	if cfg != nil {
		info.PartitionConcurrency = cfg.PartitionConcurrency
		info.PartitionWorkerConcurrency = cfg.PartitionWorkerConcurrency
		info.PartitionRateLimitMax = cfg.PartitionRateLimitMax
		info.PartitionRateLimitPeriodSec = cfg.PartitionRateLimitPeriodSec
		// What DBOS's retrieve_queue reads back too: the SDKs' polling
		// interval and the row's owner.
		info.PollingIntervalSec = cfg.PollingIntervalSec
		if cfg.ApplicationName != nil {
			info.ApplicationName = *cfg.ApplicationName
		}
	}
	return info
}

// handleListQueues lists every queue, or those the named applications own
// and the unclaimed ones (DBOS's list_queues(application_name=)): the
// summary holds every queue already, so the filter is applied here.
func handleListQueues(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.ListQueues
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	queues, err := s.agent.db.QueueList(s.ctx)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	reply := &protocol.ListQueuesReply{Queues: make([]protocol.QueueInfo, 0, len(queues))}
	for _, q := range queues {
		if len(m.ApplicationNames) == 0 || q.ApplicationName == nil || slices.Contains(m.ApplicationNames, *q.ApplicationName) {
			reply.Queues = append(reply.Queues, queueInfo(q, nil))
		}
	}
	return reply, nil
}

func handleGetQueue(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.QueueRef
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "name", m.Name); perr != nil {
		return nil, perr
	}
	queues, err := s.agent.db.QueueList(s.ctx)
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	for _, q := range queues {
		if q.Name != m.Name {
			continue
		}
		var cfg *sysdb.QueueConfig
		if q.Registered {
			c, err := s.agent.db.QueueGet(s.ctx, m.Name)
			if err != nil {
				return nil, protocolError(s, env.Op, err)
			}
			cfg = &c
		}
		return queueInfo(q, cfg), nil
	}
	return nil, protocol.Errorf(protocol.CodeInvalidArgument, "queue %s is not registered and has no active workflows", m.Name)
}

// handleDeleteQueue removes a queue's registration, as DBOS Python's
// delete_queue does: its workflows stay, but this agent's workers stop
// serving the queue (its pollers stop), so what waits on it stays ENQUEUED
// until a worker registers the queue again. A queue without a row is no
// error (deleting twice is harmless, as in DBOS).
func handleDeleteQueue(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.QueueRef
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "name", m.Name); perr != nil {
		return nil, perr
	}
	if m.Name == sysdb.InternalQueueName {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: the internal queue %s cannot be deleted", env.Op, m.Name)
	}
	var missing *sysdb.QueueNotFoundError
	if err := a.db.QueueDelete(s.ctx, m.Name); err != nil && !errors.As(err, &missing) {
		return nil, protocolError(s, env.Op, err)
	}
	a.mu.Lock()
	for _, g := range a.groups {
		for _, w := range g.workers {
			delete(w.queues, m.Name)
		}
		g.stopUnservedPollersLocked()
	}
	a.mu.Unlock()
	return protocol.Empty{}, nil
}

func handleSetWorkflowDelay(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.SetWorkflowDelay
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "workflow_id", m.WorkflowID); perr != nil {
		return nil, perr
	}
	err := s.agent.db.WorkflowSetDelay(s.ctx, m.WorkflowID, m.DelayUntilEpochMS)
	var notDelayed *sysdb.NotDelayedError
	if errors.As(err, &notDelayed) {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s", notDelayed.Error())
	}
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	return protocol.Empty{}, nil
}

// handleDebounceWorkflow starts a workflow once its key has been quiet for
// the delay: a repeated call pushes the pending start back and replaces its
// inputs, up to the timeout after the first call.
func handleDebounceWorkflow(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.DebounceWorkflow
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if perr := required(env.Op, "key", m.Key, "name", m.Name); perr != nil {
		return nil, perr
	}
	if m.DelayMS < 0 || m.TimeoutMS < 0 || m.WorkflowTimeoutMS < 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: delay_ms, timeout_ms and workflow_timeout_ms must not be negative", env.Op)
	}
	var caller *sysdb.StepCaller
	if m.Caller != nil {
		c, perr := s.stepCaller(env.Op, *m.Caller)
		if perr != nil {
			return nil, perr
		}
		if c.InStep {
			return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: a debounce is made from workflow code, not from inside a step", env.Op)
		}
		caller = &c
	}
	if perr := checkAttributes(env.Op, m.Attributes); perr != nil {
		return nil, perr
	}
	if a.draining.Load() {
		return nil, protocol.Errorf(protocol.CodeShuttingDown, "the agent is shutting down")
	}
	_, group := s.handshaken()
	queue := m.QueueName
	if queue == "" {
		queue = sysdb.InternalQueueName
	}
	version := m.AppVersion
	owner := group.app
	if m.ApplicationName != "" && m.ApplicationName != group.app {
		// For another application (DBOS's Debouncer application_name): its
		// row, and its pending debounce is the one bounced; no version of
		// the caller's, as start_workflow writes it.
		owner = m.ApplicationName
	} else if version == "" {
		version = group.version
	}
	// The key is scoped to the workflow, as the DBOS SDKs scope it, so two
	// workflows debouncing the same key do not collide.
	dedupID := m.Name + "-" + m.Key
	for attempt := 0; attempt < 3; attempt++ {
		now := time.Now().UnixMilli()
		id := m.WorkflowID
		if id == "" && caller != nil {
			id = fmt.Sprintf("%s-%d", caller.WorkflowID, caller.FunctionID+1) // DBOS's id of the child enqueued next
		} else if id == "" {
			id = newUUID()
		}
		delayUntil := now + m.DelayMS
		if m.TimeoutMS > 0 {
			// The debounce deadline caps the first delay too.
			delayUntil = min(delayUntil, now+m.TimeoutMS)
		}
		create := sysdb.WorkflowInsertParams{
			ID: id, Name: m.Name, Status: sysdb.StatusDelayed, CreatorXID: newToken(),
			ClassName: optional(m.ClassName), QueueName: &queue, QueuePartitionKey: optional(m.PartitionKey),
			DeduplicationID: &dedupID, Priority: m.Priority, ExecutorID: a.cfg.ExecutorID,
			ApplicationVersion: optional(version), ApplicationName: optional(owner),
			DelayUntilEpochMS: &delayUntil, IsDebounced: true,
			Serialization: optional(m.Serialization), Inputs: m.Inputs,
			AuthenticatedUser: optional(m.AuthenticatedUser), AssumedRole: optional(m.AssumedRole),
			AuthenticatedRoles: rolesColumn(m.AuthenticatedRoles), Attributes: m.Attributes,
		}
		if m.TimeoutMS > 0 {
			deadline := now + m.TimeoutMS
			create.DebounceDeadline = &deadline
		}
		if m.WorkflowTimeoutMS > 0 {
			create.TimeoutMS = &m.WorkflowTimeoutMS
		}
		params := sysdb.WorkflowDebounceParams{
			Name: m.Name, QueueName: queue, DeduplicationID: dedupID, DelayUntilEpochMS: now + m.DelayMS,
			Inputs: m.Inputs, Serialization: optional(m.Serialization), ApplicationName: optional(owner),
		}
		if caller != nil {
			// One transaction: the bounce or the child's insert, and the
			// caller's step, so a replay finds the step and bounces nothing.
			params.Caller, params.Create = caller, &create
		}
		res, err := a.db.WorkflowDebounce(s.ctx, params)
		var dedup *sysdb.DeduplicatedError
		if errors.As(err, &dedup) {
			continue // another caller created it meanwhile: bounce that one
		}
		if err != nil {
			if caller != nil {
				return nil, runError(s, env.Op, caller.WorkflowID, caller.OwnerXID, err)
			}
			return nil, protocolError(s, env.Op, err)
		}
		if res.BouncedID != nil {
			return &protocol.DebounceWorkflowReply{WorkflowID: *res.BouncedID, Bounced: true}, nil
		}
		if res.HolderID != nil {
			e := protocol.Errorf(protocol.CodeDeduplicated,
				"debounce key %q of %s is held by workflow %s, which is not a pending debounce", m.Key, m.Name, *res.HolderID)
			// DBOS's DBOSQueueDeduplicatedError names the holder.
			e.Data = map[string]any{"workflow_id": *res.HolderID, "queue_name": queue, "deduplication_id": dedupID}
			return nil, e
		}
		if res.CreatedID != nil {
			return &protocol.DebounceWorkflowReply{WorkflowID: *res.CreatedID}, nil
		}
		res2, err := a.db.WorkflowInsert(s.ctx, create)
		if errors.As(err, &dedup) {
			continue
		}
		if err != nil {
			return nil, protocolError(s, env.Op, err)
		}
		return &protocol.DebounceWorkflowReply{WorkflowID: id, Bounced: !res2.Created}, nil
	}
	return nil, protocol.Errorf(protocol.CodeInternal, "%s: the key kept changing hands; try again", env.Op)
}

func handleListVersions(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	_, group := s.handshaken()
	versions, err := s.agent.db.VersionList(s.ctx, optional(group.app))
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	reply := &protocol.ListVersionsReply{Versions: make([]protocol.VersionInfo, len(versions))}
	for i, v := range versions {
		reply.Versions[i] = protocol.VersionInfo{VersionID: v.ID, VersionName: v.Name, TimestampMS: v.Timestamp, CreatedAtMS: v.CreatedAt,
			ApplicationName: deref(v.ApplicationName)}
	}
	return reply, nil
}

func handlePromoteVersion(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.VersionRef
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	_, group := s.handshaken()
	app := group.app
	if m.ApplicationName != "" {
		app = m.ApplicationName // DBOS's set_latest_application_version(application_name=)
	}
	err := s.agent.db.VersionPromote(s.ctx, m.VersionName, optional(app))
	var missing *sysdb.VersionNotFoundError
	var owned *sysdb.NameOwnedError
	switch {
	case errors.As(err, &missing):
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s", missing.Error())
	case errors.As(err, &owned):
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s", owned.Error())
	}
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	// Unversioned work now belongs to another version's workers.
	s.agent.wakeAllPollers()
	return protocol.Empty{}, nil
}

// sweeper releases delayed workflows whose time came and cancels those whose
// deadline passed. Every agent sweeps; the statements are idempotent, and
// the database clock decides what is due.
func (a *Agent) sweeper(ctx context.Context) {
	everyTick(ctx, a.cfg.SweepInterval, a.sweepOnce)
}

func (a *Agent) sweepOnce(ctx context.Context) {
	if a.draining.Load() {
		return
	}
	released, err := a.db.WorkflowReleaseDelayed(ctx, nil)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("releasing delayed workflows failed", zap.Error(err))
		}
		return
	}
	seen := map[string]bool{}
	for _, r := range released {
		if !seen[r.QueueName] {
			seen[r.QueueName] = true
			a.wakeQueue(r.QueueName)
		}
	}
	for {
		cancelled, err := a.db.WorkflowCancelTimedOut(ctx, 100, nil)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("cancelling timed-out workflows failed", zap.Error(err))
			}
			return
		}
		for _, id := range cancelled {
			a.cancelLocalRun(id)
			a.waiters.wake(id)
		}
		if len(cancelled) < 100 {
			return
		}
	}
}

// wakeAllPollers wakes every poller of every group.
func (a *Agent) wakeAllPollers() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range a.groups {
		for _, p := range g.pollers {
			p.refreshConfig()
			p.wakeUp()
		}
	}
}
