package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// cliqJSON runs a CLI command that must succeed and decodes its JSON output
// into a fresh T.
func cliqJSON[T any](t *testing.T, args ...string) T {
	t.Helper()
	out, stderr, code := cli(t, args...)
	require.Equal(t, 0, code, "%v: %s", args, stderr)
	var v T
	require.NoError(t, json.Unmarshal([]byte(out), &v), "%v printed %q", args, out)
	return v
}

// cliqOK runs a CLI command that must succeed and returns its output.
func cliqOK(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, code := cli(t, args...)
	require.Equal(t, 0, code, "%v: %s", args, stderr)
	return out
}

// cliqFails runs a CLI command that must fail with one line on stderr
// containing want.
func cliqFails(t *testing.T, want string, args ...string) {
	t.Helper()
	out, stderr, code := cli(t, args...)
	require.Equal(t, 1, code, "%v should fail; printed %q", args, out)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	require.True(t, strings.HasPrefix(stderr, "dbos-agent: "), stderr)
	require.Contains(t, stderr, want)
}

// cliqByName indexes decoded JSON objects by one of their keys.
func cliqByName(t *testing.T, items []map[string]any, key string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, it := range items {
		out[it[key].(string)] = it
	}
	return out
}

// TestCLIQueuesSchedulesAndVersions runs the queue, schedule and version
// commands of the real binary against a database where an agent (its
// workers and clients) and the official Go SDK (client and runtime) wrote
// queues, schedules and versions; what the CLI writes is then read by both.
func TestCLIQueuesSchedulesAndVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.startAgent(agentOptions{})
	ctx := context.Background()
	db := []string{"--database-url", e.url, "--schema", e.schema}
	with := func(args ...string) []string { return append(args, db...) }

	// The Go SDK's runtime registers its version at launch. It runs first
	// and alone (its own executor id), so that it claims nothing the test
	// enqueues later.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runtime, err := dbos.NewContext(context.Background(), dbos.Config{
		DatabaseURL: e.url, DatabaseSchema: e.schema, AppName: "go-app", ApplicationVersion: "go-v1",
		ExecutorID: "go-exec", Logger: quiet,
	})
	require.NoError(t, err)
	require.NoError(t, dbos.Launch(runtime))
	require.NoError(t, dbos.Shutdown(runtime, 10*time.Second))

	// The Go SDK's client: a queue with partition limits, a schedule, and a
	// workflow on a queue nobody registered.
	sdk, err := dbos.NewClient(context.Background(), dbos.ClientConfig{DatabaseURL: e.url, DatabaseSchema: e.schema, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dbos.Shutdown(sdk, 10*time.Second) })
	_, err = sdk.RegisterQueue(sdk, "go-queue", dbos.WithGlobalConcurrency(10), dbos.WithWorkerConcurrency(2),
		dbos.WithRateLimiter(&dbos.RateLimiter{Limit: 5, Period: 30 * time.Second}), dbos.WithPriorityEnabled(),
		dbos.WithPartitionConcurrency(3), dbos.WithPartitionWorkerConcurrency(1),
		dbos.WithPartitionRateLimiter(&dbos.RateLimiter{Limit: 4, Period: 1500 * time.Millisecond}),
		dbos.WithQueueBasePollingInterval(250*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, dbos.CreateSchedule(sdk, dbos.ScheduleSpec{
		ScheduleName: "go-hourly", Schedule: "0 0 * * * *", WorkflowName: "sync", Context: map[string]int{"batch": 50},
	}))
	_, err = dbos.Enqueue[any](sdk, "sdk-only", "SDKWorkflow", dbos.PortableWorkflowArgs{PositionalArgs: []any{1}},
		dbos.WithEnqueueWorkflowID("cliq-sdk-wf"))
	require.NoError(t, err)

	// The agent: a worker of shop v1 that runs "report" and registers two
	// partitioned queues, one with partition limits and one without; a
	// worker of shop v2 (the newest version, so the latest); a schedule.
	ticks := make(chan [2]string, 8)
	v1, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{
		AppName: "shop", AppVersion: "v1",
		Workflows: map[string]client.WorkflowFunc{"report": func(wf *client.Workflow, in *string) (*string, error) {
			ticks <- [2]string{wf.ID(), cliqDeref(in)}
			return str(`"done"`), nil
		}},
		Queues: []protocol.QueueRegistration{
			{Name: "emails", Concurrency: cliqInt(20), PartitionQueue: true, PartitionConcurrency: cliqInt(2),
				PartitionWorkerConcurrency: cliqInt(1), PartitionRateLimitMax: cliqInt(10), PartitionRateLimitPeriodSec: cliqFloat(60),
				PollingIntervalSec: 0.5},
			{Name: "legacy", PartitionQueue: true, Concurrency: cliqInt(3)},
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { v1.Close() })
	v2, err := client.NewWorker(ctx, agent.socket, client.WorkerConfig{
		AppName: "shop", AppVersion: "v2",
		Workflows: map[string]client.WorkflowFunc{"noop": func(*client.Workflow, *string) (*string, error) { return nil, nil }},
	})
	require.NoError(t, err)
	t.Cleanup(func() { v2.Close() })
	shop, err := client.Dial(ctx, agent.socket, protocol.Hello{Role: protocol.RoleClient, AppName: "shop"})
	require.NoError(t, err)
	t.Cleanup(func() { shop.Close() })
	require.NoError(t, shop.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{
		ScheduleName: "agent-nightly", WorkflowName: "report", Cron: "0 3 * * *", CronTimezone: "America/New_York",
		Context: `{"region":"eu"}`,
	}, nil))
	require.NoError(t, shop.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "cliq-delayed", Name: "report", QueueName: "emails", PartitionKey: "alice", DelayMS: 3_600_000,
	}, nil))

	// queue list: limits as stored, partition limits included.
	queues := cliqJSON[[]map[string]any](t, with("queue", "list", "--json")...)
	q := cliqByName(t, queues, "name")
	require.Equal(t, map[string]any{"name": "emails", "registered": true, "concurrency": float64(20), "priority_enabled": false,
		"partition_queue": true, "partition_concurrency": float64(2), "partition_worker_concurrency": float64(1),
		"partition_rate_limit_max": float64(10), "partition_rate_limit_period_sec": float64(60), "polling_interval_sec": 0.5,
		"application_name": "shop", "enqueued": float64(0), "pending": float64(0), "delayed": float64(1)}, q["emails"])
	require.Equal(t, map[string]any{"name": "go-queue", "registered": true, "concurrency": float64(10), "worker_concurrency": float64(2),
		"rate_limit_max": float64(5), "rate_limit_period_sec": float64(30), "priority_enabled": true, "partition_queue": true,
		"partition_concurrency": float64(3), "partition_worker_concurrency": float64(1), "partition_rate_limit_max": float64(4),
		"partition_rate_limit_period_sec": 1.5, "polling_interval_sec": 0.25,
		"enqueued": float64(0), "pending": float64(0), "delayed": float64(0)}, q["go-queue"])
	require.Equal(t, true, q["legacy"]["partition_queue"])
	require.Equal(t, float64(3), q["legacy"]["concurrency"])
	require.NotContains(t, q["legacy"], "partition_concurrency")
	require.Equal(t, map[string]any{"name": "sdk-only", "registered": false, "priority_enabled": false, "partition_queue": false,
		"enqueued": float64(1), "pending": float64(0), "delayed": float64(0)}, q["sdk-only"])

	out := cliqOK(t, with("queue", "list")...)
	require.Regexp(t, `(?m)^legacy\s.*limits per partition$`, out)
	require.Regexp(t, `(?m)^go-queue\s.*5 per 30s\s+concurrency 3, worker 1, 4 per 1.5s$`, out)

	// queue get: one queue, and how its limits apply.
	emails := cliqJSON[map[string]any](t, with("queue", "get", "emails", "--json")...)
	require.Equal(t, q["emails"], emails)
	out = cliqOK(t, with("queue", "get", "legacy")...)
	require.Contains(t, out, "the limits above apply to each partition")
	out = cliqOK(t, with("queue", "get", "emails")...)
	require.Regexp(t, `Partition rate limit:\s+10 per 60s`, out)
	require.Contains(t, out, "partition limits count each partition")
	cliqFails(t, "queue nope is not registered and has no active workflows", with("queue", "get", "nope")...)

	// schedule list and get: the agent's and the SDK's.
	schedules := cliqJSON[[]map[string]any](t, with("schedule", "list", "--json")...)
	s := cliqByName(t, schedules, "schedule_name")
	require.Len(t, s, 2)
	nightly := s["agent-nightly"]
	require.Equal(t, "report", nightly["workflow_name"])
	require.Equal(t, "0 3 * * *", nightly["schedule"])
	require.Equal(t, "America/New_York", nightly["cron_timezone"])
	require.Equal(t, `{"region":"eu"}`, nightly["context"])
	require.Equal(t, "ACTIVE", nightly["status"])
	require.Equal(t, "shop", nightly["application_name"])
	next, err := time.Parse(time.RFC3339, nightly["next_tick"].(string))
	require.NoError(t, err)
	require.Equal(t, 3, next.In(cliqZone(t, "America/New_York")).Hour())
	require.JSONEq(t, `{"batch":50}`, s["go-hourly"]["context"].(string))
	got := cliqJSON[map[string]any](t, with("schedule", "get", "go-hourly", "--json")...)
	require.Equal(t, s["go-hourly"]["schedule_id"], got["schedule_id"])
	require.Equal(t, "0 0 * * * *", got["schedule"])
	out = cliqOK(t, with("schedule", "get", "agent-nightly")...)
	require.Regexp(t, `Timezone:\s+America/New_York`, out)
	cliqFails(t, "schedule nope does not exist", with("schedule", "get", "nope")...)
	out = cliqOK(t, with("schedule", "list")...)
	require.Regexp(t, `(?m)^agent-nightly\s+report\s+0 3 \* \* \* \(America/New_York\)\s+ACTIVE\s`, out)

	// schedule create: validated with the agent's parser, read by the SDK.
	out = cliqOK(t, with("schedule", "create", "cli-every", "--workflow", "other", "--cron", "*/5 * * * *",
		"--context", `{"k":[1,2]}`, "--timezone", "Europe/Paris", "--queue", "cli-q", "--backfill", "--app-name", "shop")...)
	require.Regexp(t, `^schedule cli-every created; next tick \S+\n$`, out)
	theirs, err := dbos.GetSchedule(sdk, "cli-every")
	require.NoError(t, err)
	require.Equal(t, "other", theirs.WorkflowName)
	require.Equal(t, "*/5 * * * *", theirs.Schedule)
	require.Equal(t, dbos.ScheduleStatusActive, theirs.Status)
	require.JSONEq(t, `{"k":[1,2]}`, string(theirs.Context))
	require.Equal(t, "Europe/Paris", theirs.CronTimezone)
	require.Equal(t, "cli-q", theirs.QueueName)
	require.Equal(t, "shop", theirs.ApplicationName)
	require.True(t, theirs.AutomaticBackfill)
	cliqFails(t, "schedule cli-every already exists",
		with("schedule", "create", "cli-every", "--workflow", "other", "--cron", "* * * * *")...)
	cliqFails(t, `Invalid cron schedule: '61 * * * *'`, with("schedule", "create", "bad", "--workflow", "w", "--cron", "61 * * * *")...)
	cliqFails(t, `Invalid timezone: 'Mars/Olympus'`,
		with("schedule", "create", "bad", "--workflow", "w", "--cron", "* * * * *", "--timezone", "Mars/Olympus")...)
	cliqFails(t, "--context must be JSON", with("schedule", "create", "bad", "--workflow", "w", "--cron", "* * * * *", "--context", "{nope")...)
	cliqFails(t, `required flag(s) "cron" not set`, with("schedule", "create", "bad", "--workflow", "w")...)
	cliqFails(t, "schedule.workflow_name: must not contain control characters",
		with("schedule", "create", "bad", "--workflow", "w\x01x", "--cron", "* * * * *")...)
	cliqFails(t, "schedule.schedule_name:", with("schedule", "create", "bad"+strings.Repeat("x", 1000), "--workflow", "w", "--cron", "* * * * *")...)
	_, err = dbos.GetSchedule(sdk, "bad")
	require.Error(t, err, "a refused create writes nothing")

	// pause and resume, as the SDK sees them.
	require.Equal(t, "schedule go-hourly is PAUSED\n", cliqOK(t, with("schedule", "pause", "go-hourly")...))
	theirs, err = dbos.GetSchedule(sdk, "go-hourly")
	require.NoError(t, err)
	require.Equal(t, dbos.ScheduleStatusPaused, theirs.Status)
	schedules = cliqJSON[[]map[string]any](t, with("schedule", "list", "--status", "paused", "--json")...)
	require.Len(t, schedules, 1)
	require.Equal(t, "go-hourly", schedules[0]["schedule_name"])
	require.NotContains(t, schedules[0], "next_tick", "a paused schedule has no next tick")
	require.Equal(t, "schedule go-hourly is ACTIVE\n", cliqOK(t, with("schedule", "resume", "go-hourly")...))
	theirs, err = dbos.GetSchedule(sdk, "go-hourly")
	require.NoError(t, err)
	require.Equal(t, dbos.ScheduleStatusActive, theirs.Status)
	cliqFails(t, "schedule nope does not exist", with("schedule", "pause", "nope")...)

	// version list: the SDK runtime's, and the agent workers'; the newest
	// (v2) is the latest.
	versions := cliqJSON[[]map[string]any](t, with("version", "list", "--json")...)
	require.Len(t, versions, 3)
	require.Equal(t, "v2", versions[0]["version_name"])
	require.Equal(t, true, versions[0]["latest"])
	require.Equal(t, "shop", versions[0]["application_name"])
	require.Equal(t, false, versions[1]["latest"])
	v := cliqByName(t, versions, "version_name")
	require.Equal(t, "go-app", v["go-v1"]["application_name"])
	sdkVersions, err := dbos.ListApplicationVersions(sdk)
	require.NoError(t, err)
	require.Len(t, sdkVersions, 3)
	for i, sv := range sdkVersions {
		require.Equal(t, sv.Name, versions[i]["version_name"], "the SDK orders versions the same")
		require.Equal(t, sv.ID, versions[i]["version_id"])
		shown, err := time.Parse(time.RFC3339Nano, versions[i]["version_timestamp"].(string))
		require.NoError(t, err)
		require.Equal(t, sv.Timestamp, shown.UnixMilli(), "the CLI shows the SDK's timestamp")
	}
	versions = cliqJSON[[]map[string]any](t, with("version", "list", "--app-name", "shop", "--json")...)
	require.Len(t, versions, 2, "another application's versions are not listed")

	// version promote: roll shop back to v1, which the SDK sees.
	require.Equal(t, "version v1 is the latest\n", cliqOK(t, with("version", "promote", "v1", "--app-name", "shop")...))
	versions = cliqJSON[[]map[string]any](t, with("version", "list", "--app-name", "shop", "--json")...)
	require.Equal(t, "v1", versions[0]["version_name"])
	require.Equal(t, true, versions[0]["latest"])
	latest, err := dbos.GetLatestApplicationVersion(sdk)
	require.NoError(t, err)
	require.Equal(t, "v1", latest.Name)
	out = cliqOK(t, with("version", "list")...)
	require.Regexp(t, `(?m)^v1\s+shop\s+\S+\s+\S+\s+yes$`, out)
	cliqFails(t, "application version nope is not registered", with("version", "promote", "nope")...)
	cliqFails(t, "application version go-v1 belongs to application go-app, not shop",
		with("version", "promote", "go-v1", "--app-name", "shop")...)
	require.Contains(t, cliqOK(t, "version"), "dbos-agent ", "bare version still prints the build")

	// schedule backfill: the ticks of two days, enqueued as the scheduler
	// would (ids, inputs, latest version), and run by the agent's worker.
	filled := cliqJSON[[]map[string]any](t, with("schedule", "backfill", "agent-nightly", "--start", "2026-01-01T00:00:00Z",
		"--end", "2026-01-03T00:00:00Z", "--json")...)
	require.Equal(t, []map[string]any{
		{"workflow_id": "sched-agent-nightly-2026-01-01T03:00:00-05:00", "scheduled_time": "2026-01-01T03:00:00-05:00", "created": true},
		{"workflow_id": "sched-agent-nightly-2026-01-02T03:00:00-05:00", "scheduled_time": "2026-01-02T03:00:00-05:00", "created": true},
	}, filled)
	ran := map[string]string{}
	for range 2 {
		select {
		case tick := <-ticks:
			ran[tick[0]] = tick[1]
		case <-time.After(30 * time.Second):
			t.Fatalf("the agent did not run the backfilled ticks; ran %v", ran)
		}
	}
	require.Equal(t, map[string]string{
		"sched-agent-nightly-2026-01-01T03:00:00-05:00": `{"namedArgs":{},"positionalArgs":["2026-01-01T03:00:00-05:00",{"region":"eu"}]}`,
		"sched-agent-nightly-2026-01-02T03:00:00-05:00": `{"namedArgs":{},"positionalArgs":["2026-01-02T03:00:00-05:00",{"region":"eu"}]}`,
	}, ran)
	require.Equal(t, "SUCCESS", awaitResult(t, shop, "sched-agent-nightly-2026-01-02T03:00:00-05:00").Status)
	wf := cliqJSON[map[string]any](t, with("workflow", "get", "sched-agent-nightly-2026-01-01T03:00:00-05:00", "--json")...)
	require.Equal(t, "v1", wf["application_version"], "ticks run on the latest version")
	require.Equal(t, "shop", wf["application_name"])
	require.Equal(t, "_dbos_internal_queue", wf["queue_name"])
	sdkList, err := dbos.ListWorkflows(sdk, dbos.WithFilterScheduleName("agent-nightly"))
	require.NoError(t, err)
	require.Len(t, sdkList, 2, "the SDK finds the ticks by their schedule")

	out = cliqOK(t, with("schedule", "backfill", "agent-nightly", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-03T00:00:00Z")...)
	require.Equal(t, "sched-agent-nightly-2026-01-01T03:00:00-05:00\talready enqueued\n"+
		"sched-agent-nightly-2026-01-02T03:00:00-05:00\talready enqueued\n2 ticks, 0 enqueued now\n", out)
	got = cliqJSON[map[string]any](t, with("schedule", "get", "agent-nightly", "--json")...)
	// In the schedule's time zone, as DBOS Python records a tick.
	require.Equal(t, "2026-01-02T03:00:00-05:00", got["last_fired_at"])
	cliqFails(t, "--end must be after --start",
		with("schedule", "backfill", "agent-nightly", "--start", "2026-01-03T00:00:00Z", "--end", "2026-01-01T00:00:00Z")...)
	cliqFails(t, `--start: "yesterday" is not an RFC 3339 time`,
		with("schedule", "backfill", "agent-nightly", "--start", "yesterday", "--end", "2026-01-01T00:00:00Z")...)
	cliqFails(t, "more than 100000 ticks",
		with("schedule", "backfill", "go-hourly", "--start", "2000-01-01T00:00:00Z", "--end", "2026-01-01T00:00:00Z")...)
	cliqFails(t, "schedule nope does not exist",
		with("schedule", "backfill", "nope", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z")...)

	// schedule trigger: one run now, run by the agent.
	before := time.Now()
	trig := cliqJSON[map[string]any](t, with("schedule", "trigger", "agent-nightly", "--json")...)
	id := trig["workflow_id"].(string)
	require.True(t, strings.HasPrefix(id, "sched-agent-nightly-trigger-"), id)
	require.Equal(t, true, trig["created"])
	select {
	case tick := <-ticks:
		require.Equal(t, id, tick[0])
		var inputs struct {
			PositionalArgs []json.RawMessage `json:"positionalArgs"`
		}
		require.NoError(t, json.Unmarshal([]byte(tick[1]), &inputs))
		require.Len(t, inputs.PositionalArgs, 2)
		var at string
		require.NoError(t, json.Unmarshal(inputs.PositionalArgs[0], &at))
		when, err := time.Parse(time.RFC3339Nano, at)
		require.NoError(t, err)
		require.WithinDuration(t, before, when, 30*time.Second)
		require.Equal(t, id, "sched-agent-nightly-trigger-"+at, "the id carries the scheduled time")
		require.JSONEq(t, `{"region":"eu"}`, string(inputs.PositionalArgs[1]))
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not run the triggered workflow")
	}
	require.Equal(t, "SUCCESS", awaitResult(t, shop, id).Status)
	require.Regexp(t, `^workflow sched-go-hourly-trigger-\S+ enqueued\n$`, cliqOK(t, with("schedule", "trigger", "go-hourly")...))
	cliqFails(t, "schedule nope does not exist", with("schedule", "trigger", "nope")...)

	// schedule delete: gone for the SDK too; its workflows stay.
	require.Equal(t, "schedule cli-every deleted\n", cliqOK(t, with("schedule", "delete", "cli-every")...))
	_, err = dbos.GetSchedule(sdk, "cli-every")
	require.Error(t, err)
	cliqFails(t, "schedule cli-every does not exist", with("schedule", "delete", "cli-every")...)
	require.Equal(t, "schedule agent-nightly deleted\n", cliqOK(t, with("schedule", "delete", "agent-nightly")...))
	wf = cliqJSON[map[string]any](t, with("workflow", "get", "sched-agent-nightly-2026-01-01T03:00:00-05:00", "--json")...)
	require.Equal(t, "SUCCESS", wf["status"])
}

func TestCLIQueueCommandsRedactThePassword(t *testing.T) {
	t.Parallel()
	bad := []string{"--database-url", "postgres://u:hunter2@localhost:1/x?sslmode=disable"}
	for _, args := range [][]string{{"queue", "get", "q"}, {"schedule", "trigger", "s"}, {"version", "promote", "v1"}} {
		_, stderr, code := cli(t, append(args, bad...)...)
		require.Equal(t, 1, code, "%v", args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
		require.Contains(t, stderr, "cannot reach the system database")
		require.NotContains(t, stderr, "hunter2")
	}
}

func cliqInt(n int) *int           { return &n }
func cliqFloat(f float64) *float64 { return &f }

func cliqDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func cliqZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}
