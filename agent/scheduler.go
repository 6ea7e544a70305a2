package agent

import (
	"context"
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
		switch {
		case sc.a.deactivated.Load():
			// A deactivated executor fires no more ticks (DBOS stops its
			// schedulers on deactivate); the other agents still do.
			sc.stopAll()
		case !sc.a.draining.Load():
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
		if _, err := a.fireTick(ctx, s, next, TickWorkflowID(s.Name, next)); err != nil && ctx.Err() == nil {
			a.log.Warn("firing a schedule failed", zap.String("schedule", s.Name), zap.Time("tick", next), zap.Error(err))
		}
		next = sched.Next(next)
	}
}

// Tick is one tick a schedule enqueued.
type Tick struct {
	WorkflowID string
	// Time is the tick's scheduled time.
	Time time.Time
	// Created is false when the tick was enqueued before (by an agent, an
	// SDK or an earlier backfill): nothing was written.
	Created bool
}

// fireTick enqueues one tick's workflow (once, whoever fires it) and
// records it as the schedule's latest.
func (a *Agent) fireTick(ctx context.Context, s sysdb.Schedule, tick time.Time, workflowID string) (Tick, error) {
	// Ticks run on the owner's latest version, so a stale deploy does not
	// pick them up; with no version registered they are unversioned.
	var version *string
	latest, found, err := a.db.VersionLatest(ctx, s.ApplicationName)
	if err != nil {
		return Tick{}, err
	}
	if found {
		version = &latest.Name
	}
	p, err := TickInsertParams(s, tick, workflowID, a.cfg.ExecutorID, newToken(), version)
	if err != nil {
		return Tick{}, err
	}
	res, err := a.db.WorkflowInsert(ctx, p)
	if err != nil && !IsTickIDTaken(err) {
		return Tick{}, err
	}
	fired := Tick{WorkflowID: workflowID, Time: tick, Created: res.Created}
	if err := a.db.ScheduleSetLastFired(ctx, s.Name, tick); err != nil {
		return fired, err
	}
	if res.Created {
		a.wakeQueue(*p.QueueName)
	}
	return fired, nil
}

// backfill enqueues every tick in [start, end) that is not enqueued yet.
func (a *Agent) backfill(ctx context.Context, s sysdb.Schedule, start, end time.Time) ([]Tick, error) {
	ticks, err := BackfillTicks(s, start, end)
	if err != nil {
		return nil, err
	}
	var fired []Tick
	for _, tick := range ticks {
		t, err := a.fireTick(ctx, s, tick, TickWorkflowID(s.Name, tick))
		if err != nil {
			return fired, err
		}
		fired = append(fired, t)
	}
	return fired, nil
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

// decodeScheduleRef decodes (and checks) a request that names one schedule.
func decodeScheduleRef(env protocol.Envelope) (protocol.ScheduleRef, error) {
	var m protocol.ScheduleRef
	return m, decode(env, &m)
}

func handleCreateSchedule(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.Schedule
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	if err := s.agent.CreateSchedule(s.ctx, s.caller(), m); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleGetSchedule(s *Session, env protocol.Envelope) (any, error) {
	m, err := decodeScheduleRef(env)
	if err != nil {
		return nil, err
	}
	sched, err := s.agent.GetSchedule(s.ctx, m.ScheduleName)
	if err != nil {
		return nil, err
	}
	return scheduleMessage(sched), nil
}

func handleListSchedules(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.ListSchedules
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	list, err := s.agent.ListSchedules(s.ctx, s.caller(), ListSchedulesParams{
		Statuses: m.Statuses, WorkflowNames: m.WorkflowNames, NamePrefix: m.NamePrefix,
		ApplicationNames: m.ApplicationNames, AllApplications: m.AllApplications,
	})
	if err != nil {
		return nil, err
	}
	reply := &protocol.ListSchedulesReply{Schedules: make([]protocol.Schedule, len(list))}
	for i, sched := range list {
		reply.Schedules[i] = scheduleMessage(sched)
	}
	return reply, nil
}

func setScheduleStatus(status string) handler {
	return func(s *Session, env protocol.Envelope) (any, error) {
		m, err := decodeScheduleRef(env)
		if err != nil {
			return nil, err
		}
		if err := s.agent.SetScheduleStatus(s.ctx, m.ScheduleName, status); err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	}
}

func handleDeleteSchedule(s *Session, env protocol.Envelope) (any, error) {
	m, err := decodeScheduleRef(env)
	if err != nil {
		return nil, err
	}
	if err := s.agent.DeleteSchedule(s.ctx, m.ScheduleName); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

func handleBackfillSchedule(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.BackfillSchedule
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	ticks, err := s.agent.BackfillSchedule(s.ctx, m.ScheduleName, time.UnixMilli(m.StartEpochMS), time.UnixMilli(m.EndEpochMS))
	if err != nil {
		return nil, err
	}
	var ids []string // none is nil, as the wire has always had it
	for _, t := range ticks {
		ids = append(ids, t.WorkflowID)
	}
	return &protocol.WorkflowIDs{WorkflowIDs: ids}, nil
}

func handleTriggerSchedule(s *Session, env protocol.Envelope) (any, error) {
	m, err := decodeScheduleRef(env)
	if err != nil {
		return nil, err
	}
	tick, err := s.agent.TriggerSchedule(s.ctx, m.ScheduleName)
	if err != nil {
		return nil, err
	}
	return &protocol.WorkflowRef{WorkflowID: tick.WorkflowID}, nil
}
