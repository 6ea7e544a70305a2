package sysdb

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

var _ Communication = (*SQLite)(nil)

// The SQLite Communication runs every write made for a running workflow in
// one IMMEDIATE transaction: it holds the file's write lock from its first
// statement, so what it reads (the caller's owner token, the step recorded
// at its id, the last message or stream offset) stands until it commits,
// against this process and every other writer on the file (DBOS apps, the
// CLI). Where Postgres needs a row lock and a statement that re-checks, a
// plain read inside the transaction does here. Rows are written in DBOS
// Python 3.4's SQLite formats (epoch ms integers, booleans as 0/1, ids as
// dashed UUID text) so either side reads the other's.

// commFence checks, inside a write transaction, that caller's run owns its
// workflow: a NotFoundError when the workflow is missing, a FencedError when
// another run (or none) owns it.
func commFence(ctx context.Context, tx *sql.Tx, c StepCaller) error {
	var owner sql.NullString
	err := tx.QueryRowContext(ctx, "SELECT owner_xid FROM workflow_status WHERE workflow_uuid = ?", c.WorkflowID).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &NotFoundError{WorkflowID: c.WorkflowID}
	case err != nil:
		return err
	case !owner.Valid || owner.String != c.OwnerXID:
		return &FencedError{WorkflowID: c.WorkflowID}
	}
	return nil
}

// commRecordedStep reads the step recorded at the caller's id, nil when
// there is none.
func commRecordedStep(ctx context.Context, tx *sql.Tx, workflowID string, functionID int) (*Step, error) {
	s, err := scanCommStep(tx.QueryRowContext(ctx, commStepSelect+" WHERE workflow_uuid = ? AND function_id = ?", workflowID, functionID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}

const commStepSelect = `SELECT function_id, function_name, output, error, serialization, child_workflow_id,
       started_at_epoch_ms, completed_at_epoch_ms
FROM operation_outputs`

func scanCommStep(sc interface{ Scan(...any) error }) (Step, error) {
	var s Step
	var started, completed sql.NullInt64
	err := sc.Scan(&s.FunctionID, &s.Name, &s.Output, &s.Error, &s.Serialization, &s.ChildWorkflowID, &started, &completed)
	if started.Valid {
		s.StartedAt = &started.Int64
	}
	if completed.Valid {
		s.CompletedAt = &completed.Int64
	}
	return s, err
}

// commStep is one operation_outputs row recorded for a communication.
type commStep struct {
	workflowID, name      string
	functionID            int
	output, serialization *string
	startedAt, completed  int64
	applicationName       *string
}

// commInsertStep records a step. Its retention timestamp is written
// explicitly, as DBOS Python stamps every step it records.
func commInsertStep(ctx context.Context, tx *sql.Tx, s commStep) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO operation_outputs (
    workflow_uuid, function_id, function_name, output, serialization,
    started_at_epoch_ms, completed_at_epoch_ms, application_name, retention_timestamp
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.workflowID, s.functionID, s.name, s.output, s.serialization, s.startedAt, s.completed, s.applicationName, nowMS())
	return err
}

// commGate is the start of a write recorded as a step, inside its
// transaction: the fence, then (not InStep) the step at the caller's id.
// replay is true when the step is recorded under name (the write is
// skipped); another name there is an UnexpectedStepError.
func commGate(ctx context.Context, tx *sql.Tx, c StepCaller, name string) (replay bool, err error) {
	if err := commFence(ctx, tx, c); err != nil {
		return false, err
	}
	if c.InStep {
		return false, nil
	}
	recorded, err := commRecordedStep(ctx, tx, c.WorkflowID, c.FunctionID)
	if err != nil || recorded == nil {
		return false, err
	}
	if recorded.Name != name {
		return false, &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: recorded.Name, Attempted: name}
	}
	return true, nil
}

// commRecordGate records the step a gated write made (nothing InStep), as
// an instant, as DBOS records its send, setEvent and stream steps.
func commRecordGate(ctx context.Context, tx *sql.Tx, c StepCaller, name string) error {
	if c.InStep {
		return nil
	}
	now := nowMS()
	return commInsertStep(ctx, tx, commStep{workflowID: c.WorkflowID, functionID: c.FunctionID, name: name,
		startedAt: now, completed: now, applicationName: c.ApplicationName})
}

// forkCopyID is the message id of a fork's copy of a message without an
// idempotency key: a UUID derived from the original's id and the fork, as
// the Postgres backend derives it.
func forkCopyID(randomID, target string) string {
	sum := md5.Sum([]byte(randomID + "::" + target))
	h := hex.EncodeToString(sum[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// MessageSend implements Communication. The rows are stamped as the
// Postgres backend stamps them (see its MessageSend query): each
// destination's new messages get strictly increasing created_at_epoch_ms
// above every message already there, ending at the clock, as DBOS SDKs
// take the oldest message by that column alone.
func (s *SQLite) MessageSend(ctx context.Context, in MessageSendParams) (bool, error) {
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
	randomIDs := make([]string, len(in.Messages))
	for i, m := range in.Messages {
		if m.DestinationID == "" {
			return false, errors.New("send: a message needs a destination")
		}
		randomIDs[i] = newUUID()
	}
	var replayed bool
	var payloads []string
	err := s.write(ctx, "send messages", func(tx *sql.Tx) error {
		replayed, payloads = false, nil
		if in.Caller != nil {
			var err error
			if replayed, err = commGate(ctx, tx, *in.Caller, name); err != nil || replayed {
				return err
			}
		}
		if err := commMissingDestination(ctx, tx, in.Messages); err != nil {
			return err
		}
		forks := map[string][]string{}
		if in.SendToForks {
			var err error
			if forks, err = commForkDescendants(ctx, tx, in.Messages); err != nil {
				return err
			}
		}
		// Every copy, by target in list order (a message before its forks'
		// copies), then each target's stamps.
		type copyOf struct {
			msg    int
			target string
			depth  int
		}
		var copies []copyOf
		perTarget := map[string]int{}
		for i, m := range in.Messages {
			copies = append(copies, copyOf{i, m.DestinationID, 0})
			perTarget[m.DestinationID]++
			for _, f := range forks[m.DestinationID] {
				copies = append(copies, copyOf{i, f, 1})
				perTarget[f]++
			}
		}
		now := nowMS()
		next := map[string]int64{}
		for target, n := range perTarget {
			first := now - int64(n-1)
			var last sql.NullInt64
			if err := tx.QueryRowContext(ctx, "SELECT max(created_at_epoch_ms) FROM notifications WHERE destination_uuid = ?", target).Scan(&last); err != nil {
				return err
			}
			if last.Valid && last.Int64+1 > first {
				first = last.Int64 + 1
			}
			next[target] = first
		}
		for _, c := range copies {
			m := in.Messages[c.msg]
			id := randomIDs[c.msg]
			switch {
			case m.IdempotencyKey != "":
				id = m.IdempotencyKey + "::" + c.target
			case c.depth > 0:
				id = forkCopyID(id, c.target)
			}
			at := next[c.target]
			next[c.target]++
			topic := topicOrNull(m.Topic)
			res, err := tx.ExecContext(ctx, `INSERT INTO notifications
    (destination_uuid, topic, message, serialization, message_uuid, created_at_epoch_ms)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (message_uuid) DO NOTHING`,
				c.target, topic, m.Message, m.Serialization, id, at)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				payloads = append(payloads, c.target+"::"+topic)
			}
		}
		if in.Caller != nil {
			return commRecordGate(ctx, tx, *in.Caller, name)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	s.notes.add(ChannelNotifications, payloads...)
	return replayed, nil
}

// commMissingDestination is a NotFoundError naming the first missing
// destination (by id), which blocks the whole send.
func commMissingDestination(ctx context.Context, tx *sql.Tx, msgs []OutgoingMessage) error {
	seen := map[string]bool{}
	var missing []string
	for _, m := range msgs {
		if seen[m.DestinationID] {
			continue
		}
		seen[m.DestinationID] = true
		var one int
		err := tx.QueryRowContext(ctx, "SELECT 1 FROM workflow_status WHERE workflow_uuid = ?", m.DestinationID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			missing = append(missing, m.DestinationID)
		} else if err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return &NotFoundError{WorkflowID: missing[0]}
	}
	return nil
}

// commForkDescendants maps each destination to every workflow forked from
// it, recursively (forks of forks), sorted, resolved in the send's
// transaction.
func commForkDescendants(ctx context.Context, tx *sql.Tx, msgs []OutgoingMessage) (map[string][]string, error) {
	out := map[string][]string{}
	for _, m := range msgs {
		root := m.DestinationID
		if _, done := out[root]; done {
			continue
		}
		rows, err := tx.QueryContext(ctx, `WITH RECURSIVE forks(id) AS (
    SELECT workflow_uuid FROM workflow_status WHERE forked_from = ?
    UNION
    SELECT w.workflow_uuid FROM workflow_status w JOIN forks f ON w.forked_from = f.id
)
SELECT id FROM forks WHERE id <> ? ORDER BY id`, root, root)
		if err != nil {
			return nil, err
		}
		ids := []string{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out[root] = ids
	}
	return out, nil
}

// MessageConsume implements Communication. A recv is always recorded: from
// inside a step (Caller.InStep) it is refused, as the SDKs refuse it.
func (s *SQLite) MessageConsume(ctx context.Context, in MessageConsumeParams) (Received, error) {
	c := in.Caller
	if err := checkCaller(&c); err != nil {
		return Received{}, fmt.Errorf("recv: %w", err)
	}
	if c.InStep {
		return Received{}, fmt.Errorf("workflow %s: recv cannot be called from inside a step", c.WorkflowID)
	}
	var out Received
	err := s.write(ctx, "receive a message for "+c.WorkflowID, func(tx *sql.Tx) error {
		out = Received{}
		if err := commFence(ctx, tx, c); err != nil {
			return err
		}
		recorded, err := commRecordedStep(ctx, tx, c.WorkflowID, c.FunctionID)
		if err != nil {
			return err
		}
		if recorded != nil {
			if recorded.Name != StepNameRecv {
				return &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: recorded.Name, Attempted: StepNameRecv}
			}
			// The record is either a message or what was recorded for none.
			if sameText(recorded.Output, in.EmptyOutput) && sameText(recorded.Serialization, in.EmptySerialization) {
				out = Received{Replayed: true}
			} else {
				out = Received{Received: true, Message: recorded.Output, Serialization: recorded.Serialization, Replayed: true}
			}
			return nil
		}
		var id, message string
		var serialization *string
		err = tx.QueryRowContext(ctx, `SELECT message_uuid, message, serialization FROM notifications
WHERE destination_uuid = ? AND topic = ? AND NOT consumed
ORDER BY created_at_epoch_ms LIMIT 1`, c.WorkflowID, topicOrNull(in.Topic)).Scan(&id, &message, &serialization)
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if !found && in.RequireMessage {
			return nil // nothing waits yet: nothing recorded
		}
		output, outSer := in.EmptyOutput, in.EmptySerialization
		if found {
			if _, err := tx.ExecContext(ctx, "UPDATE notifications SET consumed = 1, consumed_by_function_id = ? WHERE message_uuid = ?",
				c.FunctionID, id); err != nil {
				return err
			}
			output, outSer = &message, serialization
			out = Received{Received: true, Message: output, Serialization: outSer}
		}
		now := nowMS()
		started := now
		if in.StartedAtMS != nil {
			started = *in.StartedAtMS
		}
		return commInsertStep(ctx, tx, commStep{workflowID: c.WorkflowID, functionID: c.FunctionID, name: StepNameRecv,
			output: output, serialization: outSer, startedAt: started, completed: now, applicationName: c.ApplicationName})
	})
	if err != nil {
		return Received{}, err
	}
	return out, nil
}

// MessageList implements Communication.
func (s *SQLite) MessageList(ctx context.Context, destinationID string) ([]Notification, error) {
	var out []Notification
	err := s.read(ctx, "list messages of "+destinationID, func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, `SELECT destination_uuid, topic, message, serialization, message_uuid, created_at_epoch_ms,
       consumed, consumed_by_function_id
FROM notifications
WHERE destination_uuid = ?
ORDER BY created_at_epoch_ms, message_uuid`, destinationID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n Notification
			var consumedBy sql.NullInt64
			if err := rows.Scan(&n.DestinationID, &n.Topic, &n.Message, &n.Serialization, &n.MessageID, &n.CreatedAt, &n.Consumed, &consumedBy); err != nil {
				return err
			}
			if n.Topic != nil && *n.Topic == NullTopic {
				n.Topic = nil
			}
			if consumedBy.Valid {
				n.ConsumedByFunctionID = ptrTo(int(consumedBy.Int64))
			}
			out = append(out, n)
		}
		return rows.Err()
	})
	return out, err
}

// formatWakeTime is a wake time as the SDK that reads it back records it:
// DBOS Python a JSON float of epoch seconds (with a fraction, as Python
// prints a float), DBOS TypeScript a JSON integer of epoch ms.
func formatWakeTime(wakeMS int64, format WakeTimeFormat) string {
	if format == WakeEpochMS {
		return strconv.FormatInt(wakeMS, 10)
	}
	v := strconv.FormatFloat(float64(wakeMS)/1000, 'f', -1, 64)
	if !strings.Contains(v, ".") {
		v += ".0"
	}
	return v
}

// SleepRecord implements Communication. The clock is read once, so a
// projected span is exactly the duration.
func (s *SQLite) SleepRecord(ctx context.Context, in SleepParams) (SleepTimes, error) {
	c := in.Caller
	if err := checkCaller(&c); err != nil {
		return SleepTimes{}, fmt.Errorf("sleep: %w", err)
	}
	switch in.Format {
	case WakeEpochSeconds, WakeEpochMS:
	default:
		return SleepTimes{}, fmt.Errorf("sleep: unknown wake time format %d", in.Format)
	}
	durationMS := max(in.DurationMS, 0)
	var out SleepTimes
	err := s.write(ctx, "record a sleep of "+c.WorkflowID, func(tx *sql.Tx) error {
		now := nowMS()
		out = SleepTimes{WakeAtMS: now + durationMS, RemainingMS: durationMS, NowMS: now}
		if err := commFence(ctx, tx, c); err != nil {
			return err
		}
		if c.InStep {
			return nil
		}
		recorded, err := commRecordedStep(ctx, tx, c.WorkflowID, c.FunctionID)
		if err != nil {
			return err
		}
		if recorded == nil {
			completed := now
			if in.ProjectCompletion {
				completed = now + durationMS
			}
			return commInsertStep(ctx, tx, commStep{workflowID: c.WorkflowID, functionID: c.FunctionID, name: StepNameSleep,
				output: ptrTo(formatWakeTime(now+durationMS, in.Format)), serialization: ptrTo(PortableJSON),
				startedAt: now, completed: completed, applicationName: c.ApplicationName})
		}
		if recorded.Name != StepNameSleep {
			return &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: recorded.Name, Attempted: StepNameSleep}
		}
		if recorded.Output == nil {
			return &nonRetryable{fmt.Errorf("workflow %s step %d: recorded sleep has no wake time", c.WorkflowID, c.FunctionID)}
		}
		wakeAt, err := parseWakeTime(*recorded.Output)
		if err != nil {
			return &nonRetryable{fmt.Errorf("workflow %s step %d: %w", c.WorkflowID, c.FunctionID, err)}
		}
		out = SleepTimes{WakeAtMS: wakeAt, RemainingMS: max(wakeAt-now, 0), NowMS: now}
		return nil
	})
	if err != nil {
		return SleepTimes{}, err
	}
	return out, nil
}

// EventSet implements Communication.
func (s *SQLite) EventSet(ctx context.Context, in EventSetParams) error {
	c := in.Caller
	if err := checkCaller(&c); err != nil {
		return fmt.Errorf("set event: %w", err)
	}
	var written bool
	err := s.write(ctx, "set event "+in.Key+" of "+c.WorkflowID, func(tx *sql.Tx) error {
		written = false
		if replay, err := commGate(ctx, tx, c, StepNameSetEvent); err != nil || replay {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO workflow_events (workflow_uuid, key, value, serialization) VALUES (?, ?, ?, ?)
ON CONFLICT (workflow_uuid, key) DO UPDATE SET value = excluded.value, serialization = excluded.serialization`,
			c.WorkflowID, in.Key, in.Value, in.Serialization); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO workflow_events_history (workflow_uuid, function_id, key, value, serialization)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (workflow_uuid, function_id, key) DO UPDATE SET value = excluded.value, serialization = excluded.serialization`,
			c.WorkflowID, c.FunctionID, in.Key, in.Value, in.Serialization); err != nil {
			return err
		}
		written = true
		return commRecordGate(ctx, tx, c, StepNameSetEvent)
	})
	if err != nil {
		return err
	}
	if written {
		s.notes.add(ChannelWorkflowEvents, c.WorkflowID+"::"+in.Key)
	}
	return nil
}

// EventGet implements Communication.
func (s *SQLite) EventGet(ctx context.Context, workflowID, key string) (*Payload, error) {
	var v *Payload
	err := s.read(ctx, "get event "+key+" of "+workflowID, func(tx *sql.Tx) error {
		var p Payload
		err := tx.QueryRowContext(ctx, "SELECT value, serialization FROM workflow_events WHERE workflow_uuid = ? AND key = ?",
			workflowID, key).Scan(&p.Value, &p.Serialization)
		if errors.Is(err, sql.ErrNoRows) {
			v = nil
			return nil
		}
		v = &p
		return err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// EventList implements Communication.
func (s *SQLite) EventList(ctx context.Context, workflowID string) ([]Event, error) {
	return commCollect(ctx, s, "list events of "+workflowID,
		"SELECT key, value, serialization FROM workflow_events WHERE workflow_uuid = ? ORDER BY key", []any{workflowID},
		func(r *sql.Rows) (Event, error) {
			var e Event
			err := r.Scan(&e.Key, &e.Value, &e.Serialization)
			return e, err
		})
}

// EventHistory implements Communication.
func (s *SQLite) EventHistory(ctx context.Context, workflowID string) ([]EventHistoryEntry, error) {
	return commCollect(ctx, s, "list event history of "+workflowID,
		`SELECT function_id, key, value, serialization FROM workflow_events_history
WHERE workflow_uuid = ? ORDER BY function_id, key`, []any{workflowID},
		func(r *sql.Rows) (EventHistoryEntry, error) {
			var e EventHistoryEntry
			err := r.Scan(&e.FunctionID, &e.Key, &e.Value, &e.Serialization)
			return e, err
		})
}

// commCollect runs a read and collects its rows from one snapshot.
func commCollect[T any](ctx context.Context, s *SQLite, what, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	var out []T
	err := s.read(ctx, what, func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}

// StreamWrite implements Communication. The offset is the next free one,
// read in the write's transaction, which no other writer can interleave.
// As on Postgres (and DBOS Python 3.4), a write after the closing marker is
// appended and never read.
func (s *SQLite) StreamWrite(ctx context.Context, in StreamWriteParams) error {
	c := in.Caller
	if err := checkCaller(&c); err != nil {
		return fmt.Errorf("write stream: %w", err)
	}
	name, value, serialization := StepNameWriteStream, in.Value, in.Serialization
	if in.Close {
		name, value, serialization = StepNameCloseStream, StreamClosedValue, ptrTo(PortableJSON)
	}
	var written bool
	err := s.write(ctx, "write stream "+in.Key+" of "+c.WorkflowID, func(tx *sql.Tx) error {
		written = false
		if replay, err := commGate(ctx, tx, c, name); err != nil || replay {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO streams (workflow_uuid, key, value, "offset", function_id, serialization)
VALUES (?1, ?2, ?3, COALESCE((SELECT max("offset") FROM streams WHERE workflow_uuid = ?1 AND key = ?2), -1) + 1, ?4, ?5)`,
			c.WorkflowID, in.Key, value, c.FunctionID, serialization); err != nil {
			return err
		}
		written = true
		return commRecordGate(ctx, tx, c, name)
	})
	if err != nil {
		return err
	}
	if written {
		s.notes.add(ChannelStreams, c.WorkflowID+"::"+in.Key)
	}
	return nil
}

// StreamRead implements Communication. A limit of 0 or less reads to the
// end. The read looks one offset past the limit, so a closing marker right
// after the values read is reported with them.
func (s *SQLite) StreamRead(ctx context.Context, workflowID, key string, offset, limit int) (StreamRead, error) {
	if offset < 0 || offset > math.MaxInt32 {
		return StreamRead{}, fmt.Errorf("read stream %s of %s: offset %d out of range", key, workflowID, offset)
	}
	var upTo *int64
	if limit > 0 {
		upTo = ptrTo(min(int64(offset)+int64(limit), math.MaxInt32))
	}
	var out StreamRead
	err := s.read(ctx, "read stream "+key+" of "+workflowID, func(tx *sql.Tx) error {
		out = StreamRead{}
		var status sql.NullString
		err := tx.QueryRowContext(ctx, "SELECT status FROM workflow_status WHERE workflow_uuid = ?", workflowID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		out.WriterStatus = ptrTo(status.String)
		rows, err := tx.QueryContext(ctx, `SELECT "offset", value, serialization, function_id FROM streams
WHERE workflow_uuid = ? AND key = ? AND "offset" >= ? AND (? IS NULL OR "offset" <= ?)
ORDER BY "offset"`, workflowID, key, offset, upTo, upTo)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var off, fid int
			var value string
			var serialization *string
			if err := rows.Scan(&off, &value, &serialization, &fid); err != nil {
				return err
			}
			if off != offset+len(out.Values) {
				break
			}
			if isStreamClosed(value, serialization) {
				out.Closed = true
				break
			}
			if limit > 0 && len(out.Values) == limit {
				break
			}
			out.Values = append(out.Values, StreamEntry{Key: key, Offset: off, Value: value, Serialization: serialization, FunctionID: fid})
		}
		return rows.Err()
	})
	return out, err
}

// StreamList implements Communication.
func (s *SQLite) StreamList(ctx context.Context, workflowID string) ([]StreamEntry, error) {
	return commCollect(ctx, s, "list streams of "+workflowID,
		`SELECT key, "offset", value, serialization, function_id FROM streams WHERE workflow_uuid = ? ORDER BY key, "offset"`,
		[]any{workflowID},
		func(r *sql.Rows) (StreamEntry, error) {
			var e StreamEntry
			err := r.Scan(&e.Key, &e.Offset, &e.Value, &e.Serialization, &e.FunctionID)
			return e, err
		})
}

// StepGet implements Communication.
func (s *SQLite) StepGet(ctx context.Context, workflowID string, functionID int) (*Step, error) {
	var st *Step
	err := s.read(ctx, fmt.Sprintf("get step %d of %s", functionID, workflowID), func(tx *sql.Tx) error {
		var err error
		st, err = commRecordedStep(ctx, tx, workflowID, functionID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// WorkflowFork implements Communication. A fork already made under NewID
// from the same original (an earlier attempt whose acknowledgement was
// lost) is taken as done; another workflow under NewID is a
// ConflictingWorkflowError. Steps are copied from start step 1 on, as on
// Postgres: DBOS TypeScript numbers its first step 0.
func (s *SQLite) WorkflowFork(ctx context.Context, in WorkflowForkParams) error {
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
	var forked bool
	err := s.write(ctx, "fork "+in.OriginalID+" as "+in.NewID, func(tx *sql.Tx) error {
		forked = false
		var owner, inputs sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT w.application_name, COALESCE(i.inputs, w.inputs)
FROM workflow_status w LEFT JOIN workflow_input i ON i.workflow_uuid = w.workflow_uuid
WHERE w.workflow_uuid = ?`, in.OriginalID).Scan(&owner, &inputs)
		if errors.Is(err, sql.ErrNoRows) {
			return &NotFoundError{WorkflowID: in.OriginalID}
		}
		if err != nil {
			return err
		}
		var forkedFrom sql.NullString
		err = tx.QueryRowContext(ctx, "SELECT forked_from FROM workflow_status WHERE workflow_uuid = ?", in.NewID).Scan(&forkedFrom)
		switch {
		case err == nil && forkedFrom.Valid && forkedFrom.String == in.OriginalID:
			return nil // made by an earlier attempt
		case err == nil:
			return &ConflictingWorkflowError{WorkflowID: in.NewID, Reason: "the id is taken by a workflow that is not a fork of " + in.OriginalID}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		forkOwner := in.ApplicationName
		if owner.Valid {
			forkOwner = &owner.String
		}
		now := nowMS()
		if _, err := tx.ExecContext(ctx, `INSERT INTO workflow_status (
    workflow_uuid, status, name, class_name, config_name, application_id,
    authenticated_user, authenticated_roles, assumed_role, serialization, attributes, application_name,
    forked_from, queue_name, queue_partition_key, application_version, workflow_timeout_ms,
    recovery_attempts, created_at, updated_at
)
SELECT ?1, 'ENQUEUED', name, class_name, config_name, application_id,
       authenticated_user, authenticated_roles, assumed_role, serialization, attributes, ?2,
       workflow_uuid, ?3, ?4, COALESCE(?5, application_version), ?6,
       0, ?7, ?7
FROM workflow_status WHERE workflow_uuid = ?8`,
			in.NewID, forkOwner, queue, in.QueuePartitionKey, in.ApplicationVersion, in.TimeoutMS, now, in.OriginalID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO workflow_input (workflow_uuid, inputs, retention_timestamp) VALUES (?, ?, ?)
ON CONFLICT (workflow_uuid) DO UPDATE SET inputs = excluded.inputs`, in.NewID, inputs, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE workflow_status SET was_forked_from = 1 WHERE workflow_uuid = ?", in.OriginalID); err != nil {
			return err
		}
		forked = true
		if in.StartStep <= 0 {
			return nil
		}
		replacements, err := json.Marshal(in.ReplacementChildren)
		if err != nil {
			return &nonRetryable{fmt.Errorf("replacement children: %w", err)}
		}
		copies := []struct {
			what, query string
			args        []any
		}{
			{"steps", `INSERT INTO operation_outputs (
    workflow_uuid, function_id, function_name, output, error, serialization, child_workflow_id,
    started_at_epoch_ms, completed_at_epoch_ms, application_name, retention_timestamp
)
SELECT ?1, s.function_id, s.function_name, s.output, s.error, s.serialization,
       COALESCE((SELECT r.value FROM json_each(?4) r WHERE r.key = s.child_workflow_id), s.child_workflow_id),
       s.started_at_epoch_ms, s.completed_at_epoch_ms, ?5, ?6
FROM operation_outputs s WHERE s.workflow_uuid = ?2 AND s.function_id < ?3`,
				[]any{in.NewID, in.OriginalID, in.StartStep, string(replacements), forkOwner, now}},
			{"event history", `INSERT INTO workflow_events_history (workflow_uuid, function_id, key, value, serialization)
SELECT ?1, function_id, key, value, serialization FROM workflow_events_history
WHERE workflow_uuid = ?2 AND function_id < ?3`, []any{in.NewID, in.OriginalID, in.StartStep}},
			// Each key's last value below the start step.
			{"events", `INSERT INTO workflow_events (workflow_uuid, key, value, serialization)
SELECT ?1, key, value, serialization FROM (
    SELECT key, value, serialization, row_number() OVER (PARTITION BY key ORDER BY function_id DESC) AS rn
    FROM workflow_events_history WHERE workflow_uuid = ?2 AND function_id < ?3
) WHERE rn = 1`, []any{in.NewID, in.OriginalID, in.StartStep}},
			{"streams", `INSERT INTO streams (workflow_uuid, key, value, "offset", function_id, serialization)
SELECT ?1, key, value, "offset", function_id, serialization FROM streams
WHERE workflow_uuid = ?2 AND function_id < ?3`, []any{in.NewID, in.OriginalID, in.StartStep}},
		}
		for _, c := range copies {
			if _, err := tx.ExecContext(ctx, c.query, c.args...); err != nil {
				return fmt.Errorf("copy the %s: %w", c.what, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if forked {
		s.notes.add(ChannelQueue, queue)
	}
	return nil
}

// WorkflowRewind implements Communication. The cut is the Postgres one (see
// its WorkflowRewind query): workflow_events_history is the undo log of the
// events; steps, history rows, closing markers and messages consumed at or
// after the start step (or never consumed) go; nothing cascades from
// operation_outputs here, and nothing needs to.
func (s *SQLite) WorkflowRewind(ctx context.Context, in WorkflowRewindParams) error {
	if in.StartStep < 0 {
		return fmt.Errorf("rewind %s: start step must be 0 or more, not %d", in.WorkflowID, in.StartStep)
	}
	queue := in.QueueName
	if queue == "" {
		queue = InternalQueueName
	}
	err := s.write(ctx, "rewind "+in.WorkflowID, func(tx *sql.Tx) error {
		var status sql.NullString
		err := tx.QueryRowContext(ctx, "SELECT status FROM workflow_status WHERE workflow_uuid = ?", in.WorkflowID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return &NotFoundError{WorkflowID: in.WorkflowID}
		}
		if err != nil {
			return err
		}
		if w := (Workflow{Status: status.String}); w.Active() {
			return &WorkflowActiveError{WorkflowID: in.WorkflowID, Status: w.Status}
		}
		id, step := in.WorkflowID, in.StartStep
		statements := []struct {
			what, query string
			args        []any
		}{
			{"re-enqueue it", `UPDATE workflow_status
SET status = 'ENQUEUED', queue_name = ?, queue_partition_key = ?,
    application_version = COALESCE(?, application_version),
    recovery_attempts = 0, workflow_deadline_epoch_ms = NULL, deduplication_id = NULL, owner_xid = NULL,
    started_at_epoch_ms = NULL, completed_at = NULL, output = NULL, error = NULL, updated_at = ?
WHERE workflow_uuid = ?`, []any{queue, in.QueuePartitionKey, in.ApplicationVersion, nowMS(), id}},
			// Keys the discarded run published get their last value from
			// below the cut back, or are unpublished.
			{"restore its events", `INSERT INTO workflow_events (workflow_uuid, key, value, serialization)
SELECT ?1, key, value, serialization FROM (
    SELECT h.key, h.value, h.serialization, row_number() OVER (PARTITION BY h.key ORDER BY h.function_id DESC) AS rn
    FROM workflow_events_history h
    WHERE h.workflow_uuid = ?1 AND h.function_id < ?2
      AND h.key IN (SELECT key FROM workflow_events_history WHERE workflow_uuid = ?1 AND function_id >= ?2)
) WHERE rn = 1
ON CONFLICT (workflow_uuid, key) DO UPDATE SET value = excluded.value, serialization = excluded.serialization`, []any{id, step}},
			{"unpublish its events", `DELETE FROM workflow_events
WHERE workflow_uuid = ?1
  AND key IN (SELECT key FROM workflow_events_history WHERE workflow_uuid = ?1 AND function_id >= ?2)
  AND key NOT IN (SELECT key FROM workflow_events_history WHERE workflow_uuid = ?1 AND function_id < ?2)`, []any{id, step}},
			{"reopen its streams", `DELETE FROM streams
WHERE workflow_uuid = ? AND function_id >= ?
  AND ((value = ? AND serialization = ?) OR value = ?)`, []any{id, step, StreamClosedValue, PortableJSON, streamClosedBare}},
			{"cut its steps", "DELETE FROM operation_outputs WHERE workflow_uuid = ? AND function_id >= ?", []any{id, step}},
			{"cut its event history", "DELETE FROM workflow_events_history WHERE workflow_uuid = ? AND function_id >= ?", []any{id, step}},
			{"drop its messages", `DELETE FROM notifications
WHERE destination_uuid = ? AND (consumed_by_function_id >= ? OR NOT consumed)`, []any{id, step}},
			{"drop its outcome", "DELETE FROM workflow_output WHERE workflow_uuid = ?", []any{id}},
		}
		for _, st := range statements {
			if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.notes.add(ChannelQueue, queue)
	return nil
}

// WorkflowSetAttributes implements Communication. A merge replaces
// top-level keys only, as Postgres' jsonb || does (SQLite's json_patch
// would merge nested objects too), so it is made in Go inside the write.
func (s *SQLite) WorkflowSetAttributes(ctx context.Context, workflowID string, attributes *string, merge bool) error {
	var compact *string
	if attributes != nil {
		if !isJSONObject(*attributes) {
			return fmt.Errorf("set attributes of %s: not a JSON object: %s", workflowID, strconv.Quote(*attributes))
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(*attributes)); err != nil {
			return fmt.Errorf("set attributes of %s: %w", workflowID, err)
		}
		compact = ptrTo(buf.String())
	} else if merge {
		return fmt.Errorf("set attributes of %s: nothing to merge", workflowID)
	}
	return s.write(ctx, "set attributes of "+workflowID, func(tx *sql.Tx) error {
		var current sql.NullString
		err := tx.QueryRowContext(ctx, "SELECT attributes FROM workflow_status WHERE workflow_uuid = ?", workflowID).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return &NotFoundError{WorkflowID: workflowID}
		}
		if err != nil {
			return err
		}
		value := compact
		if merge && current.Valid {
			merged := map[string]json.RawMessage{}
			if err := json.Unmarshal([]byte(current.String), &merged); err != nil || merged == nil {
				// Not an object (written by someone else): the merge replaces it.
				merged = map[string]json.RawMessage{}
			}
			var add map[string]json.RawMessage
			if err := json.Unmarshal([]byte(*compact), &add); err != nil {
				return &nonRetryable{err}
			}
			for k, v := range add {
				merged[k] = v
			}
			b, err := json.Marshal(merged)
			if err != nil {
				return &nonRetryable{err}
			}
			value = ptrTo(string(b))
		}
		_, err = tx.ExecContext(ctx, "UPDATE workflow_status SET attributes = ?, updated_at = ? WHERE workflow_uuid = ?",
			value, nowMS(), workflowID)
		return err
	})
}
