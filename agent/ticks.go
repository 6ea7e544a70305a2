package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// The pure pieces of a schedule's ticks, exported so that the operator CLI
// (which backfills and triggers against the database, without an agent)
// writes exactly the rows the scheduler writes.

// cronParser reads 5-field crontabs and 6-field ones with seconds first, as
// DBOS Python (croniter, second_at_beginning) and the Go SDK (robfig/cron,
// whose parser this is) accept them.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// MaxBackfillTicks bounds one backfill, so that a typo in a range cannot
// enqueue millions of workflows.
const MaxBackfillTicks = 100000

// ParseCron parses a schedule in its timezone (an IANA name; "" is UTC) with
// the parser the scheduler fires it with.
func ParseCron(spec, timezone string) (cron.Schedule, *time.Location, error) {
	loc := time.UTC
	if timezone != "" {
		l, err := time.LoadLocation(timezone)
		if err != nil {
			return nil, nil, fmt.Errorf("Invalid timezone: '%s'", timezone) // DBOS's wording, which callers match
		}
		loc = l
	}
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("Invalid cron schedule: '%s' (%v)", spec, err) // DBOS's wording, which callers match
	}
	return sched, loc, nil
}

// parseCron parses a stored schedule's cron in its stored timezone.
func parseCron(spec string, tz *string) (cron.Schedule, *time.Location, error) {
	return ParseCron(spec, deref(tz))
}

// isoformat renders a tick as Python's datetime.isoformat() does for an
// aware datetime, the form DBOS Python puts in a tick's workflow id: an
// agent and a DBOS Python process firing the same schedule then produce the
// same id, and the tick is enqueued once.
func isoformat(t time.Time) string {
	if t.Nanosecond()/1000 != 0 {
		return t.Format("2006-01-02T15:04:05.000000-07:00")
	}
	return t.Format("2006-01-02T15:04:05-07:00")
}

// TickWorkflowID is the deterministic id of a schedule's tick, the same
// whichever agent or SDK fires it.
func TickWorkflowID(scheduleName string, tick time.Time) string {
	return "sched-" + scheduleName + "-" + isoformat(tick)
}

// TriggerWorkflowID is the id of a run triggered by hand at a time, kept
// apart from the tick ids so that a trigger never takes a tick's place.
func TriggerWorkflowID(scheduleName string, at time.Time) string {
	return "sched-" + scheduleName + "-trigger-" + isoformat(at)
}

// BackfillTicks lists the schedule's ticks in (start, end), in the
// schedule's timezone; more than MaxBackfillTicks is an error.
func BackfillTicks(s sysdb.Schedule, start, end time.Time) ([]time.Time, error) {
	sched, loc, err := parseCron(s.Cron, s.CronTimezone)
	if err != nil {
		return nil, err
	}
	var ticks []time.Time
	// Both DBOS SDKs take the ticks strictly after start.
	for tick := sched.Next(start.In(loc)); tick.Before(end); tick = sched.Next(tick) {
		if len(ticks) == MaxBackfillTicks {
			return nil, fmt.Errorf("backfill has more than %d ticks; use a shorter range", MaxBackfillTicks)
		}
		ticks = append(ticks, tick)
	}
	return ticks, nil
}

// TickInputs is a tick's portable_json input: the scheduled time and the
// schedule's context (its JSON value, or the stored text as a string when
// it is not JSON, such as a context another SDK pickled).
func TickInputs(s sysdb.Schedule, tick time.Time) (string, error) {
	ctxValue := json.RawMessage(s.Context)
	if s.Context == "" {
		ctxValue = json.RawMessage("null")
	} else if !json.Valid([]byte(s.Context)) {
		quoted, err := json.Marshal(s.Context)
		if err != nil {
			return "", err
		}
		ctxValue = quoted
	}
	raw, err := json.Marshal(map[string]any{
		"positionalArgs": []any{isoformat(tick), ctxValue},
		"namedArgs":      map[string]any{},
	})
	return string(raw), err
}

// TickInsertParams is the workflow row of one tick: ENQUEUED on the
// schedule's queue (the internal one by default), for version (the owner's
// latest; nil when none is registered), with TickInputs.
func TickInsertParams(s sysdb.Schedule, tick time.Time, workflowID, executorID, creatorXID string, version *string) (sysdb.WorkflowInsertParams, error) {
	inputs, err := TickInputs(s, tick)
	if err != nil {
		return sysdb.WorkflowInsertParams{}, err
	}
	queue := sysdb.InternalQueueName
	if s.QueueName != nil && *s.QueueName != "" {
		queue = *s.QueueName
	}
	name := s.Name
	serialization := "portable_json"
	return sysdb.WorkflowInsertParams{
		ID: workflowID, Name: s.WorkflowName, Status: sysdb.StatusEnqueued, CreatorXID: creatorXID,
		ClassName: s.WorkflowClassName, QueueName: &queue, ExecutorID: executorID,
		ApplicationVersion: version, ApplicationName: s.ApplicationName, ScheduleName: &name,
		Serialization: &serialization, Inputs: &inputs,
	}, nil
}

// IsTickIDTaken says a tick's insert found its id naming a workflow of
// another name or queue (the schedule was redefined after that tick fired):
// the tick counts as fired, as an id of the same workflow does.
func IsTickIDTaken(err error) bool {
	var conflict *sysdb.ConflictingWorkflowError
	return errors.As(err, &conflict)
}
