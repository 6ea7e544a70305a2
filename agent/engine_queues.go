package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The engine's operations on shared configuration and delayed starts:
// queues, registrations, debounces, delays, application versions and
// renames.

// registerQueues stores queue registrations for app, all or none, so that
// every agent and SDK sharing the database applies the same shared limits.
// A registration with options updates the stored row (the latest deploy
// wins); a bare name creates the row only when it is missing. What only the
// database knows (a queue another application registered) is an
// InvalidArgumentError and writes nothing.
//
// Each queue is one transaction of five round trips, before the reply: so
// a registration is bounded (protocol.MaxQueuesPerWorker) to be answered
// within seconds. Unbounded, a hello with 10,000 queues took 8 s on an idle
// agent and over 30 s on one already polling a thousand queues, past the
// Python binding's 10 s handshake timeout (after which it reconnects and
// sends the same hello again).
func (a *Agent) registerQueues(ctx context.Context, app string, queues []protocol.QueueRegistration) error {
	if len(queues) == 0 {
		return nil
	}
	params := make([]sysdb.QueueRegisterParams, len(queues))
	for i, q := range queues {
		params[i] = sysdb.QueueRegisterParams{Config: queueConfigOf(q, app), UpdateExisting: hasOptions(q)}
	}
	_, err := a.db.QueueRegisterMany(ctx, params)
	var owned *sysdb.NameOwnedError
	if errors.As(err, &owned) {
		return invalidf("%s (no queue of this registration was written)", owned.Error())
	}
	if err != nil {
		return &QueueRegistrationError{Err: err}
	}
	return nil
}

// newWorker is the worker a hello describes: its functions and the queues
// it serves (not those it only configures). It joins its group once the
// session took the hello (addWorkerLocked).
func newWorker(s *Session, h *protocol.Hello) *worker {
	w := &worker{
		session:        s,
		functions:      make(map[string]protocol.WorkflowRegistration, len(h.Workflows)),
		queues:         make(map[string]protocol.QueueRegistration, len(h.Queues)),
		maxConcurrency: h.MaxConcurrency,
		running:        map[string]*run{},
	}
	for _, f := range h.Workflows {
		w.functions[f.Name] = f
	}
	for _, q := range h.Queues {
		if !q.ConfigureOnly {
			w.queues[q.Name] = q
		}
	}
	return w
}

// announceVersion registers the application version a worker announces:
// the first of it becomes the latest, which unversioned work follows.
func (a *Agent) announceVersion(ctx context.Context, log *zap.Logger, app, version string) error {
	if version == "" {
		if latest, found, err := a.db.VersionLatest(ctx, optional(app)); err == nil && found {
			// No version is never the latest (PROTOCOL.md 2.13): such a
			// worker runs only what it starts itself.
			log.Warn("a worker without an application version takes no queued unversioned work while its application has versions; give it one",
				zap.String("app", app), zap.String("latest_version", latest.Name))
		}
		return nil
	}
	err := a.db.VersionRegister(ctx, version, optional(app))
	var owned *sysdb.NameOwnedError
	if errors.As(err, &owned) {
		// Version names are unique across applications in the DBOS
		// schema: this one's versions cannot be tracked, but its
		// workflows run all the same.
		log.Warn("application version name taken by another application; not registered", zap.Error(err))
		return nil
	}
	return err
}

// RegisterQueuesParams is queues to register.
type RegisterQueuesParams struct {
	Queues []protocol.QueueRegistration
	// ApplicationName owns the queues when a client names another
	// application than its own.
	ApplicationName string
}

// RegisterQueues stores queue registrations. A client (DBOS's
// DBOSClient.register_queue) writes the rows for its application, or the
// one it names, and serves nothing; the workers that serve the queues poll
// them again at once, under their new limits. A worker's queues are its
// own, and it serves them (see Register).
func (a *Agent) RegisterQueues(ctx context.Context, c Caller, p RegisterQueuesParams) error {
	const op = protocol.OpRegisterQueues
	m := protocol.RegisterQueues{Queues: p.Queues, ApplicationName: p.ApplicationName}
	if err := m.Validate(op); err != nil {
		return &InvalidArgumentError{Message: err.Error()}
	}
	if !c.Worker {
		app := c.App
		if p.ApplicationName != "" {
			app = p.ApplicationName
		}
		if err := a.registerQueues(ctx, app, p.Queues); err != nil {
			return err
		}
		for _, q := range p.Queues {
			a.wakeQueue(q.Name)
		}
		return nil
	}
	if p.ApplicationName != "" && p.ApplicationName != c.App {
		return invalidf("%s: a worker registers queues for its own application only", op)
	}
	return a.register(ctx, op, c, nil, p.Queues)
}

// RegisterParams is workflow functions and queues a worker adds after its
// hello.
type RegisterParams struct {
	Workflows []protocol.WorkflowRegistration
	Queues    []protocol.QueueRegistration
}

// Register adds workflow functions and queues to the calling worker.
func (a *Agent) Register(ctx context.Context, c Caller, p RegisterParams) error {
	const op = protocol.OpRegister
	m := protocol.Register{Workflows: p.Workflows, Queues: p.Queues}
	if err := m.Validate(op); err != nil {
		return &InvalidArgumentError{Message: err.Error()}
	}
	return a.register(ctx, op, c, p.Workflows, p.Queues)
}

// register adds workflow functions and queues to the calling worker after
// its hello, all or none: the queues are written first (the one step that
// can fail on what only the database knows), then both join the worker's
// maps together, under Agent.mu. So a run dispatched to the worker names a
// function it registered, and a poll that ran before this (it claimed
// nothing of the new names or queues) is woken to run again at once rather
// than at its next interval; the scheduler re-reads the schedules, since
// some may target the new functions. A name registered again replaces its
// registration for this worker (the latest declaration wins, as in a hello
// after a redeploy).
func (a *Agent) register(ctx context.Context, op string, c Caller, workflows []protocol.WorkflowRegistration, queues []protocol.QueueRegistration) error {
	if !c.Worker {
		return invalidf("%s: only a worker registers workflows and serves queues (role is client)", op)
	}
	closing := &ShuttingDownError{Message: op + ": the session is closing"}
	if c.session == nil {
		return closing
	}
	a.mu.Lock()
	w := a.workerOfLocked(c.session)
	a.mu.Unlock()
	if w == nil {
		return closing
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
		return invalidf("%s.workflows: this worker would register %d workflow functions; a worker registers at most %d",
			op, functions, protocol.MaxWorkflowsPerWorker)
	}
	if served > protocol.MaxQueuesPerWorker {
		return invalidf("%s.queues: this worker would serve %d queues; a worker serves at most %d",
			op, served, protocol.MaxQueuesPerWorker)
	}
	if err := a.registerQueues(ctx, c.App, queues); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.groups[c.group()]
	if g == nil || g.workers[c.session] != w {
		return closing
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
	c.session.log.Debug("registered after hello", zap.Int("workflows", len(workflows)), zap.Int("queues", len(queues)))
	return nil
}

// QueueState is a queue's load and, when it is registered and was asked
// for, its whole stored row (partition limits, polling interval, owner).
type QueueState struct {
	sysdb.QueueSummary
	Config *sysdb.QueueConfig
}

// ListQueuesParams filters a listing of queues.
type ListQueuesParams struct {
	// ApplicationNames keeps these applications' queues and the unclaimed
	// ones (empty: every queue).
	ApplicationNames []string
	// WithConfig reads each registered queue's whole row too.
	WithConfig bool
}

// ListQueues lists the queues: registered ones and those with active
// workflows.
func (a *Agent) ListQueues(ctx context.Context, p ListQueuesParams) ([]QueueState, error) {
	queues, err := a.db.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	// The summary holds every queue already, so the filter is applied here.
	states := make([]QueueState, 0, len(queues))
	for _, q := range queues {
		if len(p.ApplicationNames) > 0 && q.ApplicationName != nil && !slices.Contains(p.ApplicationNames, *q.ApplicationName) {
			continue
		}
		st := QueueState{QueueSummary: q}
		if p.WithConfig && q.Registered {
			cfg, err := a.db.QueueGet(ctx, q.Name)
			if err != nil {
				return nil, err
			}
			st.Config = &cfg
		}
		states = append(states, st)
	}
	return states, nil
}

// GetQueue reads one queue with its whole row; a queue neither registered
// nor holding active workflows is an InvalidArgumentError.
func (a *Agent) GetQueue(ctx context.Context, name string) (QueueState, error) {
	if err := required(protocol.OpGetQueue, "name", name); err != nil {
		return QueueState{}, err
	}
	queues, err := a.db.QueueList(ctx)
	if err != nil {
		return QueueState{}, err
	}
	for _, q := range queues {
		if q.Name != name {
			continue
		}
		st := QueueState{QueueSummary: q}
		if q.Registered {
			cfg, err := a.db.QueueGet(ctx, name)
			if err != nil {
				return QueueState{}, err
			}
			st.Config = &cfg
		}
		return st, nil
	}
	return QueueState{}, invalidf("queue %s is not registered and has no active workflows", name)
}

// DeleteQueue removes a queue's registration, as DBOS Python's delete_queue
// does: its workflows stay, but this agent's workers stop serving the queue
// (its pollers stop), so what waits on it stays ENQUEUED until a worker
// registers the queue again. A queue without a row is no error (deleting
// twice is harmless, as in DBOS).
func (a *Agent) DeleteQueue(ctx context.Context, name string) error {
	const op = protocol.OpDeleteQueue
	if err := required(op, "name", name); err != nil {
		return err
	}
	if name == sysdb.InternalQueueName {
		return invalidf("%s: the internal queue %s cannot be deleted", op, name)
	}
	var missing *sysdb.QueueNotFoundError
	if err := a.db.QueueDelete(ctx, name); err != nil && !errors.As(err, &missing) {
		return err
	}
	a.mu.Lock()
	for _, g := range a.groups {
		for _, w := range g.workers {
			delete(w.queues, name)
		}
		g.stopUnservedPollersLocked()
	}
	a.mu.Unlock()
	return nil
}

// SetWorkflowDelay moves the end of a DELAYED workflow's delay
// (sysdb.NotDelayedError when it is not delayed).
func (a *Agent) SetWorkflowDelay(ctx context.Context, workflowID string, until time.Time) error {
	if err := required(protocol.OpSetWorkflowDelay, "workflow_id", workflowID); err != nil {
		return err
	}
	return a.db.WorkflowSetDelay(ctx, workflowID, epochMS(until))
}

// SetWorkflowPriority changes the priority of a workflow waiting on its
// queue; false when it does not exist or no longer waits (left alone, as
// DBOS leaves it).
func (a *Agent) SetWorkflowPriority(ctx context.Context, workflowID string, priority int) (bool, error) {
	if err := required(protocol.OpSetWorkflowPriority, "workflow_id", workflowID); err != nil {
		return false, err
	}
	if priority < 0 || priority > math.MaxInt32 {
		return false, invalidf("%s.priority: %d is out of range (0 to 2^31-1)", protocol.OpSetWorkflowPriority, priority)
	}
	return a.db.WorkflowSetPriority(ctx, workflowID, priority)
}

// DebounceParams is a debounced start: the workflow starts once its key has
// been quiet for Delay.
type DebounceParams struct {
	Key       string
	Name      string
	ClassName string
	// QueueName defaults to the internal queue.
	QueueName string
	Delay     time.Duration
	// Timeout caps how long after the first call the start may be pushed
	// back (0: no cap).
	Timeout       time.Duration
	Inputs        *string
	Serialization string
	// WorkflowID is the id of the workflow started (default: DBOS's id of
	// the caller's next child, or a UUID).
	WorkflowID         string
	AppVersion         string
	Priority           int
	PartitionKey       string
	AuthenticatedUser  string
	AssumedRole        string
	AuthenticatedRoles []string
	// WorkflowTimeout is the started workflow's timeout.
	WorkflowTimeout time.Duration
	// Caller, for a debounce from workflow code, records it as the
	// caller's step.
	Caller          *StepRef
	Attributes      *string
	ApplicationName string
	// DeduplicationID is the key's deduplication id as the caller's SDK
	// forms it (default "<name>-<key>", DBOS Python's).
	DeduplicationID string
	// StepName is the caller's step (default DBOS Python's).
	StepName string
}

// DebounceResult is the workflow the debounce created or pushed back.
type DebounceResult struct {
	WorkflowID string
	Bounced    bool
}

// Debounce starts a workflow once its key has been quiet for the delay: a
// repeated call pushes the pending start back and replaces its inputs, up
// to the timeout after the first call.
func (a *Agent) Debounce(ctx context.Context, c Caller, p DebounceParams) (DebounceResult, error) {
	const op = protocol.OpDebounceWorkflow
	if err := required(op, "key", p.Key, "name", p.Name); err != nil {
		return DebounceResult{}, err
	}
	if p.Delay < 0 || p.Timeout < 0 || p.WorkflowTimeout < 0 {
		return DebounceResult{}, invalidf("%s: delay_ms, timeout_ms and workflow_timeout_ms must not be negative", op)
	}
	if err := checkKeys(op, "workflow_id", p.WorkflowID, "partition_key", p.PartitionKey); err != nil {
		return DebounceResult{}, err
	}
	var caller *sysdb.StepCaller
	if p.Caller != nil {
		sc, err := stepCaller(op, c, *p.Caller)
		if err != nil {
			return DebounceResult{}, err
		}
		if sc.InStep {
			return DebounceResult{}, invalidf("%s: a debounce is made from workflow code, not from inside a step", op)
		}
		caller = &sc
	}
	if err := checkAttributes(op, p.Attributes); err != nil {
		return DebounceResult{}, err
	}
	// The key is scoped to the workflow, as the DBOS SDKs scope it, so two
	// workflows debouncing the same key do not collide.
	dedupID := p.Name + "-" + p.Key
	dedupErr := checkDeduplicationID(op+".key", dedupID, "the deduplication id it forms (<name>-<key>) is ")
	if p.DeduplicationID != "" {
		dedupID = p.DeduplicationID
		dedupErr = checkDeduplicationID(op+".deduplication_id", dedupID, "")
	}
	if dedupErr != nil {
		return DebounceResult{}, dedupErr
	}
	if err := a.refuseWhileDraining(); err != nil {
		return DebounceResult{}, err
	}
	queue := queueOrInternal(p.QueueName)
	version := p.AppVersion
	owner := c.App
	if p.ApplicationName != "" && p.ApplicationName != c.App {
		// For another application (DBOS's Debouncer application_name): its
		// row, and its pending debounce is the one bounced; no version of
		// the caller's, as start_workflow writes it.
		owner = p.ApplicationName
	} else if version == "" {
		version = c.Version
	}
	delayMS, timeoutMS := p.Delay.Milliseconds(), p.Timeout.Milliseconds()
	for attempt := 0; attempt < 3; attempt++ {
		now := time.Now().UnixMilli()
		id := p.WorkflowID
		if id == "" && caller != nil {
			id = fmt.Sprintf("%s-%d", caller.WorkflowID, caller.FunctionID+1) // DBOS's id of the child enqueued next
		} else if id == "" {
			id = newUUID()
		}
		delayUntil := now + delayMS
		if timeoutMS > 0 {
			// The debounce deadline caps the first delay too.
			delayUntil = min(delayUntil, now+timeoutMS)
		}
		create := sysdb.WorkflowInsertParams{
			ID: id, Name: p.Name, Status: sysdb.StatusDelayed, CreatorXID: newToken(),
			ClassName: optional(p.ClassName), QueueName: &queue, QueuePartitionKey: optional(p.PartitionKey),
			DeduplicationID: &dedupID, Priority: p.Priority, ExecutorID: a.cfg.ExecutorID,
			ApplicationVersion: optional(version), ApplicationName: optional(owner),
			DelayUntilEpochMS: &delayUntil, IsDebounced: true,
			Serialization: optional(p.Serialization), Inputs: p.Inputs,
			AuthenticatedUser: optional(p.AuthenticatedUser), AssumedRole: optional(p.AssumedRole),
			AuthenticatedRoles: rolesColumn(p.AuthenticatedRoles), Attributes: p.Attributes,
		}
		if timeoutMS > 0 {
			deadline := now + timeoutMS
			create.DebounceDeadline = &deadline
		}
		create.TimeoutMS = optionalDuration(p.WorkflowTimeout)
		params := sysdb.WorkflowDebounceParams{
			Name: p.Name, QueueName: queue, DeduplicationID: dedupID, DelayUntilEpochMS: now + delayMS,
			Inputs: p.Inputs, Serialization: optional(p.Serialization), ApplicationName: optional(owner),
			StepName: p.StepName,
		}
		if caller != nil {
			// One transaction: the bounce or the child's insert, and the
			// caller's step, so a replay finds the step and bounces nothing.
			params.Caller, params.Create = caller, &create
		}
		res, err := a.db.WorkflowDebounce(ctx, params)
		var dedup *sysdb.DeduplicatedError
		if errors.As(err, &dedup) {
			continue // another caller created it meanwhile: bounce that one
		}
		if err != nil {
			if caller != nil {
				return DebounceResult{}, a.runFailed(ctx, caller.WorkflowID, caller.OwnerXID, err)
			}
			return DebounceResult{}, err
		}
		if res.BouncedID != nil {
			return DebounceResult{WorkflowID: *res.BouncedID, Bounced: true}, nil
		}
		if res.HolderID != nil {
			return DebounceResult{}, &DebounceKeyHeldError{Key: p.Key, Name: p.Name, HolderID: *res.HolderID, QueueName: queue, DeduplicationID: dedupID}
		}
		if res.CreatedID != nil {
			return DebounceResult{WorkflowID: *res.CreatedID}, nil
		}
		res2, err := a.db.WorkflowInsert(ctx, create)
		if errors.As(err, &dedup) {
			continue
		}
		if err != nil {
			return DebounceResult{}, err
		}
		return DebounceResult{WorkflowID: id, Bounced: !res2.Created}, nil
	}
	return DebounceResult{}, &ContentionError{Message: op + ": the key kept changing hands; try again"}
}

// ListVersions lists the caller's application's versions (every one, for
// a caller of no application), the latest first.
func (a *Agent) ListVersions(ctx context.Context, c Caller) ([]sysdb.AppVersion, error) {
	return a.db.VersionList(ctx, optional(c.App))
}

// PromoteVersionParams names a version to make the latest.
type PromoteVersionParams struct {
	VersionName string
	// ApplicationName defaults to the caller's.
	ApplicationName string
}

// PromoteVersion makes a version its application's latest (roll forward or
// back): unversioned work now belongs to its workers, whose pollers look
// again at once.
func (a *Agent) PromoteVersion(ctx context.Context, c Caller, p PromoteVersionParams) error {
	m := protocol.VersionRef{VersionName: p.VersionName, ApplicationName: p.ApplicationName}
	if err := m.Validate(protocol.OpPromoteVersion); err != nil {
		return &InvalidArgumentError{Message: err.Error()}
	}
	app := c.App
	if p.ApplicationName != "" {
		app = p.ApplicationName // DBOS's set_latest_application_version(application_name=)
	}
	if err := a.db.VersionPromote(ctx, p.VersionName, optional(app)); err != nil {
		return err
	}
	a.wakeAllPollers()
	return nil
}

// RenameParams re-owns rows from one application name (or the unclaimed
// rows) to another.
type RenameParams struct {
	OldName            string
	NewName            string
	AdoptUnclaimedRows bool
	// BatchSize moves the rows in transactions of that many (0: one).
	BatchSize int
}

// RenameApplication re-owns rows, as DBOS's DBOSClient.rename_application
// does. Ownership routes dequeues, recovery and schedule ticks, so
// afterwards every poller looks again and the scheduler re-reads the
// schedules: work that changed hands is taken by its new owner's workers
// now rather than at their next interval.
func (a *Agent) RenameApplication(ctx context.Context, p RenameParams) (sysdb.ApplicationRowCounts, error) {
	m := protocol.RenameApplication{OldName: p.OldName, NewName: p.NewName, AdoptUnclaimedRows: p.AdoptUnclaimedRows, BatchSize: p.BatchSize}
	if err := m.Validate(protocol.OpRenameApplication); err != nil {
		return sysdb.ApplicationRowCounts{}, &InvalidArgumentError{Message: err.Error()}
	}
	moved, err := a.db.ApplicationRename(ctx, sysdb.ApplicationRenameParams{
		OldName: optional(p.OldName), NewName: p.NewName, AdoptUnclaimed: p.AdoptUnclaimedRows, BatchSize: p.BatchSize,
	})
	if err != nil {
		return sysdb.ApplicationRowCounts{}, err
	}
	a.wakeAllPollers()
	a.schedules.reconcileSoon()
	a.log.Info("renamed application", zap.String("old_name", p.OldName), zap.String("new_name", p.NewName),
		zap.Bool("adopt_unclaimed_rows", p.AdoptUnclaimedRows), zap.Int64("workflows", moved.Workflows))
	return moved, nil
}
