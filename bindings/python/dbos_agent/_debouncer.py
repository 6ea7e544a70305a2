"""``Debouncer`` and ``DebouncerClient``: DBOS Python's debouncing over the
agent's ``debounce_workflow``. Calls with the same key coalesce onto one
DELAYED workflow that starts once the key has been quiet for the debounce
period, with the inputs of the latest call, and at the latest
``debounce_timeout_sec`` after the first call."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, Optional, Tuple, TypeVar, Union

from . import _protocol as proto
from ._context import (
    _Ctx,
    _enqueue_options,
    current_attributes,
    current_ctx,
    current_timeout_ms,
    take_assigned,
    validate_workflow_attributes,
)
from ._core import (
    Call,
    Engine,
    Op,
    WorkflowHandle,
    WorkflowHandleAsync,
    _replay,
    check_recorded_name,
    drive,
    drive_async,
)
from . import _auth as auth
from ._error import DBOSException, DBOSNotSupportedError, DBOSQueueDeduplicatedError
from ._registry import _dbos, _queues, _registration_of, _workflows
from ._scheduling import check_application_name, get_queue
from ._serialization import WorkflowSerializationFormat, serialize_args, tag_for

if TYPE_CHECKING:
    from ._client import DBOSClient
    from ._start import EnqueueOptions
    from ._queue import Queue

R = TypeVar("R")

# The step DBOS Python records for a debounce from workflow code: its
# DebounceResult, written in the bounce's transaction.
DEBOUNCE_STEP = "DBOS.debounce_delayed_workflow"
# The queue a debounced workflow runs on when the debouncer names none.
_INTERNAL_QUEUE = "_dbos_internal_queue"


def _queue_name(queue: "Optional[Union[Queue, str]]") -> Optional[str]:
    if queue is None:
        return None
    if isinstance(queue, str):
        return queue
    return queue.name


def _reject_conflicting_options(
    *,
    has_deduplication_id: bool,
    has_delay: bool,
    has_priority: bool,
    has_partition_key: bool,
    has_return_existing: bool = False,
    has_reject_reuse_policy: bool = False,
) -> None:
    """A debounce owns its workflow's deduplication id (the key) and delay
    (the period), as in DBOS Python, and takes no priority or partition."""
    if has_deduplication_id:
        raise DBOSException(
            "Cannot debounce a workflow with a deduplication_id set: the debounce "
            "key is used as the workflow's deduplication ID."
        )
    if has_delay:
        raise DBOSException(
            "Cannot debounce a workflow with a delay set: the debounce period controls the workflow's delay."
        )
    if has_priority:
        raise DBOSException(
            "Cannot debounce a workflow with a priority set: priority is not supported for debounced workflows."
        )
    if has_partition_key:
        raise DBOSException(
            "Cannot debounce a workflow with a queue partition key set: partitioned "
            "queues do not support deduplication, which debouncing requires."
        )
    if has_return_existing:
        raise DBOSException(
            "Cannot debounce a workflow with duplication_policy 'return-existing': "
            "a debounce owns the workflow's deduplication behavior."
        )
    if has_reject_reuse_policy:
        raise DBOSException(
            "Cannot debounce a workflow with workflow_id_reuse_policy 'reject': "
            "a debounce owns how its workflow is started."
        )


def _debounce_body(
    *,
    key: str,
    period_sec: float,
    timeout_sec: Optional[float],
    workflow_name: str,
    class_name: Optional[str],
    queue_name: Optional[str],
    tag: str,
    engine: Engine,
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    workflow_id: Optional[str],
    app_version: Optional[str],
    attributes: Optional[Dict[str, Any]],
) -> Dict[str, Any]:
    if period_sec < 0:
        raise DBOSException("debounce_period_sec must not be negative")
    if timeout_sec is not None and timeout_sec < 0:
        raise DBOSException("debounce_timeout_sec must not be negative")
    inputs, serialization = serialize_args(args, kwargs, tag, engine.serializer)
    delay_ms = int(period_sec * 1000)
    timeout_ms = int(timeout_sec * 1000) if timeout_sec else None
    if timeout_ms is not None:
        # The first call's delay is capped by the deadline too; later ones
        # are capped by the agent.
        delay_ms = min(delay_ms, timeout_ms)
    return {
        "key": key,
        "name": workflow_name,
        "class_name": class_name,
        "queue_name": queue_name,
        "delay_ms": delay_ms,
        "timeout_ms": timeout_ms,
        "inputs": inputs,
        "serialization": serialization,
        "workflow_id": workflow_id,
        "app_version": app_version,
        # The first call's, as DBOS's enqueue of the debounced workflow
        # records them; a bounce keeps the stored ones.
        "attributes": validate_workflow_attributes(attributes),
    }


class Debouncer(Generic[R]):
    """Debounce a workflow, as in DBOS Python::

        debouncer = Debouncer.create(process_edits, debounce_timeout_sec=60)
        handle = debouncer.debounce(document_id, 5.0, document_id, edits)

    Each ``debounce(key, period, *args)`` pushes the workflow of ``key`` back
    to ``period`` seconds from now and replaces its arguments; it starts when
    ``key`` has been quiet that long, or ``debounce_timeout_sec`` after the
    first call, on ``queue`` (default: the internal queue)."""

    def __init__(
        self,
        workflow_name: str,
        *,
        debounce_timeout_sec: Optional[float] = None,
        queue: "Optional[Union[Queue, str]]" = None,
        application_name: Optional[str] = None,
    ):
        self.func_name = workflow_name
        self.debounce_timeout_sec = debounce_timeout_sec
        self.queue_name = _queue_name(queue)
        self.application_name = application_name

    @staticmethod
    def create(
        workflow: Callable[..., R],
        *,
        debounce_timeout_sec: Optional[float] = None,
        queue: "Optional[Union[Queue, str]]" = None,
        application_name: Optional[str] = None,
    ) -> "Debouncer[R]":

        if isinstance(workflow, types.MethodType):
            raise TypeError("Only workflow functions may be debounced, not methods")
        return Debouncer(
            _registration_of(workflow).name,
            debounce_timeout_sec=debounce_timeout_sec,
            queue=queue,
            application_name=application_name,
        )

    @staticmethod
    def create_async(
        workflow: Callable[..., Any],
        *,
        debounce_timeout_sec: Optional[float] = None,
        queue: "Optional[Union[Queue, str]]" = None,
        application_name: Optional[str] = None,
    ) -> "Debouncer[Any]":
        return Debouncer.create(
            workflow, debounce_timeout_sec=debounce_timeout_sec, queue=queue, application_name=application_name
        )

    def _body(
        self, key: str, period_sec: float, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Tuple[Engine, Optional[_Ctx], Dict[str, Any]]:

        dbos = _dbos()
        ctx = current_ctx()
        if ctx is not None and ctx.step_id is not None:
            # From inside a step, as in DBOS: a bounce of its own, not a
            # step of the workflow (the step's outcome is what is recorded).
            ctx = None
        check_application_name("application_name", self.application_name)
        opts = _enqueue_options.get()
        assigned = take_assigned()
        pinned = assigned.workflow_id if assigned is not None else None
        _reject_conflicting_options(
            has_deduplication_id=opts is not None and opts.deduplication_id is not None,
            has_delay=opts is not None and opts.delay_until_epoch_ms is not None,
            has_priority=opts is not None and opts.priority is not None,
            has_partition_key=opts is not None and opts.queue_partition_key is not None,
            has_return_existing=opts is not None and opts.duplication_policy == "return-existing",
            has_reject_reuse_policy=assigned is not None and assigned.reuse_policy == "reject",
        )
        reg = _workflows.get(self.func_name)
        if reg is None:
            raise Exception(f"Invalid workflow name provided to debouncer: {self.func_name}")
        if self.queue_name is not None:

            if self.queue_name not in _queues and drive(dbos._engine, get_queue(self.queue_name)) is None:
                raise Exception(f"Invalid queue name provided to debouncer: {self.queue_name}")
        body = _debounce_body(
            key=key, period_sec=period_sec, timeout_sec=self.debounce_timeout_sec,
            workflow_name=reg.name, class_name=None, queue_name=self.queue_name,
            tag=tag_for(reg.serialization_type, dbos._serializer), engine=dbos._engine,
            args=args, kwargs=kwargs, workflow_id=pinned,
            app_version=opts.app_version if opts is not None else None,
            attributes=current_attributes(),
        )
        # The workflow's own timeout (its deadline is set when it is
        # dequeued). Unlike a child, it never inherits its caller's deadline
        # (DBOS's rule: it would be cancelled before its delay ends).
        timeout_ms = current_timeout_ms()
        if timeout_ms:
            body["workflow_timeout_ms"] = timeout_ms
        # A first call records the caller's identity, as an enqueue does.
        body.update(auth.start_fields())
        # Another application's workflow (DBOS's application_name): the agent
        # writes it for that application and bounces that one's pending call.
        body["application_name"] = self.application_name or None
        return dbos._engine, ctx, body

    def debounce(self, debounce_key: str, debounce_period_sec: float, *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        engine, ctx, body = self._body(debounce_key, debounce_period_sec, args, kwargs)
        return WorkflowHandle(engine, drive(engine, _debounce_op(engine, ctx, body)))

    async def debounce_async(
        self, debounce_key: str, debounce_period_sec: float, *args: Any, **kwargs: Any
    ) -> "WorkflowHandleAsync[R]":
        engine, ctx, body = self._body(debounce_key, debounce_period_sec, args, kwargs)
        return WorkflowHandleAsync(engine, await drive_async(engine, _debounce_op(engine, ctx, body)))


def _debounce_op(engine: Engine, ctx: Optional[_Ctx], body: Dict[str, Any]) -> "Op[str]":
    """A debounce: the id of the workflow that will run. From workflow code
    it is the step DBOS.debounce_delayed_workflow (DBOS's DebounceResult,
    recorded by the agent with the bounce), and when it creates the
    workflow, that child's start at the next function id, as DBOS Python
    numbers them; a replay answers from the history and bounces nothing."""
    if ctx is None:
        reply = yield Call(proto.OP_DEBOUNCE_WORKFLOW, body)
        return str(reply["workflow_id"])
    run = ctx.run
    fid = run.next_function_id()
    rec = run.history.get(fid)
    if rec is not None:
        result = _replay(run, fid, rec, DEBOUNCE_STEP, engine.serializer)
        if not isinstance(result, dict):
            raise DBOSException(f"step {fid} of workflow {run.workflow_id} ({DEBOUNCE_STEP}) records no debounce result")
        if result.get("bounced_workflow_id"):
            return str(result["bounced_workflow_id"])
        if result.get("holder_workflow_id"):
            raise DBOSQueueDeduplicatedError(
                str(result["holder_workflow_id"]),
                body.get("queue_name") or _INTERNAL_QUEUE,
                f"{body['name']}-{body['key']}",
            )
        child_fid = run.next_function_id()
        child = run.history.get(child_fid)
        if child is None or not child.get("child_workflow_id"):
            raise DBOSException(f"step {child_fid} of workflow {run.workflow_id} records no debounced workflow")
        check_recorded_name(run, child_fid, child, body["name"])
        return str(child["child_workflow_id"])
    run.check_live()
    body["caller"] = {"workflow_id": run.workflow_id, "owner_xid": run.owner_xid, "function_id": fid}
    reply = yield Call(proto.OP_DEBOUNCE_WORKFLOW, body, run, fid, DEBOUNCE_STEP)
    if not reply.get("bounced"):
        run.next_function_id()  # the workflow it created is the child at the next id
    return str(reply["workflow_id"])


class DebouncerClient(Generic[R]):
    """``Debouncer`` for a ``DBOSClient``: the workflow is named by
    ``workflow_options`` (``EnqueueOptions``), as in DBOS Python."""

    def __init__(
        self,
        client: "DBOSClient",
        workflow_options: "EnqueueOptions",
        *,
        debounce_timeout_sec: Optional[float] = None,
        queue: "Optional[Union[Queue, str]]" = None,
        application_name: Optional[str] = None,
    ):
        self.client = client
        self.workflow_options = workflow_options
        self.debounce_timeout_sec = debounce_timeout_sec
        self.queue_name = _queue_name(queue)
        self.application_name = application_name

    def _body(self, key: str, period_sec: float, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:

        opts: Dict[str, Any] = dict(self.workflow_options)
        _reject_conflicting_options(
            has_deduplication_id=opts.get("deduplication_id") is not None,
            has_delay=opts.get("delay_seconds") is not None,
            has_priority=opts.get("priority") is not None,
            has_partition_key=opts.get("queue_partition_key") is not None,
            has_return_existing=opts.get("duplication_policy") == "return-existing",
            has_reject_reuse_policy=opts.get("workflow_id_reuse_policy") == "reject",
        )
        # The debouncer's application, else the workflow options', else the
        # client's own (the agent's default), as DBOS picks the owner.
        app = self.application_name if self.application_name is not None else opts.get("application_name")
        check_application_name("application_name", app)
        for key_name in ("shard_key",):
            if opts.get(key_name) is not None:
                raise DBOSNotSupportedError(f"DebouncerClient(workflow_options[{key_name!r}])")
        fmt: Optional[WorkflowSerializationFormat] = opts.get("serialization_type")
        body = _debounce_body(
            key=key, period_sec=period_sec, timeout_sec=self.debounce_timeout_sec,
            workflow_name=opts["workflow_name"], class_name=opts.get("class_name"),
            queue_name=self.queue_name or opts.get("queue_name"),
            tag=tag_for(fmt, self.client._serializer), engine=self.client._engine,
            args=args, kwargs=kwargs, workflow_id=opts.get("workflow_id"), app_version=opts.get("app_version"),
            attributes=opts.get("attributes"),
        )
        body["authenticated_user"] = opts.get("authenticated_user")
        body["authenticated_roles"] = list(opts["authenticated_roles"]) if opts.get("authenticated_roles") else None
        timeout = opts.get("workflow_timeout")
        if timeout:
            body["workflow_timeout_ms"] = int(timeout * 1000)  # its deadline is set when it is dequeued
        body["application_name"] = app or None
        return body

    def debounce(self, debounce_key: str, debounce_period_sec: float, *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        body = self._body(debounce_key, debounce_period_sec, args, kwargs)
        reply = self.client._engine.call(proto.OP_DEBOUNCE_WORKFLOW, body)
        return WorkflowHandle(self.client._engine, reply["workflow_id"])

    async def debounce_async(
        self, debounce_key: str, debounce_period_sec: float, *args: Any, **kwargs: Any
    ) -> "WorkflowHandleAsync[R]":
        body = self._body(debounce_key, debounce_period_sec, args, kwargs)
        reply = await self.client._engine.call_async(proto.OP_DEBOUNCE_WORKFLOW, body)
        return WorkflowHandleAsync(self.client._engine, reply["workflow_id"])


__all__ = ["Debouncer", "DebouncerClient"]
