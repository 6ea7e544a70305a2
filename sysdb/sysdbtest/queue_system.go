package sysdbtest

// The QueueSystem part of the suite: partition limits, queue registrations,
// delays, debounce, timeouts, application versions and schedules. "Due" and
// "late" are written relative to now (an hour either way), never waited for.

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

const hourMS = int64(time.Hour / time.Millisecond)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func inPartition(key string) func(*sysdb.WorkflowInsertParams) {
	return func(p *sysdb.WorkflowInsertParams) { p.QueuePartitionKey = Ptr(key) }
}

func partitionClaim(t *testing.T, db sysdb.SystemDatabase, key string, lim sysdb.QueueLimits) []string {
	t.Helper()
	return ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: key, Limits: lim}))
}

// ---------------------------------------------------------------------------
// Dequeue limits per partition

func testQueueDequeuePartitionIsolation(t *testing.T, db sysdb.SystemDatabase) {
	for _, r := range [][2]string{{"a-1", "a"}, {"a-2", "a"}, {"b-1", "b"}, {"b-2", "b"}, {"c-1", "c"}} {
		enqueue(t, db, r[0], "q", inPartition(r[1]))
		tick()
	}
	one := sysdb.QueueLimits{PartitionConcurrency: Ptr(1)}
	first := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "a", Limits: one})
	require.Equal(t, []string{"a-1"}, ids(first))
	require.Empty(t, partitionClaim(t, db, "a", one), "a runs its one")
	require.Equal(t, []string{"b-1"}, partitionClaim(t, db, "b", one), "a full partition does not block another")
	require.Equal(t, []string{"c-1"}, partitionClaim(t, db, "c", one))
	finish(t, db, "a-1", *first[0].OwnerXID, `1`)
	require.Equal(t, []string{"a-2"}, partitionClaim(t, db, "a", one), "a finished run frees its partition's slot")

	// This worker's slots in a partition: PartitionWorkerConcurrency minus
	// what it runs there; other workers' runs do not count.
	enqueue(t, db, "b-3", "q", inPartition("b"))
	worker := sysdb.QueueLimits{PartitionWorkerConcurrency: Ptr(2), PartitionLocalRunning: 1}
	require.Equal(t, []string{"b-2"}, partitionClaim(t, db, "b", worker), "2 slots, 1 taken")
	worker.PartitionLocalRunning = 2
	require.Empty(t, partitionClaim(t, db, "b", worker))
	worker.PartitionLocalRunning = 0
	require.Equal(t, []string{"b-3"}, partitionClaim(t, db, "b", worker))
}

func testQueueDequeueGlobalLimitAcrossPartitions(t *testing.T, db sysdb.SystemDatabase) {
	for _, r := range [][2]string{{"a-1", "a"}, {"a-2", "a"}, {"a-3", "a"}, {"b-1", "b"}, {"b-2", "b"}} {
		enqueue(t, db, r[0], "q", inPartition(r[1]))
		tick()
	}
	lim := sysdb.QueueLimits{GlobalConcurrency: Ptr(3), PartitionConcurrency: Ptr(2)}
	as := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "a", Limits: lim})
	require.Equal(t, []string{"a-1", "a-2"}, ids(as), "the partition limit binds first")
	require.Equal(t, []string{"b-1"}, partitionClaim(t, db, "b", lim), "a's two count against the queue's three")
	require.Empty(t, partitionClaim(t, db, "b", lim))
	require.Empty(t, partitionClaim(t, db, "a", lim))
	finish(t, db, "a-1", *as[0].OwnerXID, `1`)
	require.Equal(t, []string{"b-2"}, partitionClaim(t, db, "b", lim), "a slot freed in a serves b")

	// The worker limit counts this worker's runs of the whole queue too.
	enqueue(t, db, "b-3", "q", inPartition("b"))
	require.Empty(t, partitionClaim(t, db, "b", sysdb.QueueLimits{WorkerConcurrency: Ptr(4), LocalRunning: 4}))
	require.Equal(t, []string{"b-3"}, partitionClaim(t, db, "b", sysdb.QueueLimits{WorkerConcurrency: Ptr(4), LocalRunning: 3}))
}

func testQueueDequeuePartitionRateLimit(t *testing.T, db sysdb.SystemDatabase) {
	for _, key := range []string{"a", "b", "c"} {
		for i := 1; i <= 3; i++ {
			enqueue(t, db, fmt.Sprintf("%s-%d", key, i), "q", inPartition(key))
			tick()
		}
	}
	// A start outside any rate limiter is not counted by one.
	require.Equal(t, []string{"a-1"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "a", MaxClaim: 1})))

	prl := sysdb.QueueLimits{PartitionRateLimitMax: Ptr(1), PartitionRateLimitPeriod: time.Hour}
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "a", Limits: prl})
	require.Equal(t, []string{"a-2"}, ids(ws))
	require.True(t, ws[0].RateLimited, "a partition-rate-limited start is counted as rate limited")
	finish(t, db, "a-2", *ws[0].OwnerXID, `2`)
	require.Empty(t, partitionClaim(t, db, "a", prl), "a started its one this hour; finishing does not give it back")
	require.Equal(t, []string{"b-1"}, partitionClaim(t, db, "b", prl), "b has its own window")

	// The queue-wide rate limit counts every partition's starts.
	rl := sysdb.QueueLimits{RateLimitMax: Ptr(2), RateLimitPeriod: time.Hour}
	require.Empty(t, partitionClaim(t, db, "c", rl), "a and b started two this hour")
	require.Equal(t, []string{"c-1"}, partitionClaim(t, db, "c", sysdb.QueueLimits{RateLimitMax: Ptr(3), RateLimitPeriod: time.Hour}))
}

func testQueueDequeueLegacyPartitioned(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	// Flagged partitioned without partition limits: the queue-wide limits
	// apply to each partition, as in the SDKs' deprecated mode.
	legacy, _, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{
		Name: "legacy", PartitionQueue: true, Concurrency: Ptr(1), WorkerConcurrency: Ptr(1),
		RateLimitMax: Ptr(5), RateLimitPeriodSec: Ptr(60.0),
	}})
	require.NoError(t, err)
	legacy, err = db.QueueGet(ctx, "legacy")
	require.NoError(t, err)
	require.True(t, legacy.LegacyPartitioned())
	require.True(t, legacy.Partitioned())
	lim := legacy.Limits()
	require.Equal(t, sysdb.QueueLimits{
		PartitionConcurrency: Ptr(1), PartitionWorkerConcurrency: Ptr(1),
		PartitionRateLimitMax: Ptr(5), PartitionRateLimitPeriod: time.Minute,
	}, lim)

	for _, r := range [][2]string{{"a-1", "a"}, {"a-2", "a"}, {"b-1", "b"}} {
		enqueue(t, db, r[0], "legacy", inPartition(r[1]))
		tick()
	}
	claim := func(key string) []string {
		return ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "legacy", PartitionKey: key, Limits: lim}))
	}
	require.Equal(t, []string{"a-1"}, claim("a"))
	require.Empty(t, claim("a"), "concurrency 1 per partition")
	require.Equal(t, []string{"b-1"}, claim("b"), "not 1 for the whole queue")

	// With partition limits, the flag is only a flag: the queue-wide limits
	// stay queue-wide.
	modern, _, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{
		Name: "modern", PartitionQueue: true, Concurrency: Ptr(4), PartitionConcurrency: Ptr(2),
	}})
	require.NoError(t, err)
	require.False(t, modern.LegacyPartitioned())
	require.True(t, modern.Partitioned())
	require.Equal(t, Ptr(4), modern.Limits().GlobalConcurrency)
	require.Equal(t, Ptr(2), modern.Limits().PartitionConcurrency)
	plain := sysdb.QueueConfig{Name: "plain", Concurrency: Ptr(4)}
	require.False(t, plain.Partitioned())
	require.Equal(t, Ptr(4), plain.Limits().GlobalConcurrency)
}

func testQueueDequeuePartitionLimitsNeedKey(t *testing.T, db sysdb.SystemDatabase) {
	enqueue(t, db, "a-1", "q", inPartition("a"))
	for _, lim := range []sysdb.QueueLimits{
		{PartitionConcurrency: Ptr(1)},
		{PartitionWorkerConcurrency: Ptr(1)},
		{PartitionRateLimitMax: Ptr(1), PartitionRateLimitPeriod: time.Second},
	} {
		_, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "local", ApplicationVersion: "v1", Limits: lim})
		require.ErrorContains(t, err, "partition key")
	}
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "a-1").Status, "nothing was claimed")
}

// ---------------------------------------------------------------------------
// Queue registrations

func testQueueRegister(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	before := nowMS()
	cfg := sysdb.QueueConfig{
		Name: "orders", Concurrency: Ptr(10), WorkerConcurrency: Ptr(2),
		RateLimitMax: Ptr(100), RateLimitPeriodSec: Ptr(60.5), PriorityEnabled: true,
		PartitionQueue: true, PartitionConcurrency: Ptr(3), PartitionWorkerConcurrency: Ptr(1),
		PartitionRateLimitMax: Ptr(7), PartitionRateLimitPeriodSec: Ptr(2.5), ApplicationName: Ptr("shop"),
	}
	stored, created, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: cfg})
	require.NoError(t, err)
	require.True(t, created)
	require.Regexp(t, uuidPattern, stored.ID, "queue_id is a uuid")
	require.Equal(t, sysdb.DefaultPollingIntervalSec, stored.PollingIntervalSec, "no interval: the SDKs' default")
	require.GreaterOrEqual(t, stored.CreatedAt, before-5000, "created_at is epoch ms")
	require.LessOrEqual(t, stored.CreatedAt, nowMS()+5000)
	require.Equal(t, stored.CreatedAt, stored.UpdatedAt)
	want := cfg
	want.ID, want.PollingIntervalSec, want.CreatedAt, want.UpdatedAt = stored.ID, 1.0, stored.CreatedAt, stored.UpdatedAt
	require.Equal(t, want, stored)
	got, err := db.QueueGet(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, stored, got)

	// An existing registration stands unless an update is asked for.
	other := sysdb.QueueConfig{Name: "orders", Concurrency: Ptr(1), PollingIntervalSec: 0.25, ApplicationName: Ptr("shop")}
	again, created, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: other})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, stored, again, "the stored row, unchanged")

	tick()
	updated, created, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: other, UpdateExisting: true})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, stored.ID, updated.ID, "an update keeps the row's identity")
	require.Equal(t, stored.CreatedAt, updated.CreatedAt)
	require.Greater(t, updated.UpdatedAt, stored.UpdatedAt)
	require.Equal(t, Ptr(1), updated.Concurrency)
	require.Nil(t, updated.WorkerConcurrency, "an update replaces the whole configuration")
	require.Nil(t, updated.RateLimitMax)
	require.Nil(t, updated.PartitionConcurrency)
	require.False(t, updated.PriorityEnabled)
	require.False(t, updated.PartitionQueue)
	require.Equal(t, 0.25, updated.PollingIntervalSec)
	require.Equal(t, Ptr("shop"), updated.ApplicationName)

	// The registered queue is listed with its limits.
	summaries, err := db.QueueList(ctx)
	require.NoError(t, err)
	require.Equal(t, []sysdb.QueueSummary{{Name: "orders", Registered: true, Concurrency: Ptr(1), ApplicationName: Ptr("shop")}}, summaries)
}

func testQueueRegisterOwnership(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	register := func(name string, app *string, update bool) (sysdb.QueueConfig, bool, error) {
		return db.QueueRegister(ctx, sysdb.QueueRegisterParams{
			Config: sysdb.QueueConfig{Name: name, Concurrency: Ptr(3), ApplicationName: app}, UpdateExisting: update,
		})
	}
	_, _, err := register("payments", Ptr("bank"), false)
	require.NoError(t, err)
	for _, update := range []bool{false, true} {
		_, _, err = register("payments", Ptr("shop"), update)
		owned := asError[*sysdb.NameOwnedError](t, err)
		require.Equal(t, "payments", owned.Name)
		require.Equal(t, "bank", owned.Owner)
		require.Equal(t, "shop", owned.Requester)
		require.Equal(t, "queue", owned.Kind)
	}
	// A requester acting for no application conflicts with nobody and
	// leaves the owner as it is.
	q, created, err := register("payments", nil, true)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, Ptr("bank"), q.ApplicationName)

	// An unclaimed queue is claimed by the first application that updates it
	// (as the SDKs do; a registration that leaves the row alone does not).
	q, created, err = register("shared", nil, false)
	require.NoError(t, err)
	require.True(t, created)
	require.Nil(t, q.ApplicationName)
	q, _, err = register("shared", Ptr("shop"), false)
	require.NoError(t, err)
	require.Nil(t, q.ApplicationName)
	q, _, err = register("shared", Ptr("shop"), true)
	require.NoError(t, err)
	require.Equal(t, Ptr("shop"), q.ApplicationName)
	_, _, err = register("shared", Ptr("bank"), true)
	asError[*sysdb.NameOwnedError](t, err)

	_, _, err = db.QueueRegister(ctx, sysdb.QueueRegisterParams{})
	require.Error(t, err, "a queue needs a name")
}

func testQueueGetAndDelete(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	_, err := db.QueueGet(ctx, "nowhere")
	require.Equal(t, "nowhere", asError[*sysdb.QueueNotFoundError](t, err).Name)

	_, _, err = db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{Name: "jobs"}})
	require.NoError(t, err)
	enqueue(t, db, "job-1", "jobs")
	require.NoError(t, db.QueueDelete(ctx, "jobs"))
	_, err = db.QueueGet(ctx, "jobs")
	asError[*sysdb.QueueNotFoundError](t, err)
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "job-1").Status, "the queue's workflows stay")
	err = db.QueueDelete(ctx, "jobs")
	require.Equal(t, "jobs", asError[*sysdb.QueueNotFoundError](t, err).Name)

	summaries, err := db.QueueList(ctx)
	require.NoError(t, err)
	require.Equal(t, []sysdb.QueueSummary{{Name: "jobs", Enqueued: 1}}, summaries, "listed for its workflows, no longer registered")
}

func testQueuePartitions(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	parts, err := db.QueuePartitions(ctx, "q")
	require.NoError(t, err)
	require.Empty(t, parts)

	enqueue(t, db, "c-1", "q", inPartition("c"))
	enqueue(t, db, "a-1", "q", inPartition("a"))
	enqueue(t, db, "a-2", "q", inPartition("a"))
	enqueue(t, db, "b-1", "q", inPartition("b"))
	enqueue(t, db, "none", "q")
	enqueue(t, db, "x-1", "other", inPartition("x"))
	insert(t, db, sysdb.WorkflowInsertParams{ID: "d-1", Status: sysdb.StatusDelayed, QueueName: Ptr("q"),
		QueuePartitionKey: Ptr("d"), DelayUntilEpochMS: Ptr(nowMS() + hourMS)})
	require.Equal(t, []string{"b-1"}, partitionClaim(t, db, "b", sysdb.QueueLimits{}))

	parts, err = db.QueuePartitions(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "c"}, parts, "keys with ENQUEUED work, in order; running, delayed and keyless rows do not count")
}

// ---------------------------------------------------------------------------
// Deduplication, delays, debounce, timeouts

func testWorkflowByDeduplicationID(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	withKey := func(key string) func(*sysdb.WorkflowInsertParams) {
		return func(p *sysdb.WorkflowInsertParams) { p.DeduplicationID = Ptr(key) }
	}
	_, found, err := db.WorkflowByDeduplicationID(ctx, "q", "order-7")
	require.NoError(t, err)
	require.False(t, found)

	enqueue(t, db, "first", "q", withKey("order-7"))
	// The "return existing" policy: a duplicate is refused, and the holder
	// is found by the key.
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "second", Name: "wf", Status: sysdb.StatusEnqueued,
		QueueName: Ptr("q"), DeduplicationID: Ptr("order-7"), CreatorXID: Token(), ExecutorID: "local"})
	asError[*sysdb.DeduplicatedError](t, err)
	id, found, err := db.WorkflowByDeduplicationID(ctx, "q", "order-7")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "first", id)

	_, found, err = db.WorkflowByDeduplicationID(ctx, "elsewhere", "order-7")
	require.NoError(t, err)
	require.False(t, found, "keys are per queue")

	// A finished workflow gives its key up.
	finish(t, db, "first", claimOne(t, db, "q", "first"), `1`)
	_, found, err = db.WorkflowByDeduplicationID(ctx, "q", "order-7")
	require.NoError(t, err)
	require.False(t, found)
}

func testWorkflowReleaseDelayed(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	past, future := nowMS()-hourMS, nowMS()+hourMS
	delayed := func(id, queue string, until int64, mods ...func(*sysdb.WorkflowInsertParams)) {
		p := sysdb.WorkflowInsertParams{ID: id, Status: sysdb.StatusDelayed, QueueName: Ptr(queue), DelayUntilEpochMS: Ptr(until)}
		for _, m := range mods {
			m(&p)
		}
		insert(t, db, p)
	}
	delayed("due-1", "q1", past, func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = Ptr("v3") })
	delayed("due-debounced", "q2", past, func(p *sysdb.WorkflowInsertParams) {
		p.DeduplicationID, p.IsDebounced = Ptr("debounce-key"), true
	})
	delayed("due-deduplicated", "q1", past, func(p *sysdb.WorkflowInsertParams) { p.DeduplicationID = Ptr("dedup-key") })
	delayed("not-yet", "q1", future)
	delayed("bank-due", "q1", past, func(p *sysdb.WorkflowInsertParams) { p.ApplicationName = Ptr("bank") })
	enqueue(t, db, "already-enqueued", "q1")

	released, err := db.WorkflowReleaseDelayed(ctx, Ptr("shop"))
	require.NoError(t, err)
	require.ElementsMatch(t, []sysdb.QueuedWorkflow{
		{WorkflowID: "due-1", QueueName: "q1", ApplicationVersion: Ptr("v3")},
		{WorkflowID: "due-debounced", QueueName: "q2"},
		{WorkflowID: "due-deduplicated", QueueName: "q1"},
	}, released, "due rows of shop and unclaimed ones")

	for _, id := range []string{"due-1", "due-debounced", "due-deduplicated"} {
		require.Equal(t, sysdb.StatusEnqueued, get(t, db, id).Status, id)
	}
	require.Nil(t, get(t, db, "due-debounced").DeduplicationID, "a released debounced workflow gives its debounce key up")
	require.Equal(t, Ptr("dedup-key"), get(t, db, "due-deduplicated").DeduplicationID, "a plain deduplication id stays while active")
	require.Equal(t, sysdb.StatusDelayed, get(t, db, "not-yet").Status)
	require.Equal(t, sysdb.StatusDelayed, get(t, db, "bank-due").Status, "another application's row is its own to release")

	again, err := db.WorkflowReleaseDelayed(ctx, Ptr("shop"))
	require.NoError(t, err)
	require.Empty(t, again)
	all, err := db.WorkflowReleaseDelayed(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []sysdb.QueuedWorkflow{{WorkflowID: "bank-due", QueueName: "q1"}}, all, "no application: every due row")

	require.ElementsMatch(t, []string{"due-1", "due-deduplicated", "bank-due", "already-enqueued"},
		ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q1", ApplicationVersion: "v3"})), "released rows are dequeued")
}

func testWorkflowSetDelay(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	insert(t, db, sysdb.WorkflowInsertParams{ID: "later", Status: sysdb.StatusDelayed, QueueName: Ptr("q"), DelayUntilEpochMS: Ptr(nowMS() + hourMS)})
	released, err := db.WorkflowReleaseDelayed(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, released)

	due := nowMS() - 1000
	require.NoError(t, db.WorkflowSetDelay(ctx, "later", due))
	require.Equal(t, Ptr(due), get(t, db, "later").DelayUntilEpochMS)
	released, err = db.WorkflowReleaseDelayed(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []sysdb.QueuedWorkflow{{WorkflowID: "later", QueueName: "q"}}, released, "moved into the past, it is due")

	err = db.WorkflowSetDelay(ctx, "later", nowMS()+hourMS)
	notDelayed := asError[*sysdb.NotDelayedError](t, err)
	require.Equal(t, sysdb.StatusEnqueued, notDelayed.Status)
	require.Equal(t, Ptr(due), get(t, db, "later").DelayUntilEpochMS, "a released workflow's delay does not change")
	err = db.WorkflowSetDelay(ctx, "missing", nowMS())
	asError[*sysdb.NotFoundError](t, err)
}

func testWorkflowSetPriority(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	insert(t, db, sysdb.WorkflowInsertParams{ID: "waiting", Status: sysdb.StatusEnqueued, QueueName: Ptr("q")})
	insert(t, db, sysdb.WorkflowInsertParams{ID: "held", Status: sysdb.StatusDelayed, QueueName: Ptr("q"), DelayUntilEpochMS: Ptr(nowMS() + hourMS)})
	insert(t, db, sysdb.WorkflowInsertParams{ID: "running", Status: sysdb.StatusPending, QueueName: Ptr("q")})
	for _, id := range []string{"waiting", "held"} {
		applied, err := db.WorkflowSetPriority(ctx, id, 7)
		require.NoError(t, err)
		require.True(t, applied, id)
		require.Equal(t, 7, get(t, db, id).Priority, id)
	}
	applied, err := db.WorkflowSetPriority(ctx, "running", 3)
	require.NoError(t, err)
	require.False(t, applied, "a workflow that no longer waits keeps its priority")
	require.Equal(t, 0, get(t, db, "running").Priority)
	applied, err = db.WorkflowSetPriority(ctx, "missing", 3)
	require.NoError(t, err)
	require.False(t, applied, "a missing workflow is no error, as in DBOS")
}

func testWorkflowDebounce(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	now := nowMS()
	deadline := now + 2*hourMS
	debounce := func(name, key string, until int64, inputs string) sysdb.DebounceResult {
		t.Helper()
		res, err := db.WorkflowDebounce(ctx, sysdb.WorkflowDebounceParams{
			Name: name, QueueName: "q", DeduplicationID: key, DelayUntilEpochMS: until,
			Inputs: Ptr(inputs), Serialization: Ptr("portable_json"),
		})
		require.NoError(t, err)
		return res
	}

	// Nothing holds the key: the caller starts a new debounced workflow.
	require.Equal(t, sysdb.DebounceResult{}, debounce("notify", "user-1", now+hourMS, `[1]`))
	insert(t, db, sysdb.WorkflowInsertParams{
		ID: "deb-1", Name: "notify", Status: sysdb.StatusDelayed, QueueName: Ptr("q"),
		DeduplicationID: Ptr("user-1"), IsDebounced: true, DelayUntilEpochMS: Ptr(now + hourMS), DebounceDeadline: Ptr(deadline),
		Serialization: Ptr("portable_json"), Inputs: Ptr(`[1]`),
	})

	// A bounce pushes the delay back and replaces the inputs.
	res := debounce("notify", "user-1", now+90*60_000, `[2]`)
	require.Equal(t, sysdb.DebounceResult{BouncedID: Ptr("deb-1")}, res)
	w := get(t, db, "deb-1")
	require.Equal(t, Ptr(now+90*60_000), w.DelayUntilEpochMS)
	require.Equal(t, Ptr(`[2]`), w.Inputs)
	require.Equal(t, sysdb.StatusDelayed, w.Status)

	// Never past the debounce deadline.
	require.Equal(t, Ptr("deb-1"), debounce("notify", "user-1", now+3*hourMS, `[3]`).BouncedID)
	w = get(t, db, "deb-1")
	require.Equal(t, Ptr(deadline), w.DelayUntilEpochMS, "capped at the deadline")
	require.Equal(t, Ptr(`[3]`), w.Inputs)

	// Another workflow whose key collides is not bounced: its holder is
	// reported with its name.
	res = debounce("other-workflow", "user-1", now+hourMS, `[9]`)
	require.Nil(t, res.BouncedID)
	require.Equal(t, Ptr("deb-1"), res.HolderID)
	require.True(t, res.HolderIsDebounced)
	require.Equal(t, "notify", res.HolderName)
	require.Equal(t, Ptr(`[3]`), get(t, db, "deb-1").Inputs, "the holder's inputs are untouched")

	// A plain deduplicated workflow holding the key is reported as such.
	enqueue(t, db, "plain", "q", func(p *sysdb.WorkflowInsertParams) { p.Name, p.DeduplicationID = "notify", Ptr("user-2") })
	res = debounce("notify", "user-2", now+hourMS, `[1]`)
	require.Nil(t, res.BouncedID)
	require.Equal(t, Ptr("plain"), res.HolderID)
	require.False(t, res.HolderIsDebounced)

	// Once released the key is free again: the next debounce starts afresh.
	require.NoError(t, db.WorkflowSetDelay(ctx, "deb-1", now-1000))
	_, err := db.WorkflowReleaseDelayed(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, sysdb.DebounceResult{}, debounce("notify", "user-1", now+hourMS, `[4]`))
	require.Equal(t, Ptr(`[3]`), get(t, db, "deb-1").Inputs, "a released workflow keeps the inputs it runs with")
}

func testWorkflowDebounceApplications(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	until := nowMS() + hourMS
	debounced := func(id, key string, app *string) {
		insert(t, db, sysdb.WorkflowInsertParams{
			ID: id, Name: "notify", Status: sysdb.StatusDelayed, QueueName: Ptr("q"), ApplicationName: app,
			DeduplicationID: Ptr(key), IsDebounced: true, DelayUntilEpochMS: Ptr(until),
		})
	}
	bounce := func(key string, app *string) sysdb.DebounceResult {
		res, err := db.WorkflowDebounce(ctx, sysdb.WorkflowDebounceParams{
			Name: "notify", QueueName: "q", DeduplicationID: key, DelayUntilEpochMS: until + 1000, ApplicationName: app,
		})
		require.NoError(t, err)
		return res
	}
	debounced("bank-1", "k-bank", Ptr("bank"))
	res := bounce("k-bank", Ptr("shop"))
	require.Nil(t, res.BouncedID, "another application's workflow is never bounced")
	require.Equal(t, Ptr("bank-1"), res.HolderID)
	require.Equal(t, Ptr("bank"), res.HolderApplicationName)
	require.Equal(t, Ptr(until), get(t, db, "bank-1").DelayUntilEpochMS)
	require.Equal(t, Ptr("bank-1"), bounce("k-bank", Ptr("bank")).BouncedID)

	debounced("free-1", "k-free", nil)
	require.Equal(t, Ptr("free-1"), bounce("k-free", Ptr("shop")).BouncedID)
	require.Equal(t, Ptr("shop"), get(t, db, "free-1").ApplicationName, "an unclaimed workflow is claimed by its bouncer")
	require.Equal(t, Ptr("free-1"), bounce("k-free", nil).BouncedID, "no application: any workflow")
}

// A debounce from workflow code is the caller's step, recorded with the
// bounce (or with the child it creates, at the next step) in one
// transaction; the same step again is answered from the record.
func testWorkflowDebounceFromWorkflow(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	now := nowMS()
	owner := start(t, db, "dparent")
	debounce := func(c sysdb.StepCaller, key string, until int64, inputs string) (sysdb.DebounceResult, error) {
		t.Helper()
		return db.WorkflowDebounce(ctx, sysdb.WorkflowDebounceParams{
			Name: "notify", QueueName: "q", DeduplicationID: key, DelayUntilEpochMS: until,
			Inputs: Ptr(inputs), Serialization: Ptr("portable_json"), Caller: &c,
			Create: &sysdb.WorkflowInsertParams{
				ID: fmt.Sprintf("dparent-%d", c.FunctionID+1), Name: "notify", Status: sysdb.StatusDelayed,
				CreatorXID: Token(), ExecutorID: "local", QueueName: Ptr("q"), DeduplicationID: Ptr(key),
				IsDebounced: true, DelayUntilEpochMS: Ptr(until), TimeoutMS: Ptr(int64(5000)),
				Serialization: Ptr("portable_json"), Inputs: Ptr(inputs),
			},
		})
	}
	free := `{"bounced_workflow_id":null,"holder_workflow_id":null,"holder_is_debounced":false,"holder_workflow_name":null,"holder_application_name":null}`

	// The key is free: the caller's step records DBOS's result, and its
	// child, at the next step, is the new debounced workflow.
	res, err := debounce(caller("dparent", owner, 1), "k", now+hourMS, `[1]`)
	require.NoError(t, err)
	require.Equal(t, sysdb.DebounceResult{CreatedID: Ptr("dparent-2")}, res)
	s := stepAt(t, db, "dparent", 1)
	require.Equal(t, sysdb.DebounceStepName, s.Name)
	require.JSONEq(t, free, *s.Output)
	require.Equal(t, Ptr(sysdb.PortableJSON), s.Serialization)
	s = stepAt(t, db, "dparent", 2)
	require.Equal(t, "notify", s.Name)
	require.Equal(t, Ptr("dparent-2"), s.ChildWorkflowID)
	w := get(t, db, "dparent-2")
	require.Equal(t, sysdb.StatusDelayed, w.Status)
	require.Equal(t, Ptr("dparent"), w.ParentWorkflowID)
	require.True(t, w.IsDebounced)
	require.Equal(t, Ptr(int64(5000)), w.TimeoutMS)
	require.Nil(t, w.DeadlineEpochMS, "an enqueued workflow's deadline starts when it is dequeued")

	// The same step again (a replay, a retried request) is the record:
	// nothing is created or bounced.
	res, err = debounce(caller("dparent", owner, 1), "k", now+2*hourMS, `[9]`)
	require.NoError(t, err)
	require.Equal(t, sysdb.DebounceResult{CreatedID: Ptr("dparent-2"), Replayed: true}, res)
	require.Equal(t, Ptr(now+hourMS), get(t, db, "dparent-2").DelayUntilEpochMS)

	// A later step bounces it, recorded with the bounced id.
	res, err = debounce(caller("dparent", owner, 3), "k", now+90*60_000, `[2]`)
	require.NoError(t, err)
	require.Equal(t, sysdb.DebounceResult{BouncedID: Ptr("dparent-2")}, res)
	require.JSONEq(t, `{"bounced_workflow_id":"dparent-2","holder_workflow_id":null,"holder_is_debounced":false,"holder_workflow_name":null,"holder_application_name":null}`,
		*stepAt(t, db, "dparent", 3).Output)
	require.Nil(t, stepAt(t, db, "dparent", 4), "a bounce takes one step")
	w = get(t, db, "dparent-2")
	require.Equal(t, Ptr(now+90*60_000), w.DelayUntilEpochMS)
	require.Equal(t, Ptr(`[2]`), w.Inputs)
	res, err = debounce(caller("dparent", owner, 3), "k", now+2*hourMS, `[8]`)
	require.NoError(t, err)
	require.Equal(t, sysdb.DebounceResult{BouncedID: Ptr("dparent-2"), Replayed: true}, res)
	w = get(t, db, "dparent-2")
	require.Equal(t, Ptr(now+90*60_000), w.DelayUntilEpochMS, "a replay bounces nothing")
	require.Equal(t, Ptr(`[2]`), w.Inputs)

	// Another run's token: fenced, and neither the step nor the bounce lands.
	_, err = debounce(caller("dparent", Token(), 4), "k", now+2*hourMS, `[7]`)
	asError[*sysdb.FencedError](t, err)
	require.Nil(t, stepAt(t, db, "dparent", 4))
	require.Equal(t, Ptr(`[2]`), get(t, db, "dparent-2").Inputs)

	// Another step recorded at the id: non-determinism.
	require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{WorkflowID: "dparent", OwnerXID: owner, FunctionID: 4, Name: "fetch", Output: Ptr(`1`)}))
	_, err = debounce(caller("dparent", owner, 4), "k", now+2*hourMS, `[7]`)
	require.Equal(t, 4, asError[*sysdb.UnexpectedStepError](t, err).FunctionID)
	require.Equal(t, Ptr(`[2]`), get(t, db, "dparent-2").Inputs)

	// A plain workflow holding the key: the holder is recorded, and is the
	// answer of a replay.
	enqueue(t, db, "dplain", "q", func(p *sysdb.WorkflowInsertParams) { p.Name, p.DeduplicationID = "notify", Ptr("k2") })
	for range 2 {
		res, err = debounce(caller("dparent", owner, 5), "k2", now+hourMS, `[1]`)
		require.NoError(t, err)
		require.Equal(t, Ptr("dplain"), res.HolderID)
		require.Equal(t, "notify", res.HolderName)
		require.False(t, res.HolderIsDebounced)
	}
	require.JSONEq(t, `{"bounced_workflow_id":null,"holder_workflow_id":"dplain","holder_is_debounced":false,"holder_workflow_name":"notify","holder_application_name":null}`,
		*stepAt(t, db, "dparent", 5).Output)

	// A child that cannot be created rolls the caller's step back with it.
	insert(t, db, sysdb.WorkflowInsertParams{ID: "dparent-7", Name: "other", Status: sysdb.StatusEnqueued, QueueName: Ptr("q")})
	_, err = debounce(caller("dparent", owner, 6), "k3", now+hourMS, `[1]`)
	asError[*sysdb.ConflictingWorkflowError](t, err)
	require.Nil(t, stepAt(t, db, "dparent", 6))
	require.Nil(t, stepAt(t, db, "dparent", 7))
	held, found, err := db.WorkflowByDeduplicationID(ctx, "q", "k3")
	require.NoError(t, err)
	require.False(t, found, "no workflow holds the key (%s)", held)
}

func testWorkflowCancelTimedOut(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	now := nowMS()
	late := func(ms int64) func(*sysdb.WorkflowInsertParams) {
		return func(p *sysdb.WorkflowInsertParams) { p.DeadlineEpochMS = Ptr(now - ms) }
	}
	pendingOwner := start(t, db, "late-pending", late(3000))
	enqueue(t, db, "late-enqueued", "q", late(4000), func(p *sysdb.WorkflowInsertParams) { p.DeduplicationID = Ptr("k") })
	insert(t, db, sysdb.WorkflowInsertParams{ID: "late-delayed", Status: sysdb.StatusDelayed, QueueName: Ptr("q"),
		DelayUntilEpochMS: Ptr(now + hourMS), DeadlineEpochMS: Ptr(now - 2000)})
	start(t, db, "late-bank", late(1000), func(p *sysdb.WorkflowInsertParams) { p.ApplicationName = Ptr("bank") })
	start(t, db, "early", func(p *sysdb.WorkflowInsertParams) { p.DeadlineEpochMS = Ptr(now + hourMS) })
	start(t, db, "no-deadline")
	doneOwner := start(t, db, "late-done", late(5000))
	finish(t, db, "late-done", doneOwner, `1`)

	// Oldest deadline first, up to the limit, shop's and unclaimed rows only.
	first, err := db.WorkflowCancelTimedOut(ctx, 2, Ptr("shop"))
	require.NoError(t, err)
	require.Equal(t, []string{"late-enqueued", "late-pending"}, first)
	rest, err := db.WorkflowCancelTimedOut(ctx, 10, Ptr("shop"))
	require.NoError(t, err)
	require.Equal(t, []string{"late-delayed"}, rest)
	rest, err = db.WorkflowCancelTimedOut(ctx, 0, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"late-bank"}, rest, "no application, no limit: every late row")

	for _, id := range []string{"late-pending", "late-enqueued", "late-delayed", "late-bank"} {
		w := get(t, db, id)
		require.Equal(t, sysdb.StatusCancelled, w.Status, id)
		require.Nil(t, w.OwnerXID, id)
		require.Nil(t, w.QueueName, id)
		require.Nil(t, w.DeduplicationID, id)
		require.NotNil(t, w.CompletedAt, id)
	}
	// The cancelled run is fenced.
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("late-pending", pendingOwner, 1, "s", "1")))
	require.Equal(t, sysdb.StatusPending, get(t, db, "early").Status)
	require.Equal(t, sysdb.StatusPending, get(t, db, "no-deadline").Status)
	require.Equal(t, sysdb.StatusSuccess, get(t, db, "late-done").Status)
	none, err := db.WorkflowCancelTimedOut(ctx, 10, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

// ---------------------------------------------------------------------------
// Application versions

func latestName(t *testing.T, db sysdb.SystemDatabase, app *string) string {
	t.Helper()
	v, ok, err := db.VersionLatest(t.Context(), app)
	require.NoError(t, err)
	require.True(t, ok)
	return v.Name
}

func versionNames(t *testing.T, db sysdb.SystemDatabase, app *string) []string {
	t.Helper()
	vs, err := db.VersionList(t.Context(), app)
	require.NoError(t, err)
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func testVersionRegisterAndPromote(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	_, ok, err := db.VersionLatest(ctx, nil)
	require.NoError(t, err)
	require.False(t, ok, "no version registered")
	require.Empty(t, versionNames(t, db, nil))

	require.NoError(t, db.VersionRegister(ctx, "v1", nil))
	require.NoError(t, db.VersionRegister(ctx, "v2", nil))
	require.Equal(t, "v2", latestName(t, db, nil), "a new version is the latest")
	vs, err := db.VersionList(ctx, nil)
	require.NoError(t, err)
	require.Len(t, vs, 2)
	require.Equal(t, "v2", vs[0].Name, "newest first")
	require.Greater(t, vs[0].Timestamp, vs[1].Timestamp)
	for _, v := range vs {
		require.Regexp(t, uuidPattern, v.ID)
		require.InDelta(t, nowMS(), v.CreatedAt, 60_000, "created_at is epoch ms")
		require.Nil(t, v.ApplicationName)
	}

	// Registering again changes nothing.
	require.NoError(t, db.VersionRegister(ctx, "v1", nil))
	again, err := db.VersionList(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, vs, again)

	// Rolling back: the promoted version is the latest, even within the
	// millisecond.
	require.NoError(t, db.VersionPromote(ctx, "v1", nil))
	require.Equal(t, "v1", latestName(t, db, nil))
	require.Equal(t, []string{"v1", "v2"}, versionNames(t, db, nil))
	require.NoError(t, db.VersionPromote(ctx, "v2", nil))
	require.Equal(t, "v2", latestName(t, db, nil), "rolling forward")
	require.NoError(t, db.VersionRegister(ctx, "v3", nil))
	require.Equal(t, "v3", latestName(t, db, nil), "a new version passes a promoted one")

	err = db.VersionPromote(ctx, "v9", nil)
	require.Equal(t, "v9", asError[*sysdb.VersionNotFoundError](t, err).Name)
	require.Error(t, db.VersionRegister(ctx, "", nil))
}

func testVersionOwnership(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	shop, bank := Ptr("shop"), Ptr("bank")
	require.NoError(t, db.VersionRegister(ctx, "old", nil))
	require.NoError(t, db.VersionRegister(ctx, "bank-1", bank))
	require.NoError(t, db.VersionRegister(ctx, "shop-1", shop))

	err := db.VersionRegister(ctx, "bank-1", shop)
	owned := asError[*sysdb.NameOwnedError](t, err)
	require.Equal(t, "bank", owned.Owner)
	require.Equal(t, "shop", owned.Requester)
	asError[*sysdb.NameOwnedError](t, db.VersionPromote(ctx, "bank-1", shop))

	// Each application sees its own versions and unclaimed ones.
	require.Equal(t, []string{"shop-1", "old"}, versionNames(t, db, shop))
	require.Equal(t, []string{"bank-1", "old"}, versionNames(t, db, bank))
	require.Equal(t, []string{"shop-1", "bank-1", "old"}, versionNames(t, db, nil))
	require.Equal(t, "shop-1", latestName(t, db, shop))
	require.Equal(t, "bank-1", latestName(t, db, bank), "shop's deploy does not demote bank's")

	// An unclaimed version is claimed in place by the first application
	// that registers it: it keeps its timestamp.
	before, err := db.VersionList(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, db.VersionRegister(ctx, "old", shop))
	after, err := db.VersionList(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, before[2].Timestamp, after[2].Timestamp)
	require.Equal(t, "old", after[2].Name)
	require.Equal(t, shop, after[2].ApplicationName)
	require.Equal(t, []string{"bank-1"}, versionNames(t, db, bank))

	// Promoting an unclaimed version claims it (it would otherwise be every
	// application's latest).
	require.NoError(t, db.VersionRegister(ctx, "free", nil))
	require.NoError(t, db.VersionPromote(ctx, "free", bank))
	require.Equal(t, "free", latestName(t, db, bank))
	require.Equal(t, "shop-1", latestName(t, db, shop))
	// A requester acting for no application may promote anyone's version.
	require.NoError(t, db.VersionPromote(ctx, "bank-1", nil))
	require.Equal(t, "bank-1", latestName(t, db, bank))
	vs, err := db.VersionList(ctx, bank)
	require.NoError(t, err)
	require.Equal(t, bank, vs[0].ApplicationName, "the owner stays")
}

func testVersionDequeueFollowsLatest(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	require.NoError(t, db.VersionRegister(ctx, "v1", nil))
	require.NoError(t, db.VersionRegister(ctx, "v2", nil))
	unversioned := func(id string) {
		enqueue(t, db, id, "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = nil })
	}
	claim := func(version string) []string {
		return ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ApplicationVersion: version}))
	}
	unversioned("u-1")
	require.Empty(t, claim("v1"), "v1 is not the latest")
	require.Equal(t, []string{"u-1"}, claim("v2"))

	require.NoError(t, db.VersionPromote(ctx, "v1", nil))
	unversioned("u-2")
	require.Empty(t, claim("v2"), "demoted by the rollback")
	require.Equal(t, []string{"u-2"}, claim("v1"))
	require.Equal(t, Ptr("v1"), get(t, db, "u-2").ApplicationVersion)

	// Versioned rows go to their own version, latest or not.
	enqueue(t, db, "for-v2", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = Ptr("v2") })
	require.Empty(t, claim("v1"))
	require.Equal(t, []string{"for-v2"}, claim("v2"))
}

// ---------------------------------------------------------------------------
// Schedules

func testScheduleCreateAndGet(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	full := sysdb.Schedule{
		Name: "nightly", WorkflowName: "report", WorkflowClassName: Ptr("Reports"), Cron: "0 0 3 * * *",
		Context: `{"region":"eu"}`, AutomaticBackfill: true, CronTimezone: Ptr("Europe/Paris"),
		QueueName: Ptr("reports"), ApplicationName: Ptr("shop"),
	}
	require.NoError(t, db.ScheduleCreate(ctx, full))
	got, err := db.ScheduleGet(ctx, "nightly")
	require.NoError(t, err)
	require.Regexp(t, uuidPattern, got.ID, "schedule_id is a uuid")
	want := full
	want.ID, want.Status = got.ID, sysdb.ScheduleActive
	require.Equal(t, want, got)

	err = db.ScheduleCreate(ctx, full)
	require.Equal(t, "nightly", asError[*sysdb.ScheduleExistsError](t, err).Name)
	taken := full
	taken.ApplicationName = Ptr("bank")
	owned := asError[*sysdb.NameOwnedError](t, db.ScheduleCreate(ctx, taken))
	require.Equal(t, "shop", owned.Owner)

	// The least a schedule needs; the rest takes the SDKs' defaults.
	require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{ID: "my-id", Name: "minimal", WorkflowName: "tick", Cron: "* * * * * *", Status: sysdb.SchedulePaused}))
	got, err = db.ScheduleGet(ctx, "minimal")
	require.NoError(t, err)
	require.Equal(t, sysdb.Schedule{ID: "my-id", Name: "minimal", WorkflowName: "tick", Cron: "* * * * * *",
		Status: sysdb.SchedulePaused, Context: "null"}, got)

	for _, bad := range []sysdb.Schedule{
		{WorkflowName: "w", Cron: "* * * * * *"},
		{Name: "x", Cron: "* * * * * *"},
		{Name: "x", WorkflowName: "w"},
		{Name: "x", WorkflowName: "w", Cron: "* * * * * *", Status: "RUNNING"},
	} {
		require.Error(t, db.ScheduleCreate(ctx, bad), "%+v", bad)
	}
	_, err = db.ScheduleGet(ctx, "x")
	require.Equal(t, "x", asError[*sysdb.ScheduleNotFoundError](t, err).Name)
}

func testScheduleList(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	listed := func(p sysdb.ScheduleListParams) []string {
		ss, err := db.ScheduleList(ctx, p)
		require.NoError(t, err)
		out := []string{}
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	require.Empty(t, listed(sysdb.ScheduleListParams{}))
	for _, s := range []sysdb.Schedule{
		{Name: "nightly-report", WorkflowName: "report", ApplicationName: Ptr("shop")},
		{Name: "hourly", WorkflowName: "sync", Status: sysdb.SchedulePaused},
		{Name: "nightly_backup", WorkflowName: "backup", ApplicationName: Ptr("bank")},
		{Name: "nightlyXbackup", WorkflowName: "backup"},
	} {
		s.Cron = "0 * * * * *"
		require.NoError(t, db.ScheduleCreate(ctx, s))
	}
	require.Equal(t, []string{"hourly", "nightly-report", "nightlyXbackup", "nightly_backup"}, listed(sysdb.ScheduleListParams{}), "by name")
	require.Equal(t, []string{"hourly"}, listed(sysdb.ScheduleListParams{Statuses: []string{sysdb.SchedulePaused}}))
	require.Equal(t, []string{"nightlyXbackup", "nightly_backup"}, listed(sysdb.ScheduleListParams{WorkflowNames: []string{"backup"}}))
	require.Equal(t, []string{"nightly_backup"}, listed(sysdb.ScheduleListParams{NamePrefix: "nightly_"}), "the prefix is literal, not a pattern")
	require.Equal(t, []string{"hourly", "nightly-report", "nightlyXbackup"}, listed(sysdb.ScheduleListParams{ApplicationName: Ptr("shop")}), "mine and unclaimed")
	require.Equal(t, []string{"nightlyXbackup"}, listed(sysdb.ScheduleListParams{
		ApplicationName: Ptr("shop"), Statuses: []string{sysdb.ScheduleActive}, WorkflowNames: []string{"backup"}, NamePrefix: "night",
	}), "filters combine")
	require.Equal(t, []string{"hourly", "nightly-report", "nightlyXbackup", "nightly_backup"},
		listed(sysdb.ScheduleListParams{ApplicationNames: []string{"shop", "bank"}}), "any of several, and unclaimed")
	require.Equal(t, []string{"hourly", "nightlyXbackup", "nightly_backup"},
		listed(sysdb.ScheduleListParams{ApplicationNames: []string{"bank"}}), "a peer's rows and unclaimed")
}

func testScheduleStatusAndDelete(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{Name: "s", WorkflowName: "w", Cron: "* * * * * *"}))
	fired := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	require.NoError(t, db.ScheduleSetLastFired(ctx, "s", fired))

	require.NoError(t, db.ScheduleSetStatus(ctx, "s", sysdb.SchedulePaused))
	got, err := db.ScheduleGet(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, sysdb.SchedulePaused, got.Status)
	require.NotNil(t, got.LastFiredAt, "pausing keeps where the schedule stopped")
	require.True(t, fired.Equal(*got.LastFiredAt))
	require.NoError(t, db.ScheduleSetStatus(ctx, "s", sysdb.ScheduleActive))
	got, err = db.ScheduleGet(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, sysdb.ScheduleActive, got.Status)

	require.Error(t, db.ScheduleSetStatus(ctx, "s", "STOPPED"))
	asError[*sysdb.ScheduleNotFoundError](t, db.ScheduleSetStatus(ctx, "missing", sysdb.SchedulePaused))

	require.NoError(t, db.ScheduleDelete(ctx, "s"))
	_, err = db.ScheduleGet(ctx, "s")
	asError[*sysdb.ScheduleNotFoundError](t, err)
	asError[*sysdb.ScheduleNotFoundError](t, db.ScheduleDelete(ctx, "s"))
	require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{Name: "s", WorkflowName: "w", Cron: "* * * * * *"}), "the name is free again")
}

func testScheduleLastFired(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{Name: "s", WorkflowName: "w", Cron: "* * * * * *"}))
	lastFired := func() *time.Time {
		got, err := db.ScheduleGet(ctx, "s")
		require.NoError(t, err)
		return got.LastFiredAt
	}
	require.Nil(t, lastFired())

	paris := time.FixedZone("CET", 3600)
	t1 := time.Date(2025, 3, 4, 6, 0, 0, 250_000_000, paris)
	require.NoError(t, db.ScheduleSetLastFired(ctx, "s", t1))
	got := lastFired()
	require.NotNil(t, got)
	require.True(t, t1.Equal(*got), "want %v, got %v", t1, *got)
	stored, err := db.ScheduleGet(ctx, "s")
	require.NoError(t, err)
	// In the tick's zone, as DBOS Python writes a tick of a schedule in that zone.
	require.Equal(t, Ptr("2025-03-04T06:00:00.250000+01:00"), stored.LastFiredAtRaw, "ISO 8601 as Python writes it")

	// An older tick, or the same one again, never moves it back.
	require.NoError(t, db.ScheduleSetLastFired(ctx, "s", t1.Add(-time.Minute)))
	require.NoError(t, db.ScheduleSetLastFired(ctx, "s", t1))
	require.True(t, t1.Equal(*lastFired()))
	t2 := t1.Add(time.Second)
	require.NoError(t, db.ScheduleSetLastFired(ctx, "s", t2))
	require.True(t, t2.Equal(*lastFired()))

	err = db.ScheduleSetLastFired(ctx, "missing", t2)
	asError[*sysdb.ScheduleNotFoundError](t, err)

	// A schedule created with a last tick (a copy, a migration) keeps it.
	require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{Name: "copy", WorkflowName: "w", Cron: "* * * * * *", LastFiredAt: &t2}))
	copied, err := db.ScheduleGet(ctx, "copy")
	require.NoError(t, err)
	require.True(t, t2.Equal(*copied.LastFiredAt))
}

func testQueueRegisterMany(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	_, _, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{Name: "m-owned", ApplicationName: Ptr("bank")}})
	require.NoError(t, err)
	_, _, err = db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{Name: "m-existing", Concurrency: Ptr(1), ApplicationName: Ptr("shop")}})
	require.NoError(t, err)

	// One refused: none written, none changed.
	_, err = db.QueueRegisterMany(ctx, []sysdb.QueueRegisterParams{
		{Config: sysdb.QueueConfig{Name: "m-new", ApplicationName: Ptr("shop")}},
		{Config: sysdb.QueueConfig{Name: "m-existing", Concurrency: Ptr(9), ApplicationName: Ptr("shop")}, UpdateExisting: true},
		{Config: sysdb.QueueConfig{Name: "m-owned", ApplicationName: Ptr("shop")}},
	})
	owned := asError[*sysdb.NameOwnedError](t, err)
	require.Equal(t, "m-owned", owned.Name)
	_, err = db.QueueGet(ctx, "m-new")
	asError[*sysdb.QueueNotFoundError](t, err)
	existing, err := db.QueueGet(ctx, "m-existing")
	require.NoError(t, err)
	require.Equal(t, Ptr(1), existing.Concurrency, "the update was rolled back with the refusal")

	// All accepted: results in the order given, whatever the lock order.
	results, err := db.QueueRegisterMany(ctx, []sysdb.QueueRegisterParams{
		{Config: sysdb.QueueConfig{Name: "m-z", ApplicationName: Ptr("shop")}},
		{Config: sysdb.QueueConfig{Name: "m-existing", Concurrency: Ptr(9), ApplicationName: Ptr("shop")}, UpdateExisting: true},
		{Config: sysdb.QueueConfig{Name: "m-a", ApplicationName: Ptr("shop")}},
	})
	require.NoError(t, err)
	require.Len(t, results, 3)
	require.Equal(t, "m-z", results[0].Stored.Name)
	require.True(t, results[0].Created)
	require.Equal(t, "m-existing", results[1].Stored.Name)
	require.False(t, results[1].Created)
	require.Equal(t, Ptr(9), results[1].Stored.Concurrency)
	require.Equal(t, "m-a", results[2].Stored.Name)
	require.True(t, results[2].Created)

	_, err = db.QueueRegisterMany(ctx, []sysdb.QueueRegisterParams{{Config: sysdb.QueueConfig{}}})
	require.Error(t, err, "a registration needs a name")
}

// testApplicationRename: a rename moves the named application's rows in
// every owned table, unclaimed ones only when asked, never a peer's; the
// terminal history moves in batches and a second run finds nothing.
func testApplicationRename(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := func(id string) *string {
		w, err := db.WorkflowGet(ctx, id)
		require.NoError(t, err)
		return w.ApplicationName
	}
	for app, suffix := range map[string]string{"old-app": "old", "peer-app": "peer"} {
		_, _, err := db.QueueRegister(ctx, sysdb.QueueRegisterParams{Config: sysdb.QueueConfig{Name: "q-" + suffix, ApplicationName: Ptr(app)}})
		require.NoError(t, err)
		require.NoError(t, db.ScheduleCreate(ctx, sysdb.Schedule{Name: "s-" + suffix, WorkflowName: "wf", Cron: "0 0 * * *", ApplicationName: Ptr(app)}))
		require.NoError(t, db.VersionRegister(ctx, "v-"+suffix, Ptr(app)))
	}
	// Three finished workflows with a step each, one enqueued, one of a
	// peer and one unclaimed.
	for i := range 3 {
		id := fmt.Sprintf("done-%d", i)
		tok := start(t, db, id, func(p *sysdb.WorkflowInsertParams) { p.ApplicationName = Ptr("old-app") })
		require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{WorkflowID: id, OwnerXID: tok, FunctionID: 1, Name: "step", Output: Ptr("1"), ApplicationName: Ptr("old-app")}))
		finish(t, db, id, tok, "1")
	}
	insert(t, db, sysdb.WorkflowInsertParams{ID: "waiting", Status: sysdb.StatusEnqueued, QueueName: Ptr("q-old"), ApplicationName: Ptr("old-app")})
	insert(t, db, sysdb.WorkflowInsertParams{ID: "peer", ApplicationName: Ptr("peer-app")})
	insert(t, db, sysdb.WorkflowInsertParams{ID: "unclaimed"})

	moved, err := db.ApplicationRename(ctx, sysdb.ApplicationRenameParams{OldName: Ptr("old-app"), NewName: "new-app", BatchSize: 2})
	require.NoError(t, err)
	require.Equal(t, sysdb.ApplicationRowCounts{Queues: 1, Schedules: 1, Versions: 1, Workflows: 4, Steps: 3}, moved)
	for _, id := range []string{"done-0", "done-1", "done-2", "waiting"} {
		require.Equal(t, Ptr("new-app"), owner(id), id)
	}
	require.Equal(t, Ptr("peer-app"), owner("peer"), "a peer nobody named stays")
	require.Nil(t, owner("unclaimed"), "unclaimed rows move only when asked")
	s, err := db.ScheduleGet(ctx, "s-old")
	require.NoError(t, err)
	require.Equal(t, Ptr("new-app"), s.ApplicationName)
	require.Equal(t, []string{"v-old"}, versionNames(t, db, Ptr("new-app")))

	again, err := db.ApplicationRename(ctx, sysdb.ApplicationRenameParams{OldName: Ptr("old-app"), NewName: "new-app", BatchSize: 1})
	require.NoError(t, err)
	require.Equal(t, sysdb.ApplicationRowCounts{}, again, "idempotent, so an interrupted rename resumes")

	adopted, err := db.ApplicationRename(ctx, sysdb.ApplicationRenameParams{NewName: "adopter", AdoptUnclaimed: true})
	require.NoError(t, err)
	require.Equal(t, int64(1), adopted.Workflows)
	require.Equal(t, Ptr("adopter"), owner("unclaimed"))
	require.Equal(t, Ptr("new-app"), owner("waiting"), "adoption takes only unclaimed rows")
}
