package e2e

// End-to-end tests of issue 5's schedules: cron ticks fired once per tick
// by every agent that serves the schedule, pause, resume, delete, backfill,
// trigger, list and get.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// scheduleArgs make schedule changes made through one agent reach the
// others quickly.
var scheduleArgs = []string{"--schedule-interval", "300ms"}

// ticks runs "tick_wf", the scheduled workflow: its one step counts the
// executions of each tick's workflow and keeps its inputs.
type ticks struct {
	mu     sync.Mutex
	runs   map[string]int
	inputs map[string]string
	ran    chan string
}

func newTicks() *ticks {
	return &ticks{runs: map[string]int{}, inputs: map[string]string{}, ran: make(chan string, 1024)}
}

func (k *ticks) workflow(wf *client.Workflow, in *string) (*string, error) {
	return wf.Step("record", func(context.Context) (*string, error) {
		k.mu.Lock()
		k.runs[wf.ID()]++
		if in != nil {
			k.inputs[wf.ID()] = *in
		}
		k.mu.Unlock()
		k.ran <- wf.ID()
		return str("ok"), nil
	})
}

func (k *ticks) worker(t *testing.T, socket string) *client.Worker {
	return qWorker(t, socket, client.WorkerConfig{Workflows: map[string]client.WorkflowFunc{"tick_wf": k.workflow}})
}

// next waits for the next run of a workflow whose id starts with prefix
// (runs of other schedules are skipped).
func (k *ticks) next(t *testing.T, prefix string) string {
	t.Helper()
	for {
		if id := recv(t, k.ran, "a tick of "+prefix); strings.HasPrefix(id, prefix) {
			return id
		}
	}
}

func (k *ticks) runsOf(id string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.runs[id]
}

// tickArgs decodes a tick's portable inputs: the scheduled time and the
// schedule's context.
func (k *ticks) tickArgs(t *testing.T, id string) (string, json.RawMessage) {
	t.Helper()
	k.mu.Lock()
	raw := k.inputs[id]
	k.mu.Unlock()
	var in struct {
		PositionalArgs []json.RawMessage `json:"positionalArgs"`
		NamedArgs      map[string]any    `json:"namedArgs"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &in), raw)
	require.Len(t, in.PositionalArgs, 2, raw)
	var at string
	require.NoError(t, json.Unmarshal(in.PositionalArgs[0], &at), raw)
	return at, in.PositionalArgs[1]
}

// tickTime reads the scheduled time out of a tick's workflow id,
// sched-<name>-<isoformat>.
func tickTime(t *testing.T, name, id string) time.Time {
	t.Helper()
	iso, ok := strings.CutPrefix(id, "sched-"+name+"-")
	require.True(t, ok, id)
	at, err := time.Parse("2006-01-02T15:04:05-07:00", iso)
	require.NoError(t, err, id)
	require.Equal(t, iso, at.Format("2006-01-02T15:04:05+00:00"), "ids are in UTC, whole seconds: %s", id)
	return at
}

// TestScheduleFiresEachTickOnceAcrossAgents: a per-second schedule served by
// workers on two agents: over several seconds every tick has exactly one
// workflow, with the deterministic id, and each ran once. Either agent fires
// it alone when only its workers serve the workflow, so while both serve it
// both fire every tick, and the tick is still enqueued once.
func TestScheduleFiresEachTickOnceAcrossAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{executorID: "a", socketName: "a.sock", extraArgs: scheduleArgs})
	b := e.startAgent(agentOptions{executorID: "b", socketName: "b.sock", extraArgs: scheduleArgs})
	k := newTicks()
	wa := k.worker(t, a.socket)
	wb := k.worker(t, b.socket)
	ca := dialClient(t, a.socket)
	const name = "every-second"
	prefix := "sched-" + name + "-"
	require.NoError(t, ca.Call(context.Background(), protocol.OpCreateSchedule, &protocol.Schedule{
		ScheduleName: name, WorkflowName: "tick_wf", Cron: "* * * * * *", Context: `{"n":1}`,
	}, nil))

	// closeAfterTick closes a worker right after a tick finished, so that
	// it runs nothing when it goes.
	closeAfterTick := func(w *client.Worker) {
		id := k.next(t, prefix)
		require.Equal(t, "SUCCESS", awaitResult(t, ca, id).Status)
		w.Close()
		<-w.Client.Done()
	}
	// Both agents serve it.
	for i := 0; i < 3; i++ {
		k.next(t, prefix)
	}
	// Only B.
	closeAfterTick(wa)
	k.next(t, prefix)
	k.next(t, prefix)
	// Only A again.
	k.worker(t, a.socket)
	k.next(t, prefix)
	closeAfterTick(wb)
	k.next(t, prefix)
	k.next(t, prefix)
	require.NoError(t, ca.Call(context.Background(), protocol.OpDeleteSchedule, &protocol.ScheduleRef{ScheduleName: name}, nil))

	ids := listIDs(t, ca, prefix)
	require.GreaterOrEqual(t, len(ids), 9)
	var times []time.Time
	for _, id := range ids {
		require.Equal(t, "SUCCESS", awaitResult(t, ca, id).Status, id)
		times = append(times, tickTime(t, name, id))
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	for i := 1; i < len(times); i++ {
		require.Equal(t, time.Second, times[i].Sub(times[i-1]), "ticks %s and %s: a tick missing or doubled", times[i-1], times[i])
	}
	for _, id := range ids {
		require.Equal(t, 1, k.runsOf(id), "tick %s ran %d times", id, k.runsOf(id))
		at, ctxArg := k.tickArgs(t, id)
		require.Equal(t, strings.TrimPrefix(id, prefix), at)
		require.JSONEq(t, `{"n":1}`, string(ctxArg))
		info := getWorkflow(t, ca, id)
		require.Equal(t, "tick_wf", info.Name)
		require.Equal(t, "_dbos_internal_queue", info.QueueName)
	}
}

// TestSchedulePauseResumeDelete: a paused schedule fires no tick (checked
// over two ticks of another, active schedule), a resumed one fires again, a
// deleted one is gone and fires no more.
func TestSchedulePauseResumeDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: scheduleArgs})
	clock := startClock(t, a.socket)
	k := newTicks()
	k.worker(t, a.socket)
	c := dialClient(t, a.socket)
	ctx := context.Background()
	const name = "pausable"
	prefix := "sched-" + name + "-"
	ref := &protocol.ScheduleRef{ScheduleName: name}
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{ScheduleName: name, WorkflowName: "tick_wf", Cron: "* * * * * *"}, nil))
	k.next(t, prefix)

	// requireSilent checks that the schedule fires nothing while the clock
	// ticks twice (after one tick for a change to settle).
	requireSilent := func() {
		t.Helper()
		clock.waitTicks(t, 1)
		before := listIDs(t, c, prefix)
		clock.waitTicks(t, 2)
		require.Equal(t, before, listIDs(t, c, prefix), "the schedule fired")
	}

	require.NoError(t, c.Call(ctx, protocol.OpPauseSchedule, ref, nil))
	var got protocol.Schedule
	require.NoError(t, c.Call(ctx, protocol.OpGetSchedule, ref, &got))
	require.Equal(t, "PAUSED", got.Status)
	requireSilent()
	paused := listIDs(t, c, prefix)

	resumedAt := time.Now()
	require.NoError(t, c.Call(ctx, protocol.OpResumeSchedule, ref, nil))
	var resumed protocol.Schedule
	require.NoError(t, c.Call(ctx, protocol.OpGetSchedule, ref, &resumed))
	require.Equal(t, "ACTIVE", resumed.Status)
	var resumedTick string
	for {
		id := k.next(t, prefix)
		if !contains(paused, id) {
			resumedTick = id
			break
		}
	}
	require.False(t, tickTime(t, name, resumedTick).Before(resumedAt.Truncate(time.Second)), "resumed tick %s is from before the resume", resumedTick)

	require.NoError(t, c.Call(ctx, protocol.OpDeleteSchedule, ref, nil))
	requireErrCode(t, c.Call(ctx, protocol.OpGetSchedule, ref, nil), protocol.CodeInvalidArgument)
	requireErrCode(t, c.Call(ctx, protocol.OpDeleteSchedule, ref, nil), protocol.CodeInvalidArgument)
	requireErrCode(t, c.Call(ctx, protocol.OpPauseSchedule, ref, nil), protocol.CodeInvalidArgument)
	var list protocol.ListSchedulesReply
	require.NoError(t, c.Call(ctx, protocol.OpListSchedules, &protocol.ListSchedules{}, &list))
	require.Empty(t, list.Schedules, "the e2e application's schedules")
	requireSilent()
	for _, id := range listIDs(t, c, prefix) {
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status)
		require.Equal(t, 1, k.runsOf(id), id)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestScheduleBackfillTriggerListGet: create, get and list return what was
// created; backfill over a past window enqueues exactly that window's ticks
// (idempotent when repeated) and trigger enqueues one run now; each runs
// once with its scheduled time and the schedule's context.
func TestScheduleBackfillTriggerListGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: scheduleArgs})
	k := newTicks()
	k.worker(t, a.socket)
	c := dialClient(t, a.socket)
	ctx := context.Background()

	daily := protocol.Schedule{ScheduleName: "daily", WorkflowName: "tick_wf", Cron: "0 0 * * *", Context: `{"region":"eu"}`}
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &daily, nil))
	hourly := protocol.Schedule{ScheduleName: "hourly", WorkflowName: "tick_wf", Cron: "0 * * * *", Status: "PAUSED", QueueName: "hourly-queue"}
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &hourly, nil))
	requireErrCode(t, c.Call(ctx, protocol.OpCreateSchedule, &daily, nil), protocol.CodeInvalidArgument)
	// A given schedule_id is the row's (a binding re-creating a changed
	// schedule keeps its id, as DBOS's apply_schedules updates it in place).
	kept := protocol.Schedule{ScheduleName: "kept", WorkflowName: "tick_wf", Cron: "0 0 1 1 *", ScheduleID: "kept-id-1"}
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &kept, nil))
	var keptBack protocol.Schedule
	require.NoError(t, c.Call(ctx, protocol.OpGetSchedule, &protocol.ScheduleRef{ScheduleName: "kept"}, &keptBack))
	require.Equal(t, "kept-id-1", keptBack.ScheduleID)
	require.NoError(t, c.Call(ctx, protocol.OpDeleteSchedule, &protocol.ScheduleRef{ScheduleName: "kept"}, nil))
	requireErrCode(t, c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{ScheduleName: "bad", WorkflowName: "tick_wf", Cron: "every day"}, nil), protocol.CodeInvalidArgument)

	var got protocol.Schedule
	require.NoError(t, c.Call(ctx, protocol.OpGetSchedule, &protocol.ScheduleRef{ScheduleName: "daily"}, &got))
	daily.Status = "ACTIVE"
	daily.ApplicationName = "e2e" // the creating client's application owns it
	require.NotEmpty(t, got.ScheduleID, "the row's id")
	daily.ScheduleID = got.ScheduleID
	require.Equal(t, daily, got)
	hourly.Context = "null" // no context is the JSON null
	hourly.ApplicationName = "e2e"
	var gotHourly protocol.Schedule
	require.NoError(t, c.Call(ctx, protocol.OpGetSchedule, &protocol.ScheduleRef{ScheduleName: "hourly"}, &gotHourly))
	hourly.ScheduleID = gotHourly.ScheduleID
	// A fresh reply each time: decoding into a used one keeps the fields
	// the new reply omits.
	listSchedules := func(filter protocol.ListSchedules) []protocol.Schedule {
		var list protocol.ListSchedulesReply
		require.NoError(t, c.Call(ctx, protocol.OpListSchedules, &filter, &list))
		return list.Schedules
	}
	require.Equal(t, []protocol.Schedule{daily, hourly}, listSchedules(protocol.ListSchedules{}))
	require.Equal(t, []protocol.Schedule{hourly}, listSchedules(protocol.ListSchedules{Statuses: []string{"PAUSED"}}))
	require.Equal(t, []protocol.Schedule{daily}, listSchedules(protocol.ListSchedules{NamePrefix: "dai"}))
	require.Empty(t, listSchedules(protocol.ListSchedules{WorkflowNames: []string{"other"}}))

	// Five days: ticks strictly after the start and before the end, as the
	// DBOS SDKs backfill.
	window := &protocol.BackfillSchedule{ScheduleName: "daily",
		StartEpochMS: time.Date(2024, 12, 31, 23, 59, 59, 0, time.UTC).UnixMilli(),
		EndEpochMS:   time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC).UnixMilli()}
	var want []string
	for day := 1; day <= 5; day++ {
		want = append(want, fmt.Sprintf("sched-daily-2025-01-%02dT00:00:00+00:00", day))
	}
	var filled protocol.WorkflowIDs
	require.NoError(t, c.Call(ctx, protocol.OpBackfillSchedule, window, &filled))
	require.Equal(t, want, filled.WorkflowIDs)
	require.NoError(t, c.Call(ctx, protocol.OpBackfillSchedule, window, &filled))
	require.Equal(t, want, filled.WorkflowIDs, "a repeated backfill names the same ticks")
	require.Equal(t, want, listIDs(t, c, "sched-daily-"), "and enqueues none twice")
	for _, id := range want {
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status)
		require.Equal(t, 1, k.runsOf(id), id)
		at, ctxArg := k.tickArgs(t, id)
		require.Equal(t, strings.TrimPrefix(id, "sched-daily-"), at)
		require.JSONEq(t, `{"region":"eu"}`, string(ctxArg))
	}
	var afterBackfill protocol.Schedule
	require.NoError(t, c.Call(ctx, protocol.OpGetSchedule, &protocol.ScheduleRef{ScheduleName: "daily"}, &afterBackfill))
	require.Equal(t, "2025-01-05T00:00:00+00:00", afterBackfill.LastFiredAt)
	window.EndEpochMS = window.StartEpochMS
	requireErrCode(t, c.Call(ctx, protocol.OpBackfillSchedule, window, nil), protocol.CodeInvalidArgument)

	// Trigger: one run now, on the schedule's queue (a paused schedule
	// too).
	before := time.Now()
	var triggered protocol.WorkflowRef
	require.NoError(t, c.Call(ctx, protocol.OpTriggerSchedule, &protocol.ScheduleRef{ScheduleName: "daily"}, &triggered))
	require.True(t, strings.HasPrefix(triggered.WorkflowID, "sched-daily-trigger-"), triggered.WorkflowID)
	require.Equal(t, "SUCCESS", awaitResult(t, c, triggered.WorkflowID).Status)
	require.Equal(t, 1, k.runsOf(triggered.WorkflowID))
	at, _ := k.tickArgs(t, triggered.WorkflowID)
	firedAt, err := time.Parse(time.RFC3339Nano, at)
	require.NoError(t, err, at)
	require.WithinDuration(t, before, firedAt, 5*time.Second)
	require.Len(t, listIDs(t, c, "sched-daily-trigger-"), 1)

	var hourlyRun protocol.WorkflowRef
	require.NoError(t, c.Call(ctx, protocol.OpTriggerSchedule, &protocol.ScheduleRef{ScheduleName: "hourly"}, &hourlyRun))
	info := getWorkflow(t, c, hourlyRun.WorkflowID)
	require.Equal(t, "hourly-queue", info.QueueName)
	require.Equal(t, "ENQUEUED", info.Status, "no worker serves hourly-queue")
	requireErrCode(t, c.Call(ctx, protocol.OpTriggerSchedule, &protocol.ScheduleRef{ScheduleName: "nope"}, nil), protocol.CodeInvalidArgument)
}
