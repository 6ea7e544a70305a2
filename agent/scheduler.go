package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// scheduler fires the ticks of the schedules whose workflows this agent's
// workers run. Every agent may fire a tick; its deterministic workflow id
// makes the enqueue happen once.
type scheduler struct {
	a    *Agent
	kick chan struct{}

	mu      sync.Mutex
	running map[string]*scheduleRunner
}

type scheduleRunner struct {
	signature string
	stop      chan struct{}
}

func newScheduler(a *Agent) *scheduler {
	return &scheduler{a: a, kick: make(chan struct{}, 1), running: map[string]*scheduleRunner{}}
}

// reconcileSoon makes the scheduler re-read the schedules now.
func (sc *scheduler) reconcileSoon() {
	select {
	case sc.kick <- struct{}{}:
	default:
	}
}

func (sc *scheduler) loop(ctx context.Context) {
	t := time.NewTicker(sc.a.cfg.ScheduleInterval)
	defer t.Stop()
	for {
		if !sc.a.draining.Load() {
			sc.reconcile(ctx)
		}
		select {
		case <-ctx.Done():
			sc.stopAll()
			return
		case <-t.C:
		case <-sc.kick:
		}
	}
}

func (sc *scheduler) stopAll() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for name, r := range sc.running {
		close(r.stop)
		delete(sc.running, name)
	}
}

// serves reports whether a connected worker of the schedule's application
// (any, for an unclaimed schedule) runs its workflow.
func (a *Agent) serves(s sysdb.Schedule) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, g := range a.groups {
		if s.ApplicationName != nil && *s.ApplicationName != key.app {
			continue
		}
		for _, w := range g.workers {
			if _, ok := w.functions[s.WorkflowName]; ok {
				return true
			}
		}
	}
	return false
}

func scheduleSignature(s sysdb.Schedule) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s", s.WorkflowName, deref(s.WorkflowClassName), s.Cron,
		s.Context, deref(s.CronTimezone), deref(s.QueueName))
}

func (sc *scheduler) reconcile(ctx context.Context) {
	a := sc.a
	schedules, err := a.db.ScheduleList(ctx, sysdb.ScheduleListParams{Statuses: []string{sysdb.ScheduleActive}})
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("listing schedules failed", zap.Error(err))
		}
		return
	}
	wanted := map[string]sysdb.Schedule{}
	for _, s := range schedules {
		if a.serves(s) {
			wanted[s.Name] = s
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for name, r := range sc.running {
		if s, ok := wanted[name]; !ok || scheduleSignature(s) != r.signature {
			close(r.stop)
			delete(sc.running, name)
		}
	}
	for name, s := range wanted {
		if _, ok := sc.running[name]; ok {
			continue
		}
		sched, loc, err := parseCron(s.Cron, s.CronTimezone)
		if err != nil {
			a.log.Warn("schedule cannot run", zap.String("schedule", name), zap.Error(err))
			continue
		}
		r := &scheduleRunner{signature: scheduleSignature(s), stop: make(chan struct{})}
		sc.running[name] = r
		a.sup.goFn("schedule runner", func() {
			if s.AutomaticBackfill && s.LastFiredAt != nil {
				if _, err := a.backfill(ctx, s, s.LastFiredAt.Add(time.Second), time.Now()); err != nil && ctx.Err() == nil {
					a.log.Warn("automatic backfill failed", zap.String("schedule", s.Name), zap.Error(err))
				}
			}
			sc.run(ctx, s, sched, loc, r.stop)
		})
	}
}

// run fires one schedule's ticks until stopped.
func (sc *scheduler) run(ctx context.Context, s sysdb.Schedule, sched cron.Schedule, loc *time.Location, stop <-chan struct{}) {
	a := sc.a
	next := sched.Next(time.Now().In(loc))
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		if _, _, err := a.fireTick(ctx, s, next, TickWorkflowID(s.Name, next)); err != nil && ctx.Err() == nil {
			a.log.Warn("firing a schedule failed", zap.String("schedule", s.Name), zap.Time("tick", next), zap.Error(err))
		}
		next = sched.Next(next)
	}
}

// fireTick enqueues one tick's workflow (once, whoever fires it) and
// records it as the schedule's latest.
func (a *Agent) fireTick(ctx context.Context, s sysdb.Schedule, tick time.Time, workflowID string) (string, bool, error) {
	// Ticks run on the owner's latest version, so a stale deploy does not
	// pick them up; with no version registered they are unversioned.
	var version *string
	latest, found, err := a.db.VersionLatest(ctx, s.ApplicationName)
	if err != nil {
		return "", false, err
	}
	if found {
		version = &latest.Name
	}
	p, err := TickInsertParams(s, tick, workflowID, a.cfg.ExecutorID, newToken(), version)
	if err != nil {
		return "", false, err
	}
	res, err := a.db.WorkflowInsert(ctx, p)
	if err != nil && !IsTickIDTaken(err) {
		return "", false, err
	}
	if err := a.db.ScheduleSetLastFired(ctx, s.Name, tick); err != nil {
		return workflowID, res.Created, err
	}
	if res.Created {
		a.wakeQueue(*p.QueueName)
	}
	return workflowID, res.Created, nil
}

// backfill enqueues every tick in [start, end) that is not enqueued yet.
func (a *Agent) backfill(ctx context.Context, s sysdb.Schedule, start, end time.Time) ([]string, error) {
	ticks, err := BackfillTicks(s, start, end)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, tick := range ticks {
		id, _, err := a.fireTick(ctx, s, tick, TickWorkflowID(s.Name, tick))
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func scheduleMessage(s sysdb.Schedule) protocol.Schedule {
	m := protocol.Schedule{
		ScheduleName: s.Name, WorkflowName: s.WorkflowName, WorkflowClassName: deref(s.WorkflowClassName),
		Cron: s.Cron, Context: s.Context, Status: s.Status, AutomaticBackfill: s.AutomaticBackfill,
		CronTimezone: deref(s.CronTimezone), QueueName: deref(s.QueueName),
		ApplicationName: deref(s.ApplicationName), ScheduleID: s.ID,
	}
	if s.LastFiredAtRaw != nil {
		m.LastFiredAt = *s.LastFiredAtRaw
	}
	return m
}

func scheduleError(s *Session, op string, err error) *protocol.Error {
	var (
		missing *sysdb.ScheduleNotFoundError
		exists  *sysdb.ScheduleExistsError
		owned   *sysdb.NameOwnedError
	)
	switch {
	case errors.As(err, &missing):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", missing.Error())
	case errors.As(err, &exists):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", exists.Error())
	case errors.As(err, &owned):
		return protocol.Errorf(protocol.CodeInvalidArgument, "%s", owned.Error())
	}
	return protocolError(s, op, err)
}

// decodeScheduleRef decodes (and checks) a request that names one schedule.
func decodeScheduleRef(env protocol.Envelope) (protocol.ScheduleRef, *protocol.Error) {
	var m protocol.ScheduleRef
	return m, decode(env, &m)
}

func handleCreateSchedule(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.Schedule
	// decode checks the names, the context and the status
	// (Schedule.Validate); the expression and its time zone are parsed
	// here, by the parser that fires them.
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	if _, _, err := ParseCron(m.Cron, m.CronTimezone); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: %v", env.Op, err)
	}
	status := m.Status
	if status == "" {
		status = sysdb.ScheduleActive
	}
	hello, group := s.handshaken()
	owner := group.app
	if m.ApplicationName != "" && m.ApplicationName != group.app {
		// DBOSClient.create_schedule(application_name=): a client writes a
		// schedule another application's workers fire; a worker's are its
		// own, as its queues are.
		if hello.Role == protocol.RoleWorker {
			return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: a worker creates schedules for its own application only", env.Op)
		}
		owner = m.ApplicationName
	}
	ctxText := m.Context
	if ctxText == "" {
		ctxText = "null"
	}
	// A given schedule_id is kept: a binding re-creating a schedule whose
	// definition changed (DBOS's apply_schedules updates it in place).
	err := a.db.ScheduleCreate(s.ctx, sysdb.Schedule{
		ID: m.ScheduleID, Name: m.ScheduleName, WorkflowName: m.WorkflowName, WorkflowClassName: optional(m.WorkflowClassName),
		Cron: m.Cron, Status: status, Context: ctxText, AutomaticBackfill: m.AutomaticBackfill,
		CronTimezone: optional(m.CronTimezone), QueueName: optional(m.QueueName), ApplicationName: optional(owner),
	})
	if err != nil {
		return nil, scheduleError(s, env.Op, err)
	}
	a.schedules.reconcileSoon()
	return protocol.Empty{}, nil
}

func handleGetSchedule(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	m, perr := decodeScheduleRef(env)
	if perr != nil {
		return nil, perr
	}
	sched, err := s.agent.db.ScheduleGet(s.ctx, m.ScheduleName)
	if err != nil {
		return nil, scheduleError(s, env.Op, err)
	}
	return scheduleMessage(sched), nil
}

func handleListSchedules(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.ListSchedules
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	_, group := s.handshaken()
	params := sysdb.ScheduleListParams{Statuses: m.Statuses, WorkflowNames: m.WorkflowNames, NamePrefix: m.NamePrefix}
	switch {
	case m.AllApplications:
	case len(m.ApplicationNames) > 0:
		params.ApplicationNames = m.ApplicationNames // DBOS's list_schedules(application_name=)
	default:
		params.ApplicationName = optional(group.app)
	}
	list, err := s.agent.db.ScheduleList(s.ctx, params)
	if err != nil {
		return nil, scheduleError(s, env.Op, err)
	}
	reply := &protocol.ListSchedulesReply{Schedules: make([]protocol.Schedule, len(list))}
	for i, sched := range list {
		reply.Schedules[i] = scheduleMessage(sched)
	}
	return reply, nil
}

func setScheduleStatus(status string) handler {
	return func(s *Session, env protocol.Envelope) (any, *protocol.Error) {
		m, perr := decodeScheduleRef(env)
		if perr != nil {
			return nil, perr
		}
		if err := s.agent.db.ScheduleSetStatus(s.ctx, m.ScheduleName, status); err != nil {
			return nil, scheduleError(s, env.Op, err)
		}
		s.agent.schedules.reconcileSoon()
		return protocol.Empty{}, nil
	}
}

func handleDeleteSchedule(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	m, perr := decodeScheduleRef(env)
	if perr != nil {
		return nil, perr
	}
	if err := s.agent.db.ScheduleDelete(s.ctx, m.ScheduleName); err != nil {
		return nil, scheduleError(s, env.Op, err)
	}
	s.agent.schedules.reconcileSoon()
	return protocol.Empty{}, nil
}

func handleBackfillSchedule(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.BackfillSchedule
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	sched, err := s.agent.db.ScheduleGet(s.ctx, m.ScheduleName)
	if err != nil {
		return nil, scheduleError(s, env.Op, err)
	}
	// The range and the stored cron are checked before anything is
	// enqueued: a bad one is the caller's to fix, not a retryable failure.
	if _, err := BackfillTicks(sched, time.UnixMilli(m.StartEpochMS), time.UnixMilli(m.EndEpochMS)); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidArgument, "%s: %v", env.Op, err)
	}
	ids, err := s.agent.backfill(s.ctx, sched, time.UnixMilli(m.StartEpochMS), time.UnixMilli(m.EndEpochMS))
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	return &protocol.WorkflowIDs{WorkflowIDs: ids}, nil
}

func handleTriggerSchedule(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	m, perr := decodeScheduleRef(env)
	if perr != nil {
		return nil, perr
	}
	sched, err := s.agent.db.ScheduleGet(s.ctx, m.ScheduleName)
	if err != nil {
		return nil, scheduleError(s, env.Op, err)
	}
	now := time.Now().UTC()
	id, _, err := s.agent.fireTick(s.ctx, sched, now, TriggerWorkflowID(sched.Name, now))
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	return &protocol.WorkflowRef{WorkflowID: id}, nil
}
