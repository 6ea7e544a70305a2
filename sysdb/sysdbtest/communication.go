package sysdbtest

// The Communication part of the suite: messages, durable sleeps, events,
// streams, fork, rewind, attributes, and a child's record in its parent.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

var communicationCases = []struct {
	name string
	fn   func(t *testing.T, db sysdb.SystemDatabase)
}{
	{"MessageSendAndConsume", testMessageSendAndConsume},
	{"MessageConsumeEmptyAndReplay", testMessageConsumeEmptyAndReplay},
	{"MessageConsumeConcurrent", testMessageConsumeConcurrent},
	{"MessageOrderWithinMillisecond", testMessageOrderWithinMillisecond},
	{"MessageOrderConcurrentSenders", testMessageOrderConcurrentSenders},
	{"MessageSendIdempotencyKey", testMessageSendIdempotencyKey},
	{"MessageSendMissingDestination", testMessageSendMissingDestination},
	{"MessageSendFromWorkflow", testMessageSendFromWorkflow},
	{"MessageSendToForks", testMessageSendToForks},
	{"CommunicationFencing", testCommunicationFencing},
	{"SleepRecord", testSleepRecord},
	{"SleepRecordRacing", testSleepRecordRacing},
	{"SleepRecordSpan", testSleepRecordSpan},
	{"SleepRecordEpochMS", testSleepRecordEpochMS},
	{"MessageConsumeStartedAt", testMessageConsumeStartedAt},
	{"EventSet", testEventSet},
	{"StreamWriteAndRead", testStreamWriteAndRead},
	{"StreamReplayAndSteps", testStreamReplayAndSteps},
	{"WorkflowFork", testWorkflowFork},
	{"WorkflowForkIdempotent", testWorkflowForkIdempotent},
	{"WorkflowRewind", testWorkflowRewind},
	{"WorkflowSetAttributes", testWorkflowSetAttributes},
	{"WorkflowInsertParentStep", testWorkflowInsertParentStep},
}

// caller is a running workflow's write at step fid.
func caller(id, owner string, fid int) sysdb.StepCaller {
	return sysdb.StepCaller{WorkflowID: id, OwnerXID: owner, FunctionID: fid}
}

func inStep(c sysdb.StepCaller) sysdb.StepCaller {
	c.InStep = true
	return c
}

// send sends messages without a caller (as a client does).
func send(t *testing.T, db sysdb.SystemDatabase, msgs ...sysdb.OutgoingMessage) {
	t.Helper()
	replayed, err := db.MessageSend(t.Context(), sysdb.MessageSendParams{Messages: msgs})
	require.NoError(t, err)
	require.False(t, replayed)
}

func msg(dest string, topic *string, body string) sysdb.OutgoingMessage {
	return sysdb.OutgoingMessage{DestinationID: dest, Topic: topic, Message: body, Serialization: Ptr(sysdb.PortableJSON)}
}

func recv(t *testing.T, db sysdb.SystemDatabase, c sysdb.StepCaller, topic *string) sysdb.Received {
	t.Helper()
	r, err := db.MessageConsume(t.Context(), sysdb.MessageConsumeParams{
		Caller: c, Topic: topic, EmptyOutput: Ptr("null"), EmptySerialization: Ptr(sysdb.PortableJSON),
	})
	require.NoError(t, err)
	return r
}

func messages(t *testing.T, db sysdb.SystemDatabase, dest string) []sysdb.Notification {
	t.Helper()
	ns, err := db.MessageList(t.Context(), dest)
	require.NoError(t, err)
	return ns
}

func bodies(ns []sysdb.Notification) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, n.Message)
	}
	return out
}

func stepAt(t *testing.T, db sysdb.SystemDatabase, id string, fid int) *sysdb.Step {
	t.Helper()
	s, err := db.StepGet(t.Context(), id, fid)
	require.NoError(t, err)
	return s
}

// pending reports whether an unconsumed message waits for dest on topic
// ("" or NullTopic: the default topic).
func pending(t *testing.T, db sysdb.SystemDatabase, dest, topic string) bool {
	t.Helper()
	msgs, err := db.MessageList(t.Context(), dest)
	require.NoError(t, err)
	for _, m := range msgs {
		stored := sysdb.NullTopic
		if m.Topic != nil {
			stored = *m.Topic
		}
		if !m.Consumed && (stored == topic || topic == "" && stored == sysdb.NullTopic) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Messages

func testMessageSendAndConsume(t *testing.T, db sysdb.SystemDatabase) {
	owner := start(t, db, "dest")
	require.False(t, pending(t, db, "dest", ""))
	// Back to back, in one millisecond or not: the order holds regardless.
	send(t, db, msg("dest", nil, `"first"`))
	send(t, db, msg("dest", Ptr("orders"), `{"n":1}`), msg("dest", nil, `"second"`))
	send(t, db, sysdb.OutgoingMessage{DestinationID: "dest", Message: "raw"}) // no serialization

	// The default topic is stored as NullTopic: the two spellings meet.
	require.True(t, pending(t, db, "dest", ""))
	require.True(t, pending(t, db, "dest", sysdb.NullTopic))
	require.True(t, pending(t, db, "dest", "orders"))
	require.False(t, pending(t, db, "dest", "other"))

	listed := messages(t, db, "dest")
	require.Len(t, listed, 4)
	require.Equal(t, `"first"`, listed[0].Message)
	require.Nil(t, listed[0].Topic, "the default topic lists as nil")
	require.Equal(t, sysdb.PortableJSON, *listed[0].Serialization)
	require.Regexp(t, uuidPattern, listed[0].MessageID)
	require.InDelta(t, nowMS(), listed[0].CreatedAt, float64(hourMS))
	for _, n := range listed {
		require.False(t, n.Consumed)
		require.Nil(t, n.ConsumedByFunctionID)
		require.Equal(t, "dest", n.DestinationID)
	}

	// Oldest first, per topic.
	r := recv(t, db, caller("dest", owner, 1), nil)
	require.Equal(t, sysdb.Received{Received: true, Message: Ptr(`"first"`), Serialization: Ptr(sysdb.PortableJSON)}, r)
	r = recv(t, db, caller("dest", owner, 2), Ptr(sysdb.NullTopic))
	require.Equal(t, `"second"`, *r.Message)
	r = recv(t, db, caller("dest", owner, 3), Ptr("orders"))
	require.Equal(t, `{"n":1}`, *r.Message)
	r = recv(t, db, caller("dest", owner, 4), nil)
	require.True(t, r.Received)
	require.Equal(t, "raw", *r.Message)
	require.Nil(t, r.Serialization, "the message's own serialization, NULL included")
	require.False(t, pending(t, db, "dest", ""))

	// Each consumption is the step DBOS.recv holding the message.
	s := stepAt(t, db, "dest", 3)
	require.Equal(t, sysdb.StepNameRecv, s.Name)
	require.Equal(t, `{"n":1}`, *s.Output)
	require.Equal(t, sysdb.PortableJSON, *s.Serialization)
	require.NotNil(t, s.CompletedAt)
	consumedBy := map[string]int{}
	for _, n := range messages(t, db, "dest") {
		require.True(t, n.Consumed)
		consumedBy[n.Message] = *n.ConsumedByFunctionID
	}
	require.Equal(t, map[string]int{`"first"`: 1, `"second"`: 2, `{"n":1}`: 3, "raw": 4}, consumedBy)
}

func testMessageConsumeEmptyAndReplay(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "dest")

	// Nothing waiting: the empty output is recorded.
	r := recv(t, db, caller("dest", owner, 1), nil)
	require.Equal(t, sysdb.Received{}, r)
	s := stepAt(t, db, "dest", 1)
	require.Equal(t, sysdb.StepNameRecv, s.Name)
	require.Equal(t, "null", *s.Output)

	// A message arriving later does not change a recorded recv.
	send(t, db, msg("dest", nil, `"late"`))
	r = recv(t, db, caller("dest", owner, 1), nil)
	require.Equal(t, sysdb.Received{Replayed: true}, r, "the empty output recorded is no message")
	require.True(t, pending(t, db, "dest", ""), "a replay consumes nothing")

	r = recv(t, db, caller("dest", owner, 2), nil)
	require.Equal(t, sysdb.Received{Received: true, Message: Ptr(`"late"`), Serialization: Ptr(sysdb.PortableJSON)}, r)
	send(t, db, msg("dest", nil, `"later"`))
	r = recv(t, db, caller("dest", owner, 2), nil)
	require.Equal(t, sysdb.Received{Received: true, Replayed: true, Message: Ptr(`"late"`), Serialization: Ptr(sysdb.PortableJSON)}, r)
	require.Equal(t, []string{`"late"`, `"later"`}, bodies(messages(t, db, "dest")))
	require.True(t, pending(t, db, "dest", ""), "the replay left the new message")

	// Another step at that id: non-determinism, nothing consumed.
	require.NoError(t, db.StepRecord(ctx, step("dest", owner, 3, "charge", `1`)))
	_, err := db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: caller("dest", owner, 3)})
	unexpected := asError[*sysdb.UnexpectedStepError](t, err)
	require.Equal(t, "charge", unexpected.Recorded)
	require.Equal(t, sysdb.StepNameRecv, unexpected.Attempted)
	require.True(t, pending(t, db, "dest", ""))

	// A recv is a step of its own, never made from inside one.
	_, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: inStep(caller("dest", owner, 4))})
	require.Error(t, err)
	require.Nil(t, stepAt(t, db, "dest", 4))
}

// testMessageConsumeConcurrent races consumers of one workflow's messages:
// every message is received exactly once.
func testMessageConsumeConcurrent(t *testing.T, db sysdb.SystemDatabase) {
	owner := start(t, db, "dest")
	const n, consumers = 40, 8
	var out []sysdb.OutgoingMessage
	for i := range n {
		out = append(out, msg("dest", Ptr("t"), fmt.Sprintf(`%d`, i)))
	}
	send(t, db, out...)

	var mu sync.Mutex
	got := map[string]int{}
	empty := 0
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n/consumers + 2 {
				fid := 1 + c*100 + i
				r, err := db.MessageConsume(t.Context(), sysdb.MessageConsumeParams{Caller: caller("dest", owner, fid), Topic: Ptr("t")})
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				if r.Received {
					got[*r.Message]++
				} else {
					empty++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, got, n, "every message received")
	for m, times := range got {
		require.Equal(t, 1, times, "message %s received %d times", m, times)
	}
	require.Equal(t, consumers*(n/consumers+2)-n, empty)
	require.False(t, pending(t, db, "dest", "t"))
	// Every step records what its consumer got (NULL: nothing).
	recorded, none := map[string]int{}, 0
	steps, err := db.StepList(t.Context(), "dest")
	require.NoError(t, err)
	for _, s := range steps {
		require.Equal(t, sysdb.StepNameRecv, s.Name)
		if s.Output == nil {
			none++
		} else {
			recorded[*s.Output]++
		}
	}
	require.Equal(t, empty, none)
	require.Equal(t, got, recorded)
}

// consumeAll receives every message waiting for dest on topic, from step
// fid on, in the order recv hands them out.
func consumeAll(t *testing.T, db sysdb.SystemDatabase, dest, owner string, fid int, topic *string) []string {
	t.Helper()
	var got []string
	for r := recv(t, db, caller(dest, owner, fid), topic); r.Received; r = recv(t, db, caller(dest, owner, fid), topic) {
		got = append(got, *r.Message)
		fid++
	}
	return got
}

// requireSentOrder checks dest's messages named in want were stamped in
// that order with strictly rising created_at, whatever their topic: the
// official SDKs pick the next message (and list them) by
// created_at_epoch_ms alone, so a tie would let them reorder.
func requireSentOrder(t *testing.T, db sysdb.SystemDatabase, dest string, want []string) {
	t.Helper()
	named := map[string]bool{}
	for _, body := range want {
		named[body] = true
	}
	var got []string
	var at []int64
	for _, n := range messages(t, db, dest) {
		if named[n.Message] {
			got, at = append(got, n.Message), append(at, n.CreatedAt)
		}
	}
	require.Equal(t, want, got, "listed oldest first")
	for i := 1; i < len(at); i++ {
		require.Less(t, at[i-1], at[i], "created_at of %s then %s", got[i-1], got[i])
	}
}

// testMessageOrderWithinMillisecond: messages sent in one millisecond (one
// bulk send shares its transaction's clock; quick successive sends share
// a millisecond) are received in the order they were sent, and their
// created_at says so to every reader.
func testMessageOrderWithinMillisecond(t *testing.T, db sysdb.SystemDatabase) {
	owner, otherOwner := start(t, db, "dest"), start(t, db, "other")
	const n = 60
	// One bulk in its list order, interleaving the default topic and
	// another destination, then single sends one after another.
	var bulk []sysdb.OutgoingMessage
	var all, onT, onDefault, toOther []string
	for i := range n {
		body := fmt.Sprintf(`"b%d"`, i)
		bulk = append(bulk, msg("dest", Ptr("t"), body))
		all, onT = append(all, body), append(onT, body)
		if i%3 == 0 {
			d := fmt.Sprintf(`"d%d"`, i)
			bulk = append(bulk, msg("dest", nil, d), msg("other", Ptr("t"), body))
			all, onDefault, toOther = append(all, d), append(onDefault, d), append(toOther, body)
		}
	}
	send(t, db, bulk...)
	for i := range n {
		body := fmt.Sprintf(`"s%d"`, i)
		send(t, db, msg("dest", Ptr("t"), body))
		all, onT = append(all, body), append(onT, body)
	}
	requireSentOrder(t, db, "dest", all)
	requireSentOrder(t, db, "other", toOther)

	require.Equal(t, onT, consumeAll(t, db, "dest", owner, 1, Ptr("t")))
	require.Equal(t, onDefault, consumeAll(t, db, "dest", owner, 1000, nil))
	require.Equal(t, toOther, consumeAll(t, db, "other", otherOwner, 1, Ptr("t")))
}

// testMessageOrderConcurrentSenders: senders racing to one workflow each
// have their own messages received in the order they sent them.
func testMessageOrderConcurrentSenders(t *testing.T, db sysdb.SystemDatabase) {
	owner := start(t, db, "dest")
	const senders, each = 4, 30
	sent := make([][]string, senders)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				out := []sysdb.OutgoingMessage{msg("dest", Ptr("t"), fmt.Sprintf(`"%d:%d"`, s, i))}
				if i%5 == 0 { // some in bulks of two
					out = append(out, msg("dest", Ptr("t"), fmt.Sprintf(`"%d:%d.5"`, s, i)))
				}
				_, err := db.MessageSend(t.Context(), sysdb.MessageSendParams{Messages: out})
				if !assertNoError(t, err) {
					return
				}
				for _, m := range out {
					sent[s] = append(sent[s], m.Message)
				}
			}
		}()
	}
	wg.Wait()
	got := consumeAll(t, db, "dest", owner, 1, Ptr("t"))
	require.Len(t, got, senders*(each+each/5))
	for s, want := range sent {
		var mine []string
		for _, body := range got {
			if strings.HasPrefix(body, fmt.Sprintf(`"%d:`, s)) {
				mine = append(mine, body)
			}
		}
		require.Equal(t, want, mine, "sender %d's messages in its order", s)
		requireSentOrder(t, db, "dest", want)
	}
}

// assertNoError reports err from a goroutine other than the test's.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func testMessageSendIdempotencyKey(t *testing.T, db sysdb.SystemDatabase) {
	start(t, db, "a")
	start(t, db, "b")
	keyed := func(dest string) sysdb.OutgoingMessage {
		m := msg(dest, Ptr("t"), `"once"`)
		m.IdempotencyKey = "k1"
		return m
	}
	send(t, db, keyed("a"), keyed("b"))
	send(t, db, keyed("a"))
	send(t, db, keyed("b"), keyed("a"))
	for _, dest := range []string{"a", "b"} {
		ns := messages(t, db, dest)
		require.Len(t, ns, 1, "one message per key and destination")
		require.Equal(t, "k1::"+dest, ns[0].MessageID)
	}
	// Without a key, every send is a message.
	send(t, db, msg("a", Ptr("t"), `"again"`))
	send(t, db, msg("a", Ptr("t"), `"again"`))
	require.Len(t, messages(t, db, "a"), 3)
}

func testMessageSendMissingDestination(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "sender")
	start(t, db, "there")
	_, err := db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{
		msg("there", nil, `1`), msg("nowhere", nil, `2`),
	}})
	require.Equal(t, "nowhere", asError[*sysdb.NotFoundError](t, err).WorkflowID)
	require.Empty(t, messages(t, db, "there"), "all or nothing")

	_, err = db.MessageSend(ctx, sysdb.MessageSendParams{
		Caller:   Ptr(caller("sender", owner, 1)),
		Messages: []sysdb.OutgoingMessage{msg("there", nil, `1`), msg("nowhere", nil, `2`)},
	})
	require.Equal(t, "nowhere", asError[*sysdb.NotFoundError](t, err).WorkflowID)
	require.Empty(t, messages(t, db, "there"))
	require.Nil(t, stepAt(t, db, "sender", 1), "a failed send records no step")
}

func testMessageSendFromWorkflow(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "sender", func(p *sysdb.WorkflowInsertParams) { p.ApplicationName = Ptr("app") })
	start(t, db, "dest")
	sendAt := func(c sysdb.StepCaller, name, body string) (bool, error) {
		c.ApplicationName = Ptr("app")
		return db.MessageSend(ctx, sysdb.MessageSendParams{Caller: &c, StepName: name, Messages: []sysdb.OutgoingMessage{msg("dest", nil, body)}})
	}

	replayed, err := sendAt(caller("sender", owner, 1), "", `"one"`)
	require.NoError(t, err)
	require.False(t, replayed)
	s := stepAt(t, db, "sender", 1)
	require.Equal(t, sysdb.StepNameSend, s.Name)
	require.Nil(t, s.Output)
	require.Nil(t, s.Error)

	// The replay of a recorded send sends nothing.
	replayed, err = sendAt(caller("sender", owner, 1), "", `"one"`)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, []string{`"one"`}, bodies(messages(t, db, "dest")))

	// A step name of the caller's choosing (DBOS.sendBulk and the like).
	replayed, err = sendAt(caller("sender", owner, 2), "DBOS.sendBulk", `"two"`)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "DBOS.sendBulk", stepAt(t, db, "sender", 2).Name)
	_, err = sendAt(caller("sender", owner, 2), "", `"two"`)
	unexpected := asError[*sysdb.UnexpectedStepError](t, err)
	require.Equal(t, "DBOS.sendBulk", unexpected.Recorded)
	require.Equal(t, sysdb.StepNameSend, unexpected.Attempted)
	require.Equal(t, 2, unexpected.FunctionID)
	require.Len(t, messages(t, db, "dest"), 2)

	// From inside a step: sent, no step of its own.
	replayed, err = sendAt(inStep(caller("sender", owner, 3)), "", `"three"`)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Nil(t, stepAt(t, db, "sender", 3))
	require.Equal(t, []string{`"one"`, `"two"`, `"three"`}, bodies(messages(t, db, "dest")))
}

func testMessageSendToForks(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "orig")
	finish(t, db, "orig", owner, `1`)
	require.NoError(t, db.WorkflowFork(ctx, sysdb.WorkflowForkParams{OriginalID: "orig", NewID: "fork-1"}))
	require.NoError(t, db.WorkflowFork(ctx, sysdb.WorkflowForkParams{OriginalID: "fork-1", NewID: "fork-2"}))
	require.NoError(t, db.WorkflowFork(ctx, sysdb.WorkflowForkParams{OriginalID: "orig", NewID: "fork-3"}))
	start(t, db, "other")

	_, err := db.MessageSend(ctx, sysdb.MessageSendParams{Messages: []sysdb.OutgoingMessage{msg("fork-1", nil, `"only"`)}})
	require.NoError(t, err)
	require.Empty(t, messages(t, db, "fork-2"), "forks are reached only when asked")

	keyed := msg("orig", Ptr("t"), `"all"`)
	keyed.IdempotencyKey = "k"
	for range 2 {
		_, err = db.MessageSend(ctx, sysdb.MessageSendParams{SendToForks: true, Messages: []sysdb.OutgoingMessage{
			keyed, msg("other", nil, `"plain"`),
		}})
		require.NoError(t, err)
	}
	for _, id := range []string{"orig", "fork-1", "fork-2", "fork-3"} {
		var got []sysdb.Notification
		for _, n := range messages(t, db, id) {
			if n.Topic != nil && *n.Topic == "t" {
				got = append(got, n)
			}
		}
		require.Len(t, got, 1, "%s gets the message once", id)
		require.Equal(t, `"all"`, got[0].Message)
		require.Equal(t, "k::"+id, got[0].MessageID)
	}
	require.Len(t, messages(t, db, "other"), 2)

	// Without a key each copy has an id of its own.
	_, err = db.MessageSend(ctx, sysdb.MessageSendParams{SendToForks: true, Messages: []sysdb.OutgoingMessage{msg("fork-1", Ptr("u"), `"x"`)}})
	require.NoError(t, err)
	a, b := messages(t, db, "fork-1"), messages(t, db, "fork-2")
	require.Regexp(t, uuidPattern, a[len(a)-1].MessageID)
	require.Regexp(t, uuidPattern, b[len(b)-1].MessageID)
	require.NotEqual(t, a[len(a)-1].MessageID, b[len(b)-1].MessageID)
	require.Len(t, messages(t, db, "orig"), 1, "a fork's message does not reach its original")
}

// testCommunicationFencing: a write presenting another run's token lands
// nowhere, and one for a missing workflow names it.
func testCommunicationFencing(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	start(t, db, "dest")
	send(t, db, msg("wf", nil, `"waiting"`))
	stale := caller("wf", Token(), 1)
	missing := caller("missing", owner, 1)

	for _, c := range []sysdb.StepCaller{stale, inStep(stale), missing} {
		want := func(err error) {
			t.Helper()
			if c.WorkflowID == "missing" {
				require.Equal(t, "missing", asError[*sysdb.NotFoundError](t, err).WorkflowID)
			} else {
				require.Equal(t, "wf", asError[*sysdb.FencedError](t, err).WorkflowID)
			}
		}
		_, err := db.MessageSend(ctx, sysdb.MessageSendParams{Caller: &c, Messages: []sysdb.OutgoingMessage{msg("dest", nil, `1`)}})
		want(err)
		if !c.InStep {
			_, err = db.MessageConsume(ctx, sysdb.MessageConsumeParams{Caller: c})
			want(err)
		}
		_, err = db.SleepRecord(ctx, sysdb.SleepParams{Caller: c, DurationMS: 1000})
		want(err)
		want(db.EventSet(ctx, sysdb.EventSetParams{Caller: c, Key: "k", Value: `1`}))
		want(db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c, Key: "s", Value: `1`}))
		want(db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: c, Key: "s", Close: true}))
	}
	require.Empty(t, messages(t, db, "dest"))
	require.True(t, pending(t, db, "wf", ""))
	require.Nil(t, stepAt(t, db, "wf", 1))
	events, err := db.EventList(ctx, "wf")
	require.NoError(t, err)
	require.Empty(t, events)
	history, err := db.EventHistory(ctx, "wf")
	require.NoError(t, err)
	require.Empty(t, history)
	streams, err := db.StreamList(ctx, "wf")
	require.NoError(t, err)
	require.Empty(t, streams)

	// The run that owns it writes; once it finished, it no longer can.
	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: caller("wf", owner, 1), Key: "k", Value: `1`}))
	finish(t, db, "wf", owner, `1`)
	err = db.EventSet(ctx, sysdb.EventSetParams{Caller: caller("wf", owner, 2), Key: "k", Value: `2`})
	asError[*sysdb.FencedError](t, err)
	_, err = db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, 2), DurationMS: 1})
	asError[*sysdb.FencedError](t, err)
}

// ---------------------------------------------------------------------------
// Sleeps

func testSleepRecord(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	const hour = int64(3_600_000)
	first, err := db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, 1), DurationMS: hour})
	require.NoError(t, err)
	require.InDelta(t, hour, first.RemainingMS, 1, "computed on one clock reading")
	require.InDelta(t, nowMS()+hour, first.WakeAtMS, float64(hourMS/6), "the database clock is near ours")

	// Recorded as DBOS Python records it: JSON epoch seconds, portable.
	s := stepAt(t, db, "wf", 1)
	require.Equal(t, sysdb.StepNameSleep, s.Name)
	require.Equal(t, sysdb.PortableJSON, *s.Serialization)
	var seconds float64
	require.NoError(t, json.Unmarshal([]byte(*s.Output), &seconds))
	require.InDelta(t, float64(first.WakeAtMS)/1000, seconds, 0.001)

	// Later calls find the same wake time and less left of it, as the
	// database clock moves on.
	for deadline := time.Now().Add(10 * time.Second); ; {
		again := mustSleep(t, db, caller("wf", owner, 1), 5)
		require.Equal(t, first.WakeAtMS, again.WakeAtMS, "the wake time stands")
		require.LessOrEqual(t, again.RemainingMS, first.RemainingMS)
		if again.RemainingMS < first.RemainingMS {
			break
		}
		require.True(t, time.Now().Before(deadline), "the remaining time never went down")
	}

	// A sleep already over has nothing left.
	zero, err := db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, 2), DurationMS: 0})
	require.NoError(t, err)
	require.Equal(t, int64(0), zero.RemainingMS)
	require.Equal(t, zero.WakeAtMS, mustSleep(t, db, caller("wf", owner, 2), hour).WakeAtMS)
	require.Equal(t, int64(0), mustSleep(t, db, caller("wf", owner, 2), hour).RemainingMS)

	// A wake time recorded as whole seconds is read too.
	require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{
		WorkflowID: "wf", OwnerXID: owner, FunctionID: 3, Name: sysdb.StepNameSleep,
		Output: Ptr("1700000000"), Serialization: Ptr(sysdb.PortableJSON),
	}))
	whole := mustSleep(t, db, caller("wf", owner, 3), hour)
	require.Equal(t, sysdb.SleepTimes{WakeAtMS: 1_700_000_000_000, NowMS: whole.NowMS}, whole)

	// Another step at that id.
	require.NoError(t, db.StepRecord(ctx, step("wf", owner, 4, "charge", `1`)))
	_, err = db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, 4), DurationMS: hour})
	require.Equal(t, "charge", asError[*sysdb.UnexpectedStepError](t, err).Recorded)

	// From inside a step: nothing recorded.
	inside := mustSleep(t, db, inStep(caller("wf", owner, 5)), 2000)
	require.Equal(t, int64(2000), inside.RemainingMS)
	require.Nil(t, stepAt(t, db, "wf", 5))
}

func mustSleep(t *testing.T, db sysdb.SystemDatabase, c sysdb.StepCaller, ms int64) sysdb.SleepTimes {
	t.Helper()
	s, err := db.SleepRecord(t.Context(), sysdb.SleepParams{Caller: c, DurationMS: ms})
	require.NoError(t, err)
	return s
}

// testSleepRecordEpochMS: a sleep recorded in epoch ms is a JSON integer,
// as DBOS TypeScript records it, spanning the sleep like the other format;
// and a replay reads a recorded wake time by its magnitude, whichever
// format it asks for: DBOS TypeScript's integer ms and DBOS Python's float
// seconds alike.
func testSleepRecordEpochMS(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	const hour = int64(3_600_000)
	ms := func(id int) sysdb.SleepParams {
		return sysdb.SleepParams{Caller: caller("wf", owner, id), DurationMS: hour, Format: sysdb.WakeEpochMS, ProjectCompletion: true}
	}
	first, err := db.SleepRecord(ctx, ms(1))
	require.NoError(t, err)
	require.Equal(t, hour, first.RemainingMS, "computed on one clock reading")
	require.InDelta(t, nowMS()+hour, first.WakeAtMS, float64(hourMS/6), "the database clock is near ours")
	s := stepAt(t, db, "wf", 1)
	require.Equal(t, sysdb.PortableJSON, *s.Serialization)
	require.Equal(t, strconv.FormatInt(first.WakeAtMS, 10), *s.Output, "a JSON integer of epoch ms")
	require.Equal(t, first.WakeAtMS, *s.CompletedAt, "completed at the wake time, as DBOS TypeScript records a sleep")
	require.Equal(t, first.NowMS, *s.StartedAt)

	// A replay in either format reads the ms back.
	again, err := db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, 1), DurationMS: 5})
	require.NoError(t, err)
	require.Equal(t, first.WakeAtMS, again.WakeAtMS)
	require.LessOrEqual(t, again.RemainingMS, hour)
	require.Greater(t, again.RemainingMS, hour-hourMS/6)

	// Wake times recorded by the SDKs, read by either format's sleep.
	for i, c := range []struct {
		output string
		wakeMS int64
	}{
		{"1700000000123", 1_700_000_000_123},   // DBOS TypeScript: integer ms
		{"1700000000.1234", 1_700_000_000_123}, // DBOS Python: float seconds
		{"1700000000", 1_700_000_000_000},      // whole seconds
		{"100000000000", 100_000_000_000},      // 1e11: ms (March 1973)
		{"99999999999", 99_999_999_999_000},    // just under: seconds
	} {
		id := 10 + i
		require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{
			WorkflowID: "wf", OwnerXID: owner, FunctionID: id, Name: sysdb.StepNameSleep,
			Output: Ptr(c.output), Serialization: Ptr(sysdb.PortableJSON),
		}))
		for _, f := range []sysdb.WakeTimeFormat{sysdb.WakeEpochSeconds, sysdb.WakeEpochMS} {
			got, err := db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, id), DurationMS: hour, Format: f})
			require.NoError(t, err, c.output)
			require.Equal(t, c.wakeMS, got.WakeAtMS, "%s read with format %d", c.output, f)
			require.Equal(t, max(c.wakeMS-got.NowMS, 0), got.RemainingMS, c.output)
		}
		require.Equal(t, c.output, *stepAt(t, db, "wf", id).Output, "a replay rewrites nothing")
	}

	// A deadline in ms is an instant, as DBOS TypeScript records a timeout.
	_, err = db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, 2), DurationMS: hour, Format: sysdb.WakeEpochMS})
	require.NoError(t, err)
	d := stepAt(t, db, "wf", 2)
	require.Equal(t, *d.StartedAt, *d.CompletedAt)
	require.Equal(t, strconv.FormatInt(*d.StartedAt+hour, 10), *d.Output)

	// A format this package does not know is refused before anything is written.
	_, err = db.SleepRecord(ctx, sysdb.SleepParams{Caller: caller("wf", owner, 3), DurationMS: hour, Format: sysdb.WakeTimeFormat(7)})
	require.ErrorContains(t, err, "unknown wake time format")
	require.Nil(t, stepAt(t, db, "wf", 3))
}

// testSleepRecordSpan: a sleep's step spans the sleep (its completion is the
// projected wake time), a wait's deadline spans an instant, and a replay
// leaves both as recorded.
func testSleepRecordSpan(t *testing.T, db sysdb.SystemDatabase) {
	owner := start(t, db, "wf")
	const hour = int64(3_600_000)
	slept, err := db.SleepRecord(t.Context(), sysdb.SleepParams{Caller: caller("wf", owner, 1), DurationMS: hour, ProjectCompletion: true})
	require.NoError(t, err)
	s := stepAt(t, db, "wf", 1)
	require.NotNil(t, s.StartedAt)
	require.NotNil(t, s.CompletedAt)
	require.Equal(t, hour, *s.CompletedAt-*s.StartedAt, "the span is the sleep")
	require.InDelta(t, slept.WakeAtMS, *s.CompletedAt, 1, "completed at the wake time")
	require.InDelta(t, slept.NowMS, *s.StartedAt, 1, "started at the call")

	_, err = db.SleepRecord(t.Context(), sysdb.SleepParams{Caller: caller("wf", owner, 2), DurationMS: hour})
	require.NoError(t, err)
	d := stepAt(t, db, "wf", 2)
	require.Equal(t, *d.StartedAt, *d.CompletedAt, "a deadline's registration is an instant")

	// Replays, with either kind, change neither record.
	mustSleep(t, db, caller("wf", owner, 1), 5)
	_, err = db.SleepRecord(t.Context(), sysdb.SleepParams{Caller: caller("wf", owner, 2), DurationMS: 5, ProjectCompletion: true})
	require.NoError(t, err)
	require.Equal(t, s, stepAt(t, db, "wf", 1))
	require.Equal(t, d, stepAt(t, db, "wf", 2))
}

// testMessageConsumeStartedAt: a recv's step starts when the recv began, as
// the caller says, so its span is the wait; without one it is an instant.
func testMessageConsumeStartedAt(t *testing.T, db sysdb.SystemDatabase) {
	owner := start(t, db, "dest")
	began := nowMS() - 5_000
	send(t, db, msg("dest", nil, `"m"`))
	r, err := db.MessageConsume(t.Context(), sysdb.MessageConsumeParams{Caller: caller("dest", owner, 1), StartedAtMS: &began})
	require.NoError(t, err)
	require.True(t, r.Received)
	s := stepAt(t, db, "dest", 1)
	require.Equal(t, began, *s.StartedAt)
	require.GreaterOrEqual(t, *s.CompletedAt-*s.StartedAt, int64(4_000), "the span is the wait")

	_, err = db.MessageConsume(t.Context(), sysdb.MessageConsumeParams{Caller: caller("dest", owner, 2), EmptyOutput: Ptr("null")})
	require.NoError(t, err)
	e := stepAt(t, db, "dest", 2)
	require.Equal(t, *e.StartedAt, *e.CompletedAt)
}

func testSleepRecordRacing(t *testing.T, db sysdb.SystemDatabase) {
	owner := start(t, db, "wf")
	const racers = 8
	wakes := make([]int64, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := db.SleepRecord(t.Context(), sysdb.SleepParams{Caller: caller("wf", owner, 1), DurationMS: int64(1000 + i*60_000)})
			if assertNoError(t, err) {
				wakes[i] = s.WakeAtMS
			}
		}()
	}
	wg.Wait()
	for i := range racers {
		require.Equal(t, wakes[0], wakes[i], "every racer gets the wake time that stands")
	}
	require.NotZero(t, wakes[0])
}

// ---------------------------------------------------------------------------
// Events

func testEventSet(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	set := func(c sysdb.StepCaller, key, value string) error {
		return db.EventSet(ctx, sysdb.EventSetParams{Caller: c, Key: key, Value: value, Serialization: Ptr(sysdb.PortableJSON)})
	}
	get := func(key string) *sysdb.Payload {
		t.Helper()
		v, err := db.EventGet(ctx, "wf", key)
		require.NoError(t, err)
		return v
	}
	require.Nil(t, get("status"))

	require.NoError(t, set(caller("wf", owner, 1), "status", `"started"`))
	require.Equal(t, &sysdb.Payload{Value: `"started"`, Serialization: Ptr(sysdb.PortableJSON)}, get("status"))
	s := stepAt(t, db, "wf", 1)
	require.Equal(t, sysdb.StepNameSetEvent, s.Name)
	require.Nil(t, s.Output)

	// The replay of a recorded setEvent writes nothing, whatever it carries.
	require.NoError(t, set(caller("wf", owner, 1), "status", `"changed on replay"`))
	require.Equal(t, `"started"`, get("status").Value)

	require.NoError(t, set(caller("wf", owner, 2), "status", `"done"`))
	require.NoError(t, set(caller("wf", owner, 3), "count", `3`))
	// From inside step 4: no step, the history row at the step's id; a
	// second write of the key in that step replaces the first.
	require.NoError(t, set(inStep(caller("wf", owner, 4)), "progress", `0.5`))
	require.NoError(t, set(inStep(caller("wf", owner, 4)), "progress", `1.0`))
	require.Nil(t, stepAt(t, db, "wf", 4))

	require.Equal(t, `"done"`, get("status").Value)
	events, err := db.EventList(ctx, "wf")
	require.NoError(t, err)
	require.Equal(t, []sysdb.Event{
		{Key: "count", Value: `3`, Serialization: Ptr(sysdb.PortableJSON)},
		{Key: "progress", Value: `1.0`, Serialization: Ptr(sysdb.PortableJSON)},
		{Key: "status", Value: `"done"`, Serialization: Ptr(sysdb.PortableJSON)},
	}, events)
	history, err := db.EventHistory(ctx, "wf")
	require.NoError(t, err)
	require.Equal(t, []sysdb.EventHistoryEntry{
		{FunctionID: 1, Key: "status", Value: `"started"`, Serialization: Ptr(sysdb.PortableJSON)},
		{FunctionID: 2, Key: "status", Value: `"done"`, Serialization: Ptr(sysdb.PortableJSON)},
		{FunctionID: 3, Key: "count", Value: `3`, Serialization: Ptr(sysdb.PortableJSON)},
		{FunctionID: 4, Key: "progress", Value: `1.0`, Serialization: Ptr(sysdb.PortableJSON)},
	}, history)

	// Another step at the id: non-determinism, nothing written.
	require.NoError(t, db.StepRecord(ctx, step("wf", owner, 5, "charge", `1`)))
	err = set(caller("wf", owner, 5), "status", `"wrong"`)
	require.Equal(t, 5, asError[*sysdb.UnexpectedStepError](t, err).FunctionID)
	require.Equal(t, `"done"`, get("status").Value)

	other, err := db.EventList(ctx, "missing")
	require.NoError(t, err)
	require.Empty(t, other)
}

// ---------------------------------------------------------------------------
// Streams

func write(t *testing.T, db sysdb.SystemDatabase, c sysdb.StepCaller, key, value string) {
	t.Helper()
	require.NoError(t, db.StreamWrite(t.Context(), sysdb.StreamWriteParams{Caller: c, Key: key, Value: value, Serialization: Ptr(sysdb.PortableJSON)}))
}

func read(t *testing.T, db sysdb.SystemDatabase, id, key string, offset, limit int) sysdb.StreamRead {
	t.Helper()
	r, err := db.StreamRead(t.Context(), id, key, offset, limit)
	require.NoError(t, err)
	return r
}

func values(r sysdb.StreamRead) []string {
	out := []string{}
	for _, v := range r.Values {
		out = append(out, v.Value)
	}
	return out
}

func testStreamWriteAndRead(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	require.Equal(t, sysdb.StreamRead{WriterStatus: Ptr(sysdb.StatusPending)}, read(t, db, "wf", "out", 0, 10))
	require.Equal(t, sysdb.StreamRead{}, read(t, db, "missing", "out", 0, 10), "no writer, no status")

	write(t, db, caller("wf", owner, 1), "out", `"a"`)
	write(t, db, caller("wf", owner, 2), "out", `"b"`)
	write(t, db, caller("wf", owner, 3), "other", `"x"`)
	write(t, db, caller("wf", owner, 4), "out", `"c"`)

	r := read(t, db, "wf", "out", 0, 10)
	require.Equal(t, []string{`"a"`, `"b"`, `"c"`}, values(r))
	require.False(t, r.Closed)
	require.Equal(t, sysdb.StreamEntry{Key: "out", Offset: 2, Value: `"c"`, Serialization: Ptr(sysdb.PortableJSON), FunctionID: 4}, r.Values[2])
	require.Equal(t, []string{`"b"`}, values(read(t, db, "wf", "out", 1, 1)))
	require.Empty(t, read(t, db, "wf", "out", 3, 10).Values)

	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: caller("wf", owner, 5), Key: "out", Close: true}))
	s := stepAt(t, db, "wf", 5)
	require.Equal(t, sysdb.StepNameCloseStream, s.Name)
	r = read(t, db, "wf", "out", 0, 0)
	require.Equal(t, []string{`"a"`, `"b"`, `"c"`}, values(r))
	require.True(t, r.Closed)
	r = read(t, db, "wf", "out", 1, 2)
	require.Equal(t, []string{`"b"`, `"c"`}, values(r))
	require.True(t, r.Closed, "a marker right after the values read is reported")
	r = read(t, db, "wf", "out", 0, 2)
	require.False(t, r.Closed)
	r = read(t, db, "wf", "out", 3, 5)
	require.Empty(t, r.Values)
	require.True(t, r.Closed)

	// Closed: a write or a close after it is appended, as DBOS Python 3.4
	// accepts it, and never read: readers stop at the first marker.
	write(t, db, caller("wf", owner, 6), "out", `"d"`)
	write(t, db, inStep(caller("wf", owner, 7)), "out", `"e"`)
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: caller("wf", owner, 7), Key: "out", Close: true}))
	r = read(t, db, "wf", "out", 0, 10)
	require.Equal(t, []string{`"a"`, `"b"`, `"c"`}, values(r))
	require.True(t, r.Closed)
	// Other streams are open.
	write(t, db, caller("wf", owner, 8), "other", `"y"`)

	finish(t, db, "wf", owner, `1`)
	r = read(t, db, "wf", "other", 0, 10)
	require.Equal(t, []string{`"x"`, `"y"`}, values(r))
	require.Equal(t, sysdb.StatusSuccess, *r.WriterStatus)

	all, err := db.StreamList(ctx, "wf")
	require.NoError(t, err)
	require.Len(t, all, 9, "by key and offset, the markers and what follows them included")
	require.Equal(t, sysdb.StreamEntry{Key: "other", Offset: 1, Value: `"y"`, Serialization: Ptr(sysdb.PortableJSON), FunctionID: 8}, all[1])
	require.Equal(t, sysdb.StreamEntry{Key: "out", Offset: 4, Value: `"d"`, Serialization: Ptr(sysdb.PortableJSON), FunctionID: 6}, all[6])
	require.Equal(t, sysdb.StreamEntry{Key: "out", Offset: 3, Value: sysdb.StreamClosedValue, Serialization: Ptr(sysdb.PortableJSON), FunctionID: 5}, all[5])
}

func testStreamReplayAndSteps(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "wf")
	write(t, db, caller("wf", owner, 1), "s", `1`)
	require.Equal(t, sysdb.StepNameWriteStream, stepAt(t, db, "wf", 1).Name)
	write(t, db, caller("wf", owner, 1), "s", `1`) // replay
	require.Equal(t, []string{`1`}, values(read(t, db, "wf", "s", 0, 0)), "a replay writes nothing")

	// From inside step 2, several values, none recorded as a step.
	write(t, db, inStep(caller("wf", owner, 2)), "s", `2`)
	write(t, db, inStep(caller("wf", owner, 2)), "s", `3`)
	require.Nil(t, stepAt(t, db, "wf", 2))
	r := read(t, db, "wf", "s", 0, 0)
	require.Equal(t, []string{`1`, `2`, `3`}, values(r))
	require.Equal(t, 2, r.Values[2].FunctionID)

	require.NoError(t, db.StepRecord(ctx, step("wf", owner, 3, "charge", `1`)))
	err := db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: caller("wf", owner, 3), Key: "s", Value: `4`})
	require.Equal(t, sysdb.StepNameWriteStream, asError[*sysdb.UnexpectedStepError](t, err).Attempted)
	err = db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: caller("wf", owner, 1), Key: "s", Close: true})
	require.Equal(t, sysdb.StepNameWriteStream, asError[*sysdb.UnexpectedStepError](t, err).Recorded)
	require.Len(t, read(t, db, "wf", "s", 0, 0).Values, 3)

	// Concurrent writers from inside steps take consecutive offsets.
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assertNoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: inStep(caller("wf", owner, 10+i)), Key: "par", Value: fmt.Sprint(i)}))
		}()
	}
	wg.Wait()
	r = read(t, db, "wf", "par", 0, 0)
	got := values(r)
	sort.Strings(got)
	require.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, got)
}

// ---------------------------------------------------------------------------
// Fork and rewind

// workflowWithHistory starts a workflow with steps 1-4 (2 starts child "<id>-2"), events
// "a" at 1 and 3, "b" at 3, "c" at 1, stream values at 1 and 3 and a
// closing marker at 4, and the messages: one consumed at 1, one at 3, one
// waiting.
func workflowWithHistory(t *testing.T, db sysdb.SystemDatabase, id string) string {
	t.Helper()
	ctx := t.Context()
	owner := start(t, db, id, func(p *sysdb.WorkflowInsertParams) {
		p.Inputs, p.Serialization = Ptr(`{"positionalArgs":[1],"namedArgs":{}}`), Ptr(sysdb.PortableJSON)
		p.ApplicationVersion, p.AuthenticatedUser, p.ClassName = Ptr("v1"), Ptr("alice"), Ptr("C")
		p.Attributes = Ptr(`{"team":"x"}`)
	})
	event := func(c sysdb.StepCaller, key, value string) {
		require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: c, Key: key, Value: value}))
	}
	event(inStep(caller(id, owner, 1)), "a", `"a1"`)
	event(inStep(caller(id, owner, 1)), "c", `"c1"`)
	write(t, db, inStep(caller(id, owner, 1)), "s", `"s1"`)
	send(t, db, msg(id, nil, `"m1"`))
	require.True(t, recv(t, db, caller(id, owner, 1), nil).Received)
	require.NoError(t, db.StepRecord(ctx, sysdb.StepRecordParams{WorkflowID: id, OwnerXID: owner, FunctionID: 2, Name: "child", ChildWorkflowID: Ptr(id + "-2")}))
	event(inStep(caller(id, owner, 3)), "a", `"a3"`)
	event(inStep(caller(id, owner, 3)), "b", `"b3"`)
	write(t, db, inStep(caller(id, owner, 3)), "s", `"s3"`)
	send(t, db, msg(id, nil, `"m3"`))
	require.True(t, recv(t, db, caller(id, owner, 3), nil).Received)
	require.NoError(t, db.StreamWrite(ctx, sysdb.StreamWriteParams{Caller: caller(id, owner, 4), Key: "s", Close: true}))
	send(t, db, msg(id, nil, `"waiting"`))
	return owner
}

func stepIDs(t *testing.T, db sysdb.SystemDatabase, id string) []int {
	t.Helper()
	steps, err := db.StepList(t.Context(), id)
	require.NoError(t, err)
	out := []int{}
	for _, s := range steps {
		out = append(out, s.FunctionID)
	}
	return out
}

func eventMap(t *testing.T, db sysdb.SystemDatabase, id string) map[string]string {
	t.Helper()
	events, err := db.EventList(t.Context(), id)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range events {
		out[e.Key] = e.Value
	}
	return out
}

func historyIDs(t *testing.T, db sysdb.SystemDatabase, id string) []string {
	t.Helper()
	h, err := db.EventHistory(t.Context(), id)
	require.NoError(t, err)
	out := []string{}
	for _, e := range h {
		out = append(out, fmt.Sprintf("%d:%s", e.FunctionID, e.Key))
	}
	return out
}

func streamValues(t *testing.T, db sysdb.SystemDatabase, id string) []string {
	t.Helper()
	all, err := db.StreamList(t.Context(), id)
	require.NoError(t, err)
	out := []string{}
	for _, e := range all {
		out = append(out, fmt.Sprintf("%s/%d=%s", e.Key, e.Offset, e.Value))
	}
	return out
}

func testWorkflowFork(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := workflowWithHistory(t, db, "orig")
	finish(t, db, "orig", owner, `"out"`)

	err := db.WorkflowFork(ctx, sysdb.WorkflowForkParams{OriginalID: "missing", NewID: "f0"})
	require.Equal(t, "missing", asError[*sysdb.NotFoundError](t, err).WorkflowID)

	require.NoError(t, db.WorkflowFork(ctx, sysdb.WorkflowForkParams{
		OriginalID: "orig", NewID: "fork", StartStep: 3,
		ReplacementChildren: map[string]string{"orig-2": "fork-2", "unrelated": "x"},
		ApplicationName:     Ptr("app"),
	}))
	f := get(t, db, "fork")
	require.Equal(t, sysdb.StatusEnqueued, f.Status)
	require.Equal(t, sysdb.InternalQueueName, *f.QueueName)
	require.Equal(t, "orig", *f.ForkedFrom)
	require.Equal(t, "wf", f.Name)
	require.Equal(t, "C", *f.ClassName)
	require.Equal(t, "alice", *f.AuthenticatedUser)
	require.Equal(t, "v1", *f.ApplicationVersion, "the original's version unless another is given")
	require.Equal(t, "app", *f.ApplicationName, "an unowned original's fork is the forker's")
	require.JSONEq(t, `{"team":"x"}`, *f.Attributes)
	require.Equal(t, `{"positionalArgs":[1],"namedArgs":{}}`, *f.Inputs)
	require.Equal(t, sysdb.PortableJSON, *f.Serialization)
	require.Nil(t, f.Output)
	require.Nil(t, f.OwnerXID)
	require.Nil(t, f.TimeoutMS)
	require.Zero(t, f.RecoveryAttempts)
	require.True(t, get(t, db, "orig").WasForkedFrom)

	// Below step 3 only.
	require.Equal(t, []int{1, 2}, stepIDs(t, db, "fork"))
	require.Equal(t, "fork-2", *stepAt(t, db, "fork", 2).ChildWorkflowID, "child ids replaced")
	require.Equal(t, `"m1"`, *stepAt(t, db, "fork", 1).Output)
	require.Equal(t, []string{"1:a", "1:c"}, historyIDs(t, db, "fork"))
	require.Equal(t, map[string]string{"a": `"a1"`, "c": `"c1"`}, eventMap(t, db, "fork"))
	require.Equal(t, []string{`s/0="s1"`}, streamValues(t, db, "fork"))
	require.Empty(t, messages(t, db, "fork"), "messages are not copied")
	// The original is untouched.
	require.Equal(t, []int{1, 2, 3, 4}, stepIDs(t, db, "orig"))
	require.Equal(t, "orig-2", *stepAt(t, db, "orig", 2).ChildWorkflowID)

	// The fork waits on its queue for a worker.
	claimOne(t, db, sysdb.InternalQueueName, "fork")

	// From the start, onto a queue of choice: nothing copied.
	require.NoError(t, db.WorkflowFork(ctx, sysdb.WorkflowForkParams{
		OriginalID: "orig", NewID: "fork-1", StartStep: 1, QueueName: "q", QueuePartitionKey: Ptr("p"),
		ApplicationVersion: Ptr("v2"), TimeoutMS: Ptr(int64(5000)),
	}))
	f = get(t, db, "fork-1")
	require.Equal(t, "q", *f.QueueName)
	require.Equal(t, "p", *f.QueuePartitionKey)
	require.Equal(t, "v2", *f.ApplicationVersion)
	require.Equal(t, int64(5000), *f.TimeoutMS)
	require.Nil(t, f.ApplicationName, "no owner given, none taken")
	require.Empty(t, stepIDs(t, db, "fork-1"))
	require.Empty(t, eventMap(t, db, "fork-1"))
	require.Empty(t, streamValues(t, db, "fork-1"))
}

func testWorkflowForkIdempotent(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := workflowWithHistory(t, db, "orig")
	finish(t, db, "orig", owner, `1`)
	fork := sysdb.WorkflowForkParams{OriginalID: "orig", NewID: "fork", StartStep: 4}
	require.NoError(t, db.WorkflowFork(ctx, fork))
	require.NoError(t, db.WorkflowFork(ctx, fork), "a repeated fork is the one made")
	require.Equal(t, []int{1, 2, 3}, stepIDs(t, db, "fork"), "copied once")

	start(t, db, "taken")
	fork.NewID = "taken"
	err := db.WorkflowFork(ctx, fork)
	require.Equal(t, "taken", asError[*sysdb.ConflictingWorkflowError](t, err).WorkflowID)
	require.Empty(t, stepIDs(t, db, "taken"))
}

func testWorkflowRewind(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := workflowWithHistory(t, db, "wf")

	err := db.WorkflowRewind(ctx, sysdb.WorkflowRewindParams{WorkflowID: "wf", StartStep: 3})
	active := asError[*sysdb.WorkflowActiveError](t, err)
	require.Equal(t, sysdb.StatusPending, active.Status)
	require.Equal(t, []int{1, 2, 3, 4}, stepIDs(t, db, "wf"), "an active workflow is not cut")
	err = db.WorkflowRewind(ctx, sysdb.WorkflowRewindParams{WorkflowID: "missing", StartStep: 1})
	require.Equal(t, "missing", asError[*sysdb.NotFoundError](t, err).WorkflowID)

	finish(t, db, "wf", owner, `"out"`)
	require.NoError(t, db.WorkflowRewind(ctx, sysdb.WorkflowRewindParams{WorkflowID: "wf", StartStep: 3, ApplicationVersion: Ptr("v2")}))

	w := get(t, db, "wf")
	require.Equal(t, sysdb.StatusEnqueued, w.Status)
	require.Equal(t, sysdb.InternalQueueName, *w.QueueName)
	require.Equal(t, "v2", *w.ApplicationVersion)
	require.Nil(t, w.OwnerXID)
	require.Nil(t, w.Output, "the outcome is gone")
	require.Nil(t, w.CompletedAt)
	require.Nil(t, w.StartedAt)
	require.Zero(t, w.RecoveryAttempts)
	require.Equal(t, `{"positionalArgs":[1],"namedArgs":{}}`, *w.Inputs, "inputs stay")

	require.Equal(t, []int{1, 2}, stepIDs(t, db, "wf"))
	require.Equal(t, []string{"1:a", "1:c"}, historyIDs(t, db, "wf"))
	require.Equal(t, map[string]string{"a": `"a1"`, "c": `"c1"`}, eventMap(t, db, "wf"), "a restored, b unpublished, c untouched")
	require.Equal(t, []string{`s/0="s1"`, `s/1="s3"`}, streamValues(t, db, "wf"), "values stay, the closing marker goes")
	ns := messages(t, db, "wf")
	require.Equal(t, []string{`"m1"`}, bodies(ns), "consumed at or after the cut, or never: gone")

	// It runs again under its id, and can write where it was cut.
	claimed := dequeue(t, db, sysdb.QueueDequeueParams{QueueName: sysdb.InternalQueueName, ApplicationVersion: "v2"})
	require.Equal(t, []string{"wf"}, ids(claimed))
	newOwner := *claimed[0].OwnerXID
	write(t, db, caller("wf", newOwner, 4), "s", `"again"`)
	require.NoError(t, db.EventSet(ctx, sysdb.EventSetParams{Caller: caller("wf", newOwner, 5), Key: "b", Value: `"b5"`}))
	require.Equal(t, `"b5"`, eventMap(t, db, "wf")["b"])

	// From the start, onto another queue; a rewind keeps the version when
	// none is given.
	finish(t, db, "wf", newOwner, `1`)
	require.NoError(t, db.WorkflowRewind(ctx, sysdb.WorkflowRewindParams{WorkflowID: "wf", StartStep: 0, QueueName: "q", QueuePartitionKey: Ptr("p")}))
	w = get(t, db, "wf")
	require.Equal(t, "q", *w.QueueName)
	require.Equal(t, "p", *w.QueuePartitionKey)
	require.Equal(t, "v2", *w.ApplicationVersion)
	require.Empty(t, stepIDs(t, db, "wf"))
	require.Empty(t, eventMap(t, db, "wf"))
	require.Empty(t, messages(t, db, "wf"))
}

// ---------------------------------------------------------------------------
// Attributes

func testWorkflowSetAttributes(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	start(t, db, "wf")
	attrs := func() *string { return get(t, db, "wf").Attributes }

	require.NoError(t, db.WorkflowSetAttributes(ctx, "wf", Ptr(`{"a":1,"b":{"x":1}}`), true), "merging into none")
	require.JSONEq(t, `{"a":1,"b":{"x":1}}`, *attrs())
	require.NoError(t, db.WorkflowSetAttributes(ctx, "wf", Ptr(`{"b":{"y":2},"c":"z"}`), true))
	require.JSONEq(t, `{"a":1,"b":{"y":2},"c":"z"}`, *attrs(), "top-level keys replaced, others kept")
	require.NoError(t, db.WorkflowSetAttributes(ctx, "wf", Ptr(`{"d":true}`), false))
	require.JSONEq(t, `{"d":true}`, *attrs())
	require.NoError(t, db.WorkflowSetAttributes(ctx, "wf", nil, false))
	require.Nil(t, attrs())

	require.Error(t, db.WorkflowSetAttributes(ctx, "wf", nil, true), "nothing to merge")
	require.Error(t, db.WorkflowSetAttributes(ctx, "wf", Ptr(`[1]`), false))
	require.Error(t, db.WorkflowSetAttributes(ctx, "wf", Ptr(`{"a":`), true))
	require.Nil(t, attrs())
	err := db.WorkflowSetAttributes(ctx, "missing", Ptr(`{}`), false)
	require.Equal(t, "missing", asError[*sysdb.NotFoundError](t, err).WorkflowID)
}

// ---------------------------------------------------------------------------
// A child's record in its parent

func testWorkflowInsertParentStep(t *testing.T, db sysdb.SystemDatabase) {
	ctx := t.Context()
	owner := start(t, db, "parent")
	child := func(id, name string, c sysdb.StepCaller) sysdb.WorkflowInsertParams {
		return sysdb.WorkflowInsertParams{
			ID: id, Name: name, Status: sysdb.StatusEnqueued, QueueName: Ptr("q"), CreatorXID: Token(), ExecutorID: "local",
			ParentWorkflowID: Ptr(c.WorkflowID), ParentStep: &c,
		}
	}
	first := child("parent-1", "childwf", caller("parent", owner, 1))
	res, err := db.WorkflowInsert(ctx, first)
	require.NoError(t, err)
	require.True(t, res.Created)
	s := stepAt(t, db, "parent", 1)
	require.Equal(t, "childwf", s.Name)
	require.Equal(t, "parent-1", *s.ChildWorkflowID)
	require.Nil(t, s.Output)
	require.NotNil(t, s.StartedAt)
	require.Equal(t, "parent", *get(t, db, "parent-1").ParentWorkflowID)

	// A retry (same request) and another run's start of the same child
	// are both the child recorded.
	res, err = db.WorkflowInsert(ctx, first)
	require.NoError(t, err)
	require.True(t, res.Created)
	again := child("parent-1", "childwf", caller("parent", owner, 1))
	res, err = db.WorkflowInsert(ctx, again)
	require.NoError(t, err)
	require.False(t, res.Created)

	// Another child at that step: non-determinism, and no child.
	_, err = db.WorkflowInsert(ctx, child("parent-other", "childwf", caller("parent", owner, 1)))
	unexpected := asError[*sysdb.UnexpectedStepError](t, err)
	require.Equal(t, 1, unexpected.FunctionID)
	require.Contains(t, unexpected.Recorded, "parent-1")
	asError[*sysdb.NotFoundError](t, getErr(t, db, "parent-other"))
	// A plain step there is not a child either.
	require.NoError(t, db.StepRecord(ctx, step("parent", owner, 2, "charge", `1`)))
	_, err = db.WorkflowInsert(ctx, child("parent-2", "childwf", caller("parent", owner, 2)))
	require.Equal(t, 2, asError[*sysdb.UnexpectedStepError](t, err).FunctionID)
	asError[*sysdb.NotFoundError](t, getErr(t, db, "parent-2"))

	// A run that no longer owns the parent starts nothing.
	_, err = db.WorkflowInsert(ctx, child("parent-3", "childwf", caller("parent", Token(), 3)))
	require.Equal(t, "parent", asError[*sysdb.FencedError](t, err).WorkflowID)
	asError[*sysdb.NotFoundError](t, getErr(t, db, "parent-3"))
	require.Nil(t, stepAt(t, db, "parent", 3))
	_, err = db.WorkflowInsert(ctx, child("orphan-1", "childwf", caller("no-parent", owner, 1)))
	require.Equal(t, "no-parent", asError[*sysdb.NotFoundError](t, err).WorkflowID)
	asError[*sysdb.NotFoundError](t, getErr(t, db, "orphan-1"))

	// The parent named twice must be the same.
	mismatch := child("parent-4", "childwf", caller("parent", owner, 4))
	mismatch.ParentWorkflowID = Ptr("someone-else")
	_, err = db.WorkflowInsert(ctx, mismatch)
	require.Error(t, err)
	asError[*sysdb.NotFoundError](t, getErr(t, db, "parent-4"))

	// A direct (PENDING) child, and the parent's steps in order.
	direct := child("parent-5", "childwf", caller("parent", owner, 5))
	direct.Status, direct.QueueName = sysdb.StatusPending, nil
	res, err = db.WorkflowInsert(ctx, direct)
	require.NoError(t, err)
	require.True(t, res.Created)
	require.NotNil(t, res.OwnerXID)
	require.Equal(t, []int{1, 2, 5}, stepIDs(t, db, "parent"))
}

func getErr(t *testing.T, db sysdb.SystemDatabase, id string) error {
	_, err := db.WorkflowGet(t.Context(), id)
	return err
}
