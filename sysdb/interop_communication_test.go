package sysdb_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// decodeGoPayload reads a value the Go SDK serialized: portable JSON as it
// is, its own DBOS_JSON as base64 JSON.
func decodeGoPayload(t *testing.T, value string, serialization *string, into any) {
	t.Helper()
	raw := []byte(value)
	if serialization == nil || *serialization == "DBOS_JSON" {
		var err error
		raw, err = base64.StdEncoding.DecodeString(value)
		require.NoError(t, err)
	} else {
		require.Equal(t, sysdb.PortableJSON, *serialization)
	}
	require.NoError(t, json.Unmarshal(raw, into))
}

// TestInteropMessagesAndEvents: what the Go SDK's client sends to a workflow
// of ours is what our recv consumes (each message once, its idempotency key
// honoured), and an event we set is what the client's GetEvent returns,
// including to a GetEvent already waiting for it.
func TestInteropMessagesAndEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)
	owner := startWorkflow(t, db, "ours")
	c := func(fid int) sysdb.StepCaller {
		return sysdb.StepCaller{WorkflowID: "ours", OwnerXID: owner, FunctionID: fid}
	}

	require.NoError(t, dbos.Send(client, "ours", cart{User: "ann", Items: 2}, "orders", dbos.WithPortableSend()))
	require.NoError(t, dbos.Send(client, "ours", cart{User: "bob", Items: 1}, ""))
	for range 2 {
		require.NoError(t, dbos.Send(client, "ours", "once", "keyed", dbos.WithIdempotencyKey("k-1"), dbos.WithPortableSend()))
	}
	require.Error(t, dbos.Send(client, "not-ours", "x", ""), "the client refuses a missing destination too")

	msgs, err := db.MessageList(ctx, "ours")
	require.NoError(t, err)
	defaultTopic := 0
	for _, m := range msgs {
		if m.Topic == nil {
			defaultTopic++
		}
	}
	require.Equal(t, 1, defaultTopic, "the client's default topic is ours")

	r, err := db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(1), Topic: sysdbtest.Ptr("orders")})
	require.NoError(t, err)
	require.True(t, r.Received)
	var got cart
	decodeGoPayload(t, *r.Message, r.Serialization, &got)
	require.Equal(t, cart{User: "ann", Items: 2}, got)
	require.Equal(t, sysdb.PortableJSON, *r.Serialization)

	r, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(2)})
	require.NoError(t, err)
	require.True(t, r.Received)
	decodeGoPayload(t, *r.Message, r.Serialization, &got)
	require.Equal(t, cart{User: "bob", Items: 1}, got)

	r, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(3), Topic: sysdbtest.Ptr("keyed")})
	require.NoError(t, err)
	require.True(t, r.Received)
	require.Equal(t, `"once"`, *r.Message)
	r, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(4), Topic: sysdbtest.Ptr("keyed")})
	require.NoError(t, err)
	require.False(t, r.Received, "the key made the second send a no-op")
	listed, err := db.MessageList(ctx, "ours")
	require.NoError(t, err)
	require.Len(t, listed, 3)
	for _, n := range listed {
		require.True(t, n.Consumed)
	}

	// An event the client reads, already set and awaited.
	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{
		Caller: c(5), Key: "receipt", Value: `{"total":42,"currency":"EUR"}`, Serialization: sysdbtest.Ptr(sysdb.PortableJSON),
	}))
	rc, err := dbos.GetEvent[receipt](client, "ours", "receipt", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, receipt{Total: 42, Currency: "EUR"}, rc)

	awaited := make(chan receipt, 1)
	failed := make(chan error, 1)
	go func() {
		rc, err := dbos.GetEvent[receipt](client, "ours", "later", 30*time.Second)
		if err != nil {
			failed <- err
			return
		}
		awaited <- rc
	}()
	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{
		Caller: c(6), Key: "later", Value: `{"total":7,"currency":"USD"}`, Serialization: sysdbtest.Ptr(sysdb.PortableJSON),
	}))
	select {
	case rc := <-awaited:
		require.Equal(t, receipt{Total: 7, Currency: "USD"}, rc)
	case err := <-failed:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the client's GetEvent never returned")
	}
}

// TestInteropMessageOrderForGoRecv: the Go SDK's recv takes the oldest
// message by created_at_epoch_ms alone, so what we send must be strictly
// ordered there: a workflow the Go SDK runs receives a message its client
// sent, then a bulk of ours sent in one transaction (one database clock),
// then single sends of ours made back to back, all in the order sent, by
// created_at alone.
func TestInteropMessageOrderForGoRecv(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema, db := interopSchema(t)
	client := goClient(t, url, schema)
	const bulk, singles = 40, 20
	collect := func(ctx dbos.Context, n int) ([]string, error) {
		var got []string
		for range n {
			m, err := dbos.Recv[string](ctx, "t", 30*time.Second)
			if err != nil {
				return nil, err
			}
			got = append(got, m)
		}
		return got, nil
	}
	runtime, err := dbos.NewContext(context.Background(), dbos.Config{
		DatabaseURL: url, DatabaseSchema: schema, AppName: "go-app", ExecutorID: "go-exec", Logger: goLogger(),
	})
	require.NoError(t, err)
	dbos.RegisterWorkflow(runtime, collect, dbos.WithWorkflowName("collect"))
	require.NoError(t, dbos.Launch(runtime))
	t.Cleanup(func() { require.NoError(t, dbos.Shutdown(runtime, 10*time.Second)) })
	handle, err := dbos.RunWorkflow(runtime, collect, 1+bulk+singles, dbos.WithWorkflowID("go-collector"))
	require.NoError(t, err)

	want := []string{"go-first"}
	require.NoError(t, dbos.Send(client, "go-collector", "go-first", "t", dbos.WithPortableSend()))
	var msgs []sysdb.OutgoingMessage
	for i := range bulk {
		want = append(want, fmt.Sprintf("b%d", i))
		msgs = append(msgs, sysdb.OutgoingMessage{
			DestinationID: "go-collector", Topic: sysdbtest.Ptr("t"),
			Message: fmt.Sprintf(`"b%d"`, i), Serialization: sysdbtest.Ptr(sysdb.PortableJSON),
		})
	}
	_, err = db.MessageSend(ctx, sysdb.MessageSendParams{Messages: msgs})
	require.NoError(t, err)
	for i := range singles {
		want = append(want, fmt.Sprintf("s%d", i))
		_, err = db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{{
			DestinationID: "go-collector", Topic: sysdbtest.Ptr("t"),
			Message: fmt.Sprintf(`"s%d"`, i), Serialization: sysdbtest.Ptr(sysdb.PortableJSON),
		}}})
		require.NoError(t, err)
	}
	got, err := waitResult(t, handle)
	require.NoError(t, err)
	require.Equal(t, want, got)
	// Not by luck of the rows' physical order (which a tie leaves to the
	// plan): created_at rises strictly, the client's message included.
	listed, err := db.MessageList(ctx, "go-collector")
	require.NoError(t, err)
	require.Len(t, listed, len(want))
	for i := 1; i < len(listed); i++ {
		require.Less(t, listed[i-1].CreatedAt, listed[i].CreatedAt, "created_at of %s then %s", listed[i-1].Message, listed[i].Message)
	}
}
