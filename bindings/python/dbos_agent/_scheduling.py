"""Schedules, application versions and queue information: DBOS Python's
schedule and version APIs over the agent's ops, shared by ``DBOS`` and
``DBOSClient``.

A schedule's context is stored as JSON text (the agent's scheduler hands it
to every tick as is), or, when JSON cannot hold it, as its serializer's text
as DBOS Python stores every context; a context stored that way (here or by
another SDK) is read back with this process's serializer when it can be,
and shown as its text otherwise (with a warning), as DBOS Python does.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from typing import Any, Callable, Coroutine, Dict, List, Optional, TypedDict, Union

from . import _protocol as proto
from ._core import Call, Op, decode_schedule_context
from ._serialization import Serializer
from ._error import AgentErrorReply, DBOSException, map_agent_error

logger = logging.getLogger("dbos_agent")


class WorkflowSchedule(TypedDict):
    """A schedule, with DBOS Python's keys. The agent's system database is
    unsharded: ``shard_key`` is None."""

    schedule_id: Optional[str]
    schedule_name: str
    workflow_name: str
    workflow_class_name: Optional[str]
    schedule: str
    status: str
    context: Any
    last_fired_at: Optional[str]
    automatic_backfill: bool
    cron_timezone: Optional[str]
    queue_name: Optional[str]
    application_name: Optional[str]
    shard_key: Optional[str]


class ScheduleInput(TypedDict, total=False):
    """One entry of ``DBOS.apply_schedules``."""

    schedule_name: str
    workflow_fn: Union[Callable[[datetime, Any], None], Callable[[datetime, Any], Coroutine[Any, Any, None]]]
    schedule: str
    context: Any
    automatic_backfill: bool
    cron_timezone: Optional[str]
    queue_name: Optional[str]
    shard_key: Optional[str]


class ClientScheduleInput(TypedDict, total=False):
    """One entry of ``DBOSClient.apply_schedules``."""

    schedule_name: str
    workflow_name: str
    workflow_class_name: Optional[str]
    schedule: str
    context: Any
    automatic_backfill: bool
    cron_timezone: Optional[str]
    queue_name: Optional[str]
    application_name: Optional[str]
    shard_key: Optional[str]


class VersionInfo(TypedDict):
    """An application version, with DBOS Python's keys (times in epoch ms)."""

    version_id: str
    version_name: str
    version_timestamp: int
    created_at: int
    application_name: Optional[str]


def _is_missing(e: AgentErrorReply) -> bool:
    return e.name == "invalid_argument" and "does not exist" in e.message


def _mapped(e: AgentErrorReply) -> BaseException:
    return map_agent_error(e)


def encode_context(context: Any, serializer: Optional[Serializer] = None) -> str:
    """A schedule context as the text the agent stores: its JSON text, so
    that every SDK's ticks get its value, or, for a context JSON cannot
    hold, what ``serializer`` makes of it, as DBOS Python stores every
    context (ticks and listings read it back with the serializer)."""
    try:
        return json.dumps(context)
    except (TypeError, ValueError) as e:
        if serializer is None:
            raise DBOSException(f"A schedule's context must be JSON-serializable here: {e}") from None
        return serializer.serialize(context)


def _decode_stored_context(text: Optional[str], serializer: Serializer, name: str) -> Any:
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    value = decode_schedule_context(text, serializer)
    if value is text:
        logger.warning("context of schedule %s could not be deserialized; returning it as a string", name)
    return value


def schedule_from_message(m: Dict[str, Any], serializer: Serializer) -> WorkflowSchedule:
    name = m.get("schedule_name", "")
    return {
        "schedule_id": m.get("schedule_id") or None,
        "schedule_name": name,
        "workflow_name": m.get("workflow_name", ""),
        "workflow_class_name": m.get("workflow_class_name") or None,
        "schedule": m.get("schedule", ""),
        "status": m.get("status") or "ACTIVE",
        "context": _decode_stored_context(m.get("context"), serializer, name),
        "last_fired_at": m.get("last_fired_at") or None,
        "automatic_backfill": bool(m.get("automatic_backfill")),
        "cron_timezone": m.get("cron_timezone") or None,
        "queue_name": m.get("queue_name") or None,
        "application_name": m.get("application_name") or None,
        "shard_key": None,
    }


def schedule_message(
    *,
    schedule_name: str,
    workflow_name: str,
    schedule: str,
    context: Any,
    workflow_class_name: Optional[str] = None,
    automatic_backfill: bool = False,
    cron_timezone: Optional[str] = None,
    queue_name: Optional[str] = None,
    application_name: Optional[str] = None,
    serializer: Optional[Serializer] = None,
) -> Dict[str, Any]:
    if not schedule_name:
        raise DBOSException("a schedule needs a schedule_name")
    check_application_name("application_name", application_name)
    return {
        "application_name": application_name or None,
        "schedule_name": schedule_name,
        "workflow_name": workflow_name,
        "workflow_class_name": workflow_class_name,
        "schedule": schedule,
        "context": encode_context(context, serializer),
        "automatic_backfill": automatic_backfill or None,
        "cron_timezone": cron_timezone,
        "queue_name": queue_name,
    }




# The agent's bounds (PROTOCOL.md, Limits): a name, and how many one
# listing names. Checked here too, so a caller gets DBOS's error type.
MAX_NAME_BYTES = 255
MAX_APPLICATION_NAMES = 1000


def check_application_name(what: str, name: Optional[str]) -> None:
    if name is not None and len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise DBOSException(f"{what} is longer than {MAX_NAME_BYTES} bytes")


def application_filter(requested: Optional[Union[str, List[str]]], own: str) -> Dict[str, Any]:
    """The ``application_name`` of a listing, as DBOS's observability filter
    reads it: unset, the caller's application's rows (every application's
    for a caller with none); ``""`` or ``[]``, every application's; else
    the rows of these applications. Named applications' listings include
    the unclaimed rows (the agent's rule, as DBOS's)."""
    if requested is None:
        names = [own] if own else []
    else:
        names = [requested] if isinstance(requested, str) else list(requested)
        names = [n for n in names if n]
    if len(names) > MAX_APPLICATION_NAMES:
        raise DBOSException(f"application_name names {len(names)} applications; at most {MAX_APPLICATION_NAMES}")
    for n in names:
        check_application_name("application_name", n)
    return {"application_name": names or None, "all_applications": True if not names else None}


def check_queue_declared(queue_name: Optional[str]) -> "Op[None]":
    if queue_name is not None and (yield from get_queue(queue_name)) is None:
        raise DBOSException(
            f"Queue '{queue_name}' is not declared. Please create the queue before using it in a schedule."
        )


# -- schedules (each an operation: see _core.drive)


def create_schedule(message: Dict[str, Any]) -> "Op[None]":
    try:
        yield Call(proto.OP_CREATE_SCHEDULE, message, raw=True)
    except AgentErrorReply as e:
        owned = owned_elsewhere(e, "Schedule", message["schedule_name"])
        raise (DBOSException(owned) if owned is not None else _mapped(e)) from None


def get_schedule(serializer: Serializer, name: str) -> "Op[Optional[WorkflowSchedule]]":
    try:
        reply = yield Call(proto.OP_GET_SCHEDULE, {"schedule_name": name}, raw=True)
    except AgentErrorReply as e:
        if _is_missing(e):
            return None
        raise _mapped(e) from None
    return schedule_from_message(reply, serializer)


def list_schedules(
    serializer: Serializer,
    status: Optional[Union[str, List[str]]],
    workflow_name: Optional[Union[str, List[str]]],
    schedule_name_prefix: Optional[Union[str, List[str]]],
    applications: Optional[Dict[str, Any]] = None,
) -> "Op[List[WorkflowSchedule]]":
    """``applications`` is ``application_filter``'s; None, the agent's
    default (the caller's application's schedules and the unclaimed)."""
    prefixes = [schedule_name_prefix] if isinstance(schedule_name_prefix, str) else schedule_name_prefix
    # The agent filters by one prefix; several (any of them, as DBOS takes
    # a list) are applied here to the unfiltered listing.
    several = prefixes is not None and len(prefixes) > 1
    body = {
        "status": [status] if isinstance(status, str) else status,
        "workflow_name": [workflow_name] if isinstance(workflow_name, str) else workflow_name,
        "schedule_name_prefix": prefixes[0] if prefixes and not several else None,
        **(applications or {}),
    }
    reply = yield Call(proto.OP_LIST_SCHEDULES, body)
    messages = reply.get("schedules") or []
    if several:
        assert prefixes is not None
        messages = [m for m in messages if str(m.get("schedule_name", "")).startswith(tuple(prefixes))]
    return [schedule_from_message(m, serializer) for m in messages]


def by_name(op: str, name: str) -> "Op[None]":
    """Delete, pause or resume (``op``): as in DBOS Python, a missing
    schedule is no error."""
    try:
        yield Call(op, {"schedule_name": name}, raw=True)
    except AgentErrorReply as e:
        if not _is_missing(e):
            raise _mapped(e) from None


def _same_definition(existing: WorkflowSchedule, message: Dict[str, Any], serializer: Serializer) -> bool:
    return (
        existing["workflow_name"] == message["workflow_name"]
        and existing["workflow_class_name"] == (message.get("workflow_class_name") or None)
        and existing["schedule"] == message["schedule"]
        and existing["context"] == _decode_stored_context(message.get("context"), serializer, "")
        and existing["automatic_backfill"] == bool(message.get("automatic_backfill"))
        and existing["cron_timezone"] == (message.get("cron_timezone") or None)
        and existing["queue_name"] == (message.get("queue_name") or None)
    )


def upsert_schedule(serializer: Serializer, message: Dict[str, Any], *, keep_status: bool, own: str = "") -> "Op[None]":
    """Create a schedule or replace its definition. The agent has no upsert,
    so a changed schedule is deleted and created again (not atomically: a
    tick falling in between is not fired). An unchanged one is left as it is
    (with its status when ``keep_status``, else made ACTIVE), unless it is
    unclaimed and the writer (``message``'s application, else ``own``, the
    caller's) has an application: re-registering claims it, as in DBOS
    (the row is created again, with a new schedule_id; a changed one keeps
    its schedule_id)."""
    name = message["schedule_name"]
    owner = message.get("application_name")
    for _ in range(5):
        # The listing holds the writer's application's (and unclaimed)
        # schedules only, or every one for a writer with none: a schedule
        # of that name not in it is another application's, not replaced.
        apps = None if not owner else {"application_name": [owner]}
        listed = yield from list_schedules(serializer, None, None, name, apps)
        found = [s for s in listed if s["schedule_name"] == name]
        existing = found[0] if found else None
        if existing is None:
            other = yield from get_schedule(serializer, name)
            if other is not None and other["application_name"] in (None, owner or own or None):
                continue  # created since the listing, by another writer for the same application
            if other is not None:
                raise DBOSException(already_registered("Schedule", name, other["application_name"] or "", owner or ""))
        if existing is not None:
            claims = existing["application_name"] is None and bool(owner or own)
            if _same_definition(existing, message, serializer) and not claims and (owner is None or existing["application_name"] == owner):
                if not keep_status and existing["status"] != "ACTIVE":
                    yield from by_name(proto.OP_RESUME_SCHEDULE, name)
                return
            yield from by_name(proto.OP_DELETE_SCHEDULE, name)
            if not claims and existing["schedule_id"]:
                # Updated in place as DBOS updates it: the row keeps its id.
                message = dict(message, schedule_id=existing["schedule_id"])
            if existing["last_fired_at"]:
                # And its latest tick, as DBOS's upsert keeps last_fired_at.
                message = dict(message, last_fired_at=existing["last_fired_at"])
            if keep_status and existing["status"] == "PAUSED":
                message = dict(message, status="PAUSED")
            if owner is None and existing["application_name"]:
                # A writer with no application updates the row without
                # stripping its owner (DBOS's rule); a named one claims an
                # unclaimed row.
                message = dict(message, application_name=existing["application_name"])
        try:
            yield Call(proto.OP_CREATE_SCHEDULE, message, raw=True)
            return
        except AgentErrorReply as e:
            if e.name == "invalid_argument" and "already exists" in e.message:
                continue  # created meanwhile by another process: compare again
            owned = owned_elsewhere(e, "Schedule", name)
            raise (DBOSException(owned) if owned is not None else _mapped(e)) from None
    raise DBOSException(f"schedule {name} kept changing while it was being applied")


def _epoch_ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def backfill_schedule(name: str, start: datetime, end: datetime) -> "Op[List[str]]":
    """The ticks strictly after ``start`` and before ``end`` (naive datetimes
    are UTC), as DBOS Python counts them; the agent's range includes its
    start, so it starts a millisecond later (ticks fall on whole seconds)."""
    start_ms, end_ms = _epoch_ms(start) + 1, _epoch_ms(end)
    if end_ms <= start_ms:
        return []
    body = {"schedule_name": name, "start_epoch_ms": start_ms, "end_epoch_ms": end_ms}
    try:
        reply = yield Call(proto.OP_BACKFILL_SCHEDULE, body, raw=True)
    except AgentErrorReply as e:
        if _is_missing(e):
            raise DBOSException(f"Schedule '{name}' does not exist") from None
        raise _mapped(e) from None
    return list(reply.get("workflow_ids") or [])


def trigger_schedule(name: str) -> "Op[str]":
    try:
        reply = yield Call(proto.OP_TRIGGER_SCHEDULE, {"schedule_name": name}, raw=True)
    except AgentErrorReply as e:
        if _is_missing(e):
            raise DBOSException(f"Schedule '{name}' does not exist") from None
        raise _mapped(e) from None
    return str(reply["workflow_id"])


# -- application versions


def already_registered(kind: str, name: str, owner: str, requester: str) -> str:
    """DBOS's message for a name another application holds."""
    remedy = (
        f"set a distinct application_version for '{requester}'"
        if kind == "Application version"
        else f"give '{requester}' a different {kind.lower()} name"
    )
    return (
        f"{kind} '{name}' is already registered by application '{owner}' in this system database. "
        f"{kind} names must be unique across applications sharing a system database. Either {remedy}, "
        f"or, if '{owner}' was renamed to '{requester}', re-own its rows first with dbos rename-application"
    )


def owned_elsewhere(e: AgentErrorReply, kind: str, name: str) -> Optional[str]:
    """DBOS's message for the agent's "<kind> <name> belongs to application
    <owner>, not <requester>", else None."""
    marker = " belongs to application "
    if e.name != "invalid_argument" or marker not in e.message:
        return None
    owner, _, requester = e.message.split(marker, 1)[1].partition(", not ")
    requester = requester.split(" (", 1)[0]  # the agent may say what it left unwritten
    return already_registered(kind, name, owner, requester)


def list_versions() -> "Op[List[VersionInfo]]":
    reply = yield Call(proto.OP_LIST_VERSIONS, {})
    return [
        {
            "version_id": v.get("version_id", ""),
            "version_name": v.get("version_name", ""),
            "version_timestamp": int(v.get("version_timestamp") or 0),
            "created_at": int(v.get("created_at") or 0),
            "application_name": v.get("application_name") or None,
        }
        for v in reply.get("versions") or []
    ]


def latest_version() -> "Op[VersionInfo]":
    versions = yield from list_versions()
    if not versions:
        raise DBOSException("No application versions found")
    return versions[0]


def promote_version(version_name: str, application_name: Optional[str] = None) -> "Op[None]":
    """Make a version the latest of the caller's application, or of
    ``application_name``'s (DBOS's set_latest_application_version)."""
    check_application_name("application_name", application_name)
    body = {"version_name": version_name, "application_name": application_name or None}
    try:
        yield Call(proto.OP_PROMOTE_VERSION, body, raw=True)
    except AgentErrorReply as e:
        message = owned_elsewhere(e, "Application version", version_name)
        if message is not None:
            raise DBOSException(message) from None
        raise _mapped(e) from None


# -- queues


def get_queue(name: str) -> "Op[Optional[Dict[str, Any]]]":
    """The agent's view of a queue (registration and load), or None for a
    queue neither registered nor holding active workflows."""
    try:
        info: Dict[str, Any] = yield Call(proto.OP_GET_QUEUE, {"name": name}, raw=True)
        return info
    except AgentErrorReply as e:
        if e.name == "invalid_argument" and "not registered" in e.message:
            return None
        raise _mapped(e) from None


def list_queues(applications: Optional[Dict[str, Any]] = None) -> "Op[List[Dict[str, Any]]]":
    """Every queue, or those of ``application_filter``'s applications."""
    body = {"application_name": (applications or {}).get("application_name")}
    reply = yield Call(proto.OP_LIST_QUEUES, body)
    return list(reply.get("queues") or [])


class ApplicationRowCounts(TypedDict):
    """The rows a rename moved, by table (DBOS's ApplicationRowCounts)."""

    queues: int
    schedules: int
    versions: int
    workflows: int
    steps: int


DEFAULT_RENAME_BATCH_SIZE = 10_000
_APP_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def rename_application(
    old_name: Optional[str], new_name: str, batch_size: Optional[int], adopt_unclaimed_rows: bool
) -> "Op[ApplicationRowCounts]":
    """DBOS's rename_application, its checks and messages first (the agent
    checks the same rules)."""
    if old_name is not None and not old_name:
        raise DBOSException("The application's previous name cannot be empty.")
    if old_name is None and not adopt_unclaimed_rows:
        raise DBOSException("Nothing to re-own: name the application to rename, adopt unclaimed rows, or both.")
    if not (3 <= len(new_name) <= MAX_NAME_BYTES and set(new_name) <= _APP_NAME_CHARS):
        raise DBOSException(
            f"Invalid application name '{new_name}'. Application names must be between 3 and 256 characters "
            "long and contain only lowercase letters, numbers, dashes, and underscores."
        )
    if old_name == new_name:
        raise DBOSException(f"Application '{new_name}' already holds that name; nothing to rename.")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    check_application_name("old_name", old_name)
    body = {
        "old_name": old_name, "new_name": new_name, "batch_size": batch_size,
        "adopt_unclaimed_rows": adopt_unclaimed_rows or None,
    }
    reply = yield Call(proto.OP_RENAME_APPLICATION, body)
    return {
        "queues": int(reply.get("queues") or 0), "schedules": int(reply.get("schedules") or 0),
        "versions": int(reply.get("versions") or 0), "workflows": int(reply.get("workflows") or 0),
        "steps": int(reply.get("steps") or 0),
    }


def set_workflow_delay(
    workflow_id: str, delay_seconds: Optional[float], delay_until_epoch_ms: Optional[int]
) -> "Op[None]":
    """As DBOS Python: exactly one of the two; only a DELAYED workflow
    changes (for any other it does nothing)."""
    if delay_until_epoch_ms is not None and delay_seconds is not None:
        raise DBOSException("Specify either delay_seconds or delay_until_epoch_ms, not both")
    if delay_until_epoch_ms is not None:
        if delay_until_epoch_ms < 0:
            raise DBOSException("delay_until_epoch_ms must be >= 0")
        until = delay_until_epoch_ms
    elif delay_seconds is not None:
        if delay_seconds < 0:
            raise DBOSException("delay_seconds must be >= 0")
        until = int((time.time() + delay_seconds) * 1000)
    else:
        raise DBOSException("Must specify either delay_seconds or delay_until_epoch_ms")
    try:
        yield Call(proto.OP_SET_WORKFLOW_DELAY, {"workflow_id": workflow_id, "delay_until_epoch_ms": until}, raw=True)
    except AgentErrorReply as e:
        if e.name == "invalid_argument" and "not DELAYED" in e.message:
            return
        if e.code == 200:
            return
        raise map_agent_error(e, workflow_id=workflow_id) from None
