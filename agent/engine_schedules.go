package agent

import (
	"context"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The engine's schedule operations. A change made through the engine
// applies at once: the scheduler re-reads the schedules.

// CreateSchedule creates a schedule (the protocol's create_schedule
// message is exactly its shape). The names, context and status are held to
// the protocol's rules, whoever writes the shared table; the expression and
// its time zone are parsed by the parser that fires them. A client may
// create a schedule for another application (DBOSClient.create_schedule
// application_name=); a worker's are its own, as its queues are. A given
// schedule_id is kept: a binding re-creating a schedule whose definition
// changed (DBOS's apply_schedules updates it in place), and so is a given
// last_fired_at: the re-created schedule keeps its latest tick, as DBOS's
// update keeps it (an automatic backfill then resumes from there).
func (a *Agent) CreateSchedule(ctx context.Context, c Caller, m protocol.Schedule) error {
	const op = protocol.OpCreateSchedule
	if err := m.Validate(op); err != nil {
		return &InvalidArgumentError{Message: err.Error()}
	}
	if _, _, err := ParseCron(m.Cron, m.CronTimezone); err != nil {
		return invalidf("%s: %v", op, err)
	}
	status := m.Status
	if status == "" {
		status = sysdb.ScheduleActive
	}
	owner := c.App
	if m.ApplicationName != "" && m.ApplicationName != c.App {
		if c.Worker {
			return invalidf("%s: a worker creates schedules for its own application only", op)
		}
		owner = m.ApplicationName
	}
	var lastFired *time.Time
	if m.LastFiredAt != "" {
		t, ok := sysdb.ParseLastFiredAt(m.LastFiredAt)
		if !ok {
			return invalidf("%s.last_fired_at: must be an ISO 8601 time, not %q", op, m.LastFiredAt)
		}
		lastFired = &t
	}
	ctxText := m.Context
	if ctxText == "" {
		ctxText = "null"
	}
	err := a.db.ScheduleCreate(ctx, sysdb.Schedule{
		ID: m.ScheduleID, Name: m.ScheduleName, WorkflowName: m.WorkflowName, WorkflowClassName: optional(m.WorkflowClassName),
		Cron: m.Cron, Status: status, Context: ctxText, AutomaticBackfill: m.AutomaticBackfill,
		CronTimezone: optional(m.CronTimezone), QueueName: optional(m.QueueName), ApplicationName: optional(owner),
		LastFiredAt: lastFired,
	})
	if err != nil {
		return err
	}
	a.schedules.reconcileSoon()
	return nil
}

// GetSchedule reads a schedule (sysdb.ScheduleNotFoundError when there is
// none).
func (a *Agent) GetSchedule(ctx context.Context, name string) (sysdb.Schedule, error) {
	return a.db.ScheduleGet(ctx, name)
}

// ListSchedulesParams filters a listing of schedules.
type ListSchedulesParams struct {
	Statuses      []string
	WorkflowNames []string
	NamePrefix    string
	// ApplicationNames keeps these applications' schedules; without them
	// the caller's application's (and unclaimed ones) are kept, unless
	// AllApplications.
	ApplicationNames []string
	AllApplications  bool
}

// ListSchedules lists schedules by name.
func (a *Agent) ListSchedules(ctx context.Context, c Caller, p ListSchedulesParams) ([]sysdb.Schedule, error) {
	params := sysdb.ScheduleListParams{Statuses: p.Statuses, WorkflowNames: p.WorkflowNames, NamePrefix: p.NamePrefix}
	switch {
	case p.AllApplications:
	case len(p.ApplicationNames) > 0:
		params.ApplicationNames = p.ApplicationNames // DBOS's list_schedules(application_name=)
	default:
		params.ApplicationName = optional(c.App)
	}
	return a.db.ScheduleList(ctx, params)
}

// SetScheduleStatus pauses (sysdb.SchedulePaused) or resumes
// (sysdb.ScheduleActive) a schedule.
func (a *Agent) SetScheduleStatus(ctx context.Context, name, status string) error {
	if err := a.db.ScheduleSetStatus(ctx, name, status); err != nil {
		return err
	}
	a.schedules.reconcileSoon()
	return nil
}

// DeleteSchedule deletes a schedule (the workflows it enqueued stay).
func (a *Agent) DeleteSchedule(ctx context.Context, name string) error {
	if err := a.db.ScheduleDelete(ctx, name); err != nil {
		return err
	}
	a.schedules.reconcileSoon()
	return nil
}

// BackfillSchedule enqueues every tick of a schedule in [start, end) that
// was not enqueued yet, with the workflow ids the scheduler gives them, and
// returns every tick of the range.
func (a *Agent) BackfillSchedule(ctx context.Context, name string, start, end time.Time) ([]Tick, error) {
	sched, err := a.db.ScheduleGet(ctx, name)
	if err != nil {
		return nil, err
	}
	// The range and the stored cron are checked before anything is
	// enqueued: a bad one is the caller's to fix, not a retryable failure.
	if _, err := BackfillTicks(sched, start, end); err != nil {
		return nil, invalidf("%s: %v", protocol.OpBackfillSchedule, err)
	}
	return a.backfill(ctx, sched, start, end)
}

// TriggerSchedule enqueues one run of a schedule's workflow now, outside its
// ticks.
func (a *Agent) TriggerSchedule(ctx context.Context, name string) (Tick, error) {
	sched, err := a.db.ScheduleGet(ctx, name)
	if err != nil {
		return Tick{}, err
	}
	now := time.Now().UTC()
	return a.fireTick(ctx, sched, now, TriggerWorkflowID(sched.Name, now))
}
