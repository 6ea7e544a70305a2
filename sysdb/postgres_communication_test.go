package sysdb_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// startWorkflow inserts a PENDING workflow and returns its run's owner token.
func startWorkflow(t *testing.T, db sysdb.SystemDatabase, id string) string {
	t.Helper()
	res, err := db.WorkflowInsert(t.Context(), sysdb.WorkflowInsertParams{
		ID: id, Name: "wf", Status: sysdb.StatusPending, CreatorXID: sysdbtest.Token(), ExecutorID: "local",
	})
	require.NoError(t, err)
	require.True(t, res.Created)
	return *res.OwnerXID
}

// inside is c made from inside its step.
func inside(c sysdb.StepCaller) sysdb.StepCaller {
	c.InStep = true
	return c
}

// TestPostgresCommunicationNotifications listens from a connection of its
// own: an event set or a stream written is announced once committed, on
// its channel, with "<workflow id>::<key>" (so that the SDKs' readers wake),
// and a write that wrote nothing is not. The notifications channel is the
// trigger's. Nothing-came is checked by a sentinel, notifications arriving
// in commit order.
func TestPostgresCommunicationNotifications(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url, listener := listening(t, sysdb.ChannelWorkflowEvents, sysdb.ChannelStreams, sysdb.ChannelNotifications)
	reader := pgtest.Connect(t, url)
	next := func() (string, string) {
		t.Helper()
		return nextNotification(t, listener)
	}
	owner := startWorkflow(t, db, "wf")
	c := func(fid int) sysdb.StepCaller {
		return sysdb.StepCaller{WorkflowID: "wf", OwnerXID: owner, FunctionID: fid}
	}
	sentinels := 0
	nothingCame := func() {
		t.Helper()
		sentinels++
		key := fmt.Sprintf("sentinel-%d", sentinels)
		require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: inside(c(1000)), Key: key, Value: `0`}))
		ch, payload := next()
		require.Equal(t, [2]string{sysdb.ChannelStreams, "wf::" + key}, [2]string{ch, payload}, "a notification came that should not have")
	}

	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: c(1), Key: "status", Value: `"ready"`}))
	ch, payload := next()
	require.Equal(t, sysdb.ChannelWorkflowEvents, ch)
	require.Equal(t, "wf::status", payload)
	// Sent after the commit: a reader woken by it finds the value.
	var value string
	require.NoError(t, reader.QueryRow(ctx, `SELECT value FROM dbos.workflow_events WHERE workflow_uuid = 'wf' AND key = 'status'`).Scan(&value))
	require.Equal(t, `"ready"`, value)
	nothingCame()

	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: c(1), Key: "status", Value: `"replayed"`}))
	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: inside(c(2)), Key: "progress", Value: `1`}))
	ch, payload = next()
	require.Equal(t, [2]string{sysdb.ChannelWorkflowEvents, "wf::progress"}, [2]string{ch, payload}, "a replay announces nothing")
	nothingCame()

	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c(3), Key: "out", Value: `1`}))
	ch, payload = next()
	require.Equal(t, [2]string{sysdb.ChannelStreams, "wf::out"}, [2]string{ch, payload})
	require.NoError(t, reader.QueryRow(ctx, `SELECT value FROM dbos.streams WHERE workflow_uuid = 'wf' AND key = 'out'`).Scan(&value))
	require.Equal(t, `1`, value)
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c(4), Key: "out", Close: true}))
	ch, payload = next()
	require.Equal(t, [2]string{sysdb.ChannelStreams, "wf::out"}, [2]string{ch, payload}, "closing is a write")
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c(3), Key: "out", Value: `1`})) // replay
	// A write after the close is appended (DBOS Python 3.4 accepts it) and
	// announced like any write.
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c(5), Key: "out", Value: `2`}))
	ch, payload = next()
	require.Equal(t, [2]string{sysdb.ChannelStreams, "wf::out"}, [2]string{ch, payload})
	var fenced *sysdb.FencedError
	require.ErrorAs(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: sysdb.StepCaller{WorkflowID: "wf", OwnerXID: "stale", FunctionID: 6}, Key: "k", Value: `1`}), &fenced)
	nothingCame()

	// Messages: the trigger announces "<destination>::<topic>".
	_, err := db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{
		{DestinationID: "wf", Message: `1`}, {DestinationID: "wf", Topic: sysdbtest.Ptr("t"), Message: `2`},
	}})
	require.NoError(t, err)
	got := map[string]string{}
	for range 2 {
		ch, payload := next()
		got[payload] = ch
	}
	require.Equal(t, map[string]string{"wf::" + sysdb.NullTopic: sysdb.ChannelNotifications, "wf::t": sysdb.ChannelNotifications}, got)
	nothingCame()
}

// TestPostgresCommunicationRows checks what lands in the DBOS tables, as the
// SDKs read it, and that the Go SDK's bare closing marker closes a stream.
func TestPostgresCommunicationRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, schema := openFresh(t, sysdb.PostgresOptions{})
	conn := pgtest.Connect(t, pgtest.URL(t))
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	owner := startWorkflow(t, db, "wf")
	c := func(fid int) sysdb.StepCaller {
		return sysdb.StepCaller{WorkflowID: "wf", OwnerXID: owner, FunctionID: fid}
	}

	// The default topic, the message id, the database clock.
	_, err := db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{{DestinationID: "wf", Message: `1`}}})
	require.NoError(t, err)
	var topic, id string
	var createdAt, dbNow int64
	var serialization *string
	require.NoError(t, conn.QueryRow(ctx, `SELECT topic, message_uuid, created_at_epoch_ms, serialization, (EXTRACT(epoch FROM now()) * 1000)::bigint FROM `+
		table("notifications")).Scan(&topic, &id, &createdAt, &serialization, &dbNow))
	require.Equal(t, sysdb.NullTopic, topic)
	require.Len(t, id, 36)
	require.Nil(t, serialization)
	require.InDelta(t, dbNow, createdAt, 60_000)

	// A sleep's record is DBOS Python's: epoch seconds as a JSON float.
	slept, err := db.SleepRecord(ctx, sysdb.SleepParams{Caller: c(1), DurationMS: 90_000})
	require.NoError(t, err)
	var output, ser string
	require.NoError(t, conn.QueryRow(ctx, `SELECT output, serialization FROM `+table("operation_outputs")+
		` WHERE workflow_uuid = 'wf' AND function_id = 1`).Scan(&output, &ser))
	require.Regexp(t, `^\d{10}\.\d+$`, output)
	require.Equal(t, sysdb.PortableJSON, ser)
	var seconds float64
	require.NoError(t, json.Unmarshal([]byte(output), &seconds))
	require.InDelta(t, float64(slept.WakeAtMS)/1000, seconds, 0.001)
	require.InDelta(t, dbNow+90_000, slept.WakeAtMS, 60_000)

	// The closing marker, as DBOS Python writes and reads it.
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c(2), Key: "py", Close: true}))
	require.NoError(t, conn.QueryRow(ctx, `SELECT value, serialization FROM `+table("streams")+
		` WHERE workflow_uuid = 'wf' AND key = 'py'`).Scan(&output, &ser))
	require.Equal(t, `"__DBOS_STREAM_CLOSED__"`, output)
	require.Equal(t, "portable_json", ser)

	// The Go SDK's bare marker closes a stream too, and a rewind reopens it.
	_, err = conn.Exec(ctx, `INSERT INTO `+table("streams")+` (workflow_uuid, key, value, "offset", function_id, serialization)
		VALUES ('wf', 'go', 'dmFsdWU=', 0, 3, 'DBOS_JSON'), ('wf', 'go', '__DBOS_STREAM_CLOSED__', 1, 4, '')`)
	require.NoError(t, err)
	r, err := db.StreamRead(ctx, "wf", "go", 0, 0)
	require.NoError(t, err)
	require.True(t, r.Closed)
	require.Len(t, r.Values, 1)
	// A value after the marker is appended and not read.
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c(5), Key: "go", Value: `1`}))
	r, err = db.StreamRead(ctx, "wf", "go", 0, 0)
	require.NoError(t, err)
	require.True(t, r.Closed)
	require.Len(t, r.Values, 1)
	fin, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "wf", OwnerXID: owner, Status: sysdb.StatusSuccess})
	require.NoError(t, err)
	require.True(t, fin.Applied)
	require.NoError(t, db.WorkflowRewind(ctx, sysdb.WorkflowRewindParams{WorkflowID: "wf", StartStep: 2}))
	r, err = db.StreamRead(ctx, "wf", "go", 0, 0)
	require.NoError(t, err)
	require.False(t, r.Closed)
	require.Equal(t, "dmFsdWU=", r.Values[0].Value)
}

// TestPostgresCommunicationReconnects kills the pool's connections before
// each kind of write made for a running workflow (sent as a batch behind the
// workflow's lock) and before fork and rewind: each is retried on a new
// connection, and its effect is there once.
func TestPostgresCommunicationReconnects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, kill, retried := reconnecting(t)
	owner := startWorkflow(t, db, "wf")
	c := func(fid int) sysdb.StepCaller {
		return sysdb.StepCaller{WorkflowID: "wf", OwnerXID: owner, FunctionID: fid}
	}

	kill()
	_, err := db.MessageSend(ctx, sysdb.MessageSendParams{Caller: sysdbtest.Ptr(c(1)), Messages: []sysdb.OutgoingMessage{{DestinationID: "wf", Message: `1`}}})
	require.NoError(t, err, "send after connection loss")
	kill()
	r, err := db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(2)})
	require.NoError(t, err, "recv after connection loss")
	require.Equal(t, `1`, *r.Message)
	kill()
	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: c(3), Key: "k", Value: `1`}), "set event after connection loss")
	kill()
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c(4), Key: "s", Value: `1`}), "write stream after connection loss")
	kill()
	_, err = db.SleepRecord(ctx, sysdb.SleepParams{Caller: c(5), DurationMS: 10})
	require.NoError(t, err, "sleep after connection loss")
	kill()
	_, err = db.WorkflowInsert(ctx, sysdb.WorkflowInsertParams{ID: "wf-6", Name: "child", Status: sysdb.StatusEnqueued, QueueName: sysdbtest.Ptr("q"),
		CreatorXID: "c6", ExecutorID: "local", ParentWorkflowID: sysdbtest.Ptr("wf"), ParentStep: sysdbtest.Ptr(c(6))})
	require.NoError(t, err, "child start after connection loss")

	steps, err := db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, steps, 6)
	fin, err := db.WorkflowFinish(ctx, sysdb.WorkflowFinishParams{WorkflowID: "wf", OwnerXID: owner, Status: sysdb.StatusSuccess})
	require.NoError(t, err)
	require.True(t, fin.Applied)
	kill()
	require.NoError(t, db.WorkflowFork(ctx, sysdb.WorkflowForkParams{OriginalID: "wf", NewID: "fork", StartStep: 4}), "fork after connection loss")
	kill()
	require.NoError(t, db.WorkflowRewind(ctx, sysdb.WorkflowRewindParams{WorkflowID: "wf", StartStep: 3}), "rewind after connection loss")
	steps, err = db.StepList(ctx, "fork")
	require.NoError(t, err)
	require.Len(t, steps, 3)
	steps, err = db.StepList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, steps, 2)

	retried()
}
