package sysdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Schedule statuses.
const (
	ScheduleActive = "ACTIVE"
	SchedulePaused = "PAUSED"
)

// DefaultPollingIntervalSec is the polling interval the DBOS SDKs store for a
// queue registered without one (the column's default too).
const DefaultPollingIntervalSec = 1.0

// QueueSystem is the queue, schedule and application-version part of the
// system database (issue 5). It is part of SystemDatabase.
type QueueSystem interface {
	// QueueRegister stores a queue's configuration in the queues table. A
	// new name is inserted; an existing one is updated only when
	// p.UpdateExisting is set. A queue owned by another application is a
	// NameOwnedError. It returns the stored row and whether it was created.
	QueueRegister(ctx context.Context, p QueueRegisterParams) (QueueConfig, bool, error)
	// QueueRegisterMany registers several queues as QueueRegister does,
	// all or none: one refused (a NameOwnedError) leaves every other as it
	// was. Results are in the order of p.
	QueueRegisterMany(ctx context.Context, p []QueueRegisterParams) ([]QueueRegisterResult, error)
	// QueueGet returns a registered queue or a QueueNotFoundError.
	QueueGet(ctx context.Context, name string) (QueueConfig, error)
	// QueueDelete removes a queue's registration (its workflows stay).
	QueueDelete(ctx context.Context, name string) error
	// QueuePartitions lists the partition keys that have ENQUEUED work.
	QueuePartitions(ctx context.Context, queue string) ([]string, error)

	// WorkflowByDeduplicationID returns the active workflow holding a
	// deduplication id on a queue (for the "return existing" policy).
	WorkflowByDeduplicationID(ctx context.Context, queue, deduplicationID string) (string, bool, error)
	// WorkflowReleaseDelayed moves DELAYED workflows whose delay has passed
	// (on the database clock) to ENQUEUED, clearing the deduplication id of
	// debounced ones, and returns them.
	WorkflowReleaseDelayed(ctx context.Context, applicationName *string) ([]QueuedWorkflow, error)
	// WorkflowSetPriority changes the priority of a workflow that waits on
	// its queue (ENQUEUED or DELAYED) and says whether it did: a workflow
	// that does not exist or no longer waits is left alone, as DBOS leaves it.
	WorkflowSetPriority(ctx context.Context, workflowID string, priority int) (bool, error)
	// WorkflowSetDelay changes a DELAYED workflow's release time.
	WorkflowSetDelay(ctx context.Context, workflowID string, delayUntilEpochMS int64) error
	// WorkflowCancelTimedOut cancels up to limit active workflows whose
	// deadline passed (database clock), oldest deadline first, and returns
	// their ids.
	WorkflowCancelTimedOut(ctx context.Context, limit int, applicationName *string) ([]string, error)
	// WorkflowDebounce pushes back an existing debounced DELAYED workflow
	// of (name, queue, deduplication id) to p.DelayUntilEpochMS (capped by
	// its debounce deadline) and replaces its inputs; when there is none it
	// reports the current holder of the deduplication id, if any.
	WorkflowDebounce(ctx context.Context, p WorkflowDebounceParams) (DebounceResult, error)

	// VersionRegister records an application version (idempotent); a new
	// version becomes the latest.
	VersionRegister(ctx context.Context, name string, applicationName *string) error
	// VersionList lists versions, newest timestamp first: an application's
	// and unclaimed ones (all when applicationName is nil).
	VersionList(ctx context.Context, applicationName *string) ([]AppVersion, error)
	// VersionPromote makes a version the latest (its timestamp becomes now
	// on the database clock): rolling forward or back.
	VersionPromote(ctx context.Context, name string, applicationName *string) error
	// VersionLatest returns the latest version, false when none is
	// registered.
	VersionLatest(ctx context.Context, applicationName *string) (AppVersion, bool, error)

	// ScheduleCreate stores a new schedule; a taken name is a
	// ScheduleExistsError.
	ScheduleCreate(ctx context.Context, s Schedule) error
	// ScheduleGet returns a schedule or a ScheduleNotFoundError.
	ScheduleGet(ctx context.Context, name string) (Schedule, error)
	// ScheduleList lists schedules by name.
	ScheduleList(ctx context.Context, p ScheduleListParams) ([]Schedule, error)
	// ScheduleSetStatus pauses (PAUSED) or resumes (ACTIVE) a schedule.
	ScheduleSetStatus(ctx context.Context, name, status string) error
	// ScheduleDelete removes a schedule.
	ScheduleDelete(ctx context.Context, name string) error
	// ScheduleSetLastFired records the latest tick fired; it never moves
	// last_fired_at backwards.
	ScheduleSetLastFired(ctx context.Context, name string, firedAt time.Time) error

	// ApplicationRename gives p.NewName the rows p.OldName owns, the
	// unclaimed ones (p.AdoptUnclaimed), or both, in the five owned tables
	// (DBOS's rename_application). Queues, schedules, versions and active
	// workflows move in one transaction; terminal workflows and steps move
	// after it, p.BatchSize workflows at a time. It is idempotent, so a
	// re-run resumes an interrupted one.
	ApplicationRename(ctx context.Context, p ApplicationRenameParams) (ApplicationRowCounts, error)
}

// ApplicationRenameParams names the rows ApplicationRename moves. The caller
// checks the names (at least one source; NewName differs from OldName).
type ApplicationRenameParams struct {
	OldName        *string // nil: no application's rows, only unclaimed ones
	NewName        string
	AdoptUnclaimed bool
	// BatchSize bounds the terminal workflows (and their steps' workflows)
	// one transaction moves; 0 moves them all in one.
	BatchSize int
}

// ApplicationRowCounts is how many rows a rename moved, by table.
type ApplicationRowCounts struct {
	Queues, Schedules, Versions, Workflows, Steps int64
}

// QueueConfig is one row of the queues table.
type QueueConfig struct {
	// ID is the row's queue_id (a uuid), set by QueueRegister.
	ID                          string
	Name                        string
	Concurrency                 *int
	WorkerConcurrency           *int
	RateLimitMax                *int
	RateLimitPeriodSec          *float64
	PriorityEnabled             bool
	PartitionQueue              bool
	PollingIntervalSec          float64 // 0 = DefaultPollingIntervalSec
	PartitionConcurrency        *int
	PartitionWorkerConcurrency  *int
	PartitionRateLimitMax       *int
	PartitionRateLimitPeriodSec *float64
	ApplicationName             *string
	// CreatedAt and UpdatedAt are set by the database (epoch ms).
	CreatedAt int64
	UpdatedAt int64
}

// LegacyPartitioned is a queue flagged partitioned without partition limits:
// as the DBOS SDKs do, its queue-wide limits then apply to each partition.
func (q QueueConfig) LegacyPartitioned() bool {
	return q.PartitionQueue && q.PartitionConcurrency == nil && q.PartitionWorkerConcurrency == nil && q.PartitionRateLimitMax == nil
}

// Partitioned says the queue is dequeued one partition at a time.
func (q QueueConfig) Partitioned() bool {
	return q.PartitionQueue || q.PartitionConcurrency != nil || q.PartitionWorkerConcurrency != nil || q.PartitionRateLimitMax != nil
}

// Limits resolves the configuration into dequeue limits (LocalRunning and
// PartitionLocalRunning are the caller's to fill).
func (q QueueConfig) Limits() QueueLimits {
	period := func(sec *float64) time.Duration {
		if sec == nil {
			return 0
		}
		return time.Duration(*sec * float64(time.Second))
	}
	if q.LegacyPartitioned() {
		return QueueLimits{
			PartitionConcurrency:       q.Concurrency,
			PartitionWorkerConcurrency: q.WorkerConcurrency,
			PartitionRateLimitMax:      q.RateLimitMax,
			PartitionRateLimitPeriod:   period(q.RateLimitPeriodSec),
		}
	}
	return QueueLimits{
		GlobalConcurrency:          q.Concurrency,
		WorkerConcurrency:          q.WorkerConcurrency,
		RateLimitMax:               q.RateLimitMax,
		RateLimitPeriod:            period(q.RateLimitPeriodSec),
		PartitionConcurrency:       q.PartitionConcurrency,
		PartitionWorkerConcurrency: q.PartitionWorkerConcurrency,
		PartitionRateLimitMax:      q.PartitionRateLimitMax,
		PartitionRateLimitPeriod:   period(q.PartitionRateLimitPeriodSec),
	}
}

// QueueRegisterParams registers a queue.
type QueueRegisterParams struct {
	Config         QueueConfig
	UpdateExisting bool
}

// QueueRegisterResult is one registration's stored row and whether it was
// created.
type QueueRegisterResult struct {
	Stored  QueueConfig
	Created bool
}

// QueuedWorkflow names a workflow that became available on a queue.
type QueuedWorkflow struct {
	WorkflowID         string
	QueueName          string
	ApplicationVersion *string
}

// WorkflowDebounceParams identifies a debounced workflow and its new delay
// and inputs.
type WorkflowDebounceParams struct {
	Name              string
	QueueName         string
	DeduplicationID   string
	DelayUntilEpochMS int64
	Inputs            *string
	Serialization     *string
	ApplicationName   *string
	// Caller, for a debounce from workflow code, makes the debounce the
	// caller's step Caller.FunctionID, recorded as DBOS records it
	// (DebounceStepName, the DebounceResult in portable JSON) in the
	// bounce's transaction, while Caller.OwnerXID owns the caller (else
	// FencedError). A step already recorded there is the answer (Replayed):
	// nothing is bounced again. With a Caller, Create is required.
	Caller *StepCaller
	// StepName is the name the caller's step is recorded (and replayed)
	// under: DebounceStepName (DBOS Python's) when empty; DBOS TypeScript's
	// is "DBOS.debounceDelayedWorkflow".
	StepName string
	// Create is the workflow inserted, in the same transaction, when the key
	// is free: the caller's child, recorded at Caller.FunctionID+1 as a
	// child start (DBOS enqueues it as the next step). Its ParentStep and
	// ParentWorkflowID are set here. A key taken meanwhile is a
	// DeduplicatedError and nothing is written.
	Create *WorkflowInsertParams
}

// DebounceStepName is the step DBOS records for a debounce from workflow
// code.
const DebounceStepName = "DBOS.debounce_delayed_workflow"

// StepNameOr is the debounce's step name: p.StepName, else DebounceStepName.
func (p WorkflowDebounceParams) StepNameOr() string {
	if p.StepName != "" {
		return p.StepName
	}
	return DebounceStepName
}

// DebounceResult says what a debounce did.
type DebounceResult struct {
	// BouncedID is the workflow whose delay was pushed back, nil if none.
	BouncedID *string
	// When nothing was bounced: the active holder of the deduplication id,
	// if any (nil means the caller starts a new debounced workflow).
	HolderID              *string
	HolderIsDebounced     bool
	HolderName            string
	HolderApplicationName *string
	// CreatedID is the workflow Create inserted (or, Replayed, the child
	// recorded after the caller's step), nil if none.
	CreatedID *string
	// Replayed: the caller's step was already recorded; the result is what
	// it records.
	Replayed bool
}

// AppVersion is one row of application_versions.
type AppVersion struct {
	ID              string
	Name            string
	Timestamp       int64
	CreatedAt       int64
	ApplicationName *string
}

// Schedule is one row of workflow_schedules.
type Schedule struct {
	ID                string
	Name              string
	WorkflowName      string
	WorkflowClassName *string
	Cron              string
	Status            string
	// Context is the JSON text handed to every tick (NOT NULL; "null" for
	// none).
	Context string
	// LastFiredAt is the latest tick fired, nil when none was or when the
	// stored text (LastFiredAtRaw, written by any SDK) is not ISO 8601.
	LastFiredAt       *time.Time
	LastFiredAtRaw    *string
	AutomaticBackfill bool
	// CronTimezone is an IANA zone name; nil means UTC.
	CronTimezone *string
	// QueueName nil means the internal queue.
	QueueName       *string
	ApplicationName *string
}

// ScheduleListParams filters schedules; zero values do not filter.
type ScheduleListParams struct {
	Statuses        []string
	WorkflowNames   []string
	NamePrefix      string
	ApplicationName *string // mine or unclaimed
	// ApplicationNames, when set, matches the rows any of these
	// applications owns and the unclaimed ones (DBOS's application_name
	// filter); it combines with ApplicationName.
	ApplicationNames []string
}

// QueueNotFoundError says no queue of that name is registered.
type QueueNotFoundError struct{ Name string }

func (e *QueueNotFoundError) Error() string { return fmt.Sprintf("queue %s is not registered", e.Name) }

// ScheduleNotFoundError says no schedule has that name.
type ScheduleNotFoundError struct{ Name string }

func (e *ScheduleNotFoundError) Error() string {
	return fmt.Sprintf("schedule %s does not exist", e.Name)
}

// VersionNotFoundError says no application version has that name.
type VersionNotFoundError struct{ Name string }

func (e *VersionNotFoundError) Error() string {
	return fmt.Sprintf("application version %s is not registered", e.Name)
}

// NotDelayedError says a workflow's delay cannot change: it is not DELAYED
// (any more).
type NotDelayedError struct{ WorkflowID, Status string }

func (e *NotDelayedError) Error() string {
	return fmt.Sprintf("workflow %s is %s, not DELAYED", e.WorkflowID, e.Status)
}

// ScheduleExistsError says a schedule name is taken.
type ScheduleExistsError struct{ Name string }

func (e *ScheduleExistsError) Error() string {
	return fmt.Sprintf("schedule %s already exists", e.Name)
}

// NameOwnedError says a queue, schedule or version name belongs to another
// application.
type NameOwnedError struct {
	Kind, Name, Owner, Requester string
}

func (e *NameOwnedError) Error() string {
	return fmt.Sprintf("%s %s belongs to application %s, not %s", e.Kind, e.Name, e.Owner, e.Requester)
}

// FormatLastFiredAt renders an instant for workflow_schedules.last_fired_at
// as Python's datetime.isoformat() does for an aware datetime, in t's own
// zone ("2025-01-02T03:04:05+00:00" for UTC, "2025-01-01T22:04:05-05:00"
// for a tick in New York, with ".ffffff" only when there are microseconds):
// DBOS Python records a tick in its schedule's time zone. Python 3.10's
// fromisoformat, which the Python SDK reads the column with, takes nothing
// else (no "Z", no nanoseconds); the Go SDK parses it as RFC 3339.
func FormatLastFiredAt(t time.Time) string {
	t = t.Truncate(time.Microsecond)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05-07:00")
	}
	return t.Format("2006-01-02T15:04:05.000000-07:00")
}

// lastFiredLayouts are the ISO 8601 forms the SDKs write: RFC 3339 with any
// fraction and "Z" or an offset (Go, Python), and the same without a zone
// or with a space for the "T", taken as UTC.
var lastFiredLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999",
}

// ParseLastFiredAt reads workflow_schedules.last_fired_at as any SDK wrote
// it.
func ParseLastFiredAt(text string) (time.Time, bool) {
	text = strings.TrimSpace(text)
	for _, layout := range lastFiredLayouts {
		if t, err := time.Parse(layout, text); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// storedSchedule is a Schedule as every backend writes it, so that every
// SDK reads it: validated, ACTIVE by default, context "null" when empty,
// last_fired_at in DBOS's text form, and no time zone as the empty string
// (the Go SDK scans cron_timezone into a plain string and fails on NULL;
// Python treats "" as UTC).
type storedSchedule struct {
	status, context, timezone string
	lastFired                 *string
}

func newStoredSchedule(s Schedule) (storedSchedule, error) {
	switch {
	case s.Name == "":
		return storedSchedule{}, errors.New("create schedule: a name is required")
	case s.WorkflowName == "":
		return storedSchedule{}, fmt.Errorf("create schedule %s: a workflow name is required", s.Name)
	case s.Cron == "":
		return storedSchedule{}, fmt.Errorf("create schedule %s: a cron expression is required", s.Name)
	}
	out := storedSchedule{status: s.Status, context: s.Context, timezone: deref(s.CronTimezone)}
	if out.status == "" {
		out.status = ScheduleActive
	}
	if out.status != ScheduleActive && out.status != SchedulePaused {
		return storedSchedule{}, fmt.Errorf("create schedule %s: status must be ACTIVE or PAUSED, not %q", s.Name, out.status)
	}
	if strings.TrimSpace(out.context) == "" {
		out.context = "null"
	}
	if s.LastFiredAt != nil {
		text := FormatLastFiredAt(*s.LastFiredAt)
		out.lastFired = &text
	}
	return out, nil
}

// unbounded is a claim limit that bounds nothing.
const unbounded = -1

// lowerBound is limit bounded by n (negative n counts as 0).
func lowerBound(limit, n int) int {
	n = maxInt(n, 0)
	if limit == unbounded || n < limit {
		return n
	}
	return limit
}

// localClaimLimit is how many rows a dequeue may claim by the limits the
// claimer knows without reading the database (its worker concurrencies
// against what it runs, MaxClaim), or unbounded. Partition limits without
// a partition key are an error.
func localClaimLimit(in QueueDequeueParams) (int, error) {
	lim := in.Limits
	partitionLimits := lim.PartitionConcurrency != nil || lim.PartitionWorkerConcurrency != nil || lim.PartitionRateLimitMax != nil
	if partitionLimits && in.PartitionKey == "" {
		return 0, fmt.Errorf("dequeue from queue %s: partition limits need a partition key", in.QueueName)
	}
	limit := unbounded
	if lim.WorkerConcurrency != nil {
		limit = lowerBound(limit, *lim.WorkerConcurrency-lim.LocalRunning)
	}
	if lim.PartitionWorkerConcurrency != nil {
		limit = lowerBound(limit, *lim.PartitionWorkerConcurrency-lim.PartitionLocalRunning)
	}
	if in.MaxClaim > 0 {
		limit = lowerBound(limit, in.MaxClaim)
	}
	return limit, nil
}

// sharedClaimLimit bounds limit (localClaimLimit's) by the limits every
// executor of the queue shares, counted in the claim's transaction: the
// rate limits (recentStarts counts the workflows started within period, in
// a partition or, for "", the whole queue) and the global concurrencies
// (running counts PENDING ones). A count that cannot change a zero is not
// taken.
func sharedClaimLimit(in QueueDequeueParams, limit int,
	recentStarts func(period time.Duration, partition string) (int, error), running func(partition string) (int, error)) (int, error) {
	lim := in.Limits
	for _, c := range []struct {
		max       *int
		period    time.Duration
		partition string
		rate      bool
	}{
		{lim.RateLimitMax, lim.RateLimitPeriod, "", true},
		{lim.PartitionRateLimitMax, lim.PartitionRateLimitPeriod, in.PartitionKey, true},
		{lim.GlobalConcurrency, 0, "", false},
		{lim.PartitionConcurrency, 0, in.PartitionKey, false},
	} {
		if c.max == nil || limit == 0 {
			continue
		}
		var n int
		var err error
		if c.rate {
			n, err = recentStarts(c.period, c.partition)
		} else {
			n, err = running(c.partition)
		}
		if err != nil {
			return 0, err
		}
		limit = lowerBound(limit, *c.max-n)
	}
	return limit, nil
}

// registrationOrder is the order a QueueRegisterMany writes its
// registrations in: by name, so that two concurrent registrations of
// overlapping queues take their locks in the same order. It also names the
// operation, and fails on a registration without a name.
func registrationOrder(in []QueueRegisterParams) (order []int, what string, err error) {
	order = make([]int, len(in))
	for i, r := range in {
		if r.Config.Name == "" {
			return nil, "", errors.New("register queue: a name is required")
		}
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return in[order[a]].Config.Name < in[order[b]].Config.Name })
	what = "register queues"
	if len(in) == 1 {
		what = "register queue " + in[0].Config.Name
	}
	return order, what, nil
}
