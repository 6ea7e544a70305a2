package sysdb

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var _ Communication = (*Postgres)(nil)

// streamWriteAttempts bounds the retries of a stream write that lost its
// offset to a writer that does not take the workflow's lock.
const streamWriteAttempts = 10

// fenced runs one statement for caller in a single round trip: a batch that
// first locks the caller's workflow row (WorkflowOwnerLock), then runs
// query, in one implicit transaction. Under READ COMMITTED the statement's
// snapshot is taken once the lock is held, so it sees every write of the
// runs that held the lock before it. The statement must itself check that
// $2 owns $1 before writing: it runs whatever the lock found, and the
// caller's NotFoundError or FencedError is returned after. Without a caller
// the statement runs alone. query must return exactly one row, scanned into
// dest.
func (p *Postgres) fenced(ctx context.Context, what string, caller *StepCaller, query string, args []any, dest ...any) error {
	return p.retry(ctx, what, func(ctx context.Context) error {
		if caller == nil {
			return p.pool.QueryRow(ctx, query, args...).Scan(dest...)
		}
		var b pgx.Batch
		b.Queue(p.sql("WorkflowOwnerLock"), caller.WorkflowID)
		b.Queue(query, args...)
		br := p.pool.SendBatch(ctx, &b)
		var owner *string
		lockErr := br.QueryRow().Scan(&owner)
		fence := ownerError(*caller, lockErr, owner)
		err := br.QueryRow().Scan(dest...)
		if closeErr := br.Close(); err == nil {
			err = closeErr
		}
		if fence != nil {
			return fence
		}
		return err
	})
}

// ownerError turns the result of WorkflowOwnerLock into the caller's
// NotFoundError or FencedError, or the statement's own error.
func ownerError(caller StepCaller, err error, owner *string) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &NotFoundError{WorkflowID: caller.WorkflowID}
	case err != nil:
		return err
	case owner == nil || *owner != caller.OwnerXID:
		return &FencedError{WorkflowID: caller.WorkflowID}
	}
	return nil
}

func checkCaller(c *StepCaller) error {
	if c.WorkflowID == "" || c.OwnerXID == "" {
		return errors.New("a caller needs a workflow id and an owner token")
	}
	if c.FunctionID < 0 {
		return fmt.Errorf("workflow %s: step id %d: step ids start at 0", c.WorkflowID, c.FunctionID)
	}
	return nil
}

// stepGate is what the StepGate CTEs report about a write recorded as a
// step.
type stepGate struct {
	fenceOK  bool
	recorded *string // the name recorded at the step before this call, when the snapshot saw one
	stepped  bool    // this call recorded the step
	blocked  bool
}

func (g *stepGate) dest() []any { return []any{&g.fenceOK, &g.recorded, &g.stepped, &g.blocked} }

// stepGateArgs are StepGate's parameters $1 to $6.
func stepGateArgs(c *StepCaller, name string) []any {
	if c == nil {
		return []any{nil, nil, 0, name, false, nil}
	}
	return []any{c.WorkflowID, c.OwnerXID, c.FunctionID, name, !c.InStep, c.ApplicationName}
}

// replayed decides what a gated write that did not record its step met: the
// same step recorded before (a replay: true), another step there
// (UnexpectedStepError), or nothing (the write was blocked: false). A
// record the snapshot missed (made concurrently by a writer that does not
// take the lock) is read back.
func (p *Postgres) replayed(ctx context.Context, c *StepCaller, name string, g stepGate) (bool, error) {
	if c == nil || c.InStep || g.stepped {
		return false, nil
	}
	if g.recorded == nil && !g.blocked {
		st, err := p.StepGet(ctx, c.WorkflowID, c.FunctionID)
		if err != nil {
			return false, err
		}
		if st == nil {
			return false, fmt.Errorf("workflow %s step %d: neither recorded nor found", c.WorkflowID, c.FunctionID)
		}
		g.recorded = &st.Name
	}
	if g.recorded == nil {
		return false, nil
	}
	if *g.recorded != name {
		return false, &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: *g.recorded, Attempted: name}
	}
	return true, nil
}

// topicOrNull is how a topic is stored: nil is NullTopic.
func topicOrNull(topic *string) string {
	if topic == nil {
		return NullTopic
	}
	return *topic
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// MessageSend implements Communication. Message ids are drawn before the
// first attempt, so a send retried after a lost acknowledgement inserts
// nothing twice.
func (p *Postgres) MessageSend(ctx context.Context, in MessageSendParams) (bool, error) {
	if in.Caller != nil {
		if err := checkCaller(in.Caller); err != nil {
			return false, fmt.Errorf("send: %w", err)
		}
	} else if len(in.Messages) == 0 {
		return false, nil
	}
	name := in.StepName
	if name == "" {
		name = StepNameSend
	}
	n := len(in.Messages)
	dests, topics, messages := make([]string, n), make([]string, n), make([]string, n)
	serializations, randomIDs, keys := make([]*string, n), make([]string, n), make([]*string, n)
	for i, m := range in.Messages {
		if m.DestinationID == "" {
			return false, errors.New("send: a message needs a destination")
		}
		dests[i], topics[i], messages[i] = m.DestinationID, topicOrNull(m.Topic), m.Message
		serializations[i], randomIDs[i] = m.Serialization, newUUID()
		if m.IdempotencyKey != "" {
			keys[i] = &m.IdempotencyKey
		}
	}
	var g stepGate
	var missing []string
	var sent int64
	args := append(stepGateArgs(in.Caller, name), dests, topics, messages, serializations, randomIDs, keys, in.SendToForks)
	err := p.fenced(ctx, "send messages", in.Caller, p.sql("MessageSend"), args, append(g.dest(), &missing, &sent)...)
	if err != nil {
		return false, err
	}
	replayed, err := p.replayed(ctx, in.Caller, name, g)
	if err != nil || replayed {
		return replayed, err
	}
	if len(missing) > 0 {
		return false, &NotFoundError{WorkflowID: missing[0]}
	}
	return false, nil
}

// MessageConsume implements Communication. A recv is always recorded: from
// inside a step (Caller.InStep) it is refused, as the SDKs refuse it.
func (p *Postgres) MessageConsume(ctx context.Context, in MessageConsumeParams) (Received, error) {
	c := in.Caller
	if err := checkCaller(&c); err != nil {
		return Received{}, fmt.Errorf("recv: %w", err)
	}
	if c.InStep {
		return Received{}, fmt.Errorf("workflow %s: recv cannot be called from inside a step", c.WorkflowID)
	}
	var fenceOK, stepped, consumed bool
	var recordedName, recordedOut, recordedSer, out, ser *string
	args := []any{c.WorkflowID, c.OwnerXID, c.FunctionID, topicOrNull(in.Topic), in.EmptyOutput, in.EmptySerialization, c.ApplicationName, in.RequireMessage, in.StartedAtMS}
	err := p.fenced(ctx, "receive a message for "+c.WorkflowID, &c, p.sql("MessageConsume"), args,
		&fenceOK, &recordedName, &recordedOut, &recordedSer, &stepped, &consumed, &out, &ser)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// A record made meanwhile by a writer that does not take the lock:
		// the statement failed, so nothing was consumed.
		st, getErr := p.StepGet(ctx, c.WorkflowID, c.FunctionID)
		if getErr != nil || st == nil {
			return Received{}, errors.Join(err, getErr)
		}
		recordedName, recordedOut, recordedSer = &st.Name, st.Output, st.Serialization
	} else if err != nil {
		return Received{}, err
	}
	if !stepped {
		if recordedName == nil && in.RequireMessage && fenceOK {
			return Received{}, nil // nothing waits yet
		}
		if recordedName == nil {
			return Received{}, fmt.Errorf("workflow %s step %d: recv neither recorded nor found", c.WorkflowID, c.FunctionID)
		}
		if *recordedName != StepNameRecv {
			return Received{}, &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: *recordedName, Attempted: StepNameRecv}
		}
		// The record is either a message or what was recorded for none.
		if sameText(recordedOut, in.EmptyOutput) && sameText(recordedSer, in.EmptySerialization) {
			return Received{Replayed: true}, nil
		}
		return Received{Received: true, Message: recordedOut, Serialization: recordedSer, Replayed: true}, nil
	}
	if !consumed {
		return Received{}, nil
	}
	return Received{Received: true, Message: out, Serialization: ser}, nil
}

// MessageList implements Communication.
func (p *Postgres) MessageList(ctx context.Context, destinationID string) ([]Notification, error) {
	return collectAll(ctx, p, "list messages of "+destinationID, p.sql("MessageList"), []any{destinationID},
		func(r pgx.CollectableRow) (Notification, error) {
			var n Notification
			var consumedBy *int32
			err := r.Scan(&n.DestinationID, &n.Topic, &n.Message, &n.Serialization, &n.MessageID, &n.CreatedAt, &n.Consumed, &consumedBy)
			if n.Topic != nil && *n.Topic == NullTopic {
				n.Topic = nil
			}
			n.ConsumedByFunctionID = intPtr(consumedBy)
			return n, err
		})
}

// collectAll runs a read and collects its rows, retried on connection errors.
func collectAll[T any](ctx context.Context, p *Postgres, what, query string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	var out []T
	err := p.retry(ctx, what, func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scan)
		return err
	})
	return out, err
}

// SleepRecord implements Communication. From inside a step (Caller.InStep)
// nothing is recorded: the wake time is the database clock's now plus the
// duration.
func (p *Postgres) SleepRecord(ctx context.Context, in SleepParams) (SleepTimes, error) {
	caller := in.Caller
	if err := checkCaller(&caller); err != nil {
		return SleepTimes{}, fmt.Errorf("sleep: %w", err)
	}
	durationMS := max(in.DurationMS, 0)
	var fenceOK bool
	var recordedName, output *string
	var nowMS int64
	switch in.Format {
	case WakeEpochSeconds, WakeEpochMS:
	default:
		return SleepTimes{}, fmt.Errorf("sleep: unknown wake time format %d", in.Format)
	}
	args := []any{caller.WorkflowID, caller.OwnerXID, caller.FunctionID, durationMS, !caller.InStep, caller.ApplicationName, in.ProjectCompletion,
		in.Format == WakeEpochMS}
	err := p.fenced(ctx, "record a sleep of "+caller.WorkflowID, &caller, p.sql("SleepRecord"), args,
		&fenceOK, &recordedName, &output, &nowMS)
	if err != nil {
		return SleepTimes{}, err
	}
	if caller.InStep {
		return SleepTimes{WakeAtMS: nowMS + durationMS, RemainingMS: durationMS, NowMS: nowMS}, nil
	}
	if recordedName != nil && *recordedName != StepNameSleep {
		return SleepTimes{}, &UnexpectedStepError{WorkflowID: caller.WorkflowID, FunctionID: caller.FunctionID, Recorded: *recordedName, Attempted: StepNameSleep}
	}
	if output == nil {
		// Recorded concurrently by a writer that does not take the lock.
		st, err := p.StepGet(ctx, caller.WorkflowID, caller.FunctionID)
		if err != nil {
			return SleepTimes{}, err
		}
		if st == nil || st.Name != StepNameSleep {
			return SleepTimes{}, fmt.Errorf("workflow %s step %d: sleep neither recorded nor found", caller.WorkflowID, caller.FunctionID)
		}
		output = st.Output
	}
	if output == nil {
		return SleepTimes{}, fmt.Errorf("workflow %s step %d: recorded sleep has no wake time", caller.WorkflowID, caller.FunctionID)
	}
	wakeAt, err := parseWakeTime(*output)
	if err != nil {
		return SleepTimes{}, fmt.Errorf("workflow %s step %d: %w", caller.WorkflowID, caller.FunctionID, err)
	}
	return SleepTimes{WakeAtMS: wakeAt, RemainingMS: max(wakeAt-nowMS, 0), NowMS: nowMS}, nil
}

// wakeMSThreshold splits the two recorded shapes by magnitude: epoch
// milliseconds pass it from March 1973 on, epoch seconds not before the year
// 5138.
const wakeMSThreshold = 1e11

// parseWakeTime reads a recorded DBOS.sleep wake time into epoch
// milliseconds, whichever SDK wrote it: JSON epoch seconds (DBOS Python, a
// float; an integer is taken too) or JSON epoch milliseconds (DBOS
// TypeScript, an integer), told apart by magnitude: a value of at least
// 1e11 is milliseconds.
func parseWakeTime(output string) (int64, error) {
	var v float64
	if err := json.Unmarshal([]byte(output), &v); err != nil {
		return 0, fmt.Errorf("recorded sleep %q is not an epoch time: %w", output, err)
	}
	if v >= wakeMSThreshold {
		return int64(math.Round(v)), nil
	}
	return int64(math.Round(v * 1000)), nil
}

// EventSet implements Communication.
func (p *Postgres) EventSet(ctx context.Context, in EventSetParams) error {
	c := in.Caller
	if err := checkCaller(&c); err != nil {
		return fmt.Errorf("set event: %w", err)
	}
	var g stepGate
	var written bool
	args := append(stepGateArgs(&c, StepNameSetEvent), in.Key, in.Value, in.Serialization)
	err := p.fenced(ctx, "set event "+in.Key+" of "+c.WorkflowID, &c, p.sql("EventSet"), args, append(g.dest(), &written)...)
	if err != nil {
		return err
	}
	if written {
		p.notes.add(ChannelWorkflowEvents, c.WorkflowID+"::"+in.Key)
	}
	_, err = p.replayed(ctx, &c, StepNameSetEvent, g)
	return err
}

// EventGet implements Communication.
func (p *Postgres) EventGet(ctx context.Context, workflowID, key string) (*Payload, error) {
	var v Payload
	err := p.retry(ctx, "get event "+key+" of "+workflowID, func(ctx context.Context) error {
		return p.pool.QueryRow(ctx, p.sql("EventGet"), workflowID, key).Scan(&v.Value, &v.Serialization)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// EventList implements Communication.
func (p *Postgres) EventList(ctx context.Context, workflowID string) ([]Event, error) {
	return collectAll(ctx, p, "list events of "+workflowID, p.sql("EventList"), []any{workflowID},
		func(r pgx.CollectableRow) (Event, error) {
			var e Event
			err := r.Scan(&e.Key, &e.Value, &e.Serialization)
			return e, err
		})
}

// EventHistory implements Communication.
func (p *Postgres) EventHistory(ctx context.Context, workflowID string) ([]EventHistoryEntry, error) {
	return collectAll(ctx, p, "list event history of "+workflowID, p.sql("EventHistory"), []any{workflowID},
		func(r pgx.CollectableRow) (EventHistoryEntry, error) {
			var e EventHistoryEntry
			var fid int32
			err := r.Scan(&fid, &e.Key, &e.Value, &e.Serialization)
			e.FunctionID = int(fid)
			return e, err
		})
}

// StreamWrite implements Communication. A write or a close after the
// stream's closing marker is appended like any other (DBOS Python 3.4
// accepts it); readers stop at the first marker.
func (p *Postgres) StreamWrite(ctx context.Context, in StreamWriteParams) error {
	c := in.Caller
	if err := checkCaller(&c); err != nil {
		return fmt.Errorf("write stream: %w", err)
	}
	name, value, serialization := StepNameWriteStream, in.Value, in.Serialization
	if in.Close {
		name, value, serialization = StepNameCloseStream, StreamClosedValue, ptrTo(PortableJSON)
	}
	var g stepGate
	var written bool
	args := append(stepGateArgs(&c, name), in.Key, value, serialization)
	var err error
	for attempt := 1; ; attempt++ {
		err = p.fenced(ctx, "write stream "+in.Key+" of "+c.WorkflowID, &c, p.sql("StreamWrite"), args, append(g.dest(), &written)...)
		var pgErr *pgconn.PgError
		if attempt < streamWriteAttempts && errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "streams_pkey" {
			continue // another writer took the offset
		}
		break
	}
	if err != nil {
		return err
	}
	if written {
		p.notes.add(ChannelStreams, c.WorkflowID+"::"+in.Key)
		return nil
	}
	_, err = p.replayed(ctx, &c, name, g)
	return err
}

func ptrTo[T any](v T) *T { return &v }

// isStreamClosed mirrors the StreamClosed query fragment.
func isStreamClosed(value string, serialization *string) bool {
	return (value == StreamClosedValue && serialization != nil && *serialization == PortableJSON) ||
		value == streamClosedBare
}

// streamClosedBare is the closing marker as the Go SDK writes it, untagged.
const streamClosedBare = "__DBOS_STREAM_CLOSED__"

// StreamRead implements Communication. A limit of 0 or less reads to the
// end. The read looks one offset past the limit, so a closing marker right
// after the values read is reported with them.
func (p *Postgres) StreamRead(ctx context.Context, workflowID, key string, offset, limit int) (StreamRead, error) {
	if offset < 0 || offset > math.MaxInt32 {
		return StreamRead{}, fmt.Errorf("read stream %s of %s: offset %d out of range", key, workflowID, offset)
	}
	var upTo *int32
	if limit > 0 {
		end := int32(min(int64(offset)+int64(limit), math.MaxInt32))
		upTo = &end
	}
	var out StreamRead
	err := p.retry(ctx, "read stream "+key+" of "+workflowID, func(ctx context.Context) error {
		out = StreamRead{}
		rows, err := p.pool.Query(ctx, p.sql("StreamRead"), workflowID, key, int32(offset), upTo)
		if err != nil {
			return err
		}
		var status, value, serialization *string
		var off, fid *int32
		done := false
		_, err = pgx.ForEachRow(rows, []any{&status, &off, &value, &serialization, &fid}, func() error {
			if out.WriterStatus == nil {
				out.WriterStatus = ptrTo(deref(status))
			}
			next := offset + len(out.Values)
			if done || off == nil || int(*off) != next {
				done = true
				return nil
			}
			if isStreamClosed(*value, serialization) {
				out.Closed, done = true, true
				return nil
			}
			if limit > 0 && len(out.Values) == limit {
				done = true
				return nil
			}
			out.Values = append(out.Values, StreamEntry{Key: key, Offset: next, Value: *value, Serialization: serialization, FunctionID: int(*fid)})
			return nil
		})
		return err
	})
	return out, err
}

// StreamList implements Communication.
func (p *Postgres) StreamList(ctx context.Context, workflowID string) ([]StreamEntry, error) {
	return collectAll(ctx, p, "list streams of "+workflowID, p.sql("StreamList"), []any{workflowID},
		func(r pgx.CollectableRow) (StreamEntry, error) {
			var e StreamEntry
			var off, fid int32
			err := r.Scan(&e.Key, &off, &e.Value, &e.Serialization, &fid)
			e.Offset, e.FunctionID = int(off), int(fid)
			return e, err
		})
}

// StepGet implements Communication.
func (p *Postgres) StepGet(ctx context.Context, workflowID string, functionID int) (*Step, error) {
	var s Step
	err := p.retry(ctx, fmt.Sprintf("get step %d of %s", functionID, workflowID), func(ctx context.Context) error {
		var fid int32
		err := p.pool.QueryRow(ctx, p.sql("StepGet"), workflowID, functionID).Scan(
			&fid, &s.Name, &s.Output, &s.Error, &s.Serialization, &s.ChildWorkflowID, &s.StartedAt, &s.CompletedAt)
		s.FunctionID = int(fid)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// WorkflowFork implements Communication. A fork already made under NewID
// from the same original (an earlier attempt whose acknowledgement was
// lost) is taken as done; another workflow under NewID is a
// ConflictingWorkflowError.
func (p *Postgres) WorkflowFork(ctx context.Context, in WorkflowForkParams) error {
	if in.OriginalID == "" || in.NewID == "" {
		return errors.New("fork: the original and the new id are required")
	}
	if in.StartStep < 0 {
		return fmt.Errorf("fork %s: start step must be 0 or more, not %d", in.OriginalID, in.StartStep)
	}
	queue := in.QueueName
	if queue == "" {
		queue = InternalQueueName
	}
	oldChildren := make([]string, 0, len(in.ReplacementChildren))
	for old := range in.ReplacementChildren {
		oldChildren = append(oldChildren, old)
	}
	sort.Strings(oldChildren)
	newChildren := make([]string, len(oldChildren))
	for i, old := range oldChildren {
		newChildren[i] = in.ReplacementChildren[old]
	}
	var exists, forked bool
	var forkedFrom *string
	err := p.retry(ctx, "fork "+in.OriginalID+" as "+in.NewID, func(ctx context.Context) error {
		return p.pool.QueryRow(ctx, p.sql("WorkflowFork"), in.OriginalID, in.NewID, in.StartStep,
			in.ApplicationVersion, queue, in.QueuePartitionKey, in.TimeoutMS, in.ApplicationName,
			oldChildren, newChildren).Scan(&exists, &forked, &forkedFrom)
	})
	switch {
	case err != nil:
		return err
	case !exists:
		return &NotFoundError{WorkflowID: in.OriginalID}
	case forked:
		p.notes.add(ChannelQueue, queue)
		return nil
	case forkedFrom == nil || *forkedFrom != in.OriginalID:
		return &ConflictingWorkflowError{WorkflowID: in.NewID, Reason: "the id is taken by a workflow that is not a fork of " + in.OriginalID}
	}
	return nil
}

// WorkflowRewind implements Communication.
func (p *Postgres) WorkflowRewind(ctx context.Context, in WorkflowRewindParams) error {
	if in.StartStep < 0 {
		return fmt.Errorf("rewind %s: start step must be 0 or more, not %d", in.WorkflowID, in.StartStep)
	}
	queue := in.QueueName
	if queue == "" {
		queue = InternalQueueName
	}
	var status *string
	var rewound bool
	err := p.retry(ctx, "rewind "+in.WorkflowID, func(ctx context.Context) error {
		return p.pool.QueryRow(ctx, p.sql("WorkflowRewind"), in.WorkflowID, in.StartStep, queue,
			in.QueuePartitionKey, in.ApplicationVersion).Scan(&status, &rewound)
	})
	if err != nil {
		return err
	}
	if rewound {
		p.notes.add(ChannelQueue, queue)
		return nil
	}
	w, err := p.WorkflowGet(ctx, in.WorkflowID)
	if err != nil {
		return err // a NotFoundError when it does not exist
	}
	if w.Active() {
		return &WorkflowActiveError{WorkflowID: in.WorkflowID, Status: w.Status}
	}
	// It ended again between the statement and this read.
	return fmt.Errorf("rewind %s: its status changed during the rewind (now %s); try again", in.WorkflowID, w.Status)
}

// WorkflowSetAttributes implements Communication.
func (p *Postgres) WorkflowSetAttributes(ctx context.Context, workflowID string, attributes *string, merge bool) error {
	if attributes != nil {
		if !isJSONObject(*attributes) {
			return fmt.Errorf("set attributes of %s: not a JSON object: %s", workflowID, strconv.Quote(*attributes))
		}
	} else if merge {
		return fmt.Errorf("set attributes of %s: nothing to merge", workflowID)
	}
	return p.execTouching(ctx, "set attributes of "+workflowID, &NotFoundError{WorkflowID: workflowID},
		p.sql("WorkflowSetAttributes"), workflowID, attributes, merge)
}
