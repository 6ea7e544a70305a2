package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The validation of what a peer registers. The rules live here, beside the
// messages, rather than in the agent: they are part of the wire contract
// (PROTOCOL.md states them per field), every transport reaches the agent
// with the same decoded messages (the socket and the C library alike), and
// a Go client can check a message before it sends it. The agent validates a
// request whole before it writes anything.

// Bounds on registrations. Each is far above what a real application
// declares, and low enough that the agent answers any registration
// promptly and keeps it small.
const (
	// MaxNameBytes bounds the names of queues, applications, versions and
	// schedules, class names (the DBOS schema's class_name is a
	// varchar(255)), time zones and cron expressions.
	MaxNameBytes = 255
	// MaxFunctionNameBytes bounds workflow function names, which some SDKs
	// qualify with a module or package path.
	MaxFunctionNameBytes = 1024
	// MaxWorkflowsPerWorker bounds the workflow functions one worker
	// registers, in its hello and its register requests together: each is
	// kept for the session and matched by every dispatch.
	MaxWorkflowsPerWorker = 4096
	// MaxQueuesPerWorker bounds the queues one worker serves, hello and
	// its register and register_queues requests together: each is
	// registered in the database and
	// polled.
	MaxQueuesPerWorker = 1000
	// MaxLimit bounds every count (concurrency limits, rate-limit maxima,
	// max_concurrency, max_recovery_attempts): the DBOS schema stores the
	// limits as 32-bit integers.
	MaxLimit = math.MaxInt32
	// MinPeriodSec and MaxPeriodSec bound a rate limit's period. Starts are
	// counted in whole milliseconds, so a shorter period would limit
	// nothing; a year is longer than any limit means. MinPeriodSec also
	// bounds polling_interval_sec, which the SDKs poll at: shorter is a
	// busy loop.
	MinPeriodSec = 0.001
	MaxPeriodSec = 365 * 24 * 3600
	// MaxPollingIntervalSec bounds polling_interval_sec (a day).
	MaxPollingIntervalSec = 24 * 3600
	// MaxScheduleContextBytes bounds a schedule's context, which every
	// tick of it carries.
	MaxScheduleContextBytes = 64 << 10
	// MaxApplicationNames bounds the applications one listing names
	// (list_queues, list_schedules).
	MaxApplicationNames = 1000
	// MaxDeduplicationIDBytes bounds a deduplication id (start_workflow's,
	// and debounce_workflow's, given or formed from its name and key): the
	// id is indexed with its queue's name in a unique btree, whose entries
	// Postgres caps at 2704 bytes, so a much longer one fails in the
	// database instead of being refused.
	MaxDeduplicationIDBytes = 2048
	// MaxKeyBytes bounds what the agent stores as a key of the database's
	// indexes: workflow ids it creates (a start's, a fork's, a debounce's),
	// queue partition keys, message topics and idempotency keys, and event
	// and stream keys. Postgres refuses an index entry past about 2.7 kB, and
	// a workflow id is indexed with a topic or key beside it: two of these
	// fit in one entry.
	MaxKeyBytes = 1024
	// MinApplicationNameBytes is the shortest name rename_application
	// gives rows: DBOS launches no application under a shorter one.
	MinApplicationNameBytes = 3
)

// InternalQueueName is the queue of direct starts, which every worker
// serves and none may register.
const InternalQueueName = "_dbos_internal_queue"

// FieldError is a request field that breaks a rule. Path names the field
// from the op down, as in hello.queues[3].concurrency; the agent answers it
// with invalid_argument and the message "path: problem".
type FieldError struct {
	Path    string
	Problem string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Problem }

func fieldErr(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Problem: fmt.Sprintf(format, args...)}
}

// Validator is a message with rules beyond its types. op roots the paths
// of the errors (the same message serves several ops).
type Validator interface {
	Validate(op string) error
}

// Validate checks a hello: every field, every registration, the counts,
// and that only a worker registers. The agent's defaults (an empty role is
// a client, an empty app_version the agent's) are applied after it.
func (h *Hello) Validate(op string) error {
	if err := checkNames(op,
		name{"app_name", h.AppName, MaxNameBytes, false},
		name{"app_version", h.AppVersion, MaxNameBytes, false},
		name{"language", h.Language, MaxNameBytes, false},
		name{"binding_version", h.BindingVersion, MaxNameBytes, false},
	); err != nil {
		return err
	}
	if h.PID < 0 {
		return fieldErr(op+".pid", "must not be negative")
	}
	switch h.Role {
	case "", RoleClient:
		// A client takes no runs: a registration would be ignored, so it
		// is refused rather than dropped silently.
		switch {
		case len(h.Workflows) > 0:
			return fieldErr(op+".workflows", "only a worker registers workflows (role is client)")
		case len(h.Queues) > 0:
			return fieldErr(op+".queues", "only a worker serves queues (role is client)")
		case h.MaxConcurrency != 0:
			return fieldErr(op+".max_concurrency", "only a worker takes runs (role is client)")
		}
	case RoleWorker:
	default:
		return fieldErr(op+".role", "must be %q or %q", RoleWorker, RoleClient)
	}
	if err := checkCount(op+".max_concurrency", h.MaxConcurrency, 0); err != nil {
		return err
	}
	switch h.WakeTimeFormat {
	case "", WakeTimeEpochSeconds, WakeTimeEpochMS:
	default:
		return fieldErr(op+".wake_time_format", "unknown wake time format: must be %q (DBOS Python's, the default) or %q (DBOS TypeScript's)",
			WakeTimeEpochSeconds, WakeTimeEpochMS)
	}
	return validateRegistrations(op, h.Workflows, h.Queues)
}

// validateRegistrations checks the workflows and queues of a hello or a
// register.
func validateRegistrations(op string, workflows []WorkflowRegistration, queues []QueueRegistration) error {
	if err := validateWorkflows(op+".workflows", workflows); err != nil {
		return err
	}
	return validateQueues(op+".queues", queues)
}

func validateWorkflows(path string, workflows []WorkflowRegistration) error {
	if len(workflows) > MaxWorkflowsPerWorker {
		return fieldErr(path, "%d registrations; a worker registers at most %d", len(workflows), MaxWorkflowsPerWorker)
	}
	return validateEach(path, workflows)
}

// registration is a WorkflowRegistration or a QueueRegistration: a name,
// once per request, and its own rules.
type registration interface {
	registeredName() string
	validate(path string) error
}

func (w *WorkflowRegistration) registeredName() string { return w.Name }
func (q *QueueRegistration) registeredName() string    { return q.Name }

// validateEach checks each registration of a list and that no name comes
// twice.
func validateEach[T any, R interface {
	*T
	registration
}](path string, regs []T) error {
	seen := make(map[string]int, len(regs))
	for i := range regs {
		r := R(&regs[i])
		p := fmt.Sprintf("%s[%d]", path, i)
		if err := r.validate(p); err != nil {
			return err
		}
		if j, dup := seen[r.registeredName()]; dup {
			return fieldErr(p+".name", "%q is registered twice ([%d])", r.registeredName(), j)
		}
		seen[r.registeredName()] = i
	}
	return nil
}

func (w *WorkflowRegistration) validate(path string) error {
	if err := checkNames(path,
		name{"name", w.Name, MaxFunctionNameBytes, true},
		name{"class_name", w.ClassName, MaxNameBytes, false},
	); err != nil {
		return err
	}
	return checkCount(path+".max_recovery_attempts", w.MaxRecoveryAttempts, 0)
}

// Validate checks the queues registered after a hello. That the worker
// stays within MaxQueuesPerWorker in all is the agent's to check.
func (r *RegisterQueues) Validate(op string) error {
	if len(r.Queues) == 0 {
		return fieldErr(op+".queues", "is required (at least one queue)")
	}
	if err := checkName(op+".application_name", r.ApplicationName, MaxNameBytes, false); err != nil {
		return err
	}
	return validateQueues(op+".queues", r.Queues)
}

// Validate checks the workflows and queues registered after a hello. That
// the worker stays within MaxWorkflowsPerWorker and MaxQueuesPerWorker in
// all is the agent's to check.
func (r *Register) Validate(op string) error {
	if len(r.Workflows) == 0 && len(r.Queues) == 0 {
		return fieldErr(op, "registers nothing (at least one workflow or queue)")
	}
	return validateRegistrations(op, r.Workflows, r.Queues)
}

func validateQueues(path string, queues []QueueRegistration) error {
	if len(queues) > MaxQueuesPerWorker {
		return fieldErr(path, "%d queues; a worker serves at most %d", len(queues), MaxQueuesPerWorker)
	}
	return validateEach(path, queues)
}

// validate applies the zero/absent rule of the queue options: an absent
// limit is no limit, and a present one must allow something, so 0 is
// refused (a queue that can never run anything is a mistake, not a
// setting), except worker_concurrency: 0 there is DBOS Python's way to
// pause dequeuing on the workers it applies to (DBOS accepts it, and its
// workers then take none of the queue's workflows) while other processes
// may still run them under their own. The bounds between the limits are
// DBOS Python's.
func (q *QueueRegistration) validate(path string) error {
	if err := checkName(path+".name", q.Name, MaxNameBytes, true); err != nil {
		return err
	}
	if q.Name == InternalQueueName {
		return fieldErr(path+".name", "%s is reserved: every worker serves it", InternalQueueName)
	}
	for _, l := range []struct {
		field string
		value *int
		min   int
	}{
		{"worker_concurrency", q.WorkerConcurrency, 0},
		{"concurrency", q.Concurrency, 1},
		{"rate_limit_max", q.RateLimitMax, 1},
		{"partition_concurrency", q.PartitionConcurrency, 1},
		{"partition_worker_concurrency", q.PartitionWorkerConcurrency, 1},
		{"partition_rate_limit_max", q.PartitionRateLimitMax, 1},
	} {
		if l.value == nil {
			continue
		}
		if err := checkCount(path+"."+l.field, *l.value, l.min); err != nil {
			return err
		}
	}
	if err := checkRateLimit(path, "rate_limit", q.RateLimitMax, q.RateLimitPeriodSec); err != nil {
		return err
	}
	if err := checkRateLimit(path, "partition_rate_limit", q.PartitionRateLimitMax, q.PartitionRateLimitPeriodSec); err != nil {
		return err
	}
	if p := q.PollingIntervalSec; p != 0 && !(p >= MinPeriodSec && p <= MaxPollingIntervalSec) { // NaN fails both
		return fieldErr(path+".polling_interval_sec", "must be a finite number of seconds from %g to %d (omit it for the default)", MinPeriodSec, MaxPollingIntervalSec)
	}
	for _, b := range []struct {
		small, large string
		s, l         *int
	}{
		{"worker_concurrency", "concurrency", q.WorkerConcurrency, q.Concurrency},
		{"partition_worker_concurrency", "partition_concurrency", q.PartitionWorkerConcurrency, q.PartitionConcurrency},
		{"partition_worker_concurrency", "worker_concurrency", q.PartitionWorkerConcurrency, q.WorkerConcurrency},
		{"partition_concurrency", "concurrency", q.PartitionConcurrency, q.Concurrency},
	} {
		if b.s != nil && b.l != nil && *b.s > *b.l {
			return fieldErr(path+"."+b.small, "%d is more than %s (%d)", *b.s, b.large, *b.l)
		}
	}
	return nil
}

// checkRateLimit checks a maximum and its period: both or neither, the
// period finite and within bounds.
func checkRateLimit(path, name string, maximum *int, period *float64) error {
	switch {
	case maximum == nil && period == nil:
		return nil
	case period == nil:
		return fieldErr(path+"."+name+"_period_sec", "is required with %s_max", name)
	case maximum == nil:
		return fieldErr(path+"."+name+"_max", "is required with %s_period_sec", name)
	}
	if p := *period; !(p >= MinPeriodSec && p <= MaxPeriodSec) { // NaN fails both
		return fieldErr(path+"."+name+"_period_sec", "must be a finite number of seconds from %g to %d", MinPeriodSec, MaxPeriodSec)
	}
	return nil
}

// Validate checks a schedule to create.
func (s *Schedule) Validate(op string) error {
	// The expression and the time zone are parsed by the agent, with the
	// parser the scheduler fires them with.
	if err := checkNames(op,
		name{"schedule_name", s.ScheduleName, MaxNameBytes, true},
		name{"workflow_name", s.WorkflowName, MaxFunctionNameBytes, true},
		name{"workflow_class_name", s.WorkflowClassName, MaxNameBytes, false},
		name{"schedule", s.Cron, MaxNameBytes, true},
		name{"cron_timezone", s.CronTimezone, MaxNameBytes, false},
		name{"queue_name", s.QueueName, MaxNameBytes, false},
		name{"application_name", s.ApplicationName, MaxNameBytes, false},
		name{"schedule_id", s.ScheduleID, MaxNameBytes, false},
	); err != nil {
		return err
	}
	switch s.Status {
	case "", "ACTIVE", "PAUSED":
	default:
		return fieldErr(op+".status", "must be ACTIVE or PAUSED")
	}
	if s.Context != "" {
		if len(s.Context) > MaxScheduleContextBytes {
			return fieldErr(op+".context", "%d bytes; at most %d", len(s.Context), MaxScheduleContextBytes)
		}
		// JSON text, whose value every tick gets, or any other text: a
		// context an SDK serialized its own way (DBOS Python pickles one
		// JSON cannot hold), which ticks get as a string.
		check := checkJSON
		if !json.Valid([]byte(s.Context)) {
			check = func(path, text string, _ bool) error { return checkText(path, text, false) }
		}
		if err := check(op+".context", s.Context, false); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a schedule's name, for the ops that name one.
func (s *ScheduleRef) Validate(op string) error {
	return checkName(op+".schedule_name", s.ScheduleName, MaxNameBytes, true)
}

// Validate checks a backfill's schedule and range.
func (b *BackfillSchedule) Validate(op string) error {
	if err := checkName(op+".schedule_name", b.ScheduleName, MaxNameBytes, true); err != nil {
		return err
	}
	if b.StartEpochMS < 0 {
		return fieldErr(op+".start_epoch_ms", "must not be negative")
	}
	if b.EndEpochMS <= b.StartEpochMS {
		return fieldErr(op+".end_epoch_ms", "must be after start_epoch_ms")
	}
	return nil
}

// Validate checks a version's name (promote_version).
func (v *VersionRef) Validate(op string) error {
	return checkNames(op,
		name{"version_name", v.VersionName, MaxNameBytes, true},
		name{"application_name", v.ApplicationName, MaxNameBytes, false},
	)
}

// Validate checks the applications a queue listing names.
func (l *ListQueues) Validate(op string) error {
	return checkApplicationNames(op+".application_name", l.ApplicationNames)
}

// Validate checks the applications a schedule listing names.
func (l *ListSchedules) Validate(op string) error {
	return checkApplicationNames(op+".application_name", l.ApplicationNames)
}

// Validate checks the owner a debounce names and the step name it records.
func (d *DebounceWorkflow) Validate(op string) error {
	if err := checkName(op+".application_name", d.ApplicationName, MaxNameBytes, false); err != nil {
		return err
	}
	return checkName(op+".step_name", d.StepName, MaxFunctionNameBytes, false)
}

// Validate checks a rename: a source to move (an application, the unclaimed
// rows or both), and a new name an application can launch under (DBOS's
// rule: 3 to 255 bytes of lowercase letters, digits, '-' and '_'), or the
// rows would be stranded again.
func (r *RenameApplication) Validate(op string) error {
	if err := checkName(op+".old_name", r.OldName, MaxNameBytes, false); err != nil {
		return err
	}
	if r.OldName == "" && !r.AdoptUnclaimedRows {
		return fieldErr(op+".old_name", "is required unless adopt_unclaimed_rows is set (nothing to re-own)")
	}
	if len(r.NewName) < MinApplicationNameBytes || len(r.NewName) > MaxNameBytes {
		return fieldErr(op+".new_name", "%d bytes; an application name has %d to %d", len(r.NewName), MinApplicationNameBytes, MaxNameBytes)
	}
	for i := 0; i < len(r.NewName); i++ {
		if c := r.NewName[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fieldErr(op+".new_name", "must contain only lowercase letters, digits, '-' and '_' (byte %d)", i)
		}
	}
	if r.NewName == r.OldName {
		return fieldErr(op+".new_name", "is old_name: nothing to rename")
	}
	if r.BatchSize < 0 {
		return fieldErr(op+".batch_size", "must not be negative (0 moves everything in one transaction)")
	}
	return nil
}

// checkApplicationNames checks a listing's application names: at most
// MaxApplicationNames, each a name.
func checkApplicationNames(path string, names []string) error {
	if len(names) > MaxApplicationNames {
		return fieldErr(path, "%d names; at most %d", len(names), MaxApplicationNames)
	}
	for i, n := range names {
		if err := checkName(fmt.Sprintf("%s[%d]", path, i), n, MaxNameBytes, true); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks an attributes update: the workflow and the JSON object.
func (u *UpdateAttributes) Validate(op string) error {
	if err := checkText(op+".workflow_id", u.WorkflowID, true); err != nil {
		return err
	}
	if u.Merge && u.Attributes == nil {
		return fieldErr(op+".attributes", "is required to merge")
	}
	return CheckAttributes(op+".attributes", u.Attributes)
}

// Validate checks a listing's attributes filter (the JSON text of an
// object, as a workflow's attributes are).
func (l *ListWorkflows) Validate(op string) error {
	return CheckAttributes(op+".attributes", l.Attributes)
}

// CheckAttributes accepts nil or the JSON text of an object that the
// database's jsonb column can hold (no NUL character, escaped or not).
func CheckAttributes(path string, attributes *string) error {
	if attributes == nil {
		return nil
	}
	return checkJSON(path, *attributes, true)
}

// checkJSON checks JSON text (of an object when object is set) that a
// Postgres text or jsonb column can hold: no NUL, raw or escaped.
func checkJSON(path, text string, object bool) error {
	if err := checkText(path, text, false); err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return fieldErr(path, "must be JSON text")
	}
	if _, isObject := v.(map[string]any); object && !isObject {
		return fieldErr(path, "must be the JSON text of an object")
	}
	if hasNUL(v) {
		return fieldErr(path, "must not contain the character U+0000")
	}
	return nil
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.IndexByte(k, 0) >= 0 || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// name is a name field of a message, for checkNames.
type name struct {
	field, value string
	max          int
	required     bool
}

// checkNames checks the names of a message at path, in order.
func checkNames(path string, names ...name) error {
	for _, n := range names {
		if err := checkName(path+"."+n.field, n.value, n.max, n.required); err != nil {
			return err
		}
	}
	return nil
}

// checkName checks a name: at most max bytes of UTF-8 without control
// characters (which Postgres refuses, as it does NUL, or which garble the
// logs and listings that show it).
func checkName(path, name string, max int, required bool) error {
	if name == "" {
		if required {
			return fieldErr(path, "is required")
		}
		return nil
	}
	if len(name) > max {
		return fieldErr(path, "%d bytes; at most %d", len(name), max)
	}
	if !utf8.ValidString(name) {
		return fieldErr(path, "must be valid UTF-8")
	}
	for i, r := range name {
		if unicode.IsControl(r) {
			return fieldErr(path, "must not contain control characters (%U at byte %d)", r, i)
		}
	}
	return nil
}

// checkText checks text a Postgres text column can hold: valid UTF-8
// without NUL. Other characters are the caller's (workflow ids are the
// application's to choose).
func checkText(path, text string, required bool) error {
	switch {
	case text == "" && required:
		return fieldErr(path, "is required")
	case !utf8.ValidString(text):
		return fieldErr(path, "must be valid UTF-8")
	case strings.IndexByte(text, 0) >= 0:
		return fieldErr(path, "must not contain the character U+0000")
	}
	return nil
}

// checkCount checks a count from min (0 or 1) to MaxLimit.
func checkCount(path string, n, min int) error {
	switch {
	case n < min && min == 1:
		return fieldErr(path, "must be >= 1 (omit it for no limit)")
	case n < min:
		return fieldErr(path, "must be >= %d", min)
	case n > MaxLimit:
		return fieldErr(path, "must be <= %d", MaxLimit)
	}
	return nil
}
