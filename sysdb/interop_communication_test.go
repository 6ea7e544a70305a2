package sysdb_test

import (
	"encoding/base64"
	"encoding/json"
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
