package protocol

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func validWorker() Hello {
	return Hello{MinVersion: 1, MaxVersion: 1, Role: RoleWorker, AppName: "shop", AppVersion: "v1",
		Workflows: []WorkflowRegistration{{Name: "checkout"}, {Name: "refund", ClassName: "Payments", MaxRecoveryAttempts: 5}},
		Queues: []QueueRegistration{{Name: "orders", WorkerConcurrency: intp(2), Concurrency: intp(10),
			RateLimitMax: intp(100), RateLimitPeriodSec: floatp(1.5), PollingIntervalSec: 0.5}, {Name: "emails"}},
		MaxConcurrency: 16}
}

// TestHelloValidate: every bad value is refused with the path of its field;
// the limits' zero/absent rule holds (absent is no limit, 0 is refused).
func TestHelloValidate(t *testing.T) {
	t.Parallel()
	good := validWorker()
	require.NoError(t, good.Validate(OpHello))
	require.NoError(t, (&Hello{MinVersion: 1}).Validate(OpHello), "a bare client hello")

	queue := func(mod func(*QueueRegistration)) func(*Hello) {
		return func(h *Hello) { mod(&h.Queues[0]) }
	}
	many := func(n int) []QueueRegistration {
		qs := make([]QueueRegistration, n)
		for i := range qs {
			qs[i].Name = fmt.Sprintf("q%d", i)
		}
		return qs
	}
	for _, c := range []struct {
		name, path string
		mod        func(*Hello)
	}{
		{"negative worker concurrency", "hello.queues[0].worker_concurrency", queue(func(q *QueueRegistration) { q.WorkerConcurrency = intp(-1) })},
		{"zero concurrency", "hello.queues[0].concurrency", queue(func(q *QueueRegistration) { q.Concurrency = intp(0) })},
		{"negative concurrency", "hello.queues[0].concurrency", queue(func(q *QueueRegistration) { q.Concurrency = intp(-5) })},
		{"concurrency past int32", "hello.queues[0].concurrency", queue(func(q *QueueRegistration) { q.Concurrency = intp(math.MaxInt32 + 1) })},
		{"zero rate limit", "hello.queues[0].rate_limit_max", queue(func(q *QueueRegistration) { q.RateLimitMax = intp(0) })},
		{"NaN period", "hello.queues[0].rate_limit_period_sec", queue(func(q *QueueRegistration) { q.RateLimitPeriodSec = floatp(math.NaN()) })},
		{"infinite period", "hello.queues[0].rate_limit_period_sec", queue(func(q *QueueRegistration) { q.RateLimitPeriodSec = floatp(math.Inf(1)) })},
		{"zero period", "hello.queues[0].rate_limit_period_sec", queue(func(q *QueueRegistration) { q.RateLimitPeriodSec = floatp(0) })},
		{"negative period", "hello.queues[0].rate_limit_period_sec", queue(func(q *QueueRegistration) { q.RateLimitPeriodSec = floatp(-1) })},
		{"period past a year", "hello.queues[0].rate_limit_period_sec", queue(func(q *QueueRegistration) { q.RateLimitPeriodSec = floatp(MaxPeriodSec + 1) })},
		{"half a rate limit", "hello.queues[0].rate_limit_period_sec", queue(func(q *QueueRegistration) { q.RateLimitPeriodSec = nil })},
		{"half a partition rate limit", "hello.queues[0].partition_rate_limit_max", queue(func(q *QueueRegistration) { q.PartitionRateLimitPeriodSec = floatp(1) })},
		{"NaN partition period", "hello.queues[0].partition_rate_limit_period_sec", queue(func(q *QueueRegistration) {
			q.PartitionRateLimitMax, q.PartitionRateLimitPeriodSec = intp(1), floatp(math.NaN())
		})},
		{"NaN polling interval", "hello.queues[0].polling_interval_sec", queue(func(q *QueueRegistration) { q.PollingIntervalSec = math.NaN() })},
		{"infinite polling interval", "hello.queues[0].polling_interval_sec", queue(func(q *QueueRegistration) { q.PollingIntervalSec = math.Inf(1) })},
		{"negative polling interval", "hello.queues[0].polling_interval_sec", queue(func(q *QueueRegistration) { q.PollingIntervalSec = -1 })},
		{"busy polling", "hello.queues[0].polling_interval_sec", queue(func(q *QueueRegistration) { q.PollingIntervalSec = 1e-9 })},
		{"worker above queue concurrency", "hello.queues[0].worker_concurrency", queue(func(q *QueueRegistration) { q.WorkerConcurrency = intp(11) })},
		{"partition above queue concurrency", "hello.queues[0].partition_concurrency", queue(func(q *QueueRegistration) { q.PartitionConcurrency = intp(11) })},
		{"zero partition worker concurrency", "hello.queues[0].partition_worker_concurrency", queue(func(q *QueueRegistration) { q.PartitionWorkerConcurrency = intp(0) })},
		{"1 MB queue name", "hello.queues[0].name", queue(func(q *QueueRegistration) { q.Name = strings.Repeat("q", 1<<20) })},
		{"NUL in a queue name", "hello.queues[0].name", queue(func(q *QueueRegistration) { q.Name = "or\x00ders" })},
		{"newline in a queue name", "hello.queues[0].name", queue(func(q *QueueRegistration) { q.Name = "orders\n" })},
		{"invalid UTF-8 in a queue name", "hello.queues[0].name", queue(func(q *QueueRegistration) { q.Name = "\xff\xfe" })},
		{"no queue name", "hello.queues[0].name", queue(func(q *QueueRegistration) { q.Name = "" })},
		{"the internal queue", "hello.queues[0].name", queue(func(q *QueueRegistration) { q.Name = InternalQueueName })},
		{"a queue twice", "hello.queues[1].name", func(h *Hello) { h.Queues[1].Name = h.Queues[0].Name }},
		{"10,000 queues", "hello.queues", func(h *Hello) { h.Queues = many(10000) }},
		{"no workflow name", "hello.workflows[1].name", func(h *Hello) { h.Workflows[1].Name = "" }},
		{"NUL in a workflow name", "hello.workflows[0].name", func(h *Hello) { h.Workflows[0].Name = "\x00" }},
		{"long workflow name", "hello.workflows[0].name", func(h *Hello) { h.Workflows[0].Name = strings.Repeat("w", MaxFunctionNameBytes+1) }},
		{"long class name", "hello.workflows[1].class_name", func(h *Hello) { h.Workflows[1].ClassName = strings.Repeat("c", MaxNameBytes+1) }},
		{"a workflow twice", "hello.workflows[1].name", func(h *Hello) { h.Workflows[1].Name = h.Workflows[0].Name }},
		{"negative recovery attempts", "hello.workflows[1].max_recovery_attempts", func(h *Hello) { h.Workflows[1].MaxRecoveryAttempts = -1 }},
		{"too many workflows", "hello.workflows", func(h *Hello) { h.Workflows = make([]WorkflowRegistration, MaxWorkflowsPerWorker+1) }},
		{"negative max concurrency", "hello.max_concurrency", func(h *Hello) { h.MaxConcurrency = -1 }},
		{"NUL in the app name", "hello.app_name", func(h *Hello) { h.AppName = "sh\x00p" }},
		{"long app version", "hello.app_version", func(h *Hello) { h.AppVersion = strings.Repeat("v", MaxNameBytes+1) }},
		{"escape in the language", "hello.language", func(h *Hello) { h.Language = "py\x1b[31m" }},
		{"negative pid", "hello.pid", func(h *Hello) { h.PID = -1 }},
		{"unknown wake time format", "hello.wake_time_format", func(h *Hello) { h.WakeTimeFormat = "epoch_minutes" }},
		{"wake time format in other case", "hello.wake_time_format", func(h *Hello) { h.WakeTimeFormat = "EPOCH_MS" }},
		{"unknown role", "hello.role", func(h *Hello) { h.Role = "admin" }},
		{"a client with queues", "hello.queues", func(h *Hello) { h.Role, h.Workflows = RoleClient, nil }},
		{"a client with workflows", "hello.workflows", func(h *Hello) { h.Role = "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := validWorker()
			h.Workflows = append([]WorkflowRegistration(nil), h.Workflows...)
			h.Queues = append([]QueueRegistration(nil), h.Queues...)
			c.mod(&h)
			err := h.Validate(OpHello)
			require.Error(t, err)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, c.path, fe.Path, err.Error())
			require.True(t, strings.HasPrefix(err.Error(), c.path+": "), err.Error())
			require.Less(t, len(err.Error()), 300, "the message quotes no huge value")
		})
	}

	// At the bounds: accepted.
	edge := validWorker()
	edge.Queues = many(MaxQueuesPerWorker)
	edge.Queues[0] = QueueRegistration{Name: strings.Repeat("é", MaxNameBytes/2), Concurrency: intp(MaxLimit), WorkerConcurrency: intp(1),
		RateLimitMax: intp(1), RateLimitPeriodSec: floatp(MinPeriodSec), PollingIntervalSec: MaxPollingIntervalSec}
	edge.Workflows = []WorkflowRegistration{{Name: strings.Repeat("w", MaxFunctionNameBytes), MaxRecoveryAttempts: MaxLimit}}
	require.NoError(t, edge.Validate(OpHello))
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		msg  Validator
		op   string
		path string // "" = valid
	}{
		{"register_queues", &RegisterQueues{Queues: []QueueRegistration{{Name: "late", Concurrency: intp(1)}}}, OpRegisterQueues, ""},
		{"register_queues with none", &RegisterQueues{}, OpRegisterQueues, "register_queues.queues"},
		{"register_queues worker concurrency -1", &RegisterQueues{Queues: []QueueRegistration{{Name: "a"}, {Name: "b", WorkerConcurrency: intp(-1)}}},
			OpRegisterQueues, "register_queues.queues[1].worker_concurrency"},
		// DBOS's pause-dequeue idiom: this worker takes none of the queue's workflows.
		{"register_queues worker concurrency 0", &RegisterQueues{Queues: []QueueRegistration{{Name: "a"}, {Name: "b", WorkerConcurrency: intp(0)}}},
			OpRegisterQueues, ""},
		{"partition worker concurrency above a zero worker concurrency", &RegisterQueues{Queues: []QueueRegistration{{Name: "b", WorkerConcurrency: intp(0), PartitionWorkerConcurrency: intp(1)}}},
			OpRegisterQueues, "register_queues.queues[0].partition_worker_concurrency"},
		{"register", &Register{Workflows: []WorkflowRegistration{{Name: "late", ClassName: "Orders", MaxRecoveryAttempts: 5}}, Queues: []QueueRegistration{{Name: "q"}}}, OpRegister, ""},
		{"register workflows only", &Register{Workflows: []WorkflowRegistration{{Name: "late"}}}, OpRegister, ""},
		{"register queues only", &Register{Queues: []QueueRegistration{{Name: "q", WorkerConcurrency: intp(2)}}}, OpRegister, ""},
		{"register nothing", &Register{}, OpRegister, "register"},
		{"register a name twice", &Register{Workflows: []WorkflowRegistration{{Name: "a"}, {Name: "a"}}}, OpRegister, "register.workflows[1].name"},
		{"register too many", &Register{Workflows: make([]WorkflowRegistration, MaxWorkflowsPerWorker+1)}, OpRegister, "register.workflows"},
		{"register without a name", &Register{Workflows: []WorkflowRegistration{{ClassName: "C"}}}, OpRegister, "register.workflows[0].name"},
		{"register a long class name", &Register{Workflows: []WorkflowRegistration{{Name: "a", ClassName: strings.Repeat("c", MaxNameBytes+1)}}}, OpRegister, "register.workflows[0].class_name"},
		{"register the internal queue", &Register{Queues: []QueueRegistration{{Name: InternalQueueName}}}, OpRegister, "register.queues[0].name"},
		{"schedule", &Schedule{ScheduleName: "nightly", WorkflowName: "report", Cron: "0 0 3 * * *", Context: `{"a":1}`}, OpCreateSchedule, ""},
		{"schedule without name", &Schedule{WorkflowName: "report", Cron: "* * * * *"}, OpCreateSchedule, "create_schedule.schedule_name"},
		{"schedule name with NUL", &Schedule{ScheduleName: "a\x00", WorkflowName: "report", Cron: "* * * * *"}, OpCreateSchedule, "create_schedule.schedule_name"},
		{"schedule cron with newline", &Schedule{ScheduleName: "a", WorkflowName: "report", Cron: "* * * * *\n"}, OpCreateSchedule, "create_schedule.schedule"},
		{"schedule context serialized as text", &Schedule{ScheduleName: "a", WorkflowName: "r", Cron: "* * * * *", Context: "gAWVCwAAAAAAAACMB3ByZWNpc2WULg=="}, OpCreateSchedule, ""},
		{"schedule context text with NUL", &Schedule{ScheduleName: "a", WorkflowName: "r", Cron: "* * * * *", Context: "{\x00"}, OpCreateSchedule, "create_schedule.context"},
		{"schedule context with NUL", &Schedule{ScheduleName: "a", WorkflowName: "r", Cron: "* * * * *", Context: `"\u0000"`}, OpCreateSchedule, "create_schedule.context"},
		{"schedule context too large", &Schedule{ScheduleName: "a", WorkflowName: "r", Cron: "* * * * *", Context: `"` + strings.Repeat("x", MaxScheduleContextBytes) + `"`},
			OpCreateSchedule, "create_schedule.context"},
		{"schedule status", &Schedule{ScheduleName: "a", WorkflowName: "r", Cron: "* * * * *", Status: "STOPPED"}, OpCreateSchedule, "create_schedule.status"},
		{"schedule queue name", &Schedule{ScheduleName: "a", WorkflowName: "r", Cron: "* * * * *", QueueName: strings.Repeat("q", 256)}, OpCreateSchedule, "create_schedule.queue_name"},
		{"schedule ref", &ScheduleRef{ScheduleName: "nightly"}, OpPauseSchedule, ""},
		{"schedule ref empty", &ScheduleRef{}, OpDeleteSchedule, "delete_schedule.schedule_name"},
		{"backfill", &BackfillSchedule{ScheduleName: "n", StartEpochMS: 1, EndEpochMS: 2}, OpBackfillSchedule, ""},
		{"backfill backwards", &BackfillSchedule{ScheduleName: "n", StartEpochMS: 2, EndEpochMS: 2}, OpBackfillSchedule, "backfill_schedule.end_epoch_ms"},
		{"backfill negative", &BackfillSchedule{ScheduleName: "n", StartEpochMS: -2, EndEpochMS: 2}, OpBackfillSchedule, "backfill_schedule.start_epoch_ms"},
		{"version", &VersionRef{VersionName: "v2"}, OpPromoteVersion, ""},
		{"version empty", &VersionRef{}, OpPromoteVersion, "promote_version.version_name"},
		{"version with control", &VersionRef{VersionName: "v\x7f"}, OpPromoteVersion, "promote_version.version_name"},
		{"version for application", &VersionRef{VersionName: "v2", ApplicationName: "billing"}, OpPromoteVersion, ""},
		{"version application too long", &VersionRef{VersionName: "v2", ApplicationName: strings.Repeat("a", 256)}, OpPromoteVersion, "promote_version.application_name"},
		{"schedule application with control", &Schedule{ScheduleName: "a", WorkflowName: "r", Cron: "* * * * *", ApplicationName: "b\n"}, OpCreateSchedule, "create_schedule.application_name"},
		{"list queues of applications", &ListQueues{ApplicationNames: []string{"a", "b"}}, OpListQueues, ""},
		{"list queues too many applications", &ListQueues{ApplicationNames: make([]string, MaxApplicationNames+1)}, OpListQueues, "list_queues.application_name"},
		{"list queues empty application", &ListQueues{ApplicationNames: []string{"a", ""}}, OpListQueues, "list_queues.application_name[1]"},
		{"list schedules application too long", &ListSchedules{ApplicationNames: []string{strings.Repeat("a", 256)}}, OpListSchedules, "list_schedules.application_name[0]"},
		{"debounce application too long", &DebounceWorkflow{Key: "k", Name: "n", ApplicationName: strings.Repeat("a", 256)}, OpDebounceWorkflow, "debounce_workflow.application_name"},
		{"register queues application too long", &RegisterQueues{Queues: []QueueRegistration{{Name: "q"}}, ApplicationName: strings.Repeat("a", 256)}, OpRegisterQueues, "register_queues.application_name"},
		{"rename", &RenameApplication{OldName: "Old App", NewName: "new-app_2"}, OpRenameApplication, ""},
		{"rename adopting", &RenameApplication{NewName: "new-app", AdoptUnclaimedRows: true, BatchSize: 10}, OpRenameApplication, ""},
		{"rename nothing", &RenameApplication{NewName: "new-app"}, OpRenameApplication, "rename_application.old_name"},
		{"rename to short", &RenameApplication{OldName: "a", NewName: "ab"}, OpRenameApplication, "rename_application.new_name"},
		{"rename to long", &RenameApplication{OldName: "a", NewName: strings.Repeat("a", 256)}, OpRenameApplication, "rename_application.new_name"},
		{"rename to spaces", &RenameApplication{OldName: "a", NewName: "No Spaces"}, OpRenameApplication, "rename_application.new_name"},
		{"rename to itself", &RenameApplication{OldName: "same", NewName: "same"}, OpRenameApplication, "rename_application.new_name"},
		{"rename negative batch", &RenameApplication{OldName: "a", NewName: "bbb", BatchSize: -1}, OpRenameApplication, "rename_application.batch_size"},
		{"attributes", &UpdateAttributes{WorkflowID: "w", Attributes: strp(`{"team":"a"}`), Merge: true}, OpUpdateAttributes, ""},
		{"attributes cleared", &UpdateAttributes{WorkflowID: "w"}, OpUpdateAttributes, ""},
		{"attributes not an object", &UpdateAttributes{WorkflowID: "w", Attributes: strp(`[1]`)}, OpUpdateAttributes, "update_workflow_attributes.attributes"},
		{"attributes with NUL", &UpdateAttributes{WorkflowID: "w", Attributes: strp(`{"a\u0000":1}`)}, OpUpdateAttributes, "update_workflow_attributes.attributes"},
		{"attributes merge nothing", &UpdateAttributes{WorkflowID: "w", Merge: true}, OpUpdateAttributes, "update_workflow_attributes.attributes"},
		{"attributes without workflow", &UpdateAttributes{Attributes: strp(`{}`)}, OpUpdateAttributes, "update_workflow_attributes.workflow_id"},
		{"attributes workflow id with NUL", &UpdateAttributes{WorkflowID: "w\x00"}, OpUpdateAttributes, "update_workflow_attributes.workflow_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := c.msg.Validate(c.op)
			if c.path == "" {
				require.NoError(t, err)
				return
			}
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, c.path, fe.Path, err.Error())
		})
	}
}

// TestGoldenRequestsValidate: the examples a binding copies obey the rules.
func TestGoldenRequestsValidate(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, d := range vectorDefs() {
		if d.kind != KindRequest || d.raw != nil {
			continue
		}
		if v, ok := d.body.(Validator); ok {
			require.NoError(t, v.Validate(d.op), d.name)
			checked++
		}
	}
	require.GreaterOrEqual(t, checked, 5)
}
