package sysdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

var _ QueueSystem = (*Postgres)(nil)

// ---------------------------------------------------------------------------
// Queue registrations

// QueueRegister implements QueueSystem. As the DBOS SDKs do it: a new name is
// inserted with the requester as owner; an existing one is overwritten only
// when asked, and then claimed if it was unclaimed; a name another
// application owns is refused either way.
func (p *Postgres) QueueRegister(ctx context.Context, in QueueRegisterParams) (QueueConfig, bool, error) {
	results, err := p.QueueRegisterMany(ctx, []QueueRegisterParams{in})
	if err != nil {
		return QueueConfig{}, false, err
	}
	return results[0].Stored, results[0].Created, nil
}

// QueueRegisterMany implements QueueSystem: every registration in one
// transaction, taken in name order so that two concurrent registrations of
// overlapping queues lock them in the same order.
func (p *Postgres) QueueRegisterMany(ctx context.Context, in []QueueRegisterParams) ([]QueueRegisterResult, error) {
	order, what, err := registrationOrder(in)
	if err != nil {
		return nil, err
	}
	results := make([]QueueRegisterResult, len(in))
	err = p.retry(ctx, what, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			for _, i := range order {
				stored, created, err := p.registerQueueTx(ctx, tx, in[i])
				if err != nil {
					return err
				}
				results[i] = QueueRegisterResult{Stored: stored, Created: created}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// registerQueueTx is one registration inside a transaction.
func (p *Postgres) registerQueueTx(ctx context.Context, tx pgx.Tx, in QueueRegisterParams) (QueueConfig, bool, error) {
	c := in.Config
	polling := c.PollingIntervalSec
	if polling <= 0 {
		polling = DefaultPollingIntervalSec
	}
	var current *string
	err := tx.QueryRow(ctx, p.sql("QueueOwnerLock"), c.Name).Scan(&current)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return QueueConfig{}, false, err
	}
	if exists {
		if err := ownedElsewhere("queue", c.Name, current, c.ApplicationName); err != nil {
			return QueueConfig{}, false, &nonRetryable{err}
		}
	}
	owner := resolveOwner(current, c.ApplicationName)
	args := []any{c.Name, c.Concurrency, c.WorkerConcurrency, c.RateLimitMax, c.RateLimitPeriodSec,
		c.PriorityEnabled, c.PartitionQueue, polling, owner,
		c.PartitionConcurrency, c.PartitionWorkerConcurrency, c.PartitionRateLimitMax, c.PartitionRateLimitPeriodSec}
	created := false
	if !exists {
		rows, err := tx.Query(ctx, p.sql("QueueInsert"), args...)
		if err != nil {
			return QueueConfig{}, false, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return QueueConfig{}, false, err
		}
		created = len(ids) == 1
	}
	if !created && in.UpdateExisting {
		if _, err := tx.Exec(ctx, p.sql("QueueUpdate"), args...); err != nil {
			return QueueConfig{}, false, err
		}
	}
	stored, err := scanQueue(tx.QueryRow(ctx, p.sql("QueueGet"), c.Name))
	if err != nil {
		return QueueConfig{}, false, err
	}
	// A registration that lost an insert race to another application
	// learns it here.
	if !created {
		if err := ownedElsewhere("queue", c.Name, stored.ApplicationName, c.ApplicationName); err != nil {
			return QueueConfig{}, false, &nonRetryable{err}
		}
	}
	return stored, created, nil
}

// QueueGet implements QueueSystem.
func (p *Postgres) QueueGet(ctx context.Context, name string) (QueueConfig, error) {
	var q QueueConfig
	err := p.retry(ctx, "get queue "+name, func(ctx context.Context) error {
		var err error
		q, err = scanQueue(p.pool.QueryRow(ctx, p.sql("QueueGet"), name))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return QueueConfig{}, &QueueNotFoundError{Name: name}
	}
	return q, err
}

func scanQueue(row pgx.Row) (QueueConfig, error) {
	var q QueueConfig
	var concurrency, workerConcurrency, rateMax, partConcurrency, partWorker, partRateMax *int32
	err := row.Scan(&q.ID, &q.Name, &concurrency, &workerConcurrency, &rateMax, &q.RateLimitPeriodSec,
		&q.PriorityEnabled, &q.PartitionQueue, &q.PollingIntervalSec,
		&partConcurrency, &partWorker, &partRateMax, &q.PartitionRateLimitPeriodSec,
		&q.ApplicationName, &q.CreatedAt, &q.UpdatedAt)
	q.Concurrency, q.WorkerConcurrency, q.RateLimitMax = intPtr(concurrency), intPtr(workerConcurrency), intPtr(rateMax)
	q.PartitionConcurrency, q.PartitionWorkerConcurrency, q.PartitionRateLimitMax = intPtr(partConcurrency), intPtr(partWorker), intPtr(partRateMax)
	return q, err
}

// QueueDelete implements QueueSystem. Unlike the SDKs, which ignore it,
// deleting a name that is not registered is a QueueNotFoundError, so that an
// operator's typo is not reported as done.
func (p *Postgres) QueueDelete(ctx context.Context, name string) error {
	return p.execTouching(ctx, "delete queue "+name, &QueueNotFoundError{Name: name}, p.sql("QueueDelete"), name)
}

// QueuePartitions implements QueueSystem.
func (p *Postgres) QueuePartitions(ctx context.Context, queue string) ([]string, error) {
	return p.collectIDs(ctx, "list partitions of queue "+queue, p.sql("QueuePartitions"), queue)
}

// ---------------------------------------------------------------------------
// Deduplication, delays, debounce and timeouts

// WorkflowByDeduplicationID implements QueueSystem.
func (p *Postgres) WorkflowByDeduplicationID(ctx context.Context, queue, deduplicationID string) (string, bool, error) {
	ids, err := p.collectIDs(ctx, "find deduplicated workflow", p.sql("WorkflowByDeduplicationID"), queue, deduplicationID)
	if err != nil || len(ids) == 0 {
		return "", false, err
	}
	return ids[0], true, nil
}

// WorkflowReleaseDelayed implements QueueSystem.
func (p *Postgres) WorkflowReleaseDelayed(ctx context.Context, applicationName *string) ([]QueuedWorkflow, error) {
	var out []QueuedWorkflow
	err := p.retry(ctx, "release delayed workflows", func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, p.sql("WorkflowReleaseDelayed"), applicationName)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueuedWorkflow, error) {
			var w QueuedWorkflow
			err := r.Scan(&w.WorkflowID, &w.QueueName, &w.ApplicationVersion)
			return w, err
		})
		return err
	})
	// One add for the statement, so each queue is announced once.
	queues := make([]string, 0, len(out))
	for _, w := range out {
		if w.QueueName != "" {
			queues = append(queues, w.QueueName)
		}
	}
	p.notes.add(ChannelQueue, queues...)
	return out, err
}

// WorkflowSetDelay implements QueueSystem. A workflow that is not DELAYED
// (any more) is a NotDelayedError, a missing one a NotFoundError.
func (p *Postgres) WorkflowSetDelay(ctx context.Context, workflowID string, delayUntilEpochMS int64) error {
	if delayUntilEpochMS < 0 {
		return fmt.Errorf("set delay of workflow %s: the release time must not be negative", workflowID)
	}
	var updated int64
	var status *string
	err := p.retry(ctx, "set delay of workflow "+workflowID, func(ctx context.Context) error {
		tag, err := p.pool.Exec(ctx, p.sql("WorkflowSetDelay"), workflowID, delayUntilEpochMS)
		if err != nil {
			return err
		}
		if updated = tag.RowsAffected(); updated > 0 {
			return nil
		}
		return p.pool.QueryRow(ctx, p.sql("WorkflowStatusOf"), workflowID).Scan(&status)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &NotFoundError{WorkflowID: workflowID}
	case err != nil:
		return err
	case updated == 0:
		return &NotDelayedError{WorkflowID: workflowID, Status: deref(status)}
	}
	return nil
}

// WorkflowSetPriority implements QueueSystem.
func (p *Postgres) WorkflowSetPriority(ctx context.Context, workflowID string, priority int) (bool, error) {
	var updated int64
	err := p.retry(ctx, "set priority of workflow "+workflowID, func(ctx context.Context) error {
		tag, err := p.pool.Exec(ctx, p.sql("WorkflowSetPriority"), workflowID, priority)
		if err != nil {
			return err
		}
		updated = tag.RowsAffected()
		return nil
	})
	return updated > 0, err
}

// WorkflowCancelTimedOut implements QueueSystem. A limit of 0 or less means
// no limit.
func (p *Postgres) WorkflowCancelTimedOut(ctx context.Context, limit int, applicationName *string) ([]string, error) {
	var bound *int64
	if limit > 0 {
		n := int64(limit)
		bound = &n
	}
	cancelled, err := p.collectIDs(ctx, "cancel timed-out workflows", p.sql("WorkflowCancelTimedOut"), bound, applicationName)
	p.notes.add(ChannelWorkflowStatus, cancelled...)
	return cancelled, err
}

// WorkflowDebounce implements QueueSystem: one transaction, so the bounce and
// its new inputs land together (with a caller, also its step and the child
// it creates).
func (p *Postgres) WorkflowDebounce(ctx context.Context, in WorkflowDebounceParams) (DebounceResult, error) {
	if c := in.Caller; c != nil {
		if err := checkCaller(c); err != nil {
			return DebounceResult{}, fmt.Errorf("debounce workflow %s: caller: %w", in.Name, err)
		}
		if in.Create == nil {
			return DebounceResult{}, fmt.Errorf("debounce workflow %s: a caller needs the workflow to create", in.Name)
		}
	}
	var res DebounceResult
	err := p.retry(ctx, "debounce workflow "+in.Name, func(ctx context.Context) error {
		res = DebounceResult{}
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if in.Caller == nil {
				return p.debounceTx(ctx, tx, in, &res)
			}
			return p.debounceAsStep(ctx, tx, in, &res)
		})
	})
	if err != nil {
		return DebounceResult{}, err
	}
	return res, nil
}

// debounceTx bounces the pending debounce of the key, or reports its holder.
func (p *Postgres) debounceTx(ctx context.Context, tx pgx.Tx, in WorkflowDebounceParams, res *DebounceResult) error {
	var bounced string
	err := tx.QueryRow(ctx, p.sql("WorkflowDebounceBounce"), in.DelayUntilEpochMS, in.Serialization,
		in.Name, in.QueueName, in.DeduplicationID, in.ApplicationName).Scan(&bounced)
	if err == nil {
		res.BouncedID = &bounced
		_, err = tx.Exec(ctx, p.sql("WorkflowInputReplace"), bounced, in.Inputs)
		return err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	var holder string
	err = tx.QueryRow(ctx, p.sql("WorkflowDebounceHolder"), in.QueueName, in.DeduplicationID).
		Scan(&holder, &res.HolderIsDebounced, &res.HolderName, &res.HolderApplicationName)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the key is free: the caller starts a new debounced workflow
	}
	if err != nil {
		return err
	}
	res.HolderID = &holder
	return nil
}

// debounceStepOutput is DBOS's DebounceResult, as DBOS Python records it for
// an in-workflow bounce, in portable JSON.
type debounceStepOutput struct {
	BouncedWorkflowID     *string `json:"bounced_workflow_id"`
	HolderWorkflowID      *string `json:"holder_workflow_id"`
	HolderIsDebounced     bool    `json:"holder_is_debounced"`
	HolderWorkflowName    *string `json:"holder_workflow_name"`
	HolderApplicationName *string `json:"holder_application_name"`
}

// debounceAsStep is a debounce from workflow code: under the caller's lock,
// a step already recorded at the caller's id is the answer; else the bounce
// (or, the key being free, the insert of the caller's child at the next id)
// and the caller's step, all in tx.
func (p *Postgres) debounceAsStep(ctx context.Context, tx pgx.Tx, in WorkflowDebounceParams, res *DebounceResult) error {
	c := in.Caller
	var owner *string
	lockErr := tx.QueryRow(ctx, p.sql("WorkflowOwnerLock"), c.WorkflowID).Scan(&owner)
	if err := ownerError(*c, lockErr, owner); err != nil {
		return err
	}
	recorded, err := stepIn(ctx, tx, p.sql("StepGet"), c.WorkflowID, c.FunctionID)
	if err != nil {
		return err
	}
	if recorded != nil {
		return p.debounceReplay(ctx, tx, c, in.StepNameOr(), recorded, res)
	}
	if err := p.debounceTx(ctx, tx, in, res); err != nil {
		return err
	}
	if res.BouncedID == nil && res.HolderID == nil {
		create := *in.Create
		create.ParentWorkflowID = &c.WorkflowID
		create.ParentStep = &StepCaller{WorkflowID: c.WorkflowID, OwnerXID: c.OwnerXID, FunctionID: c.FunctionID + 1, ApplicationName: c.ApplicationName}
		var ins WorkflowInsertResult
		if err := p.sendInsert(ctx, tx, create, &ins); err != nil {
			return err
		}
		res.CreatedID = &create.ID
	}
	out := debounceStepOutput{BouncedWorkflowID: res.BouncedID, HolderWorkflowID: res.HolderID, HolderIsDebounced: res.HolderIsDebounced}
	if res.HolderID != nil {
		out.HolderWorkflowName, out.HolderApplicationName = &res.HolderName, res.HolderApplicationName
	}
	encoded, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, p.sql("DebounceStepRecord"), c.WorkflowID, c.FunctionID, in.StepNameOr(), string(encoded), PortableJSON, c.ApplicationName)
	return err
}

// debounceReplay answers a debounce whose step is recorded: what it
// records, and for a debounce that created its workflow, the child recorded
// at the next id.
func (p *Postgres) debounceReplay(ctx context.Context, tx pgx.Tx, c *StepCaller, stepName string, recorded *Step, res *DebounceResult) error {
	if recorded.Name != stepName {
		return &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: recorded.Name, Attempted: stepName}
	}
	var out debounceStepOutput
	if recorded.Output == nil || json.Unmarshal([]byte(*recorded.Output), &out) != nil {
		return fmt.Errorf("workflow %s step %d: the recorded %s is not a debounce result", c.WorkflowID, c.FunctionID, stepName)
	}
	*res = DebounceResult{BouncedID: out.BouncedWorkflowID, HolderID: out.HolderWorkflowID, HolderIsDebounced: out.HolderIsDebounced,
		HolderApplicationName: out.HolderApplicationName, Replayed: true}
	if out.HolderWorkflowName != nil {
		res.HolderName = *out.HolderWorkflowName
	}
	if res.BouncedID != nil || res.HolderID != nil {
		return nil
	}
	child, err := stepIn(ctx, tx, p.sql("StepGet"), c.WorkflowID, c.FunctionID+1)
	if err != nil {
		return err
	}
	if child == nil || child.ChildWorkflowID == nil {
		return fmt.Errorf("workflow %s step %d: the debounce found its key free but step %d records no child", c.WorkflowID, c.FunctionID, c.FunctionID+1)
	}
	res.CreatedID = child.ChildWorkflowID
	return nil
}

// stepIn reads one step in tx, nil when none is recorded there.
func stepIn(ctx context.Context, tx pgx.Tx, query, workflowID string, functionID int) (*Step, error) {
	var s Step
	var fid int32
	err := tx.QueryRow(ctx, query, workflowID, functionID).Scan(
		&fid, &s.Name, &s.Output, &s.Error, &s.Serialization, &s.ChildWorkflowID, &s.StartedAt, &s.CompletedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	s.FunctionID = int(fid)
	return &s, err
}

// ---------------------------------------------------------------------------
// Application versions

// VersionRegister implements QueueSystem, as the SDKs register a version at
// launch: an unclaimed row of that name is claimed in place (keeping its
// timestamp), else a new row is inserted; a name another application owns
// is a NameOwnedError.
func (p *Postgres) VersionRegister(ctx context.Context, name string, applicationName *string) error {
	if name == "" {
		return errors.New("register application version: a name is required")
	}
	err := p.retry(ctx, "register application version "+name, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			claimed := false
			if applicationName != nil {
				tag, err := tx.Exec(ctx, p.sql("VersionClaim"), name, applicationName)
				if err != nil {
					return err
				}
				claimed = tag.RowsAffected() > 0
			}
			if !claimed {
				if _, err := tx.Exec(ctx, p.sql("VersionInsert"), name, applicationName); err != nil {
					return err
				}
			}
			var owner *string
			if err := tx.QueryRow(ctx, p.sql("VersionOwner"), name).Scan(&owner); err != nil {
				return err
			}
			if err := ownedElsewhere("application version", name, owner, applicationName); err != nil {
				return &nonRetryable{err}
			}
			return nil
		})
	})
	return err
}

// VersionList implements QueueSystem.
func (p *Postgres) VersionList(ctx context.Context, applicationName *string) ([]AppVersion, error) {
	var out []AppVersion
	err := p.retry(ctx, "list application versions", func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, p.sql("VersionList"), applicationName)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppVersion, error) { return scanVersion(r) })
		return err
	})
	return out, err
}

func scanVersion(row pgx.Row) (AppVersion, error) {
	var v AppVersion
	err := row.Scan(&v.ID, &v.Name, &v.Timestamp, &v.CreatedAt, &v.ApplicationName)
	return v, err
}

// VersionPromote implements QueueSystem. A version nobody registered is a
// VersionNotFoundError (the SDKs ignore it silently); another application's
// is a NameOwnedError.
func (p *Postgres) VersionPromote(ctx context.Context, name string, applicationName *string) error {
	err := p.retry(ctx, "promote application version "+name, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			var current *string
			err := tx.QueryRow(ctx, p.sql("VersionOwnerLock"), name).Scan(&current)
			if errors.Is(err, pgx.ErrNoRows) {
				return &nonRetryable{&VersionNotFoundError{Name: name}}
			}
			if err != nil {
				return err
			}
			if err := ownedElsewhere("application version", name, current, applicationName); err != nil {
				return &nonRetryable{err}
			}
			_, err = tx.Exec(ctx, p.sql("VersionPromote"), name, applicationName, resolveOwner(current, applicationName))
			return err
		})
	})
	return err
}

// VersionLatest implements QueueSystem.
func (p *Postgres) VersionLatest(ctx context.Context, applicationName *string) (AppVersion, bool, error) {
	var v AppVersion
	err := p.retry(ctx, "get latest application version", func(ctx context.Context) error {
		var err error
		v, err = scanVersion(p.pool.QueryRow(ctx, p.sql("LatestApplicationVersion"), applicationName))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return AppVersion{}, false, nil
	}
	if err != nil {
		return AppVersion{}, false, err
	}
	return v, true, nil
}

// ---------------------------------------------------------------------------
// Schedules

// ScheduleCreate implements QueueSystem: a fresh uuid when s.ID is empty
// (the statement draws it), and the row newStoredSchedule makes.
func (p *Postgres) ScheduleCreate(ctx context.Context, s Schedule) error {
	row, err := newStoredSchedule(s)
	if err != nil {
		return err
	}
	err = p.retry(ctx, "create schedule "+s.Name, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, p.sql("ScheduleInsert"), s.ID, s.Name, s.WorkflowName, s.WorkflowClassName, s.Cron,
				row.status, row.context, row.lastFired, s.AutomaticBackfill, row.timezone, s.QueueName, s.ApplicationName)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if len(ids) == 1 {
				return nil
			}
			var owner *string
			if err := tx.QueryRow(ctx, p.sql("ScheduleOwner"), s.Name).Scan(&owner); err != nil {
				return err
			}
			if err := ownedElsewhere("schedule", s.Name, owner, s.ApplicationName); err != nil {
				return &nonRetryable{err}
			}
			return &nonRetryable{&ScheduleExistsError{Name: s.Name}}
		})
	})
	return err
}

// scheduleColumns are read for every schedule, in scanSchedule's order.
const scheduleColumns = `schedule_id, schedule_name, workflow_name, workflow_class_name, schedule, status, context,
	last_fired_at, automatic_backfill, NULLIF(cron_timezone, ''), queue_name, application_name`

func scanSchedule(row pgx.Row) (Schedule, error) {
	var s Schedule
	err := row.Scan(&s.ID, &s.Name, &s.WorkflowName, &s.WorkflowClassName, &s.Cron, &s.Status, &s.Context,
		&s.LastFiredAtRaw, &s.AutomaticBackfill, &s.CronTimezone, &s.QueueName, &s.ApplicationName)
	if err != nil {
		return Schedule{}, err
	}
	if s.LastFiredAtRaw != nil {
		if t, ok := ParseLastFiredAt(*s.LastFiredAtRaw); ok {
			s.LastFiredAt = &t
		}
	}
	return s, nil
}

// ScheduleGet implements QueueSystem.
func (p *Postgres) ScheduleGet(ctx context.Context, name string) (Schedule, error) {
	var s Schedule
	err := p.retry(ctx, "get schedule "+name, func(ctx context.Context) error {
		var err error
		s, err = scanSchedule(p.pool.QueryRow(ctx, "SELECT "+scheduleColumns+" FROM "+p.table("workflow_schedules")+" WHERE schedule_name = $1", name))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Schedule{}, &ScheduleNotFoundError{Name: name}
	}
	return s, err
}

// ScheduleList implements QueueSystem.
func (p *Postgres) ScheduleList(ctx context.Context, in ScheduleListParams) ([]Schedule, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(in.Statuses) > 0 {
		where = append(where, "status = ANY("+arg(in.Statuses)+")")
	}
	if len(in.WorkflowNames) > 0 {
		where = append(where, "workflow_name = ANY("+arg(in.WorkflowNames)+")")
	}
	if in.NamePrefix != "" {
		where = append(where, "schedule_name LIKE "+arg(escapeLike(in.NamePrefix)+"%"))
	}
	if in.ApplicationName != nil {
		where = append(where, "(application_name = "+arg(*in.ApplicationName)+" OR application_name IS NULL)")
	}
	if len(in.ApplicationNames) > 0 {
		where = append(where, "(application_name = ANY("+arg(in.ApplicationNames)+") OR application_name IS NULL)")
	}
	query := "SELECT " + scheduleColumns + " FROM " + p.table("workflow_schedules")
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += ` ORDER BY schedule_name COLLATE "C"`
	var out []Schedule
	err := p.retry(ctx, "list schedules", func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) { return scanSchedule(r) })
		return err
	})
	return out, err
}

// ScheduleSetStatus implements QueueSystem. Unlike the Go SDK's pause and
// resume, it leaves last_fired_at alone (as Python does), so automatic
// backfill still knows where the schedule stopped.
func (p *Postgres) ScheduleSetStatus(ctx context.Context, name, status string) error {
	if status != ScheduleActive && status != SchedulePaused {
		return fmt.Errorf("set status of schedule %s: status must be ACTIVE or PAUSED, not %q", name, status)
	}
	return p.scheduleExec(ctx, "set status of schedule "+name, name, p.sql("ScheduleSetStatus"), name, status)
}

// ScheduleDelete implements QueueSystem. A missing schedule is a
// ScheduleNotFoundError.
func (p *Postgres) ScheduleDelete(ctx context.Context, name string) error {
	return p.scheduleExec(ctx, "delete schedule "+name, name, p.sql("ScheduleDelete"), name)
}

// scheduleExec runs a statement on one schedule and reports a
// ScheduleNotFoundError when it touched nothing.
func (p *Postgres) scheduleExec(ctx context.Context, what, name, query string, args ...any) error {
	return p.execTouching(ctx, what, &ScheduleNotFoundError{Name: name}, query, args...)
}

// execTouching runs a statement and returns notFound when it touched no row.
func (p *Postgres) execTouching(ctx context.Context, what string, notFound error, query string, args ...any) error {
	var affected int64
	err := p.retry(ctx, what, func(ctx context.Context) error {
		tag, err := p.pool.Exec(ctx, query, args...)
		affected = tag.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	if affected == 0 {
		return notFound
	}
	return nil
}

// ScheduleSetLastFired implements QueueSystem. The stored value is text
// that any SDK may have written in its own ISO 8601 flavour, so it is
// compared as an instant in Go under a row lock, not as text in SQL; a value
// that cannot be parsed is replaced.
func (p *Postgres) ScheduleSetLastFired(ctx context.Context, name string, firedAt time.Time) error {
	text := FormatLastFiredAt(firedAt)
	err := p.retry(ctx, "record last tick of schedule "+name, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			var stored *string
			err := tx.QueryRow(ctx, p.sql("ScheduleLastFiredLock"), name).Scan(&stored)
			if errors.Is(err, pgx.ErrNoRows) {
				return &nonRetryable{&ScheduleNotFoundError{Name: name}}
			}
			if err != nil {
				return err
			}
			if stored != nil {
				if prev, ok := ParseLastFiredAt(*stored); ok && !firedAt.After(prev) {
					return nil // an agent that fired a later tick got here first
				}
			}
			_, err = tx.Exec(ctx, p.sql("ScheduleSetLastFired"), name, text)
			return err
		})
	})
	return err
}

// ---------------------------------------------------------------------------
// Helpers

// ownedElsewhere is the SDKs' ownership rule for queue, schedule and version
// names: a name owned by one application is refused to another; an
// unclaimed name, or a requester acting for no application, is no conflict.
func ownedElsewhere(kind, name string, current, requester *string) error {
	if current == nil || requester == nil || *current == *requester {
		return nil
	}
	return &NameOwnedError{Kind: kind, Name: name, Owner: *current, Requester: *requester}
}

// resolveOwner is the owner to write: the current one if the row has one,
// else the requester (claiming an unclaimed row).
func resolveOwner(current, requester *string) *string {
	if current != nil {
		return current
	}
	return requester
}
