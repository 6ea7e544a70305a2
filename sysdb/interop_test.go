package sysdb_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// These tests share a system database between this layer and the official
// DBOS Go SDK's client: what one writes, the other must read, on a schema
// that our migrations built.

// interopSchema returns a schema migrated by our code, and our layer on it.
func interopSchema(t *testing.T) (string, string, sysdb.SystemDatabase) {
	t.Helper()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	res, err := sysdb.Migrate(t.Context(), url, sysdb.MigrateOptions{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, int64(0), res.From)
	require.Equal(t, sysdb.LatestSchemaVersion, res.To)
	db, err := sysdb.OpenPostgres(t.Context(), url, sysdb.PostgresOptions{Schema: schema, SkipMigrations: true})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return url, schema, db
}

// goClient connects the official SDK's client. The client verifies (never
// migrates) the schema and refuses one below version 125.
func goClient(t *testing.T, url, schema string) dbos.Client {
	t.Helper()
	// The SDK logs expected refusals (a deduplicated enqueue) as errors; show
	// its logs only when asked to.
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	// Not t.Context(): that ends before the cleanup that shuts the client
	// down, and the client would log its listener's cancellation.
	client, err := dbos.NewClient(context.Background(), dbos.ClientConfig{
		DatabaseURL:    url,
		DatabaseSchema: schema,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, client.Shutdown(client, 10*time.Second)) })
	return client
}

type receipt struct {
	Total    int    `json:"total"`
	Currency string `json:"currency"`
}

type cart struct {
	User  string `json:"user"`
	Items int    `json:"items"`
}

func waitResult[R any](t *testing.T, h dbos.WorkflowHandle[R]) (R, error) {
	t.Helper()
	return h.GetResult(dbos.WithHandlePollingInterval(20*time.Millisecond), dbos.WithHandleTimeout(30*time.Second))
}

// TestInteropGoClientReadsOurWorkflows: a workflow run through our layer
// (portable JSON payloads) is listed, stepped through and awaited by the Go
// client with the right values.
func TestInteropGoClientReadsOurWorkflows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	p := sysdbtest.Ptr[string]

	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "ours-ok", Name: "checkout", Status: sysdb.StatusPending, CreatorXID: "run-1",
		ExecutorID: "agent-1", ApplicationVersion: p("v1"), AuthenticatedUser: p("alice"),
		Serialization: p("portable_json"), Inputs: p(`{"positionalArgs":["alice",3],"namedArgs":{}}`),
	})
	require.NoError(t, err)
	require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{
		WorkflowID: "ours-ok", OwnerXID: "run-1", FunctionID: 1, Name: "fetchCart",
		Output: p(`{"items":3}`), Serialization: p("portable_json"),
		StartedAt: sysdbtest.Ptr(time.Now().UnixMilli() - 5), CompletedAt: sysdbtest.Ptr(time.Now().UnixMilli()),
	}))
	require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{
		WorkflowID: "ours-ok", OwnerXID: "run-1", FunctionID: 2, Name: "chargeCard",
		Error: p(`{"name":"PaymentError","message":"card declined","code":402,"data":null}`), Serialization: p("portable_json"),
	}))
	fin, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
		WorkflowID: "ours-ok", OwnerXID: "run-1", Status: sysdb.StatusSuccess, Output: p(`{"total":42,"currency":"EUR"}`),
	})
	require.NoError(t, err)
	require.True(t, fin.Applied)

	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "ours-err", Name: "checkout", Status: sysdb.StatusPending, CreatorXID: "run-2", ExecutorID: "agent-1",
		Serialization: p("portable_json"), Inputs: p(`{"positionalArgs":[],"namedArgs":{"qty":-1}}`),
	})
	require.NoError(t, err)
	fin, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
		WorkflowID: "ours-err", OwnerXID: "run-2", Status: sysdb.StatusError,
		Error: p(`{"name":"ValueError","message":"bad quantity","code":"E42","data":{"field":"qty"}}`),
	})
	require.NoError(t, err)
	require.True(t, fin.Applied)

	client := goClient(t, url, schema)

	listed, err := dbos.ListWorkflows(client, dbos.WithFilterWorkflowIDs("ours-ok", "ours-err"),
		dbos.WithFilterLoadInput(true), dbos.WithFilterLoadOutput(true))
	require.NoError(t, err)
	require.Len(t, listed, 2)
	byID := map[string]dbos.WorkflowStatus{}
	for _, w := range listed {
		byID[w.ID] = w
	}
	ok := byID["ours-ok"]
	require.Equal(t, dbos.WorkflowStatusSuccess, ok.Status)
	require.Equal(t, "checkout", ok.Name)
	require.Equal(t, "agent-1", ok.ExecutorID)
	require.Equal(t, "v1", ok.ApplicationVersion)
	require.Equal(t, "alice", ok.AuthenticatedUser)
	require.Equal(t, "portable_json", ok.Serialization)
	require.Equal(t, 1, ok.Attempts)
	require.Equal(t, map[string]any{"positionalArgs": []any{"alice", float64(3)}, "namedArgs": map[string]any{}}, ok.Input)
	require.Equal(t, map[string]any{"total": float64(42), "currency": "EUR"}, ok.Output)
	require.NoError(t, ok.Error)
	require.False(t, ok.CreatedAt.IsZero())
	require.False(t, ok.CompletedAt.IsZero())

	bad := byID["ours-err"]
	require.Equal(t, dbos.WorkflowStatusError, bad.Status)
	var listedErr *dbos.PortableWorkflowError
	require.ErrorAs(t, bad.Error, &listedErr)
	require.Equal(t, "ValueError", listedErr.Name)

	// The client filters on what we wrote.
	byName, err := dbos.ListWorkflows(client, dbos.WithFilterName("checkout"), dbos.WithFilterStatus(dbos.WorkflowStatusError))
	require.NoError(t, err)
	require.Len(t, byName, 1)
	require.Equal(t, "ours-err", byName[0].ID)

	steps, err := dbos.GetWorkflowSteps(client, "ours-ok", dbos.WithStepsLoadOutput(true))
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, 1, steps[0].StepID)
	require.Equal(t, "fetchCart", steps[0].StepName)
	require.Equal(t, map[string]any{"items": float64(3)}, steps[0].Output)
	require.NoError(t, steps[0].Error)
	require.False(t, steps[0].StartedAt.IsZero())
	require.Equal(t, 2, steps[1].StepID)
	require.Equal(t, "chargeCard", steps[1].StepName)
	var stepErr *dbos.PortableWorkflowError
	require.ErrorAs(t, steps[1].Error, &stepErr)
	require.Equal(t, "PaymentError", stepErr.Name)
	require.Equal(t, "card declined", stepErr.Message)
	require.Equal(t, float64(402), stepErr.Code)

	handle, err := dbos.RetrieveWorkflow[receipt](client, "ours-ok")
	require.NoError(t, err)
	got, err := waitResult(t, handle)
	require.NoError(t, err)
	require.Equal(t, receipt{Total: 42, Currency: "EUR"}, got)

	errHandle, err := dbos.RetrieveWorkflow[receipt](client, "ours-err")
	require.NoError(t, err)
	_, err = waitResult(t, errHandle)
	require.Error(t, err)
	var portable *dbos.PortableWorkflowError
	require.True(t, errors.As(err, &portable), "want a PortableWorkflowError, got %T: %v", err, err)
	require.Equal(t, "ValueError", portable.Name)
	require.Equal(t, "bad quantity", portable.Message)
	require.Equal(t, "E42", portable.Code)
	require.Equal(t, map[string]any{"field": "qty"}, portable.Data)
}

// TestInteropWeRunGoClientEnqueues: workflows the Go client enqueues are
// claimed by our dequeue with their inputs as the client encoded them, and
// the outcome we store is what the client's handle returns.
func TestInteropWeRunGoClientEnqueues(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)
	const queue = "agent-queue"

	native, err := dbos.Enqueue[receipt](client, queue, "checkout", cart{User: "bob", Items: 2},
		dbos.WithEnqueueWorkflowID("go-native"))
	require.NoError(t, err)
	time.Sleep(3 * time.Millisecond) // distinct created_at, for the dequeue order
	portableArgs, err := dbos.Enqueue[receipt](client, queue, "checkout",
		dbos.PortableWorkflowArgs{PositionalArgs: []any{"carol", 5}, NamedArgs: map[string]any{"express": true}},
		dbos.WithEnqueueWorkflowID("go-portable-args"), dbos.WithEnqueueClassName("Shop"))
	require.NoError(t, err)
	time.Sleep(3 * time.Millisecond)
	portableWrapped, err := dbos.Enqueue[receipt](client, queue, "checkout", cart{User: "dave", Items: 1},
		dbos.WithEnqueueWorkflowID("go-portable-wrapped"), dbos.WithEnqueuePortableWorkflow(), dbos.WithEnqueuePriority(0))
	require.NoError(t, err)

	// The rows as the client wrote them.
	queued, err := db.WorkflowGet(ctx, "go-native")
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, queued.Status)
	require.Equal(t, sysdbtest.Ptr(queue), queued.QueueName)
	require.Nil(t, queued.ApplicationVersion, "a client leaves the version to the latest executor")
	require.NotNil(t, queued.CreatorXID)
	require.Nil(t, queued.OwnerXID)
	require.Equal(t, int64(0), queued.RecoveryAttempts)

	ws, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: queue, ExecutorID: "agent", ApplicationVersion: "v1"})
	require.NoError(t, err)
	require.Len(t, ws, 3)
	got := map[string]sysdb.Workflow{}
	for _, w := range ws {
		got[w.ID] = w
		require.Equal(t, "checkout", w.Name)
		require.Equal(t, sysdb.StatusPending, w.Status)
		require.NotNil(t, w.OwnerXID)
		require.Equal(t, sysdbtest.Ptr("v1"), w.ApplicationVersion)
	}
	require.Equal(t, []string{"go-native", "go-portable-args", "go-portable-wrapped"}, []string{ws[0].ID, ws[1].ID, ws[2].ID})

	// Go's own format: DBOS_JSON, base64 of the JSON of the input value.
	w := got["go-native"]
	require.Equal(t, sysdbtest.Ptr("DBOS_JSON"), w.Serialization)
	require.NotNil(t, w.Inputs)
	raw, err := base64.StdEncoding.DecodeString(*w.Inputs)
	require.NoError(t, err, "DBOS_JSON inputs are base64: %q", *w.Inputs)
	require.JSONEq(t, `{"user":"bob","items":2}`, string(raw))

	// The portable format: plain JSON in the cross-language envelope.
	w = got["go-portable-args"]
	require.Equal(t, sysdbtest.Ptr("portable_json"), w.Serialization)
	require.JSONEq(t, `{"positionalArgs":["carol",5],"namedArgs":{"express":true}}`, *w.Inputs)
	require.Equal(t, sysdbtest.Ptr("Shop"), w.ClassName)
	w = got["go-portable-wrapped"]
	require.Equal(t, sysdbtest.Ptr("portable_json"), w.Serialization)
	require.JSONEq(t, `{"positionalArgs":[{"user":"dave","items":1}],"namedArgs":{}}`, *w.Inputs)

	// Run them: a step each, then the outcome in the row's own format.
	for _, w := range ws {
		require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{
			WorkflowID: w.ID, OwnerXID: *w.OwnerXID, FunctionID: 1, Name: "price", Output: sysdbtest.Ptr("null"), Serialization: w.Serialization,
		}))
	}
	finish := func(w sysdb.Workflow, status string, output, errText *string) {
		res, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: w.ID, OwnerXID: *w.OwnerXID, Status: status, Output: output, Error: errText})
		require.NoError(t, err)
		require.True(t, res.Applied, w.ID)
	}
	nativeOut := base64.StdEncoding.EncodeToString([]byte(`{"total":7,"currency":"USD"}`))
	finish(got["go-native"], sysdb.StatusSuccess, &nativeOut, nil)
	finish(got["go-portable-args"], sysdb.StatusSuccess, sysdbtest.Ptr(`{"total":50,"currency":"EUR"}`), nil)
	finish(got["go-portable-wrapped"], sysdb.StatusError, nil,
		sysdbtest.Ptr(`{"name":"OutOfStock","message":"nothing left","code":409,"data":{"sku":"A1"}}`))

	r, err := waitResult(t, native)
	require.NoError(t, err)
	require.Equal(t, receipt{Total: 7, Currency: "USD"}, r)
	r, err = waitResult(t, portableArgs)
	require.NoError(t, err)
	require.Equal(t, receipt{Total: 50, Currency: "EUR"}, r)
	_, err = waitResult(t, portableWrapped)
	var portable *dbos.PortableWorkflowError
	require.True(t, errors.As(err, &portable), "want a PortableWorkflowError, got %T: %v", err, err)
	require.Equal(t, "OutOfStock", portable.Name)
	require.Equal(t, "nothing left", portable.Message)

	status, err := native.GetStatus()
	require.NoError(t, err)
	require.Equal(t, dbos.WorkflowStatusSuccess, status.Status)
	require.Equal(t, "agent", status.ExecutorID)
	require.Equal(t, 1, status.Attempts)

	steps, err := dbos.GetWorkflowSteps(client, "go-native")
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, "price", steps[0].StepName)
}

// TestInteropGoClientOnOurSchema: the Go client accepts a database migrated
// by our code and works on it; what it changes, we see.
func TestInteropGoClientOnOurSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)

	listed, err := dbos.ListWorkflows(client)
	require.NoError(t, err)
	require.Empty(t, listed)

	q, err := client.RegisterQueue(client, "registered", dbos.WithGlobalConcurrency(2))
	require.NoError(t, err)
	require.Equal(t, "registered", q.GetName())
	queues, err := client.ListQueues(client)
	require.NoError(t, err)
	require.Len(t, queues, 1)
	require.Equal(t, sysdbtest.Ptr(2), queues[0].GetGlobalConcurrency())
	ours, err := db.QueueList(ctx)
	require.NoError(t, err)
	require.Equal(t, []sysdb.QueueSummary{{Name: "registered", Registered: true, Concurrency: sysdbtest.Ptr(2)}}, ours,
		"we read the queue the client registered")

	h, err := dbos.Enqueue[int](client, "registered", "count", 41, dbos.WithEnqueueDeduplicationID("once"))
	require.NoError(t, err)
	_, err = dbos.Enqueue[int](client, "registered", "count", 41, dbos.WithEnqueueDeduplicationID("once"))
	require.ErrorIs(t, err, dbos.ErrQueueDeduplicated, "the client's deduplication works on our unique index")

	listed, err = dbos.ListWorkflows(client, dbos.WithFilterQueueName("registered"))
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, h.GetWorkflowID(), listed[0].ID)
	require.Equal(t, dbos.WorkflowStatusEnqueued, listed[0].Status)

	// A cancel through the client is what our layer then sees.
	require.NoError(t, client.CancelWorkflow(client, h.GetWorkflowID()))
	w, err := db.WorkflowGet(ctx, h.GetWorkflowID())
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusCancelled, w.Status)
	require.Nil(t, w.DeduplicationID)
}

// textOf reads a nullable column as the Go SDK does: NULL is "".
func textOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// goLogger is the SDK's logger for these tests: quiet unless -v.
func goLogger() *slog.Logger {
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestInteropQueuesBothWays: a queue the Go SDK registers is read by
// QueueGet with the same limits, and one we register is read by the SDK;
// our Limits() resolve each queue as the SDK's own getters do, the
// deprecated partitioned flag included.
func TestInteropQueuesBothWays(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)
	p := sysdbtest.Ptr[int]

	_, err := client.RegisterQueue(client, "go-queue",
		dbos.WithGlobalConcurrency(10), dbos.WithWorkerConcurrency(2),
		dbos.WithRateLimiter(&dbos.RateLimiter{Limit: 5, Period: 30 * time.Second}), dbos.WithPriorityEnabled(),
		dbos.WithPartitionConcurrency(3), dbos.WithPartitionWorkerConcurrency(1),
		dbos.WithPartitionRateLimiter(&dbos.RateLimiter{Limit: 4, Period: 1500 * time.Millisecond}),
		dbos.WithQueueBasePollingInterval(250*time.Millisecond))
	require.NoError(t, err)
	got, err := db.QueueGet(ctx, "go-queue")
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f-]{36}$`, got.ID)
	require.Equal(t, sysdb.QueueConfig{
		ID: got.ID, Name: "go-queue", Concurrency: p(10), WorkerConcurrency: p(2),
		RateLimitMax: p(5), RateLimitPeriodSec: sysdbtest.Ptr(30.0), PriorityEnabled: true,
		PartitionQueue: true, PollingIntervalSec: 0.25,
		PartitionConcurrency: p(3), PartitionWorkerConcurrency: p(1),
		PartitionRateLimitMax: p(4), PartitionRateLimitPeriodSec: sysdbtest.Ptr(1.5),
		CreatedAt: got.CreatedAt, UpdatedAt: got.UpdatedAt,
	}, got)
	require.InDelta(t, time.Now().UnixMilli(), got.CreatedAt, 60_000)

	requireSameLimits := func(name string) {
		t.Helper()
		ours, err := db.QueueGet(ctx, name)
		require.NoError(t, err)
		theirs, err := client.RetrieveQueue(client, name)
		require.NoError(t, err)
		lim := ours.Limits()
		rate := func(limit *dbos.RateLimiter) (*int, time.Duration) {
			if limit == nil {
				return nil, 0
			}
			return &limit.Limit, limit.Period
		}
		max, period := rate(theirs.GetRateLimit())
		partMax, partPeriod := rate(theirs.GetPartitionRateLimit())
		require.Equal(t, sysdb.QueueLimits{
			GlobalConcurrency: theirs.GetGlobalConcurrency(), WorkerConcurrency: theirs.GetWorkerConcurrency(),
			RateLimitMax: max, RateLimitPeriod: period,
			PartitionConcurrency: theirs.GetPartitionConcurrency(), PartitionWorkerConcurrency: theirs.GetPartitionWorkerConcurrency(),
			PartitionRateLimitMax: partMax, PartitionRateLimitPeriod: partPeriod,
		}, lim, name)
		require.Equal(t, theirs.GetPartitionQueue(), ours.Partitioned(), name)
		require.Equal(t, theirs.GetPriorityEnabled(), ours.PriorityEnabled, name)
		require.Equal(t, time.Duration(ours.PollingIntervalSec*float64(time.Second)), theirs.GetPollingInterval(), name)
		require.Equal(t, textOf(ours.ApplicationName), theirs.GetApplicationName(), name)
	}
	requireSameLimits("go-queue")

	stored, created, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{
		Name: "agent-queue", Concurrency: p(4), WorkerConcurrency: p(2), RateLimitMax: p(6), RateLimitPeriodSec: sysdbtest.Ptr(2.5),
		PriorityEnabled: true, PartitionQueue: true, PartitionConcurrency: p(2), PollingIntervalSec: 0.5, ApplicationName: sysdbtest.Ptr("shop"),
	}})
	require.NoError(t, err)
	require.True(t, created)
	theirs, err := client.RetrieveQueue(client, "agent-queue")
	require.NoError(t, err)
	require.Equal(t, p(4), theirs.GetGlobalConcurrency())
	require.Equal(t, &dbos.RateLimiter{Limit: 6, Period: 2500 * time.Millisecond}, theirs.GetRateLimit())
	require.Equal(t, p(2), theirs.GetPartitionConcurrency())
	require.Equal(t, 500*time.Millisecond, theirs.GetPollingInterval())
	require.Equal(t, "shop", theirs.GetApplicationName())
	requireSameLimits("agent-queue")

	// Flagged partitioned without partition limits: both sides move the
	// queue-wide limits to each partition.
	_, _, err = db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{
		Name: "legacy", PartitionQueue: true, Concurrency: p(2), RateLimitMax: p(3), RateLimitPeriodSec: sysdbtest.Ptr(60.0),
	}})
	require.NoError(t, err)
	theirs, err = client.RetrieveQueue(client, "legacy")
	require.NoError(t, err)
	require.Nil(t, theirs.GetGlobalConcurrency())
	require.Equal(t, p(2), theirs.GetPartitionConcurrency())
	requireSameLimits("legacy")

	listed, err := client.ListQueues(client)
	require.NoError(t, err)
	var names []string
	for _, q := range listed {
		names = append(names, q.GetName())
	}
	require.ElementsMatch(t, []string{"go-queue", "agent-queue", "legacy"}, names)

	// The SDK refuses queue-wide settings on the legacy queue, as our
	// Limits() reads it: they are per partition there.
	require.Error(t, theirs.SetGlobalConcurrency(client, p(7)))
	// A change through the SDK is what we read next; ours keeps its row.
	goQueue, err := client.RetrieveQueue(client, "go-queue")
	require.NoError(t, err)
	require.NoError(t, goQueue.SetGlobalConcurrency(client, p(7)))
	after, err := db.QueueGet(ctx, "go-queue")
	require.NoError(t, err)
	require.Equal(t, p(7), after.Concurrency)
	again, err := db.QueueGet(ctx, "agent-queue")
	require.NoError(t, err)
	require.Equal(t, stored, again)
}

// TestInteropSchedulesBothWays: schedules we write are read by the Go SDK
// client with every field (last_fired_at included), and one the client
// creates is read by us.
func TestInteropSchedulesBothWays(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)

	require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{
		Name: "ours-nightly", WorkflowName: "report", WorkflowClassName: sysdbtest.Ptr("Reports"), Cron: "0 0 3 * * *",
		Context: `{"region":"eu","limit":3}`, AutomaticBackfill: true, QueueName: sysdbtest.Ptr("reports"),
		ApplicationName: sysdbtest.Ptr("shop"),
	}))
	fired := time.Date(2025, 6, 7, 3, 0, 0, 0, time.UTC)
	require.NoError(t, db.ScheduleSetLastFired(ctx, "ours-nightly", fired))
	require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{
		Name: "ours-zoned", WorkflowName: "tick", Cron: "*/5 * * * * *", CronTimezone: sysdbtest.Ptr("America/New_York"),
		Status: sysdb.SchedulePaused,
	}))
	ours, err := db.ScheduleGet(ctx, "ours-nightly")
	require.NoError(t, err)

	theirs, err := client.GetSchedule(client, "ours-nightly")
	require.NoError(t, err)
	require.Equal(t, ours.ID, theirs.ScheduleID)
	require.Equal(t, "ours-nightly", theirs.ScheduleName)
	require.Equal(t, "report", theirs.WorkflowName)
	require.Equal(t, "Reports", theirs.WorkflowClassName)
	require.Equal(t, "0 0 3 * * *", theirs.Schedule)
	require.Equal(t, dbos.ScheduleStatusActive, theirs.Status)
	require.JSONEq(t, `{"region":"eu","limit":3}`, string(theirs.Context))
	require.NotNil(t, theirs.LastFiredAt, "the SDK parses the last_fired_at we write")
	require.True(t, fired.Equal(*theirs.LastFiredAt), "SDK read %v", *theirs.LastFiredAt)
	require.True(t, theirs.AutomaticBackfill)
	require.Equal(t, "", theirs.CronTimezone)
	require.Equal(t, "reports", theirs.QueueName)
	require.Equal(t, "shop", theirs.ApplicationName)

	zoned, err := client.GetSchedule(client, "ours-zoned")
	require.NoError(t, err, "a schedule with defaults is readable by the SDK")
	require.Equal(t, "America/New_York", zoned.CronTimezone)
	require.Equal(t, dbos.ScheduleStatusPaused, zoned.Status)
	require.Equal(t, sysdb.InternalQueueName, zoned.QueueName, "no queue: the internal one")
	require.Empty(t, zoned.Context)
	require.Nil(t, zoned.LastFiredAt)

	require.NoError(t, dbos.CreateSchedule(client, dbos.ScheduleSpec{
		ScheduleName: "go-hourly", Schedule: "0 0 * * * *", WorkflowName: "sync", Context: map[string]int{"batch": 50},
	}))
	listed, err := dbos.ListSchedules(client)
	require.NoError(t, err)
	require.Len(t, listed, 3, "the SDK lists ours beside its own")

	mine, err := db.ScheduleGet(ctx, "go-hourly")
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f-]{36}$`, mine.ID)
	require.Equal(t, sysdb.Schedule{
		ID: mine.ID, Name: "go-hourly", WorkflowName: "sync", Cron: "0 0 * * * *", Status: sysdb.ScheduleActive,
		Context: `{"batch":50}`,
	}, mine, "the SDK's empty time zone reads as none")

	// A pause through the SDK is what we read.
	require.NoError(t, client.PauseSchedule(client, "go-hourly"))
	paused, err := db.ScheduleList(ctx, sysdb.ScheduleListParams{Statuses: []string{sysdb.SchedulePaused}})
	require.NoError(t, err)
	require.Len(t, paused, 2)
	require.Equal(t, "go-hourly", paused[0].Name)
	require.Equal(t, "ours-zoned", paused[1].Name)
}

// TestInteropVersionsBothWays: versions we register are the SDK's versions,
// and the latest moves the same way whichever side promotes.
func TestInteropVersionsBothWays(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)

	require.NoError(t, db.VersionRegister(ctx, "v1", nil))
	require.NoError(t, db.VersionRegister(ctx, "v2", nil))
	require.NoError(t, db.VersionRegister(ctx, "shop-v1", sysdbtest.Ptr("shop")))
	ours, err := db.VersionList(ctx, nil)
	require.NoError(t, err)
	theirs, err := dbos.ListApplicationVersions(client)
	require.NoError(t, err)
	require.Len(t, theirs, len(ours))
	for i := range ours {
		require.Equal(t, ours[i].ID, theirs[i].ID)
		require.Equal(t, ours[i].Name, theirs[i].Name)
		require.Equal(t, ours[i].Timestamp, theirs[i].Timestamp)
		require.Equal(t, ours[i].CreatedAt, theirs[i].CreatedAt)
		require.Equal(t, textOf(ours[i].ApplicationName), theirs[i].ApplicationName)
	}
	require.Equal(t, "shop", theirs[0].ApplicationName)

	sameLatest := func(want string) {
		t.Helper()
		latest, ok, err := db.VersionLatest(ctx, nil)
		require.NoError(t, err)
		require.True(t, ok)
		sdk, err := dbos.GetLatestApplicationVersion(client)
		require.NoError(t, err)
		require.Equal(t, want, latest.Name, "ours")
		require.Equal(t, want, sdk.Name, "the SDK's")
		require.Equal(t, latest.Timestamp, sdk.Timestamp)
	}
	sameLatest("shop-v1")
	require.NoError(t, db.VersionPromote(ctx, "v1", nil))
	sameLatest("v1")
	require.NoError(t, dbos.SetLatestApplicationVersion(client, "v2"))
	sameLatest("v2")
	require.NoError(t, db.VersionPromote(ctx, "v1", nil))
	sameLatest("v1")
}

// TestInteropGoRuntimeSchedulerAndVersion runs the Go SDK itself (not only
// its client) on our schema: the version it registers at launch is read by
// us, and the last_fired_at its scheduler writes is parsed by us; what we
// then write, the SDK parses back.
func TestInteropGoRuntimeSchedulerAndVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)

	// Every second, onto a queue nobody serves: the ticks only need firing.
	require.NoError(t, dbos.CreateSchedule(client, dbos.ScheduleSpec{
		ScheduleName: "go-ticker", Schedule: "* * * * * *", WorkflowName: "tick", QueueName: "unserved",
	}))
	runtime, err := dbos.NewContext(context.Background(), dbos.Config{
		DatabaseURL: url, DatabaseSchema: schema, AppName: "go-app", ApplicationVersion: "go-v1",
		ExecutorID: "go-exec", Logger: goLogger(), SchedulerPollingInterval: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	launched := time.Now()
	require.NoError(t, dbos.Launch(runtime))
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			require.NoError(t, dbos.Shutdown(runtime, 10*time.Second))
		}
	}
	t.Cleanup(stop)

	latest, ok, err := db.VersionLatest(ctx, sysdbtest.Ptr("go-app"))
	require.NoError(t, err)
	require.True(t, ok, "the runtime registered its version at launch")
	require.Equal(t, "go-v1", latest.Name)
	require.Equal(t, sysdbtest.Ptr("go-app"), latest.ApplicationName)
	err = db.VersionRegister(ctx, "go-v1", sysdbtest.Ptr("shop"))
	var owned *sysdb.NameOwnedError
	require.ErrorAs(t, err, &owned, "the runtime's version name is its application's")

	// The scheduler fires within a second or two of launch; there is no
	// signal to wait on but the row itself.
	var sched sysdb.Schedule
	deadline := time.Now().Add(30 * time.Second)
	for {
		sched, err = db.ScheduleGet(ctx, "go-ticker")
		require.NoError(t, err)
		if sched.LastFiredAtRaw != nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the Go scheduler never fired")
		time.Sleep(50 * time.Millisecond)
	}
	stop() // its next tick would overwrite what we write below
	require.NotNil(t, sched.LastFiredAt, "we parse what the Go SDK wrote: %q", *sched.LastFiredAtRaw)
	_, err = time.Parse(time.RFC3339Nano, *sched.LastFiredAtRaw)
	require.NoError(t, err, "the Go SDK writes RFC 3339")
	require.False(t, sched.LastFiredAt.Before(launched.Add(-time.Second)))
	require.False(t, sched.LastFiredAt.After(time.Now().Add(time.Second)))

	// Monotonic against the SDK's value, and the SDK reads ours back.
	goFired := *sched.LastFiredAt
	require.NoError(t, db.ScheduleSetLastFired(ctx, "go-ticker", goFired.Add(-time.Hour)))
	sched, err = db.ScheduleGet(ctx, "go-ticker")
	require.NoError(t, err)
	require.True(t, goFired.Equal(*sched.LastFiredAt), "an older tick does not replace the SDK's")
	next := goFired.Add(time.Second).Truncate(time.Second)
	require.NoError(t, db.ScheduleSetLastFired(ctx, "go-ticker", next))
	theirs, err := client.GetSchedule(client, "go-ticker")
	require.NoError(t, err)
	require.NotNil(t, theirs.LastFiredAt)
	require.True(t, next.Equal(*theirs.LastFiredAt), "SDK read %v", *theirs.LastFiredAt)
}
