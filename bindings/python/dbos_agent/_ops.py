"""The operations of DBOS Python's API that ``DBOS`` and ``DBOSClient``
share, each written once.

Each takes the caller's ``Scope`` (see ``_facade``) and then DBOS Python's
parameters, with its defaults, and is an op generator (see
``_core.drive``): the facades drive it on the calling thread for the sync
method and on the event loop for the ``_async`` one. From workflow code
(``DBOS`` only) a management call is the step DBOS Python records for it
(``as_step``), so a replay returns what the first execution saw; messages,
events and streams are steps of their own (``_comm``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, List, Optional, TypeVar, Union, cast

from . import _comm as comm
from . import _datasource as dsrc
from . import _protocol as proto
from . import _scheduling as sched
from ._comm import SendMessage
from ._core import (
    Call,
    Engine,
    Op,
    StepInfo,
    WorkflowStatus,
    as_step,
    cancel_op,
    get_result_op,
    list_steps_op,
    list_workflows_op,
    resume_op,
    workflow_status_op,
)
from ._error import check_no_shard_key, DBOSException, DBOSNonExistentWorkflowError
from ._facade import Scope, Shared, handle_twins, handles_twins, stream_twins, twins
from ._list_filters import queued_filters
from ._queue import Queue
from ._scheduling import VersionInfo, WorkflowSchedule
from ._serialization import WorkflowSerializationFormat

T = TypeVar("T")
_DEFAULT = WorkflowSerializationFormat.DEFAULT
StrOrList = Optional[Union[str, List[str]]]


def _step(scope: Scope, /, name: str, op: "Op[T]") -> "Op[T]":
    return as_step(scope.ctx, name, op)


def _not_in_workflow(scope: Scope, /, method: str) -> None:
    if scope.ctx is not None:
        raise DBOSException(f"{scope.name(method)} cannot be called from within a workflow")


# ---------------------------------------------------------------------------
# Workflows


def retrieve_workflow(scope: Scope, /, workflow_id: str, existing_workflow: bool = True, *, shard_key: Optional[str] = None) -> "Op[str]":
    """A handle to a workflow by id; raises DBOSNonExistentWorkflowError
    for an unknown id unless ``existing_workflow=False``."""
    check_no_shard_key(shard_key)
    if existing_workflow:
        stat = yield from _step(scope, "DBOS.getStatus", workflow_status_op(scope.serializer, workflow_id))
        if stat is None:
            raise DBOSNonExistentWorkflowError("target", workflow_id)
    return workflow_id


def get_result(scope: Scope, /, workflow_id: str, *, shard_key: Optional[str] = None) -> "Op[Any]":
    """Wait for a workflow and return its output (or raise its error)."""
    check_no_shard_key(shard_key)
    return (yield from get_result_op(scope.engine, scope.ctx, workflow_id))


def get_workflow_status(scope: Scope, /, workflow_id: str, *, shard_key: Optional[str] = None) -> "Op[Optional[WorkflowStatus]]":
    """A workflow's status, or None for an unknown id."""
    check_no_shard_key(shard_key)
    return (yield from _step(scope, "DBOS.getStatus", workflow_status_op(scope.serializer, workflow_id)))


def cancel_workflows(
    scope: Scope, workflow_ids: List[str], *, cancel_children: bool = False, shard_key: Optional[str] = None
) -> "Op[None]":
    """Cancel workflows: each stops at its next step and is not recovered.
    With ``cancel_children``, every workflow they started is cancelled too,
    recursively."""
    check_no_shard_key(shard_key)
    yield from _step(scope, "DBOS.cancelWorkflow", cancel_op(workflow_ids, cancel_children))


def cancel_workflow(scope: Scope, /, workflow_id: str, *, cancel_children: bool = False, shard_key: Optional[str] = None) -> "Op[None]":
    """Cancel a workflow (see ``cancel_workflows``)."""
    return cancel_workflows(scope, [workflow_id], cancel_children=cancel_children, shard_key=shard_key)


def resume_workflow(scope: Scope, /, workflow_id: str, *, queue_name: Optional[str] = None, shard_key: Optional[str] = None) -> "Op[str]":
    """Resume a cancelled (or dead-lettered) workflow from its last
    recorded step."""
    check_no_shard_key(shard_key)
    yield from _step(scope, "DBOS.resumeWorkflow", resume_op(workflow_id, queue_name))
    return workflow_id


def _resume_all(workflow_ids: List[str], queue_name: Optional[str]) -> "Op[None]":
    if workflow_ids:
        # The agent names the missing ids in its error (data.workflow_id).
        yield Call(proto.OP_RESUME, {"workflow_ids": list(workflow_ids), "queue_name": queue_name})


def resume_workflows(
    scope: Scope, workflow_ids: List[str], *, queue_name: Optional[str] = None, shard_key: Optional[str] = None
) -> "Op[List[str]]":
    """Resume several workflows, all or none: a missing id raises
    DBOSNonExistentWorkflowError naming the missing ones and resumes
    nothing. In a workflow it is the step DBOS.resumeWorkflow."""
    check_no_shard_key(shard_key)
    yield from _step(scope, "DBOS.resumeWorkflow", _resume_all(workflow_ids, queue_name))
    return list(workflow_ids)


def list_workflows(
    scope: Scope,
    /,
    *,
    workflow_ids: Optional[List[str]] = None,
    status: StrOrList = None,
    start_time: Optional[str] = None,
    end_time: Optional[str] = None,
    completed_after: Optional[str] = None,
    completed_before: Optional[str] = None,
    dequeued_after: Optional[str] = None,
    dequeued_before: Optional[str] = None,
    name: StrOrList = None,
    app_version: StrOrList = None,
    forked_from: StrOrList = None,
    parent_workflow_id: StrOrList = None,
    user: StrOrList = None,
    queue_name: StrOrList = None,
    limit: Optional[int] = None,
    offset: Optional[int] = None,
    sort_desc: bool = False,
    workflow_id_prefix: StrOrList = None,
    load_input: bool = True,
    load_output: bool = True,
    executor_id: StrOrList = None,
    queues_only: bool = False,
    was_forked_from: Optional[bool] = None,
    is_fork: Optional[bool] = None,
    has_parent: Optional[bool] = None,
    attributes: Optional[Dict[str, Any]] = None,
    schedule_name: StrOrList = None,
    application_name: StrOrList = None,
    shard_key: StrOrList = None,
    parent_shard_key: StrOrList = None,
) -> "Op[List[WorkflowStatus]]":
    """List workflows, filtered as in DBOS Python (times are ISO 8601)."""
    filters = dict(locals())
    filters.pop("scope")
    op = list_workflows_op(scope.serializer, scope.name("list_workflows"), filters, scope.app_name)
    return (yield from _step(scope, "DBOS.listWorkflows", op))


def list_queued_workflows(scope: Scope, /, **filters: Any) -> "Op[List[WorkflowStatus]]":
    """The workflows waiting in or running from a queue (``list_workflows``'
    filters but ``queues_only``, ``was_forked_from`` and ``schedule_name``)."""
    call = scope.name("list_queued_workflows")
    op = list_workflows_op(scope.serializer, call, queued_filters(call, filters), scope.app_name)
    return (yield from _step(scope, "DBOS.listQueuedWorkflows", op))


def list_workflow_steps(
    scope: Scope, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None,
    offset: Optional[int] = None, shard_key: Optional[str] = None,
) -> "Op[List[StepInfo]]":
    """The recorded steps of a workflow, in order."""
    check_no_shard_key(shard_key)
    op = list_steps_op(scope.serializer, workflow_id, load_output, limit, offset)
    return (yield from _step(scope, "DBOS.listWorkflowSteps", op))


def set_workflow_delay(
    scope: Scope, workflow_id: str, *, delay_seconds: Optional[float] = None,
    delay_until_epoch_ms: Optional[int] = None, shard_key: Optional[str] = None,
) -> "Op[None]":
    """Move a DELAYED workflow's release time (``delay_seconds`` from now,
    or ``delay_until_epoch_ms``); other workflows are left as they are."""
    check_no_shard_key(shard_key)
    op = sched.set_workflow_delay(workflow_id, delay_seconds, delay_until_epoch_ms)
    yield from _step(scope, "DBOS.setWorkflowDelay", op)


def fork_workflow(
    scope: Scope,
    /,
    workflow_id: str,
    start_step: int,
    *,
    application_version: Optional[str] = None,
    queue_name: Optional[str] = None,
    queue_partition_key: Optional[str] = None,
    replacement_children: Optional[Dict[str, str]] = None,
    timeout_seconds: Optional[float] = None,
    shard_key: Optional[str] = None,
) -> "Op[str]":
    """Start a new workflow (SetWorkflowID's id, else a new one) that
    replays the steps of ``workflow_id`` below ``start_step`` and runs
    the rest anew, on ``queue_name`` (default the internal queue)."""
    check_no_shard_key(shard_key)
    op = comm.fork_op(
        workflow_id, start_step, application_version=application_version, queue_name=queue_name,
        queue_partition_key=queue_partition_key, replacement_children=replacement_children,
        timeout_seconds=timeout_seconds,
    )
    new_id: str = yield from _step(scope, "DBOS.forkWorkflow", op)
    return (yield from retrieve_workflow(scope, new_id))


def rewind_workflow(
    scope: Scope,
    /,
    workflow_id: str,
    *,
    start_step: Optional[int] = None,
    application_version: Optional[str] = None,
    queue_name: Optional[str] = None,
    queue_partition_key: Optional[str] = None,
    shard_key: Optional[str] = None,
) -> "Op[str]":
    """Run an ended workflow again under its id from ``start_step``
    (default the first): the steps from there on are forgotten, with the
    data sources' checkpoints of those steps. An active workflow cannot be
    rewound (cancel it first)."""
    check_no_shard_key(shard_key)

    def rewind() -> "Op[None]":
        # DBOS's checks, in its words, before anything is deleted.
        if start_step is not None and start_step < 1:
            raise ValueError(f"start_step must be >= 1, got {start_step}")
        stat = yield from workflow_status_op(scope.serializer, workflow_id)
        if stat is None:
            raise DBOSNonExistentWorkflowError("target", workflow_id)
        if stat.status in ("ENQUEUED", "PENDING", "DELAYED"):
            raise DBOSException(
                f"Cannot rewind {workflow_id} ({stat.status}): only a workflow in a "
                "terminal state can be rewound, so cancel it first"
            )
        yield from dsrc.drop_before_rewind_op(scope.engine, workflow_id, start_step)  # the data sources' checkpoints first
        yield from comm.rewind_op(
            workflow_id, start_step, application_version=application_version,
            queue_name=queue_name, queue_partition_key=queue_partition_key,
        )

    yield from _step(scope, "DBOS.rewindWorkflow", rewind())
    return workflow_id


def delete_workflows(
    scope: Scope, workflow_ids: List[str], *, delete_children: bool = False, shard_key: Optional[str] = None
) -> "Op[None]":
    """Delete workflows with everything stored under them (with
    ``delete_children``, the workflows they started too, recursively)."""
    check_no_shard_key(shard_key)
    yield from _step(scope, "DBOS.deleteWorkflow", comm.delete_op(workflow_ids, delete_children))


def delete_workflow(scope: Scope, /, workflow_id: str, *, delete_children: bool = False, shard_key: Optional[str] = None) -> "Op[None]":
    """Delete a workflow (see ``delete_workflows``)."""
    return delete_workflows(scope, [workflow_id], delete_children=delete_children, shard_key=shard_key)


def update_workflow_attributes(
    scope: Scope, workflow_id: str, attributes: Optional[Dict[str, Any]], *, merge: bool = False,
    shard_key: Optional[str] = None,
) -> "Op[None]":
    """Replace a workflow's attributes (None clears them), or with
    ``merge`` set the given top-level keys and keep the others."""
    check_no_shard_key(shard_key)
    op = comm.update_attributes_op(workflow_id, attributes, merge)
    yield from _step(scope, "DBOS.updateWorkflowAttributes", op)


# ---------------------------------------------------------------------------
# Queues


def retrieve_queue(scope: Scope, /, name: str) -> "Op[Optional[Queue]]":
    """The queue of that name: one declared in this process (``DBOS``),
    else the configuration stored in the database (None when there is
    none). A queue retrieved from the database is not served by this
    process unless it is declared here or named in ``DBOS.listen_queues``."""
    declared = scope.declared_queues.get(name)
    if declared is not None:
        return cast(Queue, declared)
    info = yield from sched.get_queue(name)
    if info is None or not info.get("registered"):
        return None
    return Queue._from_info(info, _client_engine(scope))


def list_queues(scope: Scope, /, *, application_name: StrOrList = None) -> "Op[List[Queue]]":
    """The queues registered in the system database that these applications
    own, and the unclaimed ones; unset, the caller's application's (every
    queue for a client with no application)."""
    infos = yield from sched.list_queues(sched.application_filter(application_name, scope.app_name))
    return [Queue._from_info(i, _client_engine(scope)) for i in infos if i.get("registered")]


def _client_engine(scope: Scope) -> Optional[Engine]:
    """The connection a client's queues read and write their row through
    (DBOS's client_system_database); a DBOS process's go through its own."""
    return scope.engine if scope.who == "DBOSClient" else None


def delete_queue(scope: Scope, /, name: str) -> "Op[None]":
    """Delete a queue's registration (DBOS's delete_queue): its workflows
    stay, and what waits on it runs only once the queue is registered
    again. A ``DBOS`` process stops serving it."""
    scope.forget_queue(name)
    yield Call(proto.OP_DELETE_QUEUE, {"name": name})


# ---------------------------------------------------------------------------
# Schedules


def list_schedules(
    scope: Scope, *, status: StrOrList = None, workflow_name: StrOrList = None,
    schedule_name_prefix: StrOrList = None, application_name: StrOrList = None,
) -> "Op[List[WorkflowSchedule]]":
    """This application's schedules (or ``application_name``'s) and the
    unclaimed ones, optionally filtered."""
    apps = None if application_name is None else sched.application_filter(application_name, scope.app_name)
    op = sched.list_schedules(scope.serializer, status, workflow_name, schedule_name_prefix, apps)
    return (yield from _step(scope, "DBOS.listSchedules", op))


def get_schedule(scope: Scope, /, name: str) -> "Op[Optional[WorkflowSchedule]]":
    """The schedule of that name, or None."""
    return (yield from _step(scope, "DBOS.getSchedule", sched.get_schedule(scope.serializer, name)))


def delete_schedule(scope: Scope, /, name: str) -> "Op[None]":
    """Delete a schedule (nothing happens if there is none)."""
    yield from _step(scope, "DBOS.deleteSchedule", sched.by_name(proto.OP_DELETE_SCHEDULE, name))


def pause_schedule(scope: Scope, /, name: str) -> "Op[None]":
    """Pause a schedule: it does not fire until resumed."""
    yield from _step(scope, "DBOS.pauseSchedule", sched.by_name(proto.OP_PAUSE_SCHEDULE, name))


def resume_schedule(scope: Scope, /, name: str) -> "Op[None]":
    """Resume a paused schedule."""
    yield from _step(scope, "DBOS.resumeSchedule", sched.by_name(proto.OP_RESUME_SCHEDULE, name))


def create_schedule_message(scope: Scope, /, message: Dict[str, Any], queue_name: Optional[str]) -> "Op[None]":
    """Create a schedule (the step DBOS.createSchedule), once its queue is
    known to exist."""

    def create() -> "Op[None]":
        if queue_name is None or queue_name not in scope.declared_queues:
            yield from sched.check_queue_declared(queue_name)
        yield from sched.create_schedule(message)

    yield from _step(scope, "DBOS.createSchedule", create())


def apply_schedule_messages(scope: Scope, /, messages: List[Dict[str, Any]]) -> "Op[None]":
    """Create or replace these schedules (made ACTIVE). The agent has no
    transaction over several schedules: each is applied in turn, and a
    changed one is deleted and created again."""
    for m in messages:
        queue_name = m.get("queue_name")
        if queue_name is not None and queue_name not in scope.declared_queues:
            yield from sched.check_queue_declared(queue_name)
    for m in messages:
        yield from sched.upsert_schedule(scope.serializer, m, keep_status=False, own=scope.app_name)


def backfill_schedule(scope: Scope, /, schedule_name: str, start: datetime, end: datetime) -> "Op[List[str]]":
    """Enqueue every tick of a schedule strictly between ``start`` and
    ``end``, with the ids the live scheduler uses: ticks already enqueued
    are not enqueued again."""
    _not_in_workflow(scope, "backfill_schedule")
    return (yield from sched.backfill_schedule(schedule_name, start, end))


def trigger_schedule(scope: Scope, /, schedule_name: str) -> "Op[str]":
    """Enqueue a schedule's workflow now (id ``sched-<name>-trigger-<now>``)."""
    _not_in_workflow(scope, "trigger_schedule")
    return (yield from sched.trigger_schedule(schedule_name))


# ---------------------------------------------------------------------------
# Application versions


def list_application_versions(scope: Scope, /) -> "Op[List[VersionInfo]]":
    """This application's versions, the latest first."""
    return sched.list_versions()


def get_latest_application_version(scope: Scope, /) -> "Op[VersionInfo]":
    """The latest version: the one unversioned work (and schedule ticks)
    goes to."""
    return sched.latest_version()


def set_latest_application_version(scope: Scope, /, version_name: str, *, application_name: Optional[str] = None) -> "Op[None]":
    """Make a registered version the latest (roll forward or back): from
    now on, workers of that version take the unversioned work. Acting for
    ``application_name`` (default the caller's), a version another
    application registered raises, as in DBOS."""
    return sched.promote_version(version_name, application_name)


# ---------------------------------------------------------------------------
# Messages, events and streams (see _comm for where each call is a step)


def send(
    scope: Scope,
    /,
    destination_id: str,
    message: Any,
    topic: Optional[str] = None,
    *,
    idempotency_key: Optional[str] = None,
    serialization_type: Optional[WorkflowSerializationFormat] = _DEFAULT,
    send_to_forks: bool = False,
    shard_key: Optional[str] = None,
) -> "Op[None]":
    """Send a message to a workflow (on ``topic``, default the default
    topic). With ``idempotency_key`` it is delivered at most once to its
    destination; with ``send_to_forks``, also to every workflow forked
    from it, recursively."""
    messages = [SendMessage(destination_id, message, topic, idempotency_key, shard_key)]
    return comm.send_op(scope.serializer, scope.ctx, messages, serialization_type, "DBOS.send", send_to_forks)


def send_bulk(
    scope: Scope, messages: List[SendMessage], *, serialization_type: Optional[WorkflowSerializationFormat] = _DEFAULT,
    send_to_forks: bool = False,
) -> "Op[None]":
    """Send many messages in one transaction: all of them or none."""
    return comm.send_op(scope.serializer, scope.ctx, messages, serialization_type, "DBOS.sendBulk", send_to_forks)


def recv(scope: Scope, /, topic: Optional[str] = None, timeout_seconds: float = 60) -> "Op[Any]":
    """Receive the oldest message sent to this workflow on ``topic``,
    waiting up to ``timeout_seconds`` (None when none came). Only from
    workflow code; a recovered recv waits only what is left of its
    timeout."""
    return comm.recv_op(scope.serializer, scope.ctx, topic, timeout_seconds)


def sleep(scope: Scope, /, seconds: float) -> "Op[None]":
    """A durable sleep: its wake time is recorded, so a recovered
    workflow sleeps only what is left of it."""
    return comm.sleep_op(scope.ctx, seconds)


def set_event(
    scope: Scope, key: str, value: Any, *, serialization_type: Optional[WorkflowSerializationFormat] = _DEFAULT
) -> "Op[None]":
    """Publish ``value`` under ``key`` for this workflow (from workflow
    code or a step); ``get_event`` reads it."""
    return comm.set_event_op(scope.serializer, scope.ctx, key, value, serialization_type)


def get_event(scope: Scope, /, workflow_id: str, key: str, timeout_seconds: float = 60, *, shard_key: Optional[str] = None) -> "Op[Any]":
    """A workflow's event, waiting up to ``timeout_seconds`` for it to be
    set (None when it was not)."""
    check_no_shard_key(shard_key)
    return comm.get_event_op(scope.serializer, scope.ctx, workflow_id, key, timeout_seconds)


def get_all_events(scope: Scope, /, workflow_id: str, *, shard_key: Optional[str] = None) -> "Op[Dict[str, Any]]":
    """Every event a workflow has set, by key."""
    check_no_shard_key(shard_key)
    return (yield from _step(scope, "DBOS.get_events", comm.get_all_events_op(scope.serializer, workflow_id)))


def write_stream(
    scope: Scope, key: str, value: Any, *, serialization_type: Optional[WorkflowSerializationFormat] = _DEFAULT
) -> "Op[None]":
    """Append a value to this workflow's stream ``key`` (from workflow
    code or a step)."""
    return comm.write_stream_op(scope.serializer, scope.ctx, key, value, serialization_type)


def close_stream(scope: Scope, /, key: str) -> "Op[None]":
    """Close this workflow's stream ``key``: readers end there."""
    return comm.write_stream_op(scope.serializer, scope.ctx, key, None, None, close=True)


def read_stream_offset(
    scope: Scope, workflow_id: str, key: str, offset: int, *, polling_interval_sec: Optional[float] = None,
    timeout_seconds: Optional[float] = None, shard_key: Optional[str] = None,
) -> "Op[Any]":
    """The value at one offset of a stream, waiting for it to be written
    (DBOSStreamTimeoutError past the timeout, or when the stream ends
    before it)."""
    comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
    check_no_shard_key(shard_key)
    return comm.read_stream_offset_op(scope.serializer, scope.ctx, workflow_id, key, offset, timeout_seconds)


def read_stream(
    scope: Scope, workflow_id: str, key: str, *, offset: int = 0, polling_interval_sec: Optional[float] = None,
    timeout_seconds: Optional[float] = None, shard_key: Optional[str] = None,
) -> "Op[None]":
    """Yield a stream's values from ``offset`` until it is closed or its
    workflow ends; a wait longer than ``timeout_seconds`` for the next
    value raises DBOSStreamTimeoutError. In workflow code each value read
    is a step. (The agent wakes readers: ``polling_interval_sec`` is
    accepted for compatibility.)"""
    comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
    check_no_shard_key(shard_key)
    return comm.read_stream_op(scope.serializer, scope.ctx, workflow_id, key, offset, timeout_seconds)


# ---------------------------------------------------------------------------
# Patches


def patch(scope: Scope, /, patch_name: str) -> "Op[bool]":
    """True where the workflow runs (or ran) the patched code, False when
    it is a replay of an execution that started before the patch."""
    return comm.patch_op(scope.ctx, patch_name, "DBOS.patch", deprecate=False)


def deprecate_patch(scope: Scope, /, patch_name: str) -> "Op[bool]":
    """Always True: the step after a removed ``patch`` keeps its place in
    executions that recorded the patch, and new executions record none."""
    return comm.patch_op(scope.ctx, patch_name, "DBOS.deprecate_patch", deprecate=True)


# ---------------------------------------------------------------------------
# The facades' common methods


class SharedOperations(Shared):
    """The methods ``DBOS`` and ``DBOSClient`` both have, each an operation
    above bound as a sync method and its async twin (see ``_facade``). In
    DBOS a blocking call on a running event loop is refused where DBOS
    Python refuses it (``check_loop``)."""

    retrieve_workflow, retrieve_workflow_async = handle_twins(retrieve_workflow)
    cancel_workflow, cancel_workflow_async = twins(cancel_workflow)
    cancel_workflows, cancel_workflows_async = twins(cancel_workflows)
    resume_workflow, resume_workflow_async = handle_twins(resume_workflow)
    resume_workflows, resume_workflows_async = handles_twins(resume_workflows)
    list_workflows, list_workflows_async = twins(list_workflows)
    list_queued_workflows, list_queued_workflows_async = twins(list_queued_workflows)
    list_workflow_steps, list_workflow_steps_async = twins(list_workflow_steps)
    set_workflow_delay, set_workflow_delay_async = twins(set_workflow_delay)
    fork_workflow, fork_workflow_async = handle_twins(fork_workflow)
    rewind_workflow, rewind_workflow_async = handle_twins(rewind_workflow)
    delete_workflow, delete_workflow_async = twins(delete_workflow)
    delete_workflows, delete_workflows_async = twins(delete_workflows)
    update_workflow_attributes, update_workflow_attributes_async = twins(update_workflow_attributes)

    retrieve_queue, retrieve_queue_async = twins(retrieve_queue)
    list_queues, list_queues_async = twins(list_queues)
    delete_queue, delete_queue_async = twins(delete_queue)

    list_schedules, list_schedules_async = twins(list_schedules, check_loop=False)
    get_schedule, get_schedule_async = twins(get_schedule, check_loop=False)
    delete_schedule, delete_schedule_async = twins(delete_schedule, check_loop=False)
    pause_schedule, pause_schedule_async = twins(pause_schedule, check_loop=False)
    resume_schedule, resume_schedule_async = twins(resume_schedule, check_loop=False)
    backfill_schedule, backfill_schedule_async = handles_twins(backfill_schedule, check_loop=False)
    trigger_schedule, trigger_schedule_async = handle_twins(trigger_schedule, check_loop=False)

    list_application_versions, list_application_versions_async = twins(list_application_versions, check_loop=False)
    get_latest_application_version, get_latest_application_version_async = twins(
        get_latest_application_version, check_loop=False
    )
    set_latest_application_version, set_latest_application_version_async = twins(
        set_latest_application_version, check_loop=False
    )

    send_bulk, send_bulk_async = twins(send_bulk)
    get_event, get_event_async = twins(get_event)
    get_all_events, get_all_events_async = twins(get_all_events)
    read_stream, read_stream_async = stream_twins(read_stream)
    read_stream_offset, read_stream_offset_async = twins(read_stream_offset, check_loop=False)
