"""Workflows talking to each other and being steered: messages, events,
streams, durable sleep, patches, fork, rewind, delete and attributes.

Each call is an operation (see ``_core.drive``) written once and driven by
the sync and async methods of ``DBOS`` and ``DBOSClient``. What a call does
depends on where it is made, as in DBOS Python:

- from workflow code it is a step: it takes the next function id (``recv``
  and ``get_event`` take two, the second for their deadline), replays from
  the run's history when that id is recorded, and is otherwise recorded by
  the agent in the same transaction as its effect;
- from inside a step it acts for the enclosing workflow (still only while
  the run owns it) and records nothing;
- from outside a workflow (or from a ``DBOSClient``) it is a plain request.

``ctx`` is the calling workflow's context (``current_ctx()``) for calls made
through ``DBOS``; a client passes None, so its calls are never recorded.
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Optional, Tuple

from . import _dbos_log as dbos_log
from . import _protocol as proto
from ._context import _Ctx, take_assigned_id, validate_workflow_attributes
from ._core import (
    Call,
    Emit,
    Op,
    Pause,
    _now_ms,
    _record_body,
    _replay,
    check_recorded_name,
    raw_record_body,
    record_call,
)
from ._error import (
    check_no_shard_key,
    DBOSAgentError,
    DBOSException,
    DBOSNonExistentWorkflowError,
    DBOSPatchNondeterminismError,
    DBOSStreamTimeoutError,
)
from ._serialization import (
    PORTABLE_JSON,
    Serializer,
    WorkflowSerializationFormat,
    deserialize_value,
    serialize_value,
    tag_for,
)

# The value DBOS writes to close a stream, and records when a reader in a
# workflow reaches the end.
STREAM_CLOSED = "__DBOS_STREAM_CLOSED__"
_TIMED_OUT = 207  # the protocol's timeout code


@dataclass
class SendMessage:
    """One message of ``send_bulk``, as in DBOS Python."""

    destination_id: str
    message: Any
    topic: Optional[str] = None
    idempotency_key: Optional[str] = None
    shard_key: Optional[str] = None


# The default topic as DBOS stores it (and names it in its log).
_NULL_TOPIC = "__null__topic__"


def _caller(ctx: _Ctx, fid: int, in_step: bool = False) -> Dict[str, Any]:
    caller: Dict[str, Any] = {"workflow_id": ctx.run.workflow_id, "owner_xid": ctx.run.owner_xid, "function_id": fid}
    if in_step:
        caller["in_step"] = True
    return caller


def _in_workflow_code(ctx: Optional[_Ctx]) -> bool:
    return ctx is not None and ctx.step_id is None


def _ms(seconds: float) -> int:
    return max(0, math.ceil(seconds * 1000))


def payload_tag(fmt: Optional[WorkflowSerializationFormat], ctx: Optional[_Ctx], serializer: Serializer) -> str:
    """The format of a message, event or stream value: the one asked for,
    else the calling workflow's (a portable workflow writes portable JSON),
    else the default."""
    if fmt in (WorkflowSerializationFormat.PORTABLE, WorkflowSerializationFormat.NATIVE):
        return tag_for(fmt, serializer)
    if ctx is not None and ctx.run.serialization == PORTABLE_JSON:
        return PORTABLE_JSON
    return serializer.name()


def _serialized(value: Any, tag: str, serializer: Serializer) -> Dict[str, Any]:
    data, tag = serialize_value(value, tag, serializer)
    return {"value": data, "serialization": tag}


def _write_op(
    serializer: Serializer,
    ctx: Optional[_Ctx],
    op: str,
    name: str,
    body: Dict[str, Any],
    outside: Optional[str],
    missing: Optional[str] = None,
    log_as: Optional[Tuple[str, str]] = None,
) -> "Op[None]":
    """A write DBOS records as the step ``name`` from workflow code. Outside
    a workflow it is refused with the message ``outside`` (when given).
    ``missing`` names the destinations for the error of a missing one, which
    is recorded as the step's outcome (as DBOS Python records it).
    ``log_as`` is what DBOS's debug log calls it from workflow code, and the
    detail it gives."""
    run = ctx.run if ctx is not None else None
    fid = 0
    if ctx is None:
        if outside is not None:
            raise DBOSException(outside)
    elif ctx.step_id is not None:
        fid = ctx.step_id
        body["caller"] = _caller(ctx, fid, in_step=True)
    else:
        assert run is not None
        fid = run.next_function_id()
        rec = run.history.get(fid)
        if log_as is not None:
            dbos_log.operation(rec is not None, log_as[0], fid, log_as[1])
        if rec is not None:
            _replay(run, fid, rec, name, serializer, empty_ok=True)
            return
        run.check_live()
        body["caller"] = _caller(ctx, fid)
    started = _now_ms()
    try:
        yield Call(op, body, run, fid, name)
    except DBOSNonExistentWorkflowError:
        if missing is None:
            raise
        err = DBOSNonExistentWorkflowError("`send` destination", missing)
        if run is not None and _in_workflow_code(ctx):
            yield record_call(run, _record_body(run, fid, name, started, None, err, serializer))
        raise err from None


# ---------------------------------------------------------------------------
# Messages


def send_op(
    serializer: Serializer,
    ctx: Optional[_Ctx],
    messages: List[SendMessage],
    fmt: Optional[WorkflowSerializationFormat],
    step_name: str,
    send_to_forks: bool,
) -> "Op[None]":
    """``send`` and ``send_bulk``: all the messages in one transaction."""
    for m in messages:
        check_no_shard_key(m.shard_key)
    keys = [m.idempotency_key for m in messages if m.idempotency_key]
    if len(keys) != len(set(keys)):
        dups = sorted({k for k in keys if keys.count(k) > 1})
        raise DBOSException(f"send_bulk received duplicate idempotency keys: {', '.join(dups)}")
    if not messages:
        return
    tag = payload_tag(fmt, ctx, serializer)
    wire = []
    for m in messages:
        payload = _serialized(m.message, tag, serializer)
        msg = {"destination_id": m.destination_id, "topic": m.topic, "message": payload["value"],
               "serialization": payload["serialization"]}
        if m.idempotency_key:
            msg["idempotency_key"] = m.idempotency_key
        wire.append(msg)
    body = {"step_name": step_name, "messages": wire, "send_to_forks": send_to_forks or None}
    missing = ", ".join(sorted({m.destination_id for m in messages}))
    yield from _write_op(serializer, ctx, proto.OP_SEND, step_name, body, None, missing, (step_name, f"messages: {len(messages)}"))


def _none_output(serializer: Serializer) -> Dict[str, Any]:
    """What a timed-out recv or get_event records: None, in the default
    format (as DBOS Python records it)."""
    data, tag = serialize_value(None, None, serializer)
    return {"timeout_output": data, "timeout_serialization": tag}


def _recorded_wait(
    serializer: Serializer, ctx: _Ctx, op: str, name: str, body: Dict[str, Any], log_as: Tuple[str, str],
    target: Optional[str] = None,
) -> "Op[Any]":
    """``recv`` and ``get_event`` from workflow code: the step ``name`` at N
    and its deadline (recorded by the agent) at N+1, both taken even when
    the step replays."""
    run = ctx.run
    fid = run.next_function_id()
    timeout_fid = run.next_function_id()
    rec = run.history.get(fid)
    dbos_log.operation(rec is not None, log_as[0], fid, log_as[1])
    if rec is not None:
        return _replay(run, fid, rec, name, serializer, empty_ok=True)
    run.check_live()
    body.update(caller=_caller(ctx, fid), timeout_function_id=timeout_fid, **_none_output(serializer))
    return _received((yield Call(op, body, run, fid, name, target)), serializer)


def _received(reply: Dict[str, Any], serializer: Serializer) -> Any:
    """The value of a recv or get_event reply, None when nothing came."""
    if not (reply.get("received") or reply.get("found")):
        return None
    value = reply.get("message") if "message" in reply else reply.get("value")
    return deserialize_value(value, reply.get("serialization") or None, serializer)


def recv_op(serializer: Serializer, ctx: Optional[_Ctx], topic: Optional[str], timeout_seconds: float) -> "Op[Any]":
    """``recv``: the oldest message on the topic, waiting up to the timeout
    (None when none came). The agent records the deadline first, so a
    recovered recv waits only what is left of it."""
    if ctx is None or ctx.step_id is not None:
        raise DBOSException("recv() must be called from within a workflow")
    body = {"topic": topic, "timeout_ms": _ms(timeout_seconds)}
    shown = topic if topic is not None else _NULL_TOPIC
    return (yield from _recorded_wait(serializer, ctx, proto.OP_RECV, "DBOS.recv", body, ("recv", f"topic: {shown}")))


def sleep_op(ctx: Optional[_Ctx], seconds: float) -> "Op[None]":
    """``DBOS.sleep``: the agent records the wake time once (database clock)
    and says what is left of it, also on replay; the wait itself is here."""
    if seconds <= 0:
        return
    if ctx is None or ctx.step_id is not None:
        raise DBOSException("sleep() must be called from within a workflow")
    run = ctx.run
    fid = run.next_function_id()
    rec = run.history.get(fid)
    dbos_log.operation(rec is not None, "sleep", fid, f"seconds: {seconds}")
    if rec is not None:
        check_recorded_name(run, fid, rec, "DBOS.sleep")
    else:
        run.check_live()
    reply = yield Call(proto.OP_SLEEP, {"caller": _caller(ctx, fid), "duration_ms": _ms(seconds)}, run, fid, "DBOS.sleep")
    remaining = int(reply.get("remaining_ms") or 0)
    if remaining > 0:
        yield Pause(remaining / 1000.0, run)


# ---------------------------------------------------------------------------
# Events


def set_event_op(
    serializer: Serializer, ctx: Optional[_Ctx], key: str, value: Any, fmt: Optional[WorkflowSerializationFormat]
) -> "Op[None]":
    body = {"key": key, **_serialized(value, payload_tag(fmt, ctx, serializer), serializer)}
    yield from _write_op(
        serializer, ctx, proto.OP_SET_EVENT, "DBOS.setEvent", body,
        "set_event() must be called from within a workflow or step", log_as=("set_event", f"key: {key}"),
    )


def get_event_op(
    serializer: Serializer, ctx: Optional[_Ctx], workflow_id: str, key: str, timeout_seconds: float
) -> "Op[Any]":
    """``get_event``: the event's value, waiting up to the timeout (None when
    it was not set). From workflow code it is the step DBOS.getEvent with its
    deadline recorded at the next function id."""
    body: Dict[str, Any] = {"workflow_id": workflow_id, "key": key, "timeout_ms": _ms(timeout_seconds)}
    if ctx is not None and ctx.step_id is None:
        logged = ("get_event", f"key: {key}")
        return (yield from _recorded_wait(serializer, ctx, proto.OP_GET_EVENT, "DBOS.getEvent", body, logged, workflow_id))
    reply = yield Call(proto.OP_GET_EVENT, body, ctx.run if ctx else None, target=workflow_id)
    return _received(reply, serializer)


def get_all_events_op(serializer: Serializer, workflow_id: str) -> "Op[Dict[str, Any]]":
    reply = yield Call(proto.OP_GET_ALL_EVENTS, {"workflow_id": workflow_id}, target=workflow_id)
    return {
        e["key"]: deserialize_value(e.get("value"), e.get("serialization") or None, serializer)
        for e in reply.get("events") or []
    }


# ---------------------------------------------------------------------------
# Streams


def write_stream_op(
    serializer: Serializer,
    ctx: Optional[_Ctx],
    key: str,
    value: Any,
    fmt: Optional[WorkflowSerializationFormat],
    close: bool = False,
) -> "Op[None]":
    """Append a value to a stream of the calling workflow, or with ``close``
    close it (writing to a closed stream raises)."""
    if close:
        body: Dict[str, Any] = {"key": key, "value": "", "serialization": PORTABLE_JSON, "close": True}
        name, call = "DBOS.closeStream", "close_stream"
    else:
        body = {"key": key, **_serialized(value, payload_tag(fmt, ctx, serializer), serializer)}
        name, call = "DBOS.writeStream", "write_stream"
    yield from _write_op(
        serializer, ctx, proto.OP_WRITE_STREAM, name, body, f"{call}() must be called from within a workflow or step"
    )


def check_stream_read_args(timeout_seconds: Optional[float], polling_interval_sec: Optional[float]) -> None:
    """DBOS Python's checks (the agent wakes readers itself, so the polling
    interval is accepted and not used)."""
    if timeout_seconds is not None and timeout_seconds < 0:
        raise ValueError(f"timeout_seconds must not be negative, got {timeout_seconds}")
    if polling_interval_sec is not None and (not math.isfinite(polling_interval_sec) or polling_interval_sec < 0.001):
        raise ValueError(
            f"polling_interval_sec must be a finite number at least 0.001 seconds, got {polling_interval_sec}"
        )


def read_stream_op(
    serializer: Serializer,
    ctx: Optional[_Ctx],
    workflow_id: str,
    key: str,
    offset: int,
    timeout_seconds: Optional[float],
    name: str = "DBOS.readStream",
    limit: int = 0,
) -> "Op[None]":
    """Emit a stream's values from ``offset`` in order, until it is closed
    or its writer ended without closing it. A wait for the next value longer
    than ``timeout_seconds`` raises DBOSStreamTimeoutError. From workflow
    code every value read (and the end) is the step ``name``, recorded before
    it is handed over, so a replay sees what the first execution saw."""
    run = ctx.run if ctx is not None else None
    recording = _in_workflow_code(ctx)
    pending: Deque[Dict[str, Any]] = deque()
    over = False
    while True:
        fid = 0
        if recording:
            assert run is not None
            fid = run.next_function_id()
            rec = run.history.get(fid)
            if rec is not None:
                value = _replay(run, fid, rec, name, serializer, empty_ok=True)
                if value == STREAM_CLOSED:
                    return
                yield Emit(value)
                offset += 1
                continue
        started = _now_ms()
        while not pending and not over:
            body = {
                "workflow_id": workflow_id,
                "key": key,
                "offset": offset,
                "limit": limit or None,
                "timeout_ms": _ms(timeout_seconds) if timeout_seconds else None,
            }
            try:
                reply = yield Call(proto.OP_READ_STREAM, body, run, fid, name, workflow_id)
            except DBOSAgentError as e:
                if e.code != _TIMED_OUT:
                    raise
                reply = {}
            values = reply.get("values") or []
            over = bool(reply.get("closed") or reply.get("ended"))
            if not values and not over:
                err = DBOSStreamTimeoutError(workflow_id, key, timeout_seconds)
                if recording:
                    assert run is not None
                    yield record_call(run, _record_body(run, fid, name, started, None, err, serializer))
                raise err
            pending.extend(values)
        if not pending:
            if recording:
                assert run is not None
                yield record_call(run, _record_body(run, fid, name, started, STREAM_CLOSED, None, serializer))
            return
        item = pending.popleft()
        value = deserialize_value(item.get("value"), item.get("serialization") or None, serializer)
        if recording:
            assert run is not None
            yield record_call(run, _record_body(run, fid, name, started, value, None, serializer))
        yield Emit(value)
        offset = int(item.get("offset", offset)) + 1


def read_stream_offset_op(
    serializer: Serializer,
    ctx: Optional[_Ctx],
    workflow_id: str,
    key: str,
    offset: int,
    timeout_seconds: Optional[float],
) -> "Op[Any]":
    """The one value at ``offset``, waiting for it; DBOSStreamTimeoutError
    when the wait times out or the stream ends before it."""
    reader = read_stream_op(serializer, ctx, workflow_id, key, offset, timeout_seconds, "DBOS.readStreamOffset", 1)
    reply: Any = None
    error: Optional[BaseException] = None
    try:
        while True:
            try:
                item = reader.throw(error) if error is not None else reader.send(reply)
            except StopIteration:
                raise DBOSStreamTimeoutError(workflow_id, key) from None
            if isinstance(item, Emit):
                return item.value
            reply, error = None, None
            try:
                reply = yield item
            except BaseException as e:
                error = e
    finally:
        reader.close()


# ---------------------------------------------------------------------------
# Patches


def patch_op(ctx: Optional[_Ctx], patch_name: str, call: str, deprecate: bool) -> "Op[bool]":
    """``patch`` / ``deprecate_patch``, decided from the run's history at the
    next function id: the marker ``DBOS.patch-<name>`` there means the
    workflow ran the patched code (take the id, True); another step there
    means it ran the code before the patch (take nothing: False, or True
    for a deprecated patch); nothing there is a new execution, which a patch
    marks (recorded, True) and a deprecated patch does not (True)."""
    if ctx is None or ctx.step_id is not None:
        raise DBOSException(f"{call} must be called from a workflow")
    run = ctx.run
    marker = f"DBOS.patch-{patch_name}"
    fid = run.peek_function_id()
    rec = run.history.get(fid)
    if rec is not None and rec.get("name") != marker:
        return deprecate
    if rec is None and deprecate:
        return True
    if not run.take_function_id(fid):
        raise DBOSPatchNondeterminismError(
            run.workflow_id, marker,
            f"{call} was called concurrently with other operations in the same workflow, so the position "
            "of its marker would depend on task scheduling; call it from sequential workflow code",
        )
    if rec is None:
        yield record_call(run, raw_record_body(run, fid, marker, _now_ms(), None, None, None))
    return True


# ---------------------------------------------------------------------------
# Steering


def fork_op(
    workflow_id: str,
    start_step: int,
    *,
    application_version: Optional[str],
    queue_name: Optional[str],
    queue_partition_key: Optional[str],
    replacement_children: Optional[Dict[str, str]],
    timeout_seconds: Optional[float],
) -> "Op[str]":
    """A new workflow (SetWorkflowID's id, else a new UUID) replaying the
    original's steps below ``start_step``; returns its id."""
    if timeout_seconds is not None and not timeout_seconds > 0:
        raise Exception(f"Invalid workflow timeout {timeout_seconds}. Timeouts must be positive.")
    new_id = take_assigned_id() or str(uuid.uuid4())
    body = {
        "workflow_id": workflow_id,
        "start_step": max(start_step, 1),  # as DBOS: a step below 1 means the first
        "new_workflow_id": new_id,
        "app_version": application_version,
        "queue_name": queue_name,
        "partition_key": queue_partition_key,
        "timeout_ms": _ms(timeout_seconds) if timeout_seconds is not None else None,
        "replacement_children": replacement_children or None,
    }
    reply = yield Call(proto.OP_FORK_WORKFLOW, body, target=workflow_id)
    return str(reply.get("workflow_id") or new_id)


def rewind_op(
    workflow_id: str,
    start_step: Optional[int],
    *,
    application_version: Optional[str],
    queue_name: Optional[str],
    queue_partition_key: Optional[str],
) -> "Op[None]":
    """Run an ended workflow again under its id from ``start_step`` (default
    the first); an active one raises."""
    body = {
        "workflow_id": workflow_id,
        "start_step": 1 if start_step is None else start_step,
        "app_version": application_version,
        "queue_name": queue_name,
        "partition_key": queue_partition_key,
    }
    yield Call(proto.OP_REWIND_WORKFLOW, body, target=workflow_id)


def delete_op(workflow_ids: List[str], delete_children: bool) -> "Op[None]":
    if workflow_ids:
        body = {"workflow_ids": list(workflow_ids), "delete_children": delete_children or None}
        yield Call(proto.OP_DELETE_WORKFLOWS, body)


def update_attributes_op(workflow_id: str, attributes: Optional[Dict[str, Any]], merge: bool) -> "Op[None]":
    # DBOS's checks, in its order: the attributes first, then a merge of None.
    text = validate_workflow_attributes(attributes)
    if merge and text is None:
        raise DBOSException("Cannot merge None into workflow attributes")
    body = {"workflow_id": workflow_id, "attributes": text, "merge": merge or None}
    yield Call(proto.OP_UPDATE_ATTRIBUTES, body, target=workflow_id)
