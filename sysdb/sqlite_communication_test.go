package sysdb_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
	"github.com/dbos-agent/dbos-agent/sysdb/sysdbtest"
)

// commOpen opens the SQLite file at path, polling for other writers every
// poll, closed when the test ends.
func commOpen(t *testing.T, path string, poll time.Duration) *sysdb.SQLite {
	t.Helper()
	db, err := sysdb.OpenSQLite(context.Background(), path, sysdb.SQLiteOptions{PollInterval: poll})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db
}

// commStart inserts a PENDING workflow owned by a fresh token and returns
// the token.
func commStart(t *testing.T, db sysdb.SystemDatabase, id string) string {
	t.Helper()
	owner := sysdbtest.Token()
	res, err := db.WorkflowInsert(t.Context(), sysdb.WorkflowInsertParams{
		ID: id, Name: "wf", Status: sysdb.StatusPending, CreatorXID: owner, ExecutorID: "local",
	})
	require.NoError(t, err)
	require.True(t, res.Created)
	require.NotNil(t, res.OwnerXID)
	return *res.OwnerXID
}

// commListener records what a Listen on ChannelNotifications reports.
type commListener struct {
	mu       sync.Mutex
	payloads []string
	gaps     int
	changed  chan struct{}
}

func commListen(t *testing.T, db *sysdb.SQLite) *commListener {
	t.Helper()
	l := &commListener{changed: make(chan struct{}, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = db.Listen(ctx, []string{sysdb.ChannelNotifications},
			func(channel, payload string) {
				l.mu.Lock()
				l.payloads = append(l.payloads, payload)
				l.mu.Unlock()
				l.changed <- struct{}{}
			},
			func() {
				l.mu.Lock()
				l.gaps++
				l.mu.Unlock()
				l.changed <- struct{}{}
			})
	}()
	t.Cleanup(func() { cancel(); <-done })
	l.waitFor(t, time.Second, func(payloads []string, gaps int) bool { return gaps >= 1 }) // the first gap: listening
	return l
}

// waitFor waits until cond holds of what the listener got, at most within.
func (l *commListener) waitFor(t *testing.T, within time.Duration, cond func(payloads []string, gaps int) bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		l.mu.Lock()
		ok := cond(append([]string(nil), l.payloads...), l.gaps)
		l.mu.Unlock()
		if ok {
			return time.Since(start)
		}
		select {
		case <-l.changed:
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("not within %s: payloads %v, gaps %d", within, l.payloads, l.gaps)
		}
	}
}

func (l *commListener) snapshot() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.payloads...), l.gaps
}

// TestSQLiteSendWakesListeners: a message sent through the handle a Listen
// runs on is announced to it at once, with the payload Postgres' trigger
// sends ("<destination>::<topic>"); one sent through a second handle on the
// file (another process, to the first) is a gap noticed within the poll
// interval, and no notification.
func TestSQLiteSendWakesListeners(t *testing.T) {
	const poll = 50 * time.Millisecond
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	a := commOpen(t, path, poll)
	b := commOpen(t, path, time.Hour)
	commStart(t, a, "dest")
	l := commListen(t, a)

	_, gapsBefore := l.snapshot()
	_, err := b.MessageSend(t.Context(), sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{{DestinationID: "dest", Message: `"from b"`}}})
	require.NoError(t, err)
	took := l.waitFor(t, 10*poll, func(_ []string, gaps int) bool { return gaps > gapsBefore })
	require.Less(t, took, 4*poll, "noticed within the poll interval (with slack)")
	payloads, _ := l.snapshot()
	require.Empty(t, payloads, "another handle's send is not announced in process")

	_, err = a.MessageSend(t.Context(), sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{
		{DestinationID: "dest", Message: `"from a"`},
		{DestinationID: "dest", Topic: sysdbtest.Ptr("orders"), Message: `1`},
	}})
	require.NoError(t, err)
	took = l.waitFor(t, time.Second, func(payloads []string, _ int) bool { return len(payloads) >= 2 })
	require.Less(t, took, poll, "announced at once, not at the next poll")
	payloads, _ = l.snapshot()
	require.ElementsMatch(t, []string{"dest::" + sysdb.NullTopic, "dest::orders"}, payloads)

	// A send that inserts nothing (an idempotency key met again) announces
	// nothing.
	keyed := sysdb.OutgoingMessage{DestinationID: "dest", Message: `2`, IdempotencyKey: "k"}
	for range 2 {
		_, err = a.MessageSend(t.Context(), sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{keyed}})
		require.NoError(t, err)
	}
	l.waitFor(t, time.Second, func(payloads []string, _ int) bool { return len(payloads) >= 3 })
	time.Sleep(2 * poll)
	payloads, _ = l.snapshot()
	require.Len(t, payloads, 3)

	// Both handles read every message, each once.
	for _, db := range []*sysdb.SQLite{a, b} {
		ns, err := db.MessageList(t.Context(), "dest")
		require.NoError(t, err)
		require.Len(t, ns, 4)
	}
}

// commPythonSend is DBOS Python 3.4's client sending to a workflow on a
// SQLite file: a portable message on a topic, a default-serialized one on
// the default topic, and a keyed one twice.
const commPythonSend = `
import sys
from dbos import DBOSClient
from dbos._serialization import WorkflowSerializationFormat

client = DBOSClient(system_database_url="sqlite:///" + sys.argv[1])
try:
    client.send(sys.argv[2], {"n": 1}, "orders", serialization_type=WorkflowSerializationFormat.PORTABLE)
    client.send(sys.argv[2], "plain")
    for _ in range(2):
        client.send(sys.argv[2], "once", "keyed", idempotency_key="k-1", serialization_type=WorkflowSerializationFormat.PORTABLE)
finally:
    client.destroy()
`

// TestSQLiteConsumesDBOSPythonMessages: what DBOS Python's client writes to
// notifications on a SQLite file (its message ids, topics, timestamps and
// serializations) is what MessageConsume takes, oldest first, each once.
func TestSQLiteConsumesDBOSPythonMessages(t *testing.T) {
	python, err := dbosPythonPath()
	require.NoError(t, err, "DBOS Python 3.4 (scripts/dbos-python.sh, or DBOS_TEST_PYTHON)")
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	db := commOpen(t, path, 0)
	owner := commStart(t, db, "dest")

	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-c", commPythonSend, path, "dest")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), stderr.String())

	listed, err := db.MessageList(ctx, "dest")
	require.NoError(t, err)
	require.Len(t, listed, 3, "the keyed message once")
	byTopic := map[string]sysdb.Notification{}
	for _, n := range listed {
		topic := ""
		if n.Topic != nil {
			topic = *n.Topic
		}
		byTopic[topic] = n
		require.False(t, n.Consumed)
		require.InDelta(t, time.Now().UnixMilli(), n.CreatedAt, float64(time.Hour.Milliseconds()), "epoch ms")
	}
	require.Contains(t, byTopic, "", "DBOS Python's default topic is ours")
	require.Equal(t, "k-1::dest", byTopic["keyed"].MessageID)

	c := func(fid int) sysdb.StepCaller {
		return sysdb.StepCaller{WorkflowID: "dest", OwnerXID: owner, FunctionID: fid}
	}
	r, err := db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(1), Topic: sysdbtest.Ptr("orders")})
	require.NoError(t, err)
	require.True(t, r.Received)
	require.JSONEq(t, `{"n":1}`, *r.Message)
	require.Equal(t, sysdb.PortableJSON, *r.Serialization)

	r, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(2)})
	require.NoError(t, err)
	require.True(t, r.Received)
	require.NotNil(t, r.Serialization, "DBOS Python tags its default serialization")
	require.NotEqual(t, sysdb.PortableJSON, *r.Serialization)

	r, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(3), Topic: sysdbtest.Ptr("keyed")})
	require.NoError(t, err)
	require.Equal(t, `"once"`, *r.Message)
	r, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c(4), Topic: sysdbtest.Ptr("keyed")})
	require.NoError(t, err)
	require.False(t, r.Received, "consumed once")

	listed, err = db.MessageList(ctx, "dest")
	require.NoError(t, err)
	for _, n := range listed {
		require.True(t, n.Consumed, strings.Join([]string{n.MessageID, n.Message}, " "))
		require.NotNil(t, n.ConsumedByFunctionID)
	}
}

// commPythonRecv is a DBOS Python 3.4 app on a SQLite file whose workflow
// (id argv[2]) receives two messages on topic "t" and prints them as JSON.
const commPythonRecv = `
import json, sys
from dbos import DBOS, SetWorkflowID

DBOS(config={"name": "comm-recv", "system_database_url": "sqlite:///" + sys.argv[1]})

@DBOS.workflow()
def receive() -> list:
    return [DBOS.recv("t", timeout_seconds=60), DBOS.recv("t", timeout_seconds=60)]

DBOS.launch()
try:
    with SetWorkflowID(sys.argv[2]):
        handle = DBOS.start_workflow(receive)
    print(json.dumps(handle.get_result()))
finally:
    DBOS.destroy()
`

// TestSQLiteDBOSPythonReceivesOurMessages: a bulk we send (one transaction,
// one millisecond) to a DBOS Python workflow waiting in recv on the same
// file is received by it, in the order sent: DBOS Python takes the oldest
// message by created_at_epoch_ms alone, which our stamps make strict.
func TestSQLiteDBOSPythonReceivesOurMessages(t *testing.T) {
	python, err := dbosPythonPath()
	require.NoError(t, err, "DBOS Python 3.4 (scripts/dbos-python.sh, or DBOS_TEST_PYTHON)")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	db := commOpen(t, path, 0)

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-c", commPythonRecv, path, "py-dest")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Its workflow exists once DBOS Python started it.
	for {
		if _, err := db.WorkflowGet(ctx, "py-dest"); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("DBOS Python exited before its workflow started: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	_, err = db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{
		{DestinationID: "py-dest", Topic: sysdbtest.Ptr("t"), Message: `"first"`, Serialization: sysdbtest.Ptr(sysdb.PortableJSON)},
		{DestinationID: "py-dest", Topic: sysdbtest.Ptr("t"), Message: `"second"`, Serialization: sysdbtest.Ptr(sysdb.PortableJSON)},
	}})
	require.NoError(t, err)
	require.NoError(t, <-exited, stderr.String())
	require.JSONEq(t, `["first","second"]`, strings.TrimSpace(stdout.String()), stderr.String())

	listed, err := db.MessageList(ctx, "py-dest")
	require.NoError(t, err)
	require.Len(t, listed, 2)
	for i, n := range listed {
		require.True(t, n.Consumed, "consumed by DBOS Python")
		require.NotNil(t, n.ConsumedByFunctionID)
		if i > 0 {
			require.Less(t, *listed[i-1].ConsumedByFunctionID, *n.ConsumedByFunctionID)
		}
	}
}

// TestSQLiteConsumeAcrossHandles: consumers on two handles of one file (two
// writers, as two processes are) race for one workflow's messages; each
// message is received exactly once, as the IMMEDIATE transaction that picks
// it holds the file's write lock until it is marked consumed.
func TestSQLiteConsumeAcrossHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dbos.sqlite")
	handles := []*sysdb.SQLite{commOpen(t, path, 0), commOpen(t, path, 0)}
	owner := commStart(t, handles[0], "dest")
	const n, perHandle = 40, 4
	var out []sysdb.OutgoingMessage
	for i := range n {
		out = append(out, sysdb.OutgoingMessage{DestinationID: "dest", Topic: sysdbtest.Ptr("t"), Message: strconv.Itoa(i)})
	}
	_, err := handles[1].MessageSend(t.Context(), sysdb.MessageSendParams{Messages: out})
	require.NoError(t, err)

	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for h, db := range handles {
		for c := range perHandle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range n / (len(handles) * perHandle) * 2 {
					fid := 1 + h*10_000 + c*100 + i
					r, err := db.MessageConsume(t.Context(), sysdb.MessageConsumeParams{
						Caller: sysdb.StepCaller{WorkflowID: "dest", OwnerXID: owner, FunctionID: fid}, Topic: sysdbtest.Ptr("t"),
					})
					if err != nil {
						t.Errorf("consume: %v", err)
						return
					}
					if r.Received {
						mu.Lock()
						got[*r.Message]++
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	require.Len(t, got, n, "every message received")
	for m, times := range got {
		require.Equal(t, 1, times, "message %s received %d times", m, times)
	}
}
