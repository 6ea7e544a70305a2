// Package sysdbtest is the conformance suite every sysdb.SystemDatabase
// backend must pass. It speaks only through the interface, so it holds a
// second backend to exactly the contract the Postgres one meets; checks that
// need the backend's own tables (rows written as another runtime would,
// legacy payload columns, notifications) live with that backend's tests.
package sysdbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// Run runs the suite. open must return a fresh, migrated, empty system
// database for the calling test and close it when that test ends. Every
// subtest runs in parallel with the others.
func Run(t *testing.T, open func(t *testing.T) sysdb.SystemDatabase) {
	cases := []struct {
		name string
		fn   func(t *testing.T, db sysdb.SystemDatabase)
	}{
		{"WorkflowInsertPending", testWorkflowInsertPending},
		{"WorkflowInsertEnqueuedAndDelayed", testWorkflowInsertEnqueuedAndDelayed},
		{"WorkflowInsertIdempotent", testWorkflowInsertIdempotent},
		{"WorkflowInsertConflicts", testWorkflowInsertConflicts},
		{"WorkflowInsertRejectExisting", testWorkflowInsertRejectExisting},
		{"WorkflowInsertDeduplication", testWorkflowInsertDeduplication},
		{"WorkflowInsertValidation", testWorkflowInsertValidation},
		{"WorkflowGetNotFound", testWorkflowGetNotFound},
		{"WorkflowListFilters", testWorkflowListFilters},
		{"WorkflowListAttributesAndForks", testWorkflowListAttributesAndForks},
		{"WorkflowListPaging", testWorkflowListPaging},
		{"WorkflowListPayloads", testWorkflowListPayloads},
		{"WorkflowFinish", testWorkflowFinish},
		{"WorkflowFinishLoser", testWorkflowFinishLoser},
		{"WorkflowFinishMany", testWorkflowFinishMany},
		{"StepRecord", testStepRecord},
		{"StepRecordFencing", testStepRecordFencing},
		{"StepRecordManyMixedBatch", testStepRecordManyMixedBatch},
		{"StepRecordManyDuplicateItems", testStepRecordManyDuplicateItems},
		{"StepRecordManyLargeBatch", testStepRecordManyLargeBatch},
		{"StepList", testStepList},
		{"WorkflowCancel", testWorkflowCancel},
		{"WorkflowCancelChildren", testWorkflowCancelChildren},
		{"WorkflowCancelOwnerGated", testWorkflowCancelOwnerGated},
		{"WorkflowResume", testWorkflowResume},
		{"WorkflowDelete", testWorkflowDelete},
		{"WorkflowChildren", testWorkflowChildren},
		{"WorkflowRecover", testWorkflowRecover},
		{"WorkflowRequeue", testWorkflowRequeue},
		{"WorkflowUnclaim", testWorkflowUnclaim},
		{"WorkflowOrphaned", testWorkflowOrphaned},
		{"QueueRegisterMany", testQueueRegisterMany},
		{"StepListMany", testStepListMany},
		{"WorkflowDeadLetter", testWorkflowDeadLetter},
		{"QueueDequeueOrder", testQueueDequeueOrder},
		{"QueueOrderWithinMillisecond", testQueueOrderWithinMillisecond},
		{"QueueOrderConcurrentEnqueuers", testQueueOrderConcurrentEnqueuers},
		{"QueueDequeueClaim", testQueueDequeueClaim},
		{"QueueDequeueEligibility", testQueueDequeueEligibility},
		{"QueueDequeueWorkerConcurrency", testQueueDequeueWorkerConcurrency},
		{"QueueDequeueGlobalConcurrency", testQueueDequeueGlobalConcurrency},
		{"QueueDequeueRateLimit", testQueueDequeueRateLimit},
		{"QueueDequeuePartition", testQueueDequeuePartition},
		{"QueueDequeueUnversioned", testQueueDequeueUnversioned},
		{"QueueDequeueApplicationName", testQueueDequeueApplicationName},
		{"QueueDequeueWorkflowNames", testQueueDequeueWorkflowNames},
		{"QueueList", testQueueList},
		{"QueueDequeueConcurrentClaims", testQueueDequeueConcurrentClaims},
		{"QueueDequeueConcurrentGlobalLimit", testQueueDequeueConcurrentGlobalLimit},
		{"QueueDequeueConcurrentGlobalLimitAcrossPartitions", testQueueDequeueConcurrentGlobalLimitAcrossPartitions},
		{"QueueDequeuePartitionIsolation", testQueueDequeuePartitionIsolation},
		{"QueueDequeueGlobalLimitAcrossPartitions", testQueueDequeueGlobalLimitAcrossPartitions},
		{"QueueDequeuePartitionRateLimit", testQueueDequeuePartitionRateLimit},
		{"QueueDequeueLegacyPartitioned", testQueueDequeueLegacyPartitioned},
		{"QueueDequeuePartitionLimitsNeedKey", testQueueDequeuePartitionLimitsNeedKey},
		{"QueueRegister", testQueueRegister},
		{"QueueRegisterOwnership", testQueueRegisterOwnership},
		{"QueueGetAndDelete", testQueueGetAndDelete},
		{"QueuePartitions", testQueuePartitions},
		{"WorkflowByDeduplicationID", testWorkflowByDeduplicationID},
		{"WorkflowReleaseDelayed", testWorkflowReleaseDelayed},
		{"WorkflowSetDelay", testWorkflowSetDelay},
		{"WorkflowSetPriority", testWorkflowSetPriority},
		{"WorkflowDebounce", testWorkflowDebounce},
		{"WorkflowDebounceApplications", testWorkflowDebounceApplications},
		{"WorkflowDebounceFromWorkflow", testWorkflowDebounceFromWorkflow},
		{"WorkflowCancelTimedOut", testWorkflowCancelTimedOut},
		{"VersionRegisterAndPromote", testVersionRegisterAndPromote},
		{"VersionOwnership", testVersionOwnership},
		{"VersionDequeueFollowsLatest", testVersionDequeueFollowsLatest},
		{"ScheduleCreateAndGet", testScheduleCreateAndGet},
		{"ScheduleList", testScheduleList},
		{"ScheduleStatusAndDelete", testScheduleStatusAndDelete},
		{"ScheduleLastFired", testScheduleLastFired},
		{"ApplicationRename", testApplicationRename},
	}
	cases = append(cases, communicationCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

// ---------------------------------------------------------------------------
// Helpers

// Ptr returns a pointer to v, for the optional fields of the params structs.
func Ptr[T any](v T) *T { return &v }

// Token returns a fresh random token, as a runtime makes one per request or
// run.
func Token() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// insert inserts a workflow, filling what the case leaves empty: a fresh
// creator token, the name "wf", status PENDING and executor "local".
func insert(t *testing.T, db sysdb.SystemDatabase, p sysdb.WorkflowInsertParams) sysdb.WorkflowInsertResult {
	t.Helper()
	if p.CreatorXID == "" {
		p.CreatorXID = Token()
	}
	if p.Name == "" {
		p.Name = "wf"
	}
	if p.Status == "" {
		p.Status = sysdb.StatusPending
	}
	if p.ExecutorID == "" {
		p.ExecutorID = "local"
	}
	res, err := db.WorkflowInsert(t.Context(), p)
	require.NoError(t, err, "insert %s", p.ID)
	return res
}

// start inserts a directly started (PENDING) workflow and returns the owner
// token of its run.
func start(t *testing.T, db sysdb.SystemDatabase, id string, mods ...func(*sysdb.WorkflowInsertParams)) string {
	t.Helper()
	p := sysdb.WorkflowInsertParams{ID: id, CreatorXID: Token(), Status: sysdb.StatusPending}
	for _, m := range mods {
		m(&p)
	}
	res := insert(t, db, p)
	require.True(t, res.Created)
	require.NotNil(t, res.OwnerXID)
	return *res.OwnerXID
}

// enqueue inserts an ENQUEUED workflow on queue.
func enqueue(t *testing.T, db sysdb.SystemDatabase, id, queue string, mods ...func(*sysdb.WorkflowInsertParams)) {
	t.Helper()
	p := sysdb.WorkflowInsertParams{ID: id, Status: sysdb.StatusEnqueued, QueueName: Ptr(queue)}
	for _, m := range mods {
		m(&p)
	}
	res := insert(t, db, p)
	require.True(t, res.Created)
}

func get(t *testing.T, db sysdb.SystemDatabase, id string) sysdb.Workflow {
	t.Helper()
	w, err := db.WorkflowGet(t.Context(), id)
	require.NoError(t, err, "get %s", id)
	return w
}

func dequeue(t *testing.T, db sysdb.SystemDatabase, p sysdb.QueueDequeueParams) []sysdb.Workflow {
	t.Helper()
	if p.ExecutorID == "" {
		p.ExecutorID = "local"
	}
	if p.ApplicationVersion == "" {
		p.ApplicationVersion = "v1"
	}
	ws, err := db.QueueDequeue(t.Context(), p)
	require.NoError(t, err)
	return ws
}

func testWorkflowFinishMany(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	a, b, dup := start(t, db, "a"), start(t, db, "b"), start(t, db, "dup")
	results, err := db.WorkflowFinishMany(ctx, []sysdb.WorkflowFinishParams{
		{WorkflowID: "b", OwnerXID: b, Status: sysdb.StatusError, Error: Ptr(`{"name":"E","message":"b"}`)},
		{WorkflowID: "dup", OwnerXID: Token(), Status: sysdb.StatusSuccess, Output: Ptr(`"zombie"`)},
		{WorkflowID: "a", OwnerXID: a, Status: sysdb.StatusSuccess, Output: Ptr(`"a"`)},
		{WorkflowID: "dup", OwnerXID: dup, Status: sysdb.StatusSuccess, Output: Ptr(`"owner"`)},
		{WorkflowID: "a", OwnerXID: a, Status: sysdb.StatusCancelled},
		{WorkflowID: "missing", OwnerXID: Token(), Status: sysdb.StatusSuccess},
	})
	require.NoError(t, err)
	require.Len(t, results, 6, "one outcome per input, in order")
	require.NoError(t, results[0].Err)
	require.True(t, results[0].Result.Applied)
	require.Equal(t, Ptr(`{"name":"E","message":"b"}`), get(t, db, "b").Error)

	// Two outcomes of one workflow in a batch: only its owner's applies,
	// and the other adopts it.
	require.NoError(t, results[1].Err)
	require.False(t, results[1].Result.Applied)
	require.True(t, results[3].Result.Applied)
	require.Equal(t, Ptr(`"owner"`), get(t, db, "dup").Output)

	require.True(t, results[2].Result.Applied)
	require.Equal(t, sysdb.StatusSuccess, get(t, db, "a").Status)
	require.Error(t, results[4].Err, "only SUCCESS or ERROR is an outcome; the rest of the batch stands")
	asError[*sysdb.NotFoundError](t, results[5].Err)

	empty, err := db.WorkflowFinishMany(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}

// claimOne dequeues exactly the workflow id from its queue (the caller makes
// sure it is the only candidate) and returns its owner token.
func claimOne(t *testing.T, db sysdb.SystemDatabase, queue, id string) string {
	t.Helper()
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: queue})
	require.Equal(t, []string{id}, ids(ws))
	require.NotNil(t, ws[0].OwnerXID)
	return *ws[0].OwnerXID
}

func finish(t *testing.T, db sysdb.SystemDatabase, id, owner, output string) {
	t.Helper()
	res, err := db.WorkflowFinish(t.Context(), sysdb.WorkflowFinishParams{
		WorkflowID: id, OwnerXID: owner, Status: sysdb.StatusSuccess, Output: Ptr(output),
	})
	require.NoError(t, err)
	require.True(t, res.Applied, "finish %s", id)
}

func list(t *testing.T, db sysdb.SystemDatabase, p sysdb.WorkflowListParams) []string {
	t.Helper()
	ws, err := db.WorkflowList(t.Context(), p)
	require.NoError(t, err)
	return ids(ws)
}

func ids(ws []sysdb.Workflow) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

func step(workflowID, owner string, functionID int, name, output string) sysdb.StepRecordParams {
	return sysdb.StepRecordParams{
		WorkflowID: workflowID, OwnerXID: owner, FunctionID: functionID, Name: name,
		Output: Ptr(output), Serialization: Ptr("portable_json"),
	}
}

// asError asserts that err's chain holds an E and returns it.
func asError[E error](t *testing.T, err error) E {
	t.Helper()
	var target E
	require.Error(t, err)
	require.True(t, errors.As(err, &target), "want %T in the chain, got %T: %v", target, err, err)
	return target
}

// tick lets the clock move on: created_at has millisecond resolution, and
// the ordering cases need rows created at distinct instants.
func tick() { time.Sleep(3 * time.Millisecond) }

func nowMS() int64 { return time.Now().UnixMilli() }

// ---------------------------------------------------------------------------
// WorkflowInsert and WorkflowGet

func testWorkflowInsertPending(t *testing.T, db sysdb.SystemDatabase) {
	before := nowMS()
	creator := Token()
	res := insert(t, db, sysdb.WorkflowInsertParams{
		ID: "wf-1", Name: "checkout", Status: sysdb.StatusPending, CreatorXID: creator,
		ClassName: Ptr("Shop"), ConfigName: Ptr("eu"),
		AuthenticatedUser: Ptr("alice"), AssumedRole: Ptr("admin"), AuthenticatedRoles: Ptr(`["admin"]`),
		ExecutorID: "exec-1", ApplicationVersion: Ptr("v7"), ApplicationID: Ptr("app-id"), ApplicationName: Ptr("shop"),
		TimeoutMS: Ptr(int64(60000)), DeadlineEpochMS: Ptr(before + 60000),
		Attributes: Ptr(`{"tier": "gold"}`), Priority: 0,
		Serialization: Ptr("portable_json"), Inputs: Ptr(`{"positionalArgs":[1,"two"],"namedArgs":{}}`),
	})
	require.True(t, res.Created)
	require.Equal(t, sysdb.StatusPending, res.Status)
	require.Equal(t, "checkout", res.Name)
	require.Equal(t, Ptr(creator), res.OwnerXID, "a direct start owns its run with the creator token")
	require.Equal(t, Ptr(int64(60000)), res.TimeoutMS)
	require.Equal(t, Ptr(before+60000), res.DeadlineEpochMS)
	require.Nil(t, res.QueueName)

	w := get(t, db, "wf-1")
	require.Equal(t, "wf-1", w.ID)
	require.Equal(t, sysdb.StatusPending, w.Status)
	require.Equal(t, "checkout", w.Name)
	require.Equal(t, Ptr("Shop"), w.ClassName)
	require.Equal(t, Ptr("eu"), w.ConfigName)
	require.Equal(t, Ptr("alice"), w.AuthenticatedUser)
	require.Equal(t, Ptr("admin"), w.AssumedRole)
	require.Equal(t, Ptr(`["admin"]`), w.AuthenticatedRoles)
	require.Equal(t, Ptr("exec-1"), w.ExecutorID)
	require.Equal(t, Ptr("v7"), w.ApplicationVersion)
	require.Equal(t, Ptr("app-id"), w.ApplicationID)
	require.Equal(t, Ptr("shop"), w.ApplicationName)
	require.Equal(t, Ptr(creator), w.OwnerXID)
	require.Equal(t, Ptr(creator), w.CreatorXID)
	require.Equal(t, int64(1), w.RecoveryAttempts, "a direct start is its first attempt")
	require.Equal(t, Ptr(int64(60000)), w.TimeoutMS)
	require.Equal(t, Ptr(before+60000), w.DeadlineEpochMS)
	require.NotNil(t, w.Attributes)
	require.JSONEq(t, `{"tier":"gold"}`, *w.Attributes)
	require.Equal(t, Ptr("portable_json"), w.Serialization)
	require.Equal(t, Ptr(`{"positionalArgs":[1,"two"],"namedArgs":{}}`), w.Inputs)
	require.Nil(t, w.Output)
	require.Nil(t, w.Error)
	require.True(t, w.PayloadsLoaded)
	require.Nil(t, w.QueueName)
	require.Nil(t, w.CompletedAt)
	require.Nil(t, w.ParentWorkflowID)
	require.False(t, w.WasForkedFrom)
	require.True(t, w.Active())
	require.GreaterOrEqual(t, w.CreatedAt, before-5000, "created_at is epoch milliseconds")
	require.LessOrEqual(t, w.CreatedAt, nowMS()+5000)
	require.Equal(t, w.CreatedAt, w.UpdatedAt)
}

func testWorkflowInsertEnqueuedAndDelayed(t *testing.T, db sysdb.SystemDatabase) {
	res := insert(t, db, sysdb.WorkflowInsertParams{
		ID: "q-1", Status: sysdb.StatusEnqueued, QueueName: Ptr("orders"), Priority: 3,
		QueuePartitionKey: Ptr("tenant-1"), ParentWorkflowID: Ptr("parent"), ScheduleName: Ptr("nightly"),
		Serialization: Ptr("portable_json"), Inputs: Ptr(`{"positionalArgs":[],"namedArgs":{"a":1}}`),
	})
	require.True(t, res.Created)
	require.Equal(t, sysdb.StatusEnqueued, res.Status)
	require.Equal(t, Ptr("orders"), res.QueueName)
	require.Equal(t, Ptr("tenant-1"), res.QueuePartitionKey)
	require.Nil(t, res.OwnerXID, "nobody runs an enqueued workflow yet")

	w := get(t, db, "q-1")
	require.Equal(t, sysdb.StatusEnqueued, w.Status)
	require.Equal(t, Ptr("orders"), w.QueueName)
	require.Equal(t, Ptr("tenant-1"), w.QueuePartitionKey)
	require.Equal(t, 3, w.Priority)
	require.Equal(t, Ptr("parent"), w.ParentWorkflowID)
	require.Equal(t, Ptr("nightly"), w.ScheduleName)
	require.Nil(t, w.OwnerXID)
	require.NotNil(t, w.CreatorXID)
	require.Equal(t, int64(0), w.RecoveryAttempts)
	require.Nil(t, w.StartedAt)
	require.Equal(t, Ptr(`{"positionalArgs":[],"namedArgs":{"a":1}}`), w.Inputs)
	require.Equal(t, Ptr("portable_json"), w.Serialization)

	until := nowMS() + 3_600_000
	res = insert(t, db, sysdb.WorkflowInsertParams{
		ID: "d-1", Status: sysdb.StatusDelayed, QueueName: Ptr("orders"),
		DelayUntilEpochMS: Ptr(until), DeduplicationID: Ptr("debounce-key"), IsDebounced: true,
		DebounceDeadline: Ptr(until + 1000),
	})
	require.True(t, res.Created)
	require.Equal(t, sysdb.StatusDelayed, res.Status)
	w = get(t, db, "d-1")
	require.Equal(t, sysdb.StatusDelayed, w.Status)
	require.Equal(t, Ptr(until), w.DelayUntilEpochMS)
	require.Equal(t, Ptr("debounce-key"), w.DeduplicationID)
	require.True(t, w.IsDebounced)
	require.Equal(t, Ptr(until+1000), w.DebounceDeadline)
	require.Nil(t, w.OwnerXID)
	require.Equal(t, int64(0), w.RecoveryAttempts)
	require.Nil(t, w.Inputs, "no inputs given, none stored")
	require.True(t, w.Active())
}

func testWorkflowInsertIdempotent(t *testing.T, db sysdb.SystemDatabase) {
	creator := Token()
	p := sysdb.WorkflowInsertParams{
		ID: "wf-1", Name: "wf", Status: sysdb.StatusPending, CreatorXID: creator, ExecutorID: "local",
		Serialization: Ptr("portable_json"), Inputs: Ptr(`{"positionalArgs":[1],"namedArgs":{}}`),
	}
	first := insert(t, db, p)
	require.True(t, first.Created)

	// A retried request (same token) recognises its own row, even with other
	// inputs: the first inputs stand.
	retry := p
	retry.Inputs = Ptr(`{"positionalArgs":[2],"namedArgs":{}}`)
	again := insert(t, db, retry)
	require.True(t, again.Created, "same creator token: the row is this request's")
	require.Equal(t, Ptr(creator), again.OwnerXID)

	// Another request learns the stored row's identity and takes nothing.
	other := p
	other.CreatorXID = Token()
	res := insert(t, db, other)
	require.False(t, res.Created)
	require.Equal(t, sysdb.StatusPending, res.Status)
	require.Equal(t, "wf", res.Name)
	require.Equal(t, Ptr(creator), res.OwnerXID, "the stored owner, not the newcomer")

	w := get(t, db, "wf-1")
	require.Equal(t, Ptr(`{"positionalArgs":[1],"namedArgs":{}}`), w.Inputs)
	require.Equal(t, Ptr(creator), w.OwnerXID)
	require.Equal(t, Ptr(creator), w.CreatorXID)
	require.Equal(t, int64(1), w.RecoveryAttempts, "a recognised insert is not another attempt")

	// A finished row is reported as finished.
	finish(t, db, "wf-1", creator, `"done"`)
	res = insert(t, db, other)
	require.False(t, res.Created)
	require.Equal(t, sysdb.StatusSuccess, res.Status)
	require.Nil(t, res.OwnerXID)

	// An enqueue of an id that is already queued returns the queued row.
	enqueue(t, db, "q-1", "jobs")
	res = insert(t, db, sysdb.WorkflowInsertParams{ID: "q-1", Status: sysdb.StatusPending})
	require.False(t, res.Created)
	require.Equal(t, sysdb.StatusEnqueued, res.Status)
	require.Equal(t, Ptr("jobs"), res.QueueName)
	require.Nil(t, res.OwnerXID)
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "q-1").Status)
}

func testWorkflowInsertConflicts(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	insert(t, db, sysdb.WorkflowInsertParams{
		ID: "wf-1", Name: "checkout", ClassName: Ptr("Shop"), ConfigName: Ptr("eu"),
		Status: sysdb.StatusEnqueued, QueueName: Ptr("orders"),
	})
	base := sysdb.WorkflowInsertParams{
		ID: "wf-1", Name: "checkout", ClassName: Ptr("Shop"), ConfigName: Ptr("eu"),
		Status: sysdb.StatusEnqueued, QueueName: Ptr("orders"), CreatorXID: Token(), ExecutorID: "local",
	}
	for name, mod := range map[string]func(*sysdb.WorkflowInsertParams){
		"name":   func(p *sysdb.WorkflowInsertParams) { p.Name = "refund" },
		"class":  func(p *sysdb.WorkflowInsertParams) { p.ClassName = Ptr("Bank") },
		"config": func(p *sysdb.WorkflowInsertParams) { p.ConfigName = Ptr("us") },
		"queue":  func(p *sysdb.WorkflowInsertParams) { p.QueueName = Ptr("refunds") },
	} {
		p := base
		mod(&p)
		_, err := db.WorkflowInsert(ctx, p)
		conflict := asError[*sysdb.ConflictingWorkflowError](t, err)
		require.Equal(t, "wf-1", conflict.WorkflowID, name)
		require.NotEmpty(t, conflict.Reason, name)
	}

	// Leaving class, config or queue unset is not a difference.
	p := base
	p.ClassName, p.ConfigName, p.QueueName = nil, nil, nil
	res, err := db.WorkflowInsert(ctx, p)
	require.NoError(t, err)
	require.False(t, res.Created)
	require.Equal(t, Ptr("orders"), res.QueueName)

	// A directly started row has no queue to differ from.
	start(t, db, "wf-2")
	res, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "wf-2", Name: "wf", Status: sysdb.StatusEnqueued, QueueName: Ptr("orders"), CreatorXID: Token(), ExecutorID: "local",
	})
	require.NoError(t, err)
	require.False(t, res.Created)
	require.Equal(t, sysdb.StatusPending, res.Status)

	w := get(t, db, "wf-1")
	require.Equal(t, "checkout", w.Name)
	require.Equal(t, Ptr("Shop"), w.ClassName)
	require.Equal(t, Ptr("orders"), w.QueueName)
}

// testWorkflowInsertRejectExisting: DBOS's workflow_id_reuse_policy
// "reject". A taken id is a WorkflowIDInUseError naming the stored row,
// before a name conflict or the deduplication id, and changes nothing (a
// child's parent gets no step); the request that made the row retries
// without error.
func testWorkflowInsertRejectExisting(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "taken", func(p *sysdb.WorkflowInsertParams) { p.Name = "checkout"; p.Inputs = Ptr(`"first"`) })
	before := get(t, db, "taken")
	for name, p := range map[string]sysdb.WorkflowInsertParams{
		"same name":  {ID: "taken", Name: "checkout", Inputs: Ptr(`"second"`)},
		"other name": {ID: "taken", Name: "refund"},
		"dedup id":   {ID: "taken", Name: "checkout", Status: sysdb.StatusEnqueued, QueueName: Ptr("q"), DeduplicationID: Ptr("d")},
	} {
		p.RejectExisting, p.CreatorXID, p.ExecutorID = true, Token(), "local"
		if p.Status == "" {
			p.Status = sysdb.StatusPending
		}
		_, err := db.WorkflowInsert(ctx, p)
		inUse := asError[*sysdb.WorkflowIDInUseError](t, err)
		require.Equal(t, sysdb.WorkflowIDInUseError{WorkflowID: "taken", Status: sysdb.StatusPending, Name: "checkout"}, *inUse, name)
	}
	after := get(t, db, "taken")
	require.Equal(t, before, after, "a rejected insert changes nothing")

	// The request that made the row is not rejected by its own retry.
	fresh := sysdb.WorkflowInsertParams{ID: "fresh", Name: "wf", Status: sysdb.StatusPending, CreatorXID: Token(), ExecutorID: "local", RejectExisting: true}
	for range 2 {
		res, err := db.WorkflowInsert(ctx, fresh)
		require.NoError(t, err)
		require.True(t, res.Created)
	}

	// A child: the parent's step is not recorded.
	parent := sysdb.StepCaller{WorkflowID: "taken", OwnerXID: owner, FunctionID: 1}
	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "fresh", Name: "wf", Status: sysdb.StatusEnqueued, QueueName: Ptr("q"), CreatorXID: Token(), ExecutorID: "local",
		RejectExisting: true, ParentWorkflowID: Ptr("taken"), ParentStep: &parent,
	})
	asError[*sysdb.WorkflowIDInUseError](t, err)
	steps, err := db.StepList(ctx, "taken")
	require.NoError(t, err)
	require.Empty(t, steps)
}

func testWorkflowInsertDeduplication(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	withDedup := func(id string) func(*sysdb.WorkflowInsertParams) {
		return func(p *sysdb.WorkflowInsertParams) { p.DeduplicationID = Ptr(id) }
	}
	enqueue(t, db, "a", "q", withDedup("d"))

	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "b", Name: "wf", Status: sysdb.StatusEnqueued, QueueName: Ptr("q"), DeduplicationID: Ptr("d"),
		CreatorXID: Token(), ExecutorID: "local", Inputs: Ptr(`{}`),
	})
	dedup := asError[*sysdb.DeduplicatedError](t, err)
	require.Equal(t, "b", dedup.WorkflowID)
	require.Equal(t, "q", dedup.QueueName)
	require.Equal(t, "d", dedup.DeduplicationID)
	_, err = db.WorkflowGet(ctx, "b")
	asError[*sysdb.NotFoundError](t, err) // nothing of b was kept

	// The same id on another queue is another key.
	enqueue(t, db, "c", "other", withDedup("d"))

	// While a runs the key is still held; once it finishes it is free.
	owner := claimOne(t, db, "q", "a")
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "b", Name: "wf", Status: sysdb.StatusEnqueued, QueueName: Ptr("q"), DeduplicationID: Ptr("d"),
		CreatorXID: Token(), ExecutorID: "local",
	})
	asError[*sysdb.DeduplicatedError](t, err)
	finish(t, db, "a", owner, `1`)
	require.Nil(t, get(t, db, "a").DeduplicationID, "finishing releases the deduplication id")
	enqueue(t, db, "b", "q", withDedup("d"))

	// A delayed workflow holds its key too; cancelling releases it.
	insert(t, db, sysdb.WorkflowInsertParams{
		ID: "e", Status: sysdb.StatusDelayed, QueueName: Ptr("later"), DeduplicationID: Ptr("k"),
		DelayUntilEpochMS: Ptr(nowMS() + 3_600_000),
	})
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{
		ID: "f", Name: "wf", Status: sysdb.StatusEnqueued, QueueName: Ptr("later"), DeduplicationID: Ptr("k"),
		CreatorXID: Token(), ExecutorID: "local",
	})
	asError[*sysdb.DeduplicatedError](t, err)
	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"e"}})
	require.NoError(t, err)
	enqueue(t, db, "f", "later", withDedup("k"))
}

func testWorkflowInsertValidation(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	valid := sysdb.WorkflowInsertParams{ID: "x", Name: "wf", Status: sysdb.StatusPending, CreatorXID: Token(), ExecutorID: "local"}
	for name, mod := range map[string]func(*sysdb.WorkflowInsertParams){
		"no id":        func(p *sysdb.WorkflowInsertParams) { p.ID = "" },
		"no name":      func(p *sysdb.WorkflowInsertParams) { p.Name = "" },
		"no token":     func(p *sysdb.WorkflowInsertParams) { p.CreatorXID = "" },
		"final status": func(p *sysdb.WorkflowInsertParams) { p.Status = sysdb.StatusSuccess },
		"no status":    func(p *sysdb.WorkflowInsertParams) { p.Status = "" },
	} {
		p := valid
		mod(&p)
		_, err := db.WorkflowInsert(ctx, p)
		require.Error(t, err, name)
	}
	ws, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{})
	require.NoError(t, err)
	require.Empty(t, ws, "a rejected insert writes nothing")
}

func testWorkflowGetNotFound(t *testing.T, db sysdb.SystemDatabase) {
	_, err := db.WorkflowGet(t.Context(), "missing")
	nf := asError[*sysdb.NotFoundError](t, err)
	require.Equal(t, "missing", nf.WorkflowID)
}

// ---------------------------------------------------------------------------
// WorkflowList

// listFixture creates five workflows at distinct instants and returns their
// created_at by id. The ids exercise LIKE's wildcards in prefixes.
func listFixture(t *testing.T, db sysdb.SystemDatabase) map[string]int64 {
	t.Helper()
	start(t, db, "pre_fix-1", func(p *sysdb.WorkflowInsertParams) {
		p.Name, p.ExecutorID, p.ApplicationVersion, p.ApplicationName = "alpha", "e1", Ptr("v1"), Ptr("app1")
		p.AuthenticatedUser = Ptr("alice")
		p.Serialization, p.Inputs = Ptr("portable_json"), Ptr(`{"positionalArgs":[1],"namedArgs":{}}`)
	})
	tick()
	enqueue(t, db, "preXfix-2", "q1", func(p *sysdb.WorkflowInsertParams) {
		p.Name, p.ExecutorID, p.ApplicationVersion, p.ApplicationName = "beta", "e2", Ptr("v2"), Ptr("app2")
		p.AuthenticatedUser, p.DeduplicationID, p.ScheduleName = Ptr("bob"), Ptr("d1"), Ptr("s1")
	})
	tick()
	start(t, db, "pre%fix-3", func(p *sysdb.WorkflowInsertParams) {
		p.Name, p.ExecutorID, p.ApplicationVersion = "alpha", "e1", Ptr("v1")
		p.ParentWorkflowID = Ptr("pre_fix-1")
	})
	tick()
	owner := start(t, db, "other-4", func(p *sysdb.WorkflowInsertParams) {
		p.Name, p.ExecutorID, p.ApplicationVersion, p.ApplicationName = "gamma", "e3", Ptr("v2"), Ptr("app1")
		p.QueueName = Ptr("q2")
	})
	finish(t, db, "other-4", owner, `"four"`)
	tick()
	enqueue(t, db, "other-5", "q1", func(p *sysdb.WorkflowInsertParams) { p.Name = "beta" })
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q1", ExecutorID: "e9", ApplicationVersion: "v3", MaxClaim: 5})
	// preXfix-2 is a v2 row, so only other-5 (unversioned) is claimed.
	require.Equal(t, []string{"other-5"}, ids(ws))

	created := map[string]int64{}
	all, err := db.WorkflowList(t.Context(), sysdb.WorkflowListParams{})
	require.NoError(t, err)
	require.Len(t, all, 5)
	for i, w := range all {
		created[w.ID] = w.CreatedAt
		if i > 0 {
			require.Greater(t, w.CreatedAt, all[i-1].CreatedAt, "fixture rows need distinct instants")
		}
	}
	return created
}

func testWorkflowListFilters(t *testing.T, db sysdb.SystemDatabase) {
	created := listFixture(t, db)
	w4, w5 := get(t, db, "other-4"), get(t, db, "other-5")
	require.NotNil(t, w4.CompletedAt)
	require.NotNil(t, w5.StartedAt)
	yes, no := true, false
	for _, c := range []struct {
		name string
		p    sysdb.WorkflowListParams
		want []string
	}{
		{"none", sysdb.WorkflowListParams{}, []string{"pre_fix-1", "preXfix-2", "pre%fix-3", "other-4", "other-5"}},
		{"empty slices", sysdb.WorkflowListParams{WorkflowIDs: []string{}, Statuses: []string{}}, []string{"pre_fix-1", "preXfix-2", "pre%fix-3", "other-4", "other-5"}},
		{"ids", sysdb.WorkflowListParams{WorkflowIDs: []string{"pre%fix-3", "pre_fix-1", "missing"}}, []string{"pre_fix-1", "pre%fix-3"}},
		{"prefix", sysdb.WorkflowListParams{IDPrefixes: []string{"pre"}}, []string{"pre_fix-1", "preXfix-2", "pre%fix-3"}},
		{"prefix with _", sysdb.WorkflowListParams{IDPrefixes: []string{"pre_"}}, []string{"pre_fix-1"}},
		{"prefix with %", sysdb.WorkflowListParams{IDPrefixes: []string{"pre%"}}, []string{"pre%fix-3"}},
		{"prefixes", sysdb.WorkflowListParams{IDPrefixes: []string{"pre_", "other-4"}}, []string{"pre_fix-1", "other-4"}},
		{"status", sysdb.WorkflowListParams{Statuses: []string{sysdb.StatusEnqueued}}, []string{"preXfix-2"}},
		{"statuses", sysdb.WorkflowListParams{Statuses: []string{sysdb.StatusPending, sysdb.StatusSuccess}}, []string{"pre_fix-1", "pre%fix-3", "other-4", "other-5"}},
		{"name", sysdb.WorkflowListParams{Names: []string{"alpha"}}, []string{"pre_fix-1", "pre%fix-3"}},
		{"queue", sysdb.WorkflowListParams{QueueNames: []string{"q1"}}, []string{"preXfix-2", "other-5"}},
		{"queues only", sysdb.WorkflowListParams{QueuesOnly: true}, []string{"preXfix-2", "other-5"}},
		{"queues only, ended", sysdb.WorkflowListParams{QueuesOnly: true, Statuses: []string{sysdb.StatusSuccess}}, []string{"other-4"}},
		{"executor", sysdb.WorkflowListParams{ExecutorIDs: []string{"e1", "e9"}}, []string{"pre_fix-1", "pre%fix-3", "other-5"}},
		{"version", sysdb.WorkflowListParams{ApplicationVersion: []string{"v2"}}, []string{"preXfix-2", "other-4"}},
		{"version stamped by claim", sysdb.WorkflowListParams{ApplicationVersion: []string{"v3"}}, []string{"other-5"}},
		// An application sees its own rows and the unclaimed ones.
		{"app name", sysdb.WorkflowListParams{ApplicationNames: []string{"app1"}}, []string{"pre_fix-1", "pre%fix-3", "other-4", "other-5"}},
		{"app names", sysdb.WorkflowListParams{ApplicationNames: []string{"app2"}}, []string{"preXfix-2", "pre%fix-3", "other-5"}},
		{"user", sysdb.WorkflowListParams{AuthenticatedUsers: []string{"alice"}}, []string{"pre_fix-1"}},
		{"parent", sysdb.WorkflowListParams{ParentWorkflowIDs: []string{"pre_fix-1"}}, []string{"pre%fix-3"}},
		{"has parent", sysdb.WorkflowListParams{HasParent: &yes}, []string{"pre%fix-3"}},
		{"has no parent", sysdb.WorkflowListParams{HasParent: &no}, []string{"pre_fix-1", "preXfix-2", "other-4", "other-5"}},
		{"forked from", sysdb.WorkflowListParams{ForkedFrom: []string{"pre_fix-1"}}, []string{}},
		{"is fork", sysdb.WorkflowListParams{IsFork: &yes}, []string{}},
		{"is no fork", sysdb.WorkflowListParams{IsFork: &no}, []string{"pre_fix-1", "preXfix-2", "pre%fix-3", "other-4", "other-5"}},
		{"dedup id", sysdb.WorkflowListParams{DeduplicationIDs: []string{"d1"}}, []string{"preXfix-2"}},
		{"schedule", sysdb.WorkflowListParams{ScheduleNames: []string{"s1"}}, []string{"preXfix-2"}},
		{"created after (inclusive)", sysdb.WorkflowListParams{CreatedAfter: Ptr(created["pre%fix-3"])}, []string{"pre%fix-3", "other-4", "other-5"}},
		{"created before (inclusive)", sysdb.WorkflowListParams{CreatedBefore: Ptr(created["preXfix-2"])}, []string{"pre_fix-1", "preXfix-2"}},
		{"created between", sysdb.WorkflowListParams{CreatedAfter: Ptr(created["preXfix-2"]), CreatedBefore: Ptr(created["pre%fix-3"])}, []string{"preXfix-2", "pre%fix-3"}},
		{"completed after", sysdb.WorkflowListParams{CompletedAfter: w4.CompletedAt}, []string{"other-4"}},
		{"completed after, none", sysdb.WorkflowListParams{CompletedAfter: Ptr(*w4.CompletedAt + 1)}, []string{}},
		{"completed before", sysdb.WorkflowListParams{CompletedBefore: w4.CompletedAt}, []string{"other-4"}},
		{"started after", sysdb.WorkflowListParams{StartedAfter: w5.StartedAt}, []string{"other-5"}},
		{"started before, none", sysdb.WorkflowListParams{StartedBefore: Ptr(*w5.StartedAt - 1)}, []string{}},
		{"filters combine", sysdb.WorkflowListParams{Names: []string{"alpha"}, ExecutorIDs: []string{"e1"}, HasParent: &no}, []string{"pre_fix-1"}},
		{"nothing matches", sysdb.WorkflowListParams{Names: []string{"alpha"}, Statuses: []string{sysdb.StatusEnqueued}}, []string{}},
	} {
		require.Equal(t, c.want, list(t, db, c.p), c.name)
	}
}

// testWorkflowListAttributesAndForks covers the filters DBOS's
// test_attributes and fork tests rely on: attributes by jsonb containment
// (nested values, arrays, every given key must match, a row without
// attributes never matches) and the fork columns.
func testWorkflowListAttributesAndForks(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	with := func(attrs string) func(*sysdb.WorkflowInsertParams) {
		return func(p *sysdb.WorkflowInsertParams) { p.Attributes = Ptr(attrs) }
	}
	start(t, db, "a-1", with(`{"team":"core","tier":1,"tags":["x","y"],"meta":{"region":"eu","zone":2}}`))
	tick()
	start(t, db, "a-2", with(`{"team":"core","tier":2}`))
	tick()
	start(t, db, "a-3", with(`{"team":"edge","flag":true,"none":null}`))
	tick()
	start(t, db, "a-4")
	require.NoError(t, db.WorkflowFork(ctx, sysdb.WorkflowForkParams{OriginalID: "a-2", NewID: "a-2-fork"}))
	yes, no := true, false
	for _, c := range []struct {
		name string
		p    sysdb.WorkflowListParams
		want []string
	}{
		// A fork carries its original's attributes, as DBOS copies them.
		{"one key", sysdb.WorkflowListParams{Attributes: Ptr(`{"team":"core"}`)}, []string{"a-1", "a-2", "a-2-fork"}},
		{"every key must match", sysdb.WorkflowListParams{Attributes: Ptr(`{"team":"core","tier":2}`), IsFork: &no}, []string{"a-2"}},
		{"number is not string", sysdb.WorkflowListParams{Attributes: Ptr(`{"tier":"1"}`)}, []string{}},
		{"bool", sysdb.WorkflowListParams{Attributes: Ptr(`{"flag":true}`)}, []string{"a-3"}},
		{"null value", sysdb.WorkflowListParams{Attributes: Ptr(`{"none":null}`)}, []string{"a-3"}},
		{"array element", sysdb.WorkflowListParams{Attributes: Ptr(`{"tags":["y"]}`)}, []string{"a-1"}},
		{"nested subset", sysdb.WorkflowListParams{Attributes: Ptr(`{"meta":{"region":"eu"}}`)}, []string{"a-1"}},
		{"nested mismatch", sysdb.WorkflowListParams{Attributes: Ptr(`{"meta":{"region":"us"}}`)}, []string{}},
		{"missing key", sysdb.WorkflowListParams{Attributes: Ptr(`{"nope":1}`)}, []string{}},
		{"with other filters", sysdb.WorkflowListParams{Attributes: Ptr(`{"team":"core"}`), IDPrefixes: []string{"a-2"}}, []string{"a-2", "a-2-fork"}},
		{"forked from", sysdb.WorkflowListParams{ForkedFrom: []string{"a-2"}}, []string{"a-2-fork"}},
		{"is fork", sysdb.WorkflowListParams{IsFork: &yes}, []string{"a-2-fork"}},
		{"was forked from", sysdb.WorkflowListParams{WasForkedFrom: &yes}, []string{"a-2"}},
		{"was not forked from", sysdb.WorkflowListParams{WasForkedFrom: &no}, []string{"a-1", "a-3", "a-4", "a-2-fork"}},
	} {
		require.Equal(t, c.want, list(t, db, c.p), c.name)
	}
	for _, bad := range []string{`[1]`, `"x"`, `null`, `{`} {
		_, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{Attributes: Ptr(bad)})
		require.ErrorContains(t, err, "not a JSON object", bad)
	}
}

func testWorkflowListPaging(t *testing.T, db sysdb.SystemDatabase) {
	listFixture(t, db)
	for _, c := range []struct {
		name string
		p    sysdb.WorkflowListParams
		want []string
	}{
		{"limit", sysdb.WorkflowListParams{Limit: 2}, []string{"pre_fix-1", "preXfix-2"}},
		{"offset", sysdb.WorkflowListParams{Offset: 3}, []string{"other-4", "other-5"}},
		{"limit and offset", sysdb.WorkflowListParams{Limit: 2, Offset: 1}, []string{"preXfix-2", "pre%fix-3"}},
		{"desc", sysdb.WorkflowListParams{SortDesc: true}, []string{"other-5", "other-4", "pre%fix-3", "preXfix-2", "pre_fix-1"}},
		{"desc limit offset", sysdb.WorkflowListParams{SortDesc: true, Limit: 2, Offset: 1}, []string{"other-4", "pre%fix-3"}},
		{"filter then limit", sysdb.WorkflowListParams{IDPrefixes: []string{"pre"}, SortDesc: true, Limit: 1}, []string{"pre%fix-3"}},
		{"offset past the end", sysdb.WorkflowListParams{Offset: 10}, []string{}},
	} {
		require.Equal(t, c.want, list(t, db, c.p), c.name)
	}
}

func testWorkflowListPayloads(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	listFixture(t, db)
	byID := func(ws []sysdb.Workflow) map[string]sysdb.Workflow {
		m := map[string]sysdb.Workflow{}
		for _, w := range ws {
			m[w.ID] = w
		}
		return m
	}

	bare, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{})
	require.NoError(t, err)
	for _, w := range bare {
		require.False(t, w.PayloadsLoaded, w.ID)
		require.Nil(t, w.Inputs, w.ID)
		require.Nil(t, w.Output, w.ID)
		require.Nil(t, w.Error, w.ID)
		require.NotEmpty(t, w.Status, w.ID)
		require.NotEmpty(t, w.Name, w.ID)
	}
	m := byID(bare)
	require.Equal(t, Ptr("portable_json"), m["pre_fix-1"].Serialization, "the tag is a status column, listed without payloads")
	require.Equal(t, Ptr("alice"), m["pre_fix-1"].AuthenticatedUser)
	require.Equal(t, Ptr("pre_fix-1"), m["pre%fix-3"].ParentWorkflowID)

	inputsOnly, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{LoadInputs: true})
	require.NoError(t, err)
	m = byID(inputsOnly)
	require.Equal(t, Ptr(`{"positionalArgs":[1],"namedArgs":{}}`), m["pre_fix-1"].Inputs)
	require.Nil(t, m["other-4"].Output)
	require.False(t, m["pre_fix-1"].PayloadsLoaded, "only inputs were read")

	outputsOnly, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{LoadOutputs: true})
	require.NoError(t, err)
	m = byID(outputsOnly)
	require.Nil(t, m["pre_fix-1"].Inputs)
	require.Equal(t, Ptr(`"four"`), m["other-4"].Output)
	require.False(t, m["other-4"].PayloadsLoaded)

	full, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{LoadInputs: true, LoadOutputs: true})
	require.NoError(t, err)
	m = byID(full)
	for _, w := range full {
		require.True(t, w.PayloadsLoaded, w.ID)
	}
	require.Equal(t, Ptr(`{"positionalArgs":[1],"namedArgs":{}}`), m["pre_fix-1"].Inputs)
	require.Equal(t, Ptr(`"four"`), m["other-4"].Output)
	require.Nil(t, m["other-4"].Error)
	require.Nil(t, m["pre_fix-1"].Output)
}

// ---------------------------------------------------------------------------
// WorkflowFinish

func testWorkflowFinish(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	enqueue(t, db, "ok", "q", func(p *sysdb.WorkflowInsertParams) { p.DeduplicationID = Ptr("d") })
	owner := claimOne(t, db, "q", "ok")
	res, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
		WorkflowID: "ok", OwnerXID: owner, Status: sysdb.StatusSuccess, Output: Ptr(`{"total":3}`),
	})
	require.NoError(t, err)
	require.True(t, res.Applied)
	require.Equal(t, sysdb.StatusSuccess, res.Stored.Status)
	require.Equal(t, Ptr(`{"total":3}`), res.Stored.Output)
	require.Nil(t, res.Stored.Error)

	w := get(t, db, "ok")
	require.Equal(t, sysdb.StatusSuccess, w.Status)
	require.Equal(t, Ptr(`{"total":3}`), w.Output)
	require.Nil(t, w.OwnerXID, "a finished run owns nothing")
	require.Nil(t, w.DeduplicationID)
	require.NotNil(t, w.CompletedAt)
	require.GreaterOrEqual(t, *w.CompletedAt, *w.StartedAt)
	require.Equal(t, Ptr("q"), w.QueueName, "the queue stays for the record")
	require.False(t, w.Active())

	failOwner := start(t, db, "fail")
	errText := `{"name":"ValueError","message":"bad input","code":null,"data":null}`
	res, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
		WorkflowID: "fail", OwnerXID: failOwner, Status: sysdb.StatusError, Error: Ptr(errText),
	})
	require.NoError(t, err)
	require.True(t, res.Applied)
	w = get(t, db, "fail")
	require.Equal(t, sysdb.StatusError, w.Status)
	require.Equal(t, Ptr(errText), w.Error)
	require.Nil(t, w.Output)

	_, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "ok", OwnerXID: owner, Status: sysdb.StatusCancelled})
	require.Error(t, err, "only SUCCESS or ERROR is an outcome")

	_, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "missing", OwnerXID: "x", Status: sysdb.StatusSuccess})
	asError[*sysdb.NotFoundError](t, err)
}

func testWorkflowFinishLoser(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")

	// Another token cannot finish the run, and learns it is still running.
	res, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
		WorkflowID: "wf", OwnerXID: Token(), Status: sysdb.StatusSuccess, Output: Ptr(`"intruder"`),
	})
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.Equal(t, sysdb.StatusPending, res.Stored.Status)
	require.Nil(t, res.Stored.Output)

	finish(t, db, "wf", owner, `"winner"`)

	// The owner's second outcome (a duplicate run) loses to the first and
	// adopts it; so does anyone else's.
	for _, token := range []string{owner, Token()} {
		res, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
			WorkflowID: "wf", OwnerXID: token, Status: sysdb.StatusError, Error: Ptr(`{"name":"E","message":"late"}`),
		})
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Equal(t, sysdb.StatusSuccess, res.Stored.Status)
		require.Equal(t, Ptr(`"winner"`), res.Stored.Output)
		require.Nil(t, res.Stored.Error)
	}

	// An enqueued workflow nobody claimed cannot be finished.
	enqueue(t, db, "queued", "q")
	res, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "queued", OwnerXID: Token(), Status: sysdb.StatusSuccess})
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.Equal(t, sysdb.StatusEnqueued, res.Stored.Status)
}

// ---------------------------------------------------------------------------
// Steps

func testStepRecord(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	first := step("wf", owner, 1, "fetch", `{"v":1}`)
	first.StartedAt, first.CompletedAt = Ptr(int64(1000)), Ptr(int64(2000))
	require.NoError(t, db.StepRecord(ctx, first))

	// The same record again (a retry whose acknowledgement was lost) succeeds.
	require.NoError(t, db.StepRecord(ctx, first))

	other := first
	other.Name = "charge"
	unexpected := asError[*sysdb.UnexpectedStepError](t, db.StepRecord(ctx, other))
	require.Equal(t, "wf", unexpected.WorkflowID)
	require.Equal(t, 1, unexpected.FunctionID)
	require.Equal(t, "fetch", unexpected.Recorded)
	require.Equal(t, "charge", unexpected.Attempted)

	for name, mod := range map[string]func(*sysdb.StepRecordParams){
		"output":        func(s *sysdb.StepRecordParams) { s.Output = Ptr(`{"v":2}`) },
		"no output":     func(s *sysdb.StepRecordParams) { s.Output = nil },
		"empty output":  func(s *sysdb.StepRecordParams) { s.Output = Ptr("") },
		"error":         func(s *sysdb.StepRecordParams) { s.Error = Ptr(`{"name":"E","message":"m"}`) },
		"serialization": func(s *sysdb.StepRecordParams) { s.Serialization = Ptr("DBOS_JSON") },
		"child":         func(s *sysdb.StepRecordParams) { s.ChildWorkflowID = Ptr("wf-1") },
	} {
		s := first
		mod(&s)
		conflict := asError[*sysdb.StepConflictError](t, db.StepRecord(ctx, s))
		require.Equal(t, "wf", conflict.WorkflowID, name)
		require.Equal(t, 1, conflict.FunctionID, name)
	}

	// A step with no output at all is recorded as such, and its retry matches.
	bare := sysdb.StepRecordParams{WorkflowID: "wf", OwnerXID: owner, FunctionID: 2, Name: "DBOS.sleep"}
	require.NoError(t, db.StepRecord(ctx, bare))
	require.NoError(t, db.StepRecord(ctx, bare))
	withOutput := bare
	withOutput.Output = Ptr("")
	asError[*sysdb.StepConflictError](t, db.StepRecord(ctx, withOutput))

	steps, err := db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, sysdb.Step{
		FunctionID: 1, Name: "fetch", Output: Ptr(`{"v":1}`), Serialization: Ptr("portable_json"),
		StartedAt: Ptr(int64(1000)), CompletedAt: Ptr(int64(2000)),
	}, steps[0])
	require.Equal(t, sysdb.Step{FunctionID: 2, Name: "DBOS.sleep"}, steps[1])
}

func testStepRecordFencing(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")

	fenced := asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("wf", Token(), 1, "s", "1")))
	require.Equal(t, "wf", fenced.WorkflowID)

	enqueue(t, db, "queued", "q")
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("queued", Token(), 1, "s", "1")))

	nf := asError[*sysdb.NotFoundError](t, db.StepRecord(ctx, step("missing", owner, 1, "s", "1")))
	require.Equal(t, "missing", nf.WorkflowID)

	// Finishing ends the run's right to write.
	require.NoError(t, db.StepRecord(ctx, step("wf", owner, 1, "s", "1")))
	finish(t, db, "wf", owner, `"done"`)
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("wf", owner, 2, "s", "2")))

	for _, id := range []string{"queued", "missing"} {
		steps, err := db.StepList(ctx, id)
		require.NoError(t, err)
		require.Empty(t, steps)
	}
	steps, err := db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, steps, 1)
}

func testStepRecordManyMixedBatch(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "a")
	require.NoError(t, db.StepRecord(ctx, step("a", owner, 1, "s1", "1")))
	require.NoError(t, db.StepRecord(ctx, step("a", owner, 2, "s2", "2")))
	enqueue(t, db, "b", "q")

	batch := []sysdb.StepRecordParams{
		step("a", owner, 3, "s3", "3"),         // 0: new
		step("a", owner, 1, "s1", "1"),         // 1: the recorded step again
		step("a", owner, 1, "other", "1"),      // 2: another name at a recorded id
		step("a", owner, 2, "s2", "changed"),   // 3: other content at a recorded id
		step("a", Token(), 4, "s4", "4"),       // 4: not this run's workflow any more
		step("b", Token(), 1, "s1", "1"),       // 5: a workflow nobody runs
		step("missing", owner, 1, "s1", "1"),   // 6: no such workflow
		step("a", owner, 5, "s5", "5"),         // 7: new
		step("a", owner, 3, "s3", "3"),         // 8: repeats item 0
		step("a", owner, 5, "s5-renamed", "5"), // 9: another name for item 7's id
		step("a", owner, 3, "s3", "different"), // 10: other content for item 0's id
	}
	results, err := db.StepRecordMany(ctx, batch)
	require.NoError(t, err)
	require.Len(t, results, len(batch))
	require.NoError(t, results[0])
	require.NoError(t, results[1])
	unexpected := asError[*sysdb.UnexpectedStepError](t, results[2])
	require.Equal(t, "s1", unexpected.Recorded)
	require.Equal(t, "other", unexpected.Attempted)
	asError[*sysdb.StepConflictError](t, results[3])
	asError[*sysdb.FencedError](t, results[4])
	require.Equal(t, "b", asError[*sysdb.FencedError](t, results[5]).WorkflowID)
	require.Equal(t, "missing", asError[*sysdb.NotFoundError](t, results[6]).WorkflowID)
	require.NoError(t, results[7])
	require.NoError(t, results[8])
	unexpected = asError[*sysdb.UnexpectedStepError](t, results[9])
	require.Equal(t, "s5", unexpected.Recorded)
	require.Equal(t, 5, unexpected.FunctionID)
	asError[*sysdb.StepConflictError](t, results[10])

	steps, err := db.StepList(ctx, "a")
	require.NoError(t, err)
	got := map[int]string{}
	var order []int
	for _, s := range steps {
		got[s.FunctionID] = s.Name + "=" + *s.Output
		order = append(order, s.FunctionID)
	}
	require.Equal(t, []int{1, 2, 3, 5}, order)
	require.Equal(t, map[int]string{1: "s1=1", 2: "s2=2", 3: "s3=3", 5: "s5=5"}, got)
	steps, err = db.StepList(ctx, "b")
	require.NoError(t, err)
	require.Empty(t, steps)

	results, err = db.StepRecordMany(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, results)
}

func testStepRecordManyDuplicateItems(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	s := step("wf", owner, 1, "s", `"x"`)
	results, err := db.StepRecordMany(ctx, []sysdb.StepRecordParams{s, s})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, results)
	steps, err := db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, Ptr(`"x"`), steps[0].Output)

	// Both items of a batch fenced alike.
	results, err = db.StepRecordMany(ctx, []sysdb.StepRecordParams{step("wf", "stale", 2, "s", "1"), step("wf", "stale", 2, "s", "1")})
	require.NoError(t, err)
	asError[*sysdb.FencedError](t, results[0])
	asError[*sysdb.FencedError](t, results[1])
}

func testStepRecordManyLargeBatch(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	const workflows, perWorkflow = 50, 10
	owners := make([]string, workflows)
	for i := range owners {
		owners[i] = start(t, db, fmt.Sprintf("wf-%02d", i))
	}
	var batch []sysdb.StepRecordParams
	for fid := perWorkflow; fid >= 1; fid-- { // out of order on purpose
		for i := range workflows {
			batch = append(batch, step(fmt.Sprintf("wf-%02d", i), owners[i], fid, fmt.Sprintf("step-%d", fid), fmt.Sprintf(`"%d-%d"`, i, fid)))
		}
	}
	require.Len(t, batch, 500)
	results, err := db.StepRecordMany(ctx, batch)
	require.NoError(t, err)
	require.Len(t, results, 500)
	for i, r := range results {
		require.NoError(t, r, "item %d", i)
	}
	for i := range workflows {
		steps, err := db.StepList(ctx, fmt.Sprintf("wf-%02d", i))
		require.NoError(t, err)
		require.Len(t, steps, perWorkflow)
		for j, s := range steps {
			require.Equal(t, j+1, s.FunctionID)
			require.Equal(t, fmt.Sprintf("step-%d", j+1), s.Name)
			require.Equal(t, Ptr(fmt.Sprintf(`"%d-%d"`, i, j+1)), s.Output)
		}
	}
	// Replaying the whole batch is a no-op success.
	results, err = db.StepRecordMany(ctx, batch)
	require.NoError(t, err)
	for i, r := range results {
		require.NoError(t, r, "replayed item %d", i)
	}
}

func testStepList(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	records := []sysdb.StepRecordParams{
		{WorkflowID: "wf", OwnerXID: owner, FunctionID: 3, Name: "DBOS.sleep", Output: Ptr("1700000000000"), Serialization: Ptr("portable_json"),
			StartedAt: Ptr(int64(30)), CompletedAt: Ptr(int64(31))},
		{WorkflowID: "wf", OwnerXID: owner, FunctionID: 1, Name: "fetch", Output: Ptr(`{"a":[1,2]}`), Serialization: Ptr("portable_json"),
			StartedAt: Ptr(int64(10)), CompletedAt: Ptr(int64(11)), ApplicationName: Ptr("shop")},
		{WorkflowID: "wf", OwnerXID: owner, FunctionID: 2, Name: "child", ChildWorkflowID: Ptr("wf-2"), Serialization: Ptr("portable_json"),
			Output: Ptr(`"wf-2"`), StartedAt: Ptr(int64(20))},
		{WorkflowID: "wf", OwnerXID: owner, FunctionID: 10, Name: "charge", Error: Ptr(`{"name":"E","message":"declined"}`),
			Serialization: Ptr("portable_json"), StartedAt: Ptr(int64(100)), CompletedAt: Ptr(int64(101))},
	}
	for _, r := range records {
		require.NoError(t, db.StepRecord(ctx, r))
	}
	steps, err := db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Equal(t, []sysdb.Step{
		{FunctionID: 1, Name: "fetch", Output: Ptr(`{"a":[1,2]}`), Serialization: Ptr("portable_json"), StartedAt: Ptr(int64(10)), CompletedAt: Ptr(int64(11))},
		{FunctionID: 2, Name: "child", Output: Ptr(`"wf-2"`), Serialization: Ptr("portable_json"), ChildWorkflowID: Ptr("wf-2"), StartedAt: Ptr(int64(20))},
		{FunctionID: 3, Name: "DBOS.sleep", Output: Ptr("1700000000000"), Serialization: Ptr("portable_json"), StartedAt: Ptr(int64(30)), CompletedAt: Ptr(int64(31))},
		{FunctionID: 10, Name: "charge", Error: Ptr(`{"name":"E","message":"declined"}`), Serialization: Ptr("portable_json"), StartedAt: Ptr(int64(100)), CompletedAt: Ptr(int64(101))},
	}, steps)

	// Steps belong to their workflow only.
	other := start(t, db, "wf-other")
	require.NoError(t, db.StepRecord(ctx, step("wf-other", other, 1, "x", "1")))
	steps, err = db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, steps, 4)
}

// ---------------------------------------------------------------------------
// Cancel, resume, delete, children

func testWorkflowCancel(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	pendingOwner := start(t, db, "pending")
	enqueue(t, db, "queued", "q", func(p *sysdb.WorkflowInsertParams) { p.DeduplicationID = Ptr("d") })
	doneOwner := start(t, db, "done")
	finish(t, db, "done", doneOwner, `"kept"`)
	errOwner := start(t, db, "failed")
	_, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "failed", OwnerXID: errOwner, Status: sysdb.StatusError, Error: Ptr(`"e"`)})
	require.NoError(t, err)

	got, err := db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"pending", "queued", "done", "failed", "missing"}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"pending", "queued", "done", "failed"}, got, "the ids that exist")

	for _, id := range []string{"pending", "queued"} {
		w := get(t, db, id)
		require.Equal(t, sysdb.StatusCancelled, w.Status, id)
		require.Nil(t, w.OwnerXID, id)
		require.Nil(t, w.QueueName, id)
		require.Nil(t, w.DeduplicationID, id)
		require.Nil(t, w.StartedAt, id)
		require.NotNil(t, w.CompletedAt, id)
		require.False(t, w.Active(), id)
	}
	done := get(t, db, "done")
	require.Equal(t, sysdb.StatusSuccess, done.Status)
	require.Equal(t, Ptr(`"kept"`), done.Output)
	require.Equal(t, sysdb.StatusError, get(t, db, "failed").Status)

	// The cancelled run is fenced out.
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("pending", pendingOwner, 1, "s", "1")))
	res, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "pending", OwnerXID: pendingOwner, Status: sysdb.StatusSuccess, Output: Ptr("1")})
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.Equal(t, sysdb.StatusCancelled, res.Stored.Status)
	require.Nil(t, res.Stored.Output)

	// Cancelling again is harmless and still reports the id.
	got, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"pending"}})
	require.NoError(t, err)
	require.Equal(t, []string{"pending"}, got)

	got, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"missing"}})
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{})
	require.NoError(t, err)
	require.Empty(t, got)
}

// family creates parent -> child-a, child-b; child-a -> grandchild.
func family(t *testing.T, db sysdb.SystemDatabase) map[string]string {
	t.Helper()
	owners := map[string]string{}
	owners["parent"] = start(t, db, "parent")
	for _, c := range [][2]string{{"child-b", "parent"}, {"child-a", "parent"}, {"grandchild", "child-a"}} {
		owners[c[0]] = start(t, db, c[0], func(p *sysdb.WorkflowInsertParams) {
			p.ParentWorkflowID = Ptr(c[1])
			p.Serialization, p.Inputs = Ptr("portable_json"), Ptr(`{"positionalArgs":[],"namedArgs":{}}`)
		})
	}
	return owners
}

func testWorkflowCancelChildren(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owners := family(t, db)
	// A finished child stays finished.
	finish(t, db, "child-b", owners["child-b"], `"b"`)

	got, err := db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"child-a"}})
	require.NoError(t, err)
	require.Equal(t, []string{"child-a"}, got)
	require.Equal(t, sysdb.StatusPending, get(t, db, "grandchild").Status, "without IncludeChildren only the named workflow")
	require.Equal(t, sysdb.StatusPending, get(t, db, "parent").Status)

	got, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"parent"}, IncludeChildren: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"parent", "child-a", "child-b", "grandchild"}, got)
	for _, id := range []string{"parent", "child-a", "grandchild"} {
		require.Equal(t, sysdb.StatusCancelled, get(t, db, id).Status, id)
	}
	require.Equal(t, sysdb.StatusSuccess, get(t, db, "child-b").Status)
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("grandchild", owners["grandchild"], 1, "s", "1")))
}

func testWorkflowCancelOwnerGated(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")

	got, err := db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"wf"}, OnlyIfOwnedByXID: Token()})
	require.NoError(t, err)
	require.Equal(t, []string{"wf"}, got, "the id exists, whether or not it moved")
	w := get(t, db, "wf")
	require.Equal(t, sysdb.StatusPending, w.Status, "another run's token cancels nothing")
	require.Equal(t, Ptr(owner), w.OwnerXID)
	require.NoError(t, db.StepRecord(ctx, step("wf", owner, 1, "s", "1")))

	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"wf"}, OnlyIfOwnedByXID: owner})
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusCancelled, get(t, db, "wf").Status)
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("wf", owner, 2, "s", "2")))

	// An enqueued row has no owner, so a gated cancel leaves it.
	enqueue(t, db, "queued", "q")
	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"queued"}, OnlyIfOwnedByXID: owner})
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "queued").Status)
}

func testWorkflowResume(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	cancelledOwner := start(t, db, "cancelled", func(p *sysdb.WorkflowInsertParams) {
		p.TimeoutMS, p.DeadlineEpochMS = Ptr(int64(1000)), Ptr(nowMS()+1000)
	})
	_, err := db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"cancelled"}})
	require.NoError(t, err)
	runningOwner := start(t, db, "running")
	doneOwner := start(t, db, "done")
	finish(t, db, "done", doneOwner, `"ok"`)
	failedOwner := start(t, db, "failed")
	_, err = db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "failed", OwnerXID: failedOwner, Status: sysdb.StatusError, Error: Ptr(`"e"`)})
	require.NoError(t, err)

	got, err := db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: []string{"cancelled", "running", "done", "failed", "missing"}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"cancelled", "running", "done", "failed"}, got)

	for _, id := range []string{"cancelled", "running"} {
		w := get(t, db, id)
		require.Equal(t, sysdb.StatusEnqueued, w.Status, id)
		require.Equal(t, Ptr(sysdb.InternalQueueName), w.QueueName, id)
		require.Equal(t, int64(0), w.RecoveryAttempts, id)
		require.Nil(t, w.OwnerXID, id)
		require.Nil(t, w.StartedAt, id)
		require.Nil(t, w.CompletedAt, id)
		require.Nil(t, w.DeadlineEpochMS, id, "the next run starts a fresh deadline")
	}
	require.Equal(t, Ptr(int64(1000)), get(t, db, "cancelled").TimeoutMS, "the timeout itself stays")
	done := get(t, db, "done")
	require.Equal(t, sysdb.StatusSuccess, done.Status)
	require.Equal(t, Ptr(`"ok"`), done.Output)
	require.Equal(t, sysdb.StatusError, get(t, db, "failed").Status)

	// Both earlier runs are fenced out.
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("running", runningOwner, 1, "s", "1")))
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("cancelled", cancelledOwner, 1, "s", "1")))

	// Onto a named queue, from where a dequeue runs it again.
	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"running"}})
	require.NoError(t, err)
	_, err = db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: []string{"running"}, QueueName: "retries"})
	require.NoError(t, err)
	require.Equal(t, Ptr("retries"), get(t, db, "running").QueueName)
	claimOne(t, db, "retries", "running")
	require.Equal(t, int64(1), get(t, db, "running").RecoveryAttempts)

	// All or nothing: one missing id (a repeated one counts once) leaves
	// the others as they were, and the reply says which exist.
	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"running", "cancelled"}})
	require.NoError(t, err)
	got, err = db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: []string{"running", "cancelled", "missing"}, RequireAll: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"running", "cancelled"}, got)
	require.Equal(t, sysdb.StatusCancelled, get(t, db, "running").Status)
	require.Equal(t, sysdb.StatusCancelled, get(t, db, "cancelled").Status)
	got, err = db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{WorkflowIDs: []string{"running", "cancelled", "running"}, RequireAll: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"running", "cancelled"}, got)
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "running").Status)
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "cancelled").Status)

	got, err = db.WorkflowResume(ctx, sysdb.WorkflowResumeParams{})
	require.NoError(t, err)
	require.Empty(t, got)
}

func testWorkflowDelete(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owners := family(t, db)
	for id, owner := range owners {
		require.NoError(t, db.StepRecord(ctx, step(id, owner, 1, "s", `"x"`)))
	}
	finish(t, db, "grandchild", owners["grandchild"], `"g"`)
	start(t, db, "bystander", func(p *sysdb.WorkflowInsertParams) { p.Inputs = Ptr(`"stays"`) })

	// Without children only the named workflow goes.
	require.NoError(t, db.WorkflowDelete(ctx, sysdb.WorkflowDeleteParams{WorkflowIDs: []string{"child-b"}}))
	_, err := db.WorkflowGet(ctx, "child-b")
	asError[*sysdb.NotFoundError](t, err)
	steps, err := db.StepList(ctx, "child-b")
	require.NoError(t, err)
	require.Empty(t, steps)
	require.Equal(t, []string{"child-a", "grandchild"}, mustChildren(t, db, "parent"))

	require.NoError(t, db.WorkflowDelete(ctx, sysdb.WorkflowDeleteParams{WorkflowIDs: []string{"parent"}, IncludeChildren: true}))
	for _, id := range []string{"parent", "child-a", "grandchild"} {
		_, err := db.WorkflowGet(ctx, id)
		asError[*sysdb.NotFoundError](t, err)
		steps, err := db.StepList(ctx, id)
		require.NoError(t, err)
		require.Empty(t, steps, id)
	}
	require.Equal(t, []string{"bystander"}, list(t, db, sysdb.WorkflowListParams{}))
	require.Equal(t, Ptr(`"stays"`), get(t, db, "bystander").Inputs)

	// Nothing is left under a deleted id: a new workflow of that id starts
	// clean, with no inherited inputs, outcome or steps.
	owner := start(t, db, "grandchild")
	w := get(t, db, "grandchild")
	require.Nil(t, w.Inputs)
	require.Nil(t, w.Output)
	require.Nil(t, w.ParentWorkflowID)
	require.NoError(t, db.StepRecord(ctx, step("grandchild", owner, 1, "other", `"y"`)), "step 1 is free again")

	require.NoError(t, db.WorkflowDelete(ctx, sysdb.WorkflowDeleteParams{WorkflowIDs: []string{"missing"}}))
	require.NoError(t, db.WorkflowDelete(ctx, sysdb.WorkflowDeleteParams{}))
}

func mustChildren(t *testing.T, db sysdb.SystemDatabase, id string) []string {
	t.Helper()
	got, err := db.WorkflowChildren(t.Context(), id)
	require.NoError(t, err)
	if got == nil {
		got = []string{}
	}
	return got
}

func testWorkflowChildren(t *testing.T, db sysdb.SystemDatabase) {
	// Inserted deepest-last, named so that id order and depth order differ.
	start(t, db, "root")
	start(t, db, "z-child", func(p *sysdb.WorkflowInsertParams) { p.ParentWorkflowID = Ptr("root") })
	start(t, db, "m-child", func(p *sysdb.WorkflowInsertParams) { p.ParentWorkflowID = Ptr("root") })
	start(t, db, "a-grandchild", func(p *sysdb.WorkflowInsertParams) { p.ParentWorkflowID = Ptr("z-child") })
	start(t, db, "b-grandchild", func(p *sysdb.WorkflowInsertParams) { p.ParentWorkflowID = Ptr("m-child") })
	start(t, db, "0-great", func(p *sysdb.WorkflowInsertParams) { p.ParentWorkflowID = Ptr("a-grandchild") })
	start(t, db, "unrelated", func(p *sysdb.WorkflowInsertParams) { p.ParentWorkflowID = Ptr("elsewhere") })

	got := mustChildren(t, db, "root")
	require.Len(t, got, 5)
	require.ElementsMatch(t, []string{"z-child", "m-child"}, got[:2], "children first")
	require.ElementsMatch(t, []string{"a-grandchild", "b-grandchild"}, got[2:4], "then grandchildren")
	require.Equal(t, "0-great", got[4], "then great-grandchildren")

	require.Equal(t, []string{"0-great"}, mustChildren(t, db, "a-grandchild"))
	require.Empty(t, mustChildren(t, db, "0-great"))
	require.Empty(t, mustChildren(t, db, "missing"))
}

// ---------------------------------------------------------------------------
// Recovery, requeue, dead letters

func testWorkflowRecover(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	mk := func(id, executor, version string, app *string, queue *string) string {
		return start(t, db, id, func(p *sysdb.WorkflowInsertParams) {
			p.ExecutorID, p.ApplicationVersion, p.ApplicationName, p.QueueName = executor, Ptr(version), app, queue
		})
	}
	directOwner := mk("direct", "e1", "v1", Ptr("mine"), nil)
	mk("queued", "e1", "v1", nil, Ptr("jobs"))
	mk("other-executor", "e2", "v1", Ptr("mine"), nil)
	mk("other-version", "e1", "v2", Ptr("mine"), nil)
	mk("other-app", "e1", "v1", Ptr("theirs"), nil)
	mk("third-executor", "e3", "v1", Ptr("mine"), nil)
	doneOwner := mk("done", "e1", "v1", Ptr("mine"), nil)
	finish(t, db, "done", doneOwner, `1`)
	enqueue(t, db, "waiting", "jobs", func(p *sysdb.WorkflowInsertParams) { p.ExecutorID = "e1" })

	got, err := db.WorkflowRecover(ctx, sysdb.WorkflowRecoverParams{
		ExecutorIDs: []string{"e1", "e3"}, ApplicationVersion: "v1", ApplicationName: Ptr("mine"),
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"direct", "queued", "third-executor"}, got)

	direct := get(t, db, "direct")
	require.Equal(t, sysdb.StatusEnqueued, direct.Status)
	require.Equal(t, Ptr(sysdb.InternalQueueName), direct.QueueName, "a workflow without a queue goes to the internal one")
	require.Nil(t, direct.OwnerXID)
	require.Nil(t, direct.StartedAt)
	require.Equal(t, int64(1), direct.RecoveryAttempts, "the attempt is counted when it is claimed again")
	queued := get(t, db, "queued")
	require.Equal(t, sysdb.StatusEnqueued, queued.Status)
	require.Equal(t, Ptr("jobs"), queued.QueueName, "back onto its own queue")
	require.Nil(t, queued.OwnerXID)
	for _, id := range []string{"other-executor", "other-version", "other-app"} {
		require.Equal(t, sysdb.StatusPending, get(t, db, id).Status, id)
	}
	require.Equal(t, sysdb.StatusSuccess, get(t, db, "done").Status)
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "waiting").Status)
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("direct", directOwner, 1, "s", "1")))

	// No version and no application: every PENDING row of the executors.
	got, err = db.WorkflowRecover(ctx, sysdb.WorkflowRecoverParams{ExecutorIDs: []string{"e1"}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"other-version", "other-app"}, got)

	got, err = db.WorkflowRecover(ctx, sysdb.WorkflowRecoverParams{})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, sysdb.StatusPending, get(t, db, "other-executor").Status)

	// A recovered workflow runs again from its queue with one more attempt.
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: sysdb.InternalQueueName, ExecutorID: "e4"})
	require.ElementsMatch(t, []string{"direct", "third-executor", "other-app"}, ids(ws), "v1 rows only: other-version waits for a v2 executor")
	require.Equal(t, int64(2), get(t, db, "direct").RecoveryAttempts)
	require.Equal(t, Ptr("e4"), get(t, db, "direct").ExecutorID)
}

func testWorkflowRequeue(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	enqueue(t, db, "a", "q")
	owner := claimOne(t, db, "q", "a")

	got, err := db.WorkflowRequeue(ctx, []sysdb.WorkflowClaim{{WorkflowID: "a", OwnerXID: Token()}})
	require.NoError(t, err)
	require.Empty(t, got)
	w := get(t, db, "a")
	require.Equal(t, sysdb.StatusPending, w.Status, "another run's token moves nothing")
	require.Equal(t, Ptr(owner), w.OwnerXID)

	got, err = db.WorkflowRequeue(ctx, []sysdb.WorkflowClaim{{WorkflowID: "a", OwnerXID: owner}, {WorkflowID: "missing", OwnerXID: owner}})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, got)
	w = get(t, db, "a")
	require.Equal(t, sysdb.StatusEnqueued, w.Status)
	require.Equal(t, Ptr("q"), w.QueueName)
	require.Nil(t, w.OwnerXID)
	require.Nil(t, w.StartedAt)
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("a", owner, 1, "s", "1")))

	// A direct start whose run is gone goes to the internal queue.
	directOwner := start(t, db, "direct")
	got, err = db.WorkflowRequeue(ctx, []sysdb.WorkflowClaim{{WorkflowID: "direct", OwnerXID: directOwner}})
	require.NoError(t, err)
	require.Equal(t, []string{"direct"}, got)
	w = get(t, db, "direct")
	require.Equal(t, sysdb.StatusEnqueued, w.Status)
	require.Equal(t, Ptr(sysdb.InternalQueueName), w.QueueName)

	// A finished run is not requeued.
	doneOwner := start(t, db, "done")
	finish(t, db, "done", doneOwner, `1`)
	got, err = db.WorkflowRequeue(ctx, []sysdb.WorkflowClaim{{WorkflowID: "done", OwnerXID: doneOwner}})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, sysdb.StatusSuccess, get(t, db, "done").Status)

	got, err = db.WorkflowRequeue(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

func testWorkflowDeadLetter(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	enqueue(t, db, "once", "q", func(p *sysdb.WorkflowInsertParams) { p.Priority = 0 })
	claimOne(t, db, "q", "once")
	enqueue(t, db, "thrice", "q2", func(p *sysdb.WorkflowInsertParams) { p.DeduplicationID = Ptr("d") })
	owner := claimOne(t, db, "q2", "thrice")
	for range 2 {
		_, err := db.WorkflowRequeue(ctx, []sysdb.WorkflowClaim{{WorkflowID: "thrice", OwnerXID: owner}})
		require.NoError(t, err)
		owner = claimOne(t, db, "q2", "thrice")
	}
	require.Equal(t, int64(3), get(t, db, "thrice").RecoveryAttempts)
	enqueue(t, db, "waiting", "q3")

	got, err := db.WorkflowDeadLetter(ctx, []string{"once", "thrice", "waiting", "missing"}, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"thrice"}, got)
	w := get(t, db, "thrice")
	require.Equal(t, sysdb.StatusMaxRecoveryAttemptsExceeded, w.Status)
	require.Nil(t, w.OwnerXID)
	require.Nil(t, w.QueueName)
	require.Nil(t, w.DeduplicationID)
	require.NotNil(t, w.CompletedAt)
	require.False(t, w.Active())
	asError[*sysdb.FencedError](t, db.StepRecord(ctx, step("thrice", owner, 1, "s", "1")))
	require.Equal(t, sysdb.StatusPending, get(t, db, "once").Status)

	got, err = db.WorkflowDeadLetter(ctx, []string{"once", "waiting"}, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"once"}, got, "only claimed (PENDING) rows")
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "waiting").Status)

	got, err = db.WorkflowDeadLetter(ctx, nil, 0)
	require.NoError(t, err)
	require.Empty(t, got)
}

// ---------------------------------------------------------------------------
// QueueDequeue

func testQueueDequeueOrder(t *testing.T, db sysdb.SystemDatabase) {
	for _, r := range []struct {
		id       string
		priority int
	}{{"p5-first", 5}, {"p0-second", 0}, {"p1-third", 1}, {"p0-fourth", 0}, {"p1-fifth", 1}} {
		enqueue(t, db, r.id, "q", func(p *sysdb.WorkflowInsertParams) { p.Priority = r.priority })
	}
	want := []string{"p0-second", "p0-fourth", "p1-third", "p1-fifth", "p5-first"}
	first := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", MaxClaim: 2})
	require.Equal(t, want[:2], ids(first), "priority first, then creation order")
	rest := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"})
	require.Equal(t, want[2:], ids(rest), "no bound: everything left, in order")
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"}))
}

// testQueueOrderWithinMillisecond: back-to-back enqueues, many in one
// millisecond, get strictly increasing created_at per queue and priority,
// so every SDK's dequeue (by priority, created_at alone) takes them in the
// order enqueued.
func testQueueOrderWithinMillisecond(t *testing.T, db sysdb.SystemDatabase) {
	const n = 60
	var want []string
	for i := range n {
		id := fmt.Sprintf("o-%02d", i)
		enqueue(t, db, id, "q", func(p *sysdb.WorkflowInsertParams) { p.Priority = i % 2 })
		want = append(want, id)
	}
	// Another queue and a direct start are stamped apart from q.
	enqueue(t, db, "other-queue", "q2")
	start(t, db, "direct")

	var stamps [2][]int64
	for i, id := range want {
		stamps[i%2] = append(stamps[i%2], get(t, db, id).CreatedAt)
	}
	for _, s := range stamps {
		for i := 1; i < len(s); i++ {
			require.Greater(t, s[i], s[i-1], "strictly increasing per queue and priority")
		}
		require.LessOrEqual(t, s[len(s)-1]-s[0], int64(5*60_000), "near the clock")
	}
	require.InDelta(t, nowMS(), get(t, db, "direct").CreatedAt, float64(hourMS))

	var order []string
	for i := range n {
		if i%2 == 0 {
			order = append(order, want[i])
		}
	}
	for i := range n {
		if i%2 == 1 {
			order = append(order, want[i])
		}
	}
	require.Equal(t, order, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"})), "priority, then enqueue order")
}

// testQueueOrderConcurrentEnqueuers: enqueuers racing on one queue each
// keep their own order (an enqueue made after another returned sorts after
// it), however their enqueues interleave.
func testQueueOrderConcurrentEnqueuers(t *testing.T, db sysdb.SystemDatabase) {
	const enqueuers, each = 4, 15
	var wg sync.WaitGroup
	for e := range enqueuers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := sysdb.WorkflowInsertParams{ID: fmt.Sprintf("e%d-%02d", e, i), Name: "wf", Status: sysdb.StatusEnqueued,
					QueueName: Ptr("q"), CreatorXID: Token(), ExecutorID: "local"}
				if _, err := db.WorkflowInsert(t.Context(), p); !assertNoError(t, err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	got := ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"}))
	require.Len(t, got, enqueuers*each)
	next := map[byte]int{}
	for _, id := range got {
		e := id[1]
		require.Equal(t, fmt.Sprintf("e%c-%02d", e, next[e]), id, "each enqueuer's order kept")
		next[e]++
	}
}

func testQueueDequeueClaim(t *testing.T, db sysdb.SystemDatabase) {
	enqueue(t, db, "a", "q", func(p *sysdb.WorkflowInsertParams) {
		p.TimeoutMS = Ptr(int64(5000))
		p.Serialization, p.Inputs = Ptr("portable_json"), Ptr(`{"positionalArgs":["x"],"namedArgs":{}}`)
	})
	presetDeadline := nowMS() + 999_000
	enqueue(t, db, "b", "q", func(p *sysdb.WorkflowInsertParams) {
		p.TimeoutMS, p.DeadlineEpochMS = Ptr(int64(5000)), Ptr(presetDeadline)
		p.ExecutorID, p.ApplicationVersion = "enqueuer", nil
	})
	enqueue(t, db, "c", "q")

	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "worker-7", ApplicationVersion: "v9"})
	require.Equal(t, []string{"a", "b", "c"}, ids(ws))
	owners := map[string]bool{}
	for _, w := range ws {
		require.Equal(t, sysdb.StatusPending, w.Status, w.ID)
		require.NotNil(t, w.OwnerXID, w.ID)
		owners[*w.OwnerXID] = true
		require.Equal(t, Ptr("worker-7"), w.ExecutorID, w.ID)
		require.Equal(t, Ptr("v9"), w.ApplicationVersion, w.ID)
		require.Equal(t, int64(1), w.RecoveryAttempts, w.ID)
		require.NotNil(t, w.StartedAt, w.ID)
		require.False(t, w.RateLimited, w.ID)
		stored := get(t, db, w.ID)
		require.Equal(t, w.OwnerXID, stored.OwnerXID, "the returned token is the stored one")
		require.Equal(t, sysdb.StatusPending, stored.Status)
		require.Equal(t, w.StartedAt, stored.StartedAt)
	}
	require.Len(t, owners, 3, "every claimed workflow has its own owner token")

	require.Equal(t, Ptr(`{"positionalArgs":["x"],"namedArgs":{}}`), ws[0].Inputs)
	require.Equal(t, Ptr("portable_json"), ws[0].Serialization)
	require.Equal(t, Ptr(*ws[0].StartedAt+5000), ws[0].DeadlineEpochMS, "the deadline starts with the run")
	require.Equal(t, Ptr(presetDeadline), ws[1].DeadlineEpochMS, "a deadline already set is kept")
	require.Nil(t, ws[2].DeadlineEpochMS, "no timeout, no deadline")
	require.Nil(t, ws[2].Inputs)

	// The claimed runs can write.
	for _, w := range ws {
		require.NoError(t, db.StepRecord(t.Context(), step(w.ID, *w.OwnerXID, 1, "s", "1")))
	}
}

func testQueueDequeueEligibility(t *testing.T, db sysdb.SystemDatabase) {
	enqueue(t, db, "other-queue", "elsewhere")
	insert(t, db, sysdb.WorkflowInsertParams{ID: "delayed", Status: sysdb.StatusDelayed, QueueName: Ptr("q"), DelayUntilEpochMS: Ptr(nowMS() - 1000)})
	start(t, db, "running", func(p *sysdb.WorkflowInsertParams) { p.QueueName = Ptr("q") })
	cancelled := "cancelled"
	enqueue(t, db, cancelled, "q")
	_, err := db.WorkflowCancel(t.Context(), sysdb.WorkflowCancelParams{WorkflowIDs: []string{cancelled}})
	require.NoError(t, err)
	enqueue(t, db, "ready", "q")

	require.Equal(t, []string{"ready"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"})),
		"only ENQUEUED rows of the queue; DELAYED ones wait for their transition")
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"}))
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "nothing-here"}))
	require.Equal(t, sysdb.StatusDelayed, get(t, db, "delayed").Status)
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "other-queue").Status)
}

func testQueueDequeueWorkerConcurrency(t *testing.T, db sysdb.SystemDatabase) {
	for i := range 6 {
		enqueue(t, db, fmt.Sprintf("w-%d", i), "q")
	}
	lim := func(running int) sysdb.QueueLimits {
		return sysdb.QueueLimits{WorkerConcurrency: Ptr(3), LocalRunning: running}
	}
	require.Len(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", Limits: lim(1)}), 2, "3 slots, 1 taken")
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", Limits: lim(3)}))
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", Limits: lim(5)}), "over the limit claims nothing")
	// Worker concurrency is this worker's business: the 2 PENDING rows do
	// not count against another worker with its own free slots.
	require.Len(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "other", Limits: lim(0)}), 3)
	// MaxClaim bounds further.
	require.Len(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", MaxClaim: 1, Limits: lim(0)}), 1)
}

func testQueueDequeueGlobalConcurrency(t *testing.T, db sysdb.SystemDatabase) {
	for i := range 6 {
		enqueue(t, db, fmt.Sprintf("g-%d", i), "q")
		tick()
	}
	// PENDING rows elsewhere do not count.
	enqueue(t, db, "elsewhere", "q2")
	dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q2"})
	start(t, db, "direct")

	// Two claimed by another executor count against the shared limit.
	first := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "e1", MaxClaim: 2})
	require.Equal(t, []string{"g-0", "g-1"}, ids(first))
	gc := sysdb.QueueLimits{GlobalConcurrency: Ptr(3)}
	second := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "e2", Limits: gc})
	require.Equal(t, []string{"g-2"}, ids(second))
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "e2", Limits: gc}))

	// A finished run frees its slot.
	finish(t, db, "g-0", *first[0].OwnerXID, `0`)
	require.Equal(t, []string{"g-3"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "e3", Limits: gc})))

	// The tighter of worker and global limits wins.
	finish(t, db, "g-1", *first[1].OwnerXID, `1`)
	finish(t, db, "g-2", *second[0].OwnerXID, `2`)
	both := sysdb.QueueLimits{GlobalConcurrency: Ptr(3), WorkerConcurrency: Ptr(1)}
	require.Equal(t, []string{"g-4"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", Limits: both})))
}

func testQueueDequeueRateLimit(t *testing.T, db sysdb.SystemDatabase) {
	for i := range 6 {
		enqueue(t, db, fmt.Sprintf("r-%d", i), "q")
		tick()
	}
	// A start without the rate limiter is not counted by it.
	require.Equal(t, []string{"r-0"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", MaxClaim: 1})))

	rl := sysdb.QueueLimits{RateLimitMax: Ptr(2), RateLimitPeriod: time.Hour}
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", Limits: rl})
	require.Equal(t, []string{"r-1", "r-2"}, ids(ws))
	for _, w := range ws {
		require.True(t, w.RateLimited, w.ID)
		require.True(t, get(t, db, w.ID).RateLimited, w.ID)
	}
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", Limits: rl}), "two started in the window")

	// Finishing does not give the start back: the limit counts starts.
	finish(t, db, "r-1", *ws[0].OwnerXID, `1`)
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "other", Limits: rl}))

	// A window that no longer holds those starts has room again; waiting for
	// the clock to leave the window behind is the only way to get there.
	short := sysdb.QueueLimits{RateLimitMax: Ptr(2), RateLimitPeriod: 50 * time.Millisecond}
	deadline := time.Now().Add(10 * time.Second)
	for len(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", MaxClaim: 1, Limits: short})) == 0 {
		require.True(t, time.Now().Before(deadline), "the rate limit window never moved on")
		time.Sleep(20 * time.Millisecond)
	}
}

func testQueueDequeuePartition(t *testing.T, db sysdb.SystemDatabase) {
	part := func(key string) func(*sysdb.WorkflowInsertParams) {
		return func(p *sysdb.WorkflowInsertParams) { p.QueuePartitionKey = Ptr(key) }
	}
	enqueue(t, db, "a-1", "q", part("a"))
	tick()
	enqueue(t, db, "b-1", "q", part("b"))
	tick()
	enqueue(t, db, "a-2", "q", part("a"))
	tick()
	enqueue(t, db, "a-3", "q", part("a"))
	enqueue(t, db, "b-2", "q", part("b"))

	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "a", MaxClaim: 2})
	require.Equal(t, []string{"a-1", "a-2"}, ids(ws))
	for _, w := range ws {
		require.Equal(t, Ptr("a"), w.QueuePartitionKey)
	}

	// Queue-wide limits count the whole queue, even for one partition's
	// claim: a's two running fill the global limit for b too.
	gc := sysdb.QueueLimits{GlobalConcurrency: Ptr(2)}
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "b", Limits: gc}), "the queue is full")
	// Partition limits count within the partition.
	pc := sysdb.QueueLimits{PartitionConcurrency: Ptr(2)}
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "a", Limits: pc}), "partition a is full")
	require.Equal(t, []string{"b-1", "b-2"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "b", Limits: pc})))
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", PartitionKey: "c"}))
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "a-3").Status)
}

func testQueueDequeueUnversioned(t *testing.T, db sysdb.SystemDatabase) {
	enqueue(t, db, "any", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = nil })
	tick()
	enqueue(t, db, "v1", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = Ptr("v1") })
	tick()
	enqueue(t, db, "v2", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = Ptr("v2") })

	// With no registered versions every executor counts as the latest, so
	// it takes unversioned rows as well as its own, never another version's.
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ApplicationVersion: "v1"})
	require.Equal(t, []string{"any", "v1"}, ids(ws))
	require.Equal(t, Ptr("v1"), ws[0].ApplicationVersion, "the claim stamps the version")
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "v2").Status)
	require.Equal(t, []string{"v2"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ApplicationVersion: "v2"})))

	// An executor without a version takes unversioned rows only while no
	// version is registered: "" is a version like any other, never the
	// latest, not a wildcard.
	enqueue(t, db, "any-2", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = nil })
	enqueue(t, db, "any-3", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationVersion = nil })
	versionless := func() []sysdb.Workflow {
		ws, err := db.QueueDequeue(t.Context(), sysdb.QueueDequeueParams{QueueName: "q", ExecutorID: "local", MaxClaim: 1})
		require.NoError(t, err)
		return ws
	}
	ws = versionless()
	require.Equal(t, []string{"any-2"}, ids(ws), "no version registered: the executor without one takes it")
	require.Nil(t, ws[0].ApplicationVersion, "and leaves it unversioned")
	require.NoError(t, db.VersionRegister(t.Context(), "v2", nil))
	require.Empty(t, versionless(), "v2 is the latest: unversioned work is its")
	require.Equal(t, []string{"any-3"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ApplicationVersion: "v2"})))
}

func testQueueDequeueApplicationName(t *testing.T, db sysdb.SystemDatabase) {
	enqueue(t, db, "mine", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationName = Ptr("shop") })
	tick()
	enqueue(t, db, "theirs", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationName = Ptr("bank") })
	tick()
	enqueue(t, db, "unclaimed", "q")

	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ApplicationName: Ptr("shop")})
	require.Equal(t, []string{"mine", "unclaimed"}, ids(ws))
	require.Equal(t, Ptr("shop"), get(t, db, "unclaimed").ApplicationName, "an unclaimed row is stamped by its claimer")
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "theirs").Status)

	// Application-scoped limits count that application's (and unclaimed)
	// rows only: bank's queue has nothing running yet.
	ws = dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", ApplicationName: Ptr("bank"),
		Limits: sysdb.QueueLimits{GlobalConcurrency: Ptr(1)}})
	require.Equal(t, []string{"theirs"}, ids(ws))

	// An executor with no application name takes any row.
	enqueue(t, db, "late", "q", func(p *sysdb.WorkflowInsertParams) { p.ApplicationName = Ptr("bank") })
	require.Equal(t, []string{"late"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"})))
	require.Equal(t, Ptr("bank"), get(t, db, "late").ApplicationName)
}

func testQueueDequeueWorkflowNames(t *testing.T, db sysdb.SystemDatabase) {
	for _, r := range [][2]string{{"1", "resize"}, {"2", "email"}, {"3", "resize"}, {"4", "archive"}} {
		enqueue(t, db, r[0], "q", func(p *sysdb.WorkflowInsertParams) { p.Name = r[1] })
		tick()
	}
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", WorkflowNames: []string{"resize", "archive"}})
	require.Equal(t, []string{"1", "3", "4"}, ids(ws), "only the functions this worker can run")
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", WorkflowNames: []string{"resize"}}))
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "2").Status)
	require.Equal(t, []string{"2"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q"})), "no names: any workflow")

	for _, id := range []string{"5", "6"} {
		enqueue(t, db, id, "q")
		tick()
	}
	ws = dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "q", WorkflowIDs: []string{"6", "1"}})
	require.Equal(t, []string{"6"}, ids(ws), "only these ids, and only while ENQUEUED")
	require.Equal(t, sysdb.StatusEnqueued, get(t, db, "5").Status)
}

func testQueueList(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	got, err := db.QueueList(ctx)
	require.NoError(t, err)
	require.Empty(t, got)

	enqueue(t, db, "b-1", "beta")
	enqueue(t, db, "a-1", "alpha")
	enqueue(t, db, "a-2", "alpha")
	enqueue(t, db, "a-3", "alpha")
	insert(t, db, sysdb.WorkflowInsertParams{ID: "a-4", Status: sysdb.StatusDelayed, QueueName: Ptr("alpha"), DelayUntilEpochMS: Ptr(nowMS() + 60_000)})
	ws := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "alpha", MaxClaim: 2})
	require.Len(t, ws, 2)
	finish(t, db, ws[0].ID, *ws[0].OwnerXID, `1`) // finished: no longer counted
	enqueue(t, db, "gone-1", "gone")
	_, err = db.WorkflowCancel(ctx, sysdb.WorkflowCancelParams{WorkflowIDs: []string{"gone-1"}}) // a queue with nothing active is not listed
	require.NoError(t, err)
	start(t, db, "direct") // no queue

	got, err = db.QueueList(ctx)
	require.NoError(t, err)
	require.Equal(t, []sysdb.QueueSummary{
		{Name: "alpha", Enqueued: 1, Pending: 1, Delayed: 1},
		{Name: "beta", Enqueued: 1},
	}, got)
}

func testQueueDequeueConcurrentClaims(t *testing.T, db sysdb.SystemDatabase) {
	const rows, workers = 60, 4
	for i := range rows {
		enqueue(t, db, fmt.Sprintf("c-%02d", i), "q")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var mu sync.Mutex
	claimedBy := map[string][]int{}
	var total atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for total.Load() < rows && ctx.Err() == nil {
				ws, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{
					QueueName: "q", ExecutorID: fmt.Sprintf("g%d", g), ApplicationVersion: "v1", MaxClaim: 3,
				})
				if err != nil {
					errs <- err
					cancel() // stop the others too
					return
				}
				mu.Lock()
				for _, w := range ws {
					claimedBy[w.ID] = append(claimedBy[w.ID], g)
				}
				mu.Unlock()
				total.Add(int64(len(ws)))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Err(), "the workers did not drain the queue in time")
	require.Len(t, claimedBy, rows)
	for id, by := range claimedBy {
		require.Len(t, by, 1, "%s claimed by workers %v", id, by)
	}
	require.Equal(t, int64(rows), total.Load())
	tokens := map[string]bool{}
	for _, w := range mustList(t, db, sysdb.WorkflowListParams{QueueNames: []string{"q"}}) {
		require.Equal(t, sysdb.StatusPending, w.Status)
		require.Equal(t, int64(1), w.RecoveryAttempts, w.ID)
		tokens[*w.OwnerXID] = true
	}
	require.Len(t, tokens, rows)
}

func mustList(t *testing.T, db sysdb.SystemDatabase, p sysdb.WorkflowListParams) []sysdb.Workflow {
	t.Helper()
	ws, err := db.WorkflowList(t.Context(), p)
	require.NoError(t, err)
	return ws
}

func testQueueDequeueConcurrentGlobalLimit(t *testing.T, db sysdb.SystemDatabase) {
	concurrentGlobalLimit(t, db, false)
}

// testQueueDequeueConcurrentGlobalLimitAcrossPartitions: each worker claims
// from its own partition, so they lock disjoint rows; only the isolation of
// the claim keeps their counts of the shared limit honest.
func testQueueDequeueConcurrentGlobalLimitAcrossPartitions(t *testing.T, db sysdb.SystemDatabase) {
	concurrentGlobalLimit(t, db, true)
}

// concurrentGlobalLimit drains a queue with four concurrent workers under a
// global concurrency of 3, each on a partition of its own when partitioned,
// and checks that no more than 3 ever ran at once.
func concurrentGlobalLimit(t *testing.T, db sysdb.SystemDatabase, partitioned bool) {
	const rows, workers, limit = 24, 4, 3
	partitionOf := func(g int) string {
		if !partitioned {
			return ""
		}
		return fmt.Sprintf("p%d", g)
	}
	for i := range rows {
		enqueue(t, db, fmt.Sprintf("c-%02d", i), "q", func(p *sysdb.WorkflowInsertParams) {
			if key := partitionOf(i % workers); key != "" {
				p.QueuePartitionKey = Ptr(key)
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// running counts claims between their dequeue and their finish, so it
	// never exceeds the number of PENDING rows; maxRunning is its peak.
	var running, maxRunning, finished atomic.Int64
	observe := func(n int64) {
		for {
			peak := maxRunning.Load()
			if n <= peak || maxRunning.CompareAndSwap(peak, n) {
				return
			}
		}
	}
	errs := make(chan error, workers+1)
	var mu sync.Mutex
	claims := map[string]int{}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for finished.Load() < rows && ctx.Err() == nil {
				ws, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{
					QueueName: "q", ExecutorID: fmt.Sprintf("g%d", g), ApplicationVersion: "v1",
					Limits: sysdb.QueueLimits{GlobalConcurrency: Ptr(limit)}, PartitionKey: partitionOf(g),
				})
				if err != nil {
					errs <- err
					cancel() // stop the others too
					return
				}
				observe(running.Add(int64(len(ws))))
				for _, w := range ws {
					mu.Lock()
					claims[w.ID]++
					mu.Unlock()
					running.Add(-1)
					res, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{
						WorkflowID: w.ID, OwnerXID: *w.OwnerXID, Status: sysdb.StatusSuccess, Output: Ptr(`"ok"`),
					})
					if err != nil || !res.Applied {
						errs <- fmt.Errorf("finish %s: applied=%v err=%v", w.ID, res.Applied, err)
						cancel()
						return
					}
					finished.Add(1)
				}
			}
		}()
	}
	// A watcher samples the database: no snapshot may show more than the
	// limit running.
	var peakInDB atomic.Int64
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			ws, err := db.WorkflowList(ctx, sysdb.WorkflowListParams{QueueNames: []string{"q"}, Statuses: []string{sysdb.StatusPending}})
			if err != nil {
				if ctx.Err() == nil {
					errs <- err
				}
				return
			}
			if n := int64(len(ws)); n > peakInDB.Load() {
				peakInDB.Store(n)
			}
		}
	}()
	wg.Wait()
	close(stopWatch)
	<-watchDone
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Err(), "the workers did not drain the queue in time")
	require.Equal(t, int64(rows), finished.Load())
	require.Len(t, claims, rows)
	for id, n := range claims {
		require.Equal(t, 1, n, "%s claimed %d times", id, n)
	}
	require.LessOrEqual(t, maxRunning.Load(), int64(limit), "claims in flight exceeded the global concurrency")
	require.LessOrEqual(t, peakInDB.Load(), int64(limit), "the database held more PENDING rows than the global concurrency")
	require.Greater(t, maxRunning.Load(), int64(0))
}

// testWorkflowUnclaim: a claim handed back unused costs no attempt and no
// rate-limit start, and leaves the row as it was before the claim (an
// unversioned row stays unversioned); a claim of another token is left
// alone.
func testWorkflowUnclaim(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	timeout := int64(60000)
	_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "u", Name: "wf", Status: sysdb.StatusEnqueued,
		CreatorXID: Token(), QueueName: Ptr("uq"), ExecutorID: "enqueuer", TimeoutMS: &timeout})
	require.NoError(t, err)
	max := 5
	claimed, err := db.QueueDequeue(ctx, sysdb.QueueDequeueParams{QueueName: "uq", ExecutorID: "claimer", ApplicationVersion: "v1",
		ApplicationName: Ptr("shop"), Limits: sysdb.QueueLimits{RateLimitMax: &max, RateLimitPeriod: time.Minute}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, int64(1), claimed[0].RecoveryAttempts)
	require.True(t, claimed[0].RateLimited)
	require.Equal(t, Ptr("v1"), claimed[0].ApplicationVersion, "the claim stamps the version")
	require.Equal(t, Ptr("shop"), claimed[0].ApplicationName)
	require.NotNil(t, claimed[0].DeadlineEpochMS, "the claim starts the timeout's clock")
	require.Equal(t, &sysdb.PreClaim{ExecutorID: Ptr("enqueuer")}, claimed[0].PreClaim)

	claim := sysdb.WorkflowClaim{WorkflowID: "u", OwnerXID: *claimed[0].OwnerXID, PreClaim: claimed[0].PreClaim}
	got, err := db.WorkflowUnclaim(ctx, []sysdb.WorkflowClaim{{WorkflowID: "u", OwnerXID: Token(), PreClaim: claim.PreClaim}})
	require.NoError(t, err)
	require.Empty(t, got, "another token's claim must not be handed back")

	got, err = db.WorkflowUnclaim(ctx, []sysdb.WorkflowClaim{claim})
	require.NoError(t, err)
	require.Equal(t, []string{"u"}, got)
	wf, err := db.WorkflowGet(ctx, "u")
	require.NoError(t, err)
	require.Equal(t, sysdb.StatusEnqueued, wf.Status)
	require.Equal(t, int64(0), wf.RecoveryAttempts)
	require.False(t, wf.RateLimited)
	require.Nil(t, wf.OwnerXID)
	require.Equal(t, "uq", *wf.QueueName)
	require.Nil(t, wf.ApplicationVersion, "still unversioned")
	require.Nil(t, wf.ApplicationName, "still any application's")
	require.Equal(t, Ptr("enqueuer"), wf.ExecutorID)
	require.Nil(t, wf.DeadlineEpochMS, "the timeout starts at a real start")

	// So the latest version takes it, though a v1 claim once held it.
	require.NoError(t, db.VersionRegister(ctx, "v2", nil))
	require.Empty(t, dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "uq", ApplicationVersion: "v1"}))
	require.Equal(t, []string{"u"}, ids(dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "uq", ApplicationVersion: "v2"})))

	// Without a PreClaim the claim's stamps stay.
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "u2", Name: "wf", Status: sysdb.StatusEnqueued,
		CreatorXID: Token(), QueueName: Ptr("uq"), ExecutorID: "enqueuer"})
	require.NoError(t, err)
	claimed = dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "uq", ExecutorID: "claimer", ApplicationVersion: "v2"})
	require.Len(t, claimed, 1)
	got, err = db.WorkflowUnclaim(ctx, []sysdb.WorkflowClaim{{WorkflowID: "u2", OwnerXID: *claimed[0].OwnerXID}})
	require.NoError(t, err)
	require.Equal(t, []string{"u2"}, got)
	require.Equal(t, Ptr("v2"), get(t, db, "u2").ApplicationVersion)
}

// testStepListMany: several workflows' histories in one read, each in
// function-id order, nothing for a workflow without steps.
func testStepListMany(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owners := map[string]string{}
	for _, id := range []string{"h1", "h2", "h3"} {
		owners[id] = Token()
		_, err := db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: id, Name: "wf", Status: sysdb.StatusPending,
			CreatorXID: owners[id], ExecutorID: "local"})
		require.NoError(t, err)
	}
	var steps []sysdb.StepRecordParams
	for _, rec := range []struct {
		id  string
		fid int
	}{{"h1", 2}, {"h1", 1}, {"h2", 1}} {
		steps = append(steps, sysdb.StepRecordParams{WorkflowID: rec.id, OwnerXID: owners[rec.id], FunctionID: rec.fid,
			Name: "s" + strconv.Itoa(rec.fid), Output: Ptr(rec.id)})
	}
	results, err := db.StepRecordMany(ctx, steps)
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r)
	}
	got, err := db.StepListMany(ctx, []string{"h1", "h2", "h3", "missing"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []int{1, 2}, []int{got["h1"][0].FunctionID, got["h1"][1].FunctionID})
	require.Equal(t, "s1", got["h1"][0].Name)
	require.Equal(t, Ptr("h2"), got["h2"][0].Output)
	single, err := db.StepList(ctx, "h1")
	require.NoError(t, err)
	require.Equal(t, single, got["h1"])
	empty, err := db.StepListMany(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}

func testWorkflowOrphaned(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	for _, id := range []string{"o1", "o2", "o3", "other"} {
		enqueue(t, db, id, "oq")
	}
	mine := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "oq", ExecutorID: "exec-a", MaxClaim: 3, OwnerPrefix: "agent-1:"})
	require.Len(t, mine, 3)
	tokens := map[string]string{}
	for _, w := range mine {
		require.NotNil(t, w.OwnerXID)
		require.True(t, strings.HasPrefix(*w.OwnerXID, "agent-1:"), "a claim's token starts with the prefix: %s", *w.OwnerXID)
		tokens[w.ID] = *w.OwnerXID
	}
	theirs := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: "oq", ExecutorID: "exec-a", OwnerPrefix: "agent-2:"})
	require.Equal(t, []string{"other"}, ids(theirs))

	list := func(p sysdb.WorkflowOrphanedParams) []string {
		t.Helper()
		got, err := db.WorkflowOrphaned(ctx, p)
		require.NoError(t, err)
		out := make([]string, len(got))
		for i, c := range got {
			require.Equal(t, tokens[c.WorkflowID], c.OwnerXID, "each claim comes with its token")
			out[i] = c.WorkflowID
		}
		sort.Strings(out)
		return out
	}
	all := sysdb.WorkflowOrphanedParams{ExecutorID: "exec-a", OwnerPrefix: "agent-1:", Limit: 10}
	require.Equal(t, []string{"o1", "o2", "o3"}, list(all), "only this prefix's claims, however new with no horizon")

	held := all
	held.HeldTokens = []string{tokens["o2"]}
	require.Equal(t, []string{"o1", "o3"}, list(held), "a held token's row is not listed")

	limited := all
	limited.Limit = 2
	require.Len(t, list(limited), 2)

	recent := all
	recent.OlderThan = time.Hour
	require.Empty(t, list(recent), "rows changed within the horizon are not listed")

	otherExecutor := all
	otherExecutor.ExecutorID = "exec-b"
	require.Empty(t, list(otherExecutor))

	// A finished row is no claim any more.
	finish(t, db, "o1", tokens["o1"], `1`)
	require.Equal(t, []string{"o2", "o3"}, list(all))

	for _, bad := range []sysdb.WorkflowOrphanedParams{
		{ExecutorID: "exec-a", Limit: 10},
		{OwnerPrefix: "agent-1:", Limit: 10},
		{ExecutorID: "exec-a", OwnerPrefix: "agent-1:"},
	} {
		_, err := db.WorkflowOrphaned(ctx, bad)
		require.Error(t, err, "%+v", bad)
	}
}
