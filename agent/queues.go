package agent

import (
	"context"

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

func handleRegisterQueues(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.RegisterQueues
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.RegisterQueues(s.ctx, s.caller(), RegisterQueuesParams{Queues: m.Queues, ApplicationName: m.ApplicationName}); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleRegister(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.Register
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.Register(s.ctx, s.caller(), RegisterParams{Workflows: m.Workflows, Queues: m.Queues}); err != nil {
		return nil, err
	}
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
// and the unclaimed ones (DBOS's list_queues(application_name=)).
func handleListQueues(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.ListQueues
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	queues, err := s.agent.ListQueues(s.ctx, ListQueuesParams{ApplicationNames: m.ApplicationNames})
	if err != nil {
		return nil, err
	}
	reply := &protocol.ListQueuesReply{Queues: make([]protocol.QueueInfo, len(queues))}
	for i, q := range queues {
		reply.Queues[i] = queueInfo(q.QueueSummary, q.Config)
	}
	return reply, nil
}

func handleGetQueue(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.QueueRef
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	q, err := s.agent.GetQueue(s.ctx, m.Name)
	if err != nil {
		return nil, err
	}
	return queueInfo(q.QueueSummary, q.Config), nil
}

func handleDeleteQueue(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.QueueRef
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.DeleteQueue(s.ctx, m.Name); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleSetWorkflowDelay(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.SetWorkflowDelay
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.SetWorkflowDelay(s.ctx, m.WorkflowID, epochMillis(m.DelayUntilEpochMS)); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleSetWorkflowPriority(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.SetWorkflowPriority
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	applied, err := s.agent.SetWorkflowPriority(s.ctx, m.WorkflowID, m.Priority)
	if err != nil {
		return nil, err
	}
	return protocol.SetWorkflowPriorityReply{Applied: applied}, nil
}

func handleDebounceWorkflow(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.DebounceWorkflow
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	res, err := s.agent.Debounce(s.ctx, s.caller(), DebounceParams{
		Key: m.Key, Name: m.Name, ClassName: m.ClassName, QueueName: m.QueueName,
		Delay: millis(m.DelayMS), Timeout: millis(m.TimeoutMS), Inputs: m.Inputs, Serialization: m.Serialization,
		WorkflowID: m.WorkflowID, AppVersion: m.AppVersion, Priority: m.Priority, PartitionKey: m.PartitionKey,
		AuthenticatedUser: m.AuthenticatedUser, AssumedRole: m.AssumedRole, AuthenticatedRoles: m.AuthenticatedRoles,
		WorkflowTimeout: millis(m.WorkflowTimeoutMS), Caller: optionalStepRef(m.Caller), Attributes: m.Attributes,
		ApplicationName: m.ApplicationName, DeduplicationID: m.DeduplicationID, StepName: m.StepName,
	})
	if err != nil {
		return nil, err
	}
	return &protocol.DebounceWorkflowReply{WorkflowID: res.WorkflowID, Bounced: res.Bounced}, nil
}

func handleListVersions(s *Session, _ protocol.Envelope) (any, error) {
	versions, err := s.agent.ListVersions(s.ctx, s.caller())
	if err != nil {
		return nil, err
	}
	reply := &protocol.ListVersionsReply{Versions: make([]protocol.VersionInfo, len(versions))}
	for i, v := range versions {
		reply.Versions[i] = protocol.VersionInfo{VersionID: v.ID, VersionName: v.Name, TimestampMS: v.Timestamp, CreatedAtMS: v.CreatedAt,
			ApplicationName: deref(v.ApplicationName)}
	}
	return reply, nil
}

func handlePromoteVersion(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.VersionRef
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.PromoteVersion(s.ctx, s.caller(), PromoteVersionParams{VersionName: m.VersionName, ApplicationName: m.ApplicationName}); err != nil {
		return nil, err
	}
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
