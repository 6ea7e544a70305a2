"""``DBOSClient``: for processes that run no workflows but enqueue them,
wait for them and manage them (a web frontend, a script)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, AsyncGenerator, Dict, Generator, Iterable, List, Optional, TypedDict, TypeVar, Union

from . import _comm as comm
from ._comm import SendMessage
from ._core import (
    DEFAULT_POLLING_INTERVAL,
    Engine,
    ParentStep,
    StepInfo,
    WorkflowHandle,
    WorkflowHandleAsync,
    WorkflowStatus,
    _EnqueueOptions,
    drive,
    drive_async,
    drive_values,
    drive_values_async,
    validate_duplication_policy,
    validate_priority,
    validate_workflow_id_reuse_policy,
    wait_first,
    wait_first_async,
)
from . import _scheduling as sched
from ._extras import ClientExtras
from ._scheduling import ClientScheduleInput, VersionInfo, WorkflowSchedule
from ._error import DBOSException, DBOSNonExistentWorkflowError, DBOSNotSupportedError
from ._client_queue import register_queue_op
from ._list_filters import LIST_FILTERS, check_filter_names, queued_filters
from ._management import delete_queue_op, resume_workflows_op
from ._serialization import DBOSDefaultSerializer, Serializer, WorkflowSerializationFormat, tag_for
from ._transport import AgentLink, Connection, resolve_socket_path, resolve_trusted_uids

if TYPE_CHECKING:
    from ._dbos import Queue, QueueRateLimit

R = TypeVar("R")
logger = logging.getLogger("dbos_agent")


class _EnqueueOptionsRequired(TypedDict):
    workflow_name: str
    queue_name: str


class EnqueueOptions(_EnqueueOptionsRequired, total=False):
    """What ``DBOSClient.enqueue`` (and ``DBOS.enqueue_workflow_with_options``)
    takes, as in DBOS Python."""

    workflow_id: str
    workflow_id_reuse_policy: str
    app_version: str
    workflow_timeout: float
    delay_seconds: float
    deduplication_id: str
    duplication_policy: str
    priority: int
    queue_partition_key: str
    authenticated_user: str
    serialization_type: WorkflowSerializationFormat
    class_name: str
    instance_name: str
    attributes: Dict[str, Any]
    authenticated_roles: List[str]
    application_name: Optional[str]
    # Accepted by DBOS Python; refused here until the agent serves them.
    otel_context: Any
    shard_key: str


_UNSUPPORTED_OPTIONS = {
    "otel_context": None,
    "shard_key": "sharded system databases",
}


def enqueue_request(
    engine: Engine,
    serializer: Serializer,
    options: EnqueueOptions,
    args: Any,
    kwargs: Dict[str, Any],
    call: str,
    own_app: str,
    parent: Optional[ParentStep] = None,
) -> Dict[str, Any]:
    """The start_workflow request for ``EnqueueOptions``, as DBOS Python
    builds the row: a timeout starts counting when the workflow is dequeued,
    ``delay_seconds`` keeps it DELAYED that long first."""
    opts: Dict[str, Any] = dict(options)
    for key, what in _UNSUPPORTED_OPTIONS.items():
        if opts.get(key) is not None:
            raise DBOSNotSupportedError(f"{call}(options[{key!r}])", what)
    validate_workflow_id_reuse_policy(opts.get("workflow_id_reuse_policy"))
    if "workflow_name" not in opts or "queue_name" not in opts:
        raise DBOSException(f"{call} needs options workflow_name and queue_name")
    validate_priority(opts.get("priority"))
    validate_duplication_policy(opts.get("duplication_policy"), opts["queue_name"], opts.get("deduplication_id"))
    delay = opts.get("delay_seconds")
    timeout = opts.get("workflow_timeout")
    body = engine.start_request(
        opts["workflow_name"], tuple(args), kwargs,
        tag=tag_for(opts.get("serialization_type"), serializer),
        workflow_id=opts.get("workflow_id") or (parent.child_id() if parent is not None else None),
        queue_name=opts["queue_name"],
        run_here=False,
        class_name=opts.get("class_name"),
        config_name=opts.get("instance_name"),
        enqueue=_EnqueueOptions(
            deduplication_id=opts.get("deduplication_id"),
            priority=opts.get("priority"),
            app_version=opts.get("app_version"),
            queue_partition_key=opts.get("queue_partition_key"),
            delay_until_epoch_ms=int((time.time() + delay) * 1000) if delay is not None else None,
            duplication_policy=opts.get("duplication_policy"),
        ),
        authenticated_user=opts.get("authenticated_user"),
        timeout_ms=int(timeout * 1000) if timeout else None,
        attributes=opts.get("attributes"),
        parent=parent,
    )
    # The roles the user was granted, recorded as DBOS records them (the
    # worker checks the workflow's required roles against them).
    if opts.get("authenticated_roles"):
        body["authenticated_roles"] = list(opts["authenticated_roles"])
    if opts.get("workflow_id_reuse_policy") == "reject":
        body["workflow_id_reuse_policy"] = "reject"
    # Another application's workflow (DBOS's application_name option): its
    # row, run by that application's workers.
    app = opts.get("application_name")
    if app and app != own_app:
        body["application_name"] = app
    return body


class DBOSClient(ClientExtras):
    """A connection to the agent for enqueueing and managing workflows.

    ``agent_socket`` names the agent (else env ``DBOS_AGENT_SOCKET``, else its
    default path); ``agent_trusted_uids`` are users besides this process's
    own and root whose agent it talks to (else env
    ``DBOS_AGENT_TRUSTED_UIDS``). DBOS Python's ``system_database_url`` and
    ``dbos_system_schema`` are accepted so that code written for it runs
    unchanged; the agent's own database is the one used.
    """

    def __init__(
        self,
        *,
        agent_socket: Optional[str] = None,
        agent_trusted_uids: Union[None, str, Iterable[int]] = None,
        application_name: Optional[str] = None,
        system_database_url: Optional[str] = None,
        dbos_system_schema: Optional[str] = None,
        serializer: Serializer = DBOSDefaultSerializer,
        **ignored: Any,
    ) -> None:
        if system_database_url is not None or dbos_system_schema is not None or ignored:
            logger.info("DBOSClient: database settings are the agent's business and are ignored here")
        self._app_name = application_name or ""
        self._serializer = serializer
        self._engine = Engine(serializer)
        self._link = AgentLink(
            resolve_socket_path(agent_socket),
            self._hello,
            self._on_push,
            self._on_connected,
            self._on_lost,
            trusted_uids=resolve_trusted_uids(agent_trusted_uids),
        )
        self._engine.link = self._link
        self._link.start()

    def _hello(self) -> Dict[str, Any]:
        from ._dbos import client_hello

        return client_hello(self._app_name)

    def _on_push(self, op: str, body: Dict[str, Any], conn: Connection) -> None:
        pass  # a client runs nothing, so the agent pushes it nothing

    def _on_connected(self, conn: Connection, reply: Dict[str, Any]) -> None:
        pass

    def _on_lost(self, conn: Connection, reason: BaseException) -> None:
        pass

    def destroy(self) -> None:
        self._link.close()

    def __enter__(self) -> "DBOSClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    # ------------------------------------------------------------------

    def enqueue(self, options: EnqueueOptions, *args: Any, **kwargs: Any) -> "WorkflowHandle[Any]":
        """Enqueue a workflow by name on a queue; a worker serving that queue
        runs it."""
        body = enqueue_request(self._engine, self._serializer, options, args, kwargs, "DBOSClient.enqueue", self._app_name)
        reply, _ = self._engine.start(body)
        return WorkflowHandle(self._engine, reply.get("workflow_id") or body["workflow_id"])

    async def enqueue_async(self, options: EnqueueOptions, *args: Any, **kwargs: Any) -> "WorkflowHandleAsync[Any]":
        body = enqueue_request(
            self._engine, self._serializer, options, args, kwargs, "DBOSClient.enqueue_async", self._app_name
        )
        reply, _ = await self._engine.start_async(body)
        return WorkflowHandleAsync(self._engine, reply.get("workflow_id") or body["workflow_id"])

    def retrieve_workflow(
        self, workflow_id: str, existing_workflow: bool = True, *, shard_key: Optional[str] = None,
    ) -> "WorkflowHandle[Any]":
        sched.refuse_shard_key("DBOSClient.retrieve_workflow", shard_key)
        if existing_workflow and self._engine.get_status(workflow_id) is None:
            raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandle(self._engine, workflow_id)

    async def retrieve_workflow_async(
        self, workflow_id: str, existing_workflow: bool = True, *, shard_key: Optional[str] = None,
    ) -> "WorkflowHandleAsync[Any]":
        sched.refuse_shard_key("DBOSClient.retrieve_workflow_async", shard_key)
        if existing_workflow and await self._engine.get_status_async(workflow_id) is None:
            raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandleAsync(self._engine, workflow_id)

    def wait_first(
        self, handles: List["WorkflowHandle[Any]"], *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL
    ) -> "WorkflowHandle[Any]":
        """The handle of the first of ``handles`` whose workflow ends (with
        any outcome). The agent wakes the waits, so ``polling_interval_sec``
        is accepted and not used."""
        return wait_first(self._engine, "DBOSClient.wait_first", handles, recorded=False)

    async def wait_first_async(
        self, handles: List["WorkflowHandleAsync[Any]"], *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL
    ) -> "WorkflowHandleAsync[Any]":
        return await wait_first_async(self._engine, "DBOSClient.wait_first_async", handles, recorded=False)

    def cancel_workflow(self, workflow_id: str, *, cancel_children: bool = False, shard_key: Optional[str] = None) -> None:
        """Cancel a workflow (with ``cancel_children``, every workflow it
        started too, recursively)."""
        self.cancel_workflows([workflow_id], cancel_children=cancel_children, shard_key=shard_key)

    async def cancel_workflow_async(
        self, workflow_id: str, *, cancel_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        await self.cancel_workflows_async([workflow_id], cancel_children=cancel_children, shard_key=shard_key)

    def cancel_workflows(
        self, workflow_ids: List[str], *, cancel_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOSClient.cancel_workflows", shard_key)
        self._engine.cancel(workflow_ids, cancel_children)

    async def cancel_workflows_async(
        self, workflow_ids: List[str], *, cancel_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOSClient.cancel_workflows_async", shard_key)
        await self._engine.cancel_async(workflow_ids, cancel_children)

    def resume_workflow(
        self, workflow_id: str, *, queue_name: Optional[str] = None, shard_key: Optional[str] = None,
    ) -> "WorkflowHandle[Any]":
        sched.refuse_shard_key("DBOSClient.resume_workflow", shard_key)
        self._engine.resume(workflow_id, queue_name)
        return WorkflowHandle(self._engine, workflow_id)

    async def resume_workflow_async(
        self, workflow_id: str, *, queue_name: Optional[str] = None, shard_key: Optional[str] = None,
    ) -> "WorkflowHandleAsync[Any]":
        sched.refuse_shard_key("DBOSClient.resume_workflow_async", shard_key)
        await self._engine.resume_async(workflow_id, queue_name)
        return WorkflowHandleAsync(self._engine, workflow_id)

    def resume_workflows(
        self, workflow_ids: List[str], *, queue_name: Optional[str] = None, shard_key: Optional[str] = None
    ) -> "List[WorkflowHandle[Any]]":
        """Resume several workflows, all or none (see ``DBOS.resume_workflows``)."""
        sched.refuse_shard_key("DBOSClient.resume_workflows", shard_key)
        drive(self._engine, resume_workflows_op(workflow_ids, queue_name))
        return [WorkflowHandle(self._engine, wid) for wid in workflow_ids]

    async def resume_workflows_async(
        self, workflow_ids: List[str], *, queue_name: Optional[str] = None, shard_key: Optional[str] = None
    ) -> "List[WorkflowHandleAsync[Any]]":
        sched.refuse_shard_key("DBOSClient.resume_workflows_async", shard_key)
        await drive_async(self._engine, resume_workflows_op(workflow_ids, queue_name))
        return [WorkflowHandleAsync(self._engine, wid) for wid in workflow_ids]

    # DBOS's keyword arguments (see _list_filters.LIST_FILTERS).
    def list_workflows(self, **filters: Any) -> List[WorkflowStatus]:
        check_filter_names("DBOSClient.list_workflows", filters, LIST_FILTERS)
        return self._engine.list_workflows("DBOSClient.list_workflows", filters, self._app_name)

    async def list_workflows_async(self, **filters: Any) -> List[WorkflowStatus]:
        check_filter_names("DBOSClient.list_workflows_async", filters, LIST_FILTERS)
        return await self._engine.list_workflows_async("DBOSClient.list_workflows_async", filters, self._app_name)

    def list_queued_workflows(self, **filters: Any) -> List[WorkflowStatus]:
        filters = queued_filters("DBOSClient.list_queued_workflows", filters)
        return self._engine.list_workflows("DBOSClient.list_queued_workflows", filters, self._app_name)

    async def list_queued_workflows_async(self, **filters: Any) -> List[WorkflowStatus]:
        filters = queued_filters("DBOSClient.list_queued_workflows_async", filters)
        return await self._engine.list_workflows_async("DBOSClient.list_queued_workflows_async", filters, self._app_name)

    def list_workflow_steps(
        self, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None,
        offset: Optional[int] = None, shard_key: Optional[str] = None,
    ) -> List[StepInfo]:
        sched.refuse_shard_key("DBOSClient.list_workflow_steps", shard_key)
        return self._engine.list_steps(workflow_id, load_output, limit, offset)

    async def list_workflow_steps_async(
        self, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None,
        offset: Optional[int] = None, shard_key: Optional[str] = None,
    ) -> List[StepInfo]:
        sched.refuse_shard_key("DBOSClient.list_workflow_steps_async", shard_key)
        return await self._engine.list_steps_async(workflow_id, load_output, limit, offset)

    # -- queues and delays

    def retrieve_queue(self, name: str) -> "Optional[Queue]":
        """A queue's stored configuration, or None."""
        from ._dbos import Queue

        info = sched.get_queue(self._engine, name)
        if info is None or not info.get("registered"):
            return None
        return Queue._from_info(info)

    async def retrieve_queue_async(self, name: str) -> "Optional[Queue]":
        return await asyncio.to_thread(self.retrieve_queue, name)

    def list_queues(self, *, application_name: Optional[Union[str, List[str]]] = None) -> "List[Queue]":
        """The queues registered in the system database."""
        from ._dbos import Queue

        sched.refuse_other_application("DBOSClient.list_queues", application_name, self._app_name)
        return [Queue._from_info(i) for i in sched.list_queues(self._engine) if i.get("registered")]

    async def list_queues_async(self, *, application_name: Optional[Union[str, List[str]]] = None) -> "List[Queue]":
        return await asyncio.to_thread(lambda: self.list_queues(application_name=application_name))

    def set_workflow_delay(
        self,
        workflow_id: str,
        *,
        delay_seconds: Optional[float] = None,
        delay_until_epoch_ms: Optional[int] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        sched.refuse_shard_key("DBOSClient.set_workflow_delay", shard_key)
        sched.set_workflow_delay(self._engine, workflow_id, delay_seconds, delay_until_epoch_ms)

    async def set_workflow_delay_async(
        self,
        workflow_id: str,
        *,
        delay_seconds: Optional[float] = None,
        delay_until_epoch_ms: Optional[int] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        await asyncio.to_thread(
            lambda: self.set_workflow_delay(
                workflow_id, delay_seconds=delay_seconds, delay_until_epoch_ms=delay_until_epoch_ms, shard_key=shard_key
            )
        )

    # -- schedules

    def create_schedule(
        self,
        *,
        schedule_name: str,
        workflow_name: str,
        schedule: str,
        context: Any = None,
        workflow_class_name: Optional[str] = None,
        automatic_backfill: bool = False,
        cron_timezone: Optional[str] = None,
        queue_name: Optional[str] = None,
        application_name: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        """Create a cron schedule of a workflow by name; it belongs to the
        client's application (``DBOSClient(application_name=...)``; a client
        without one creates an unclaimed schedule)."""
        sched.refuse_shard_key("DBOSClient.create_schedule", shard_key)
        sched.refuse_other_application("DBOSClient.create_schedule", application_name, self._app_name)
        sched.create_schedule(
            self._engine,
            sched.schedule_message(
                schedule_name=schedule_name, workflow_name=workflow_name, schedule=schedule, context=context,
                workflow_class_name=workflow_class_name, automatic_backfill=automatic_backfill,
                cron_timezone=cron_timezone, queue_name=queue_name,
            ),
        )

    async def create_schedule_async(
        self,
        *,
        schedule_name: str,
        workflow_name: str,
        schedule: str,
        context: Any = None,
        workflow_class_name: Optional[str] = None,
        automatic_backfill: bool = False,
        cron_timezone: Optional[str] = None,
        queue_name: Optional[str] = None,
        application_name: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        await asyncio.to_thread(
            lambda: self.create_schedule(
                schedule_name=schedule_name, workflow_name=workflow_name, schedule=schedule, context=context,
                workflow_class_name=workflow_class_name, automatic_backfill=automatic_backfill,
                cron_timezone=cron_timezone, queue_name=queue_name, application_name=application_name,
                shard_key=shard_key,
            )
        )

    def list_schedules(
        self,
        *,
        status: Optional[Union[str, List[str]]] = None,
        workflow_name: Optional[Union[str, List[str]]] = None,
        schedule_name_prefix: Optional[Union[str, List[str]]] = None,
        application_name: Optional[Union[str, List[str]]] = None,
    ) -> List[WorkflowSchedule]:
        sched.refuse_other_application("DBOSClient.list_schedules", application_name, self._app_name)
        return sched.list_schedules(self._engine, "DBOSClient.list_schedules", status, workflow_name, schedule_name_prefix)

    async def list_schedules_async(
        self,
        *,
        status: Optional[Union[str, List[str]]] = None,
        workflow_name: Optional[Union[str, List[str]]] = None,
        schedule_name_prefix: Optional[Union[str, List[str]]] = None,
        application_name: Optional[Union[str, List[str]]] = None,
    ) -> List[WorkflowSchedule]:
        return await asyncio.to_thread(
            lambda: self.list_schedules(
                status=status, workflow_name=workflow_name, schedule_name_prefix=schedule_name_prefix,
                application_name=application_name,
            )
        )

    def get_schedule(self, name: str) -> Optional[WorkflowSchedule]:
        return sched.get_schedule(self._engine, name)

    async def get_schedule_async(self, name: str) -> Optional[WorkflowSchedule]:
        return await asyncio.to_thread(self.get_schedule, name)

    def delete_schedule(self, name: str) -> None:
        sched.delete_schedule(self._engine, name)

    async def delete_schedule_async(self, name: str) -> None:
        await asyncio.to_thread(self.delete_schedule, name)

    def pause_schedule(self, name: str) -> None:
        sched.pause_schedule(self._engine, name)

    def resume_schedule(self, name: str) -> None:
        sched.resume_schedule(self._engine, name)

    def apply_schedules(self, schedules: List[ClientScheduleInput]) -> None:
        """Create or replace these schedules (made ACTIVE), one at a time."""
        messages = []
        for i, entry in enumerate(schedules):
            for required in ("schedule_name", "workflow_name", "schedule"):
                if required not in entry:
                    raise DBOSException(f"Schedule entry {i} is missing required field '{required}'")
            sched.refuse_shard_key("DBOSClient.apply_schedules", entry.get("shard_key"))
            sched.refuse_other_application("DBOSClient.apply_schedules", entry.get("application_name"), self._app_name)
            messages.append(
                sched.schedule_message(
                    schedule_name=entry["schedule_name"], workflow_name=entry["workflow_name"],
                    schedule=entry["schedule"], context=entry.get("context"),
                    workflow_class_name=entry.get("workflow_class_name"),
                    automatic_backfill=entry.get("automatic_backfill", False),
                    cron_timezone=entry.get("cron_timezone"), queue_name=entry.get("queue_name"),
                )
            )
        for m in messages:
            sched.upsert_schedule(self._engine, m, keep_status=False)

    async def apply_schedules_async(self, schedules: List[ClientScheduleInput]) -> None:
        await asyncio.to_thread(self.apply_schedules, schedules)

    def backfill_schedule(self, schedule_name: str, start: datetime, end: datetime) -> "List[WorkflowHandle[None]]":
        return [
            WorkflowHandle(self._engine, wid)
            for wid in sched.backfill_schedule(self._engine, schedule_name, start, end)
        ]

    def trigger_schedule(self, schedule_name: str) -> "WorkflowHandle[None]":
        return WorkflowHandle(self._engine, sched.trigger_schedule(self._engine, schedule_name))

    # -- application versions

    def list_application_versions(self) -> List[VersionInfo]:
        return sched.list_versions(self._engine)

    def get_latest_application_version(self) -> VersionInfo:
        return sched.latest_version(self._engine)

    def set_latest_application_version(self, version_name: str, *, application_name: Optional[str] = None) -> None:
        sched.refuse_other_application("DBOSClient.set_latest_application_version", application_name, self._app_name)
        sched.promote_version(self._engine, version_name)

    async def list_application_versions_async(self) -> List[VersionInfo]:
        return await asyncio.to_thread(self.list_application_versions)

    async def get_latest_application_version_async(self) -> VersionInfo:
        return await asyncio.to_thread(self.get_latest_application_version)

    async def set_latest_application_version_async(
        self, version_name: str, *, application_name: Optional[str] = None
    ) -> None:
        await asyncio.to_thread(
            lambda: self.set_latest_application_version(version_name, application_name=application_name)
        )

    def register_queue(
        self,
        name: str,
        *,
        global_concurrency: Optional[int] = None,
        partition_concurrency: Optional[int] = None,
        partition_worker_concurrency: Optional[int] = None,
        partition_limiter: "Optional[QueueRateLimit]" = None,
        limiter: "Optional[QueueRateLimit]" = None,
        worker_concurrency: Optional[int] = None,
        polling_interval_sec: float = 1.0,
        on_conflict: str = "always_update",
        application_name: Optional[str] = None,
        concurrency: Optional[int] = None,
    ) -> "Queue":
        """Store a queue's configuration for this client's application (or
        ``application_name``'s), as DBOS's client does; this client serves
        nothing (workers that declare the queue do). ``on_conflict``: "always_update" (default) overwrites
        a stored configuration, "never_update" keeps it."""
        return drive(self._engine, register_queue_op(
            name, application_name=application_name, global_concurrency=global_concurrency, partition_concurrency=partition_concurrency,
            partition_worker_concurrency=partition_worker_concurrency, partition_limiter=partition_limiter,
            limiter=limiter, worker_concurrency=worker_concurrency, polling_interval_sec=polling_interval_sec,
            on_conflict=on_conflict, concurrency=concurrency,
        ))

    async def register_queue_async(
        self,
        name: str,
        *,
        global_concurrency: Optional[int] = None,
        partition_concurrency: Optional[int] = None,
        partition_worker_concurrency: Optional[int] = None,
        partition_limiter: "Optional[QueueRateLimit]" = None,
        limiter: "Optional[QueueRateLimit]" = None,
        worker_concurrency: Optional[int] = None,
        polling_interval_sec: float = 1.0,
        on_conflict: str = "always_update",
        application_name: Optional[str] = None,
        concurrency: Optional[int] = None,
    ) -> "Queue":
        return await drive_async(self._engine, register_queue_op(
            name, application_name=application_name, global_concurrency=global_concurrency, partition_concurrency=partition_concurrency,
            partition_worker_concurrency=partition_worker_concurrency, partition_limiter=partition_limiter,
            limiter=limiter, worker_concurrency=worker_concurrency, polling_interval_sec=polling_interval_sec,
            on_conflict=on_conflict, concurrency=concurrency,
        ))

    def delete_queue(self, name: str) -> None:
        """Delete a queue's registration (see ``DBOS.delete_queue``)."""
        drive(self._engine, delete_queue_op(name))

    async def delete_queue_async(self, name: str) -> None:
        await drive_async(self._engine, delete_queue_op(name))

    # -- messages, events and streams (never recorded: a client is not a
    # workflow)

    def send(
        self,
        destination_id: str,
        message: Any,
        topic: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        *,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
        shard_key: Optional[str] = None,
    ) -> None:
        """Send a message to a workflow (see ``DBOS.send``)."""
        messages = [SendMessage(destination_id, message, topic, idempotency_key, shard_key)]
        drive(self._engine, comm.send_op(self._serializer, None, messages, serialization_type, "DBOS.send", send_to_forks))

    async def send_async(
        self,
        destination_id: str,
        message: Any,
        topic: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        *,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
        shard_key: Optional[str] = None,
    ) -> None:
        messages = [SendMessage(destination_id, message, topic, idempotency_key, shard_key)]
        op = comm.send_op(self._serializer, None, messages, serialization_type, "DBOS.send", send_to_forks)
        await drive_async(self._engine, op)

    def send_bulk(
        self,
        messages: List[SendMessage],
        *,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
    ) -> None:
        """Send many messages in one transaction: all of them or none."""
        op = comm.send_op(self._serializer, None, messages, serialization_type, "DBOS.sendBulk", send_to_forks)
        drive(self._engine, op)

    async def send_bulk_async(
        self,
        messages: List[SendMessage],
        *,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
    ) -> None:
        op = comm.send_op(self._serializer, None, messages, serialization_type, "DBOS.sendBulk", send_to_forks)
        await drive_async(self._engine, op)

    def get_event(self, workflow_id: str, key: str, timeout_seconds: float = 60, *, shard_key: Optional[str] = None) -> Any:
        """A workflow's event, waiting up to ``timeout_seconds`` (None when it
        was not set)."""
        sched.refuse_shard_key("DBOSClient.get_event", shard_key)
        return drive(self._engine, comm.get_event_op(self._serializer, None, workflow_id, key, timeout_seconds))

    async def get_event_async(
        self, workflow_id: str, key: str, timeout_seconds: float = 60, *, shard_key: Optional[str] = None
    ) -> Any:
        sched.refuse_shard_key("DBOSClient.get_event_async", shard_key)
        return await drive_async(self._engine, comm.get_event_op(self._serializer, None, workflow_id, key, timeout_seconds))

    def get_all_events(self, workflow_id: str) -> Dict[str, Any]:
        """Every event a workflow has set, by key."""
        return drive(self._engine, comm.get_all_events_op(self._serializer, workflow_id))

    async def get_all_events_async(self, workflow_id: str) -> Dict[str, Any]:
        return await drive_async(self._engine, comm.get_all_events_op(self._serializer, workflow_id))

    def read_stream(
        self,
        workflow_id: str,
        key: str,
        *,
        offset: int = 0,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> Generator[Any, Any, None]:
        """Yield a stream's values until it is closed or its workflow ends
        (see ``DBOS.read_stream``)."""
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOSClient.read_stream", shard_key)
        yield from drive_values(
            self._engine, comm.read_stream_op(self._serializer, None, workflow_id, key, offset, timeout_seconds)
        )

    async def read_stream_async(
        self,
        workflow_id: str,
        key: str,
        *,
        offset: int = 0,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> AsyncGenerator[Any, None]:
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOSClient.read_stream_async", shard_key)
        reader = comm.read_stream_op(self._serializer, None, workflow_id, key, offset, timeout_seconds)
        async for value in drive_values_async(self._engine, reader):
            yield value

    def read_stream_offset(
        self,
        workflow_id: str,
        key: str,
        offset: int,
        *,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> Any:
        """The value at one offset of a stream, waiting for it."""
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOSClient.read_stream_offset", shard_key)
        op = comm.read_stream_offset_op(self._serializer, None, workflow_id, key, offset, timeout_seconds)
        return drive(self._engine, op)

    async def read_stream_offset_async(
        self,
        workflow_id: str,
        key: str,
        offset: int,
        *,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> Any:
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOSClient.read_stream_offset_async", shard_key)
        op = comm.read_stream_offset_op(self._serializer, None, workflow_id, key, offset, timeout_seconds)
        return await drive_async(self._engine, op)

    # -- fork, rewind, delete and attributes

    def fork_workflow(
        self,
        workflow_id: str,
        start_step: int,
        *,
        application_version: Optional[str] = None,
        queue_name: Optional[str] = None,
        queue_partition_key: Optional[str] = None,
        replacement_children: Optional[Dict[str, str]] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> "WorkflowHandle[Any]":
        """Start a copy of a workflow from a step (see ``DBOS.fork_workflow``)."""
        sched.refuse_shard_key("DBOSClient.fork_workflow", shard_key)
        op = comm.fork_op(
            workflow_id, start_step, application_version=application_version, queue_name=queue_name,
            queue_partition_key=queue_partition_key, replacement_children=replacement_children,
            timeout_seconds=timeout_seconds,
        )
        return WorkflowHandle(self._engine, drive(self._engine, op))

    async def fork_workflow_async(
        self,
        workflow_id: str,
        start_step: int,
        *,
        application_version: Optional[str] = None,
        queue_name: Optional[str] = None,
        queue_partition_key: Optional[str] = None,
        replacement_children: Optional[Dict[str, str]] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> "WorkflowHandleAsync[Any]":
        sched.refuse_shard_key("DBOSClient.fork_workflow_async", shard_key)
        op = comm.fork_op(
            workflow_id, start_step, application_version=application_version, queue_name=queue_name,
            queue_partition_key=queue_partition_key, replacement_children=replacement_children,
            timeout_seconds=timeout_seconds,
        )
        return WorkflowHandleAsync(self._engine, await drive_async(self._engine, op))

    def rewind_workflow(
        self,
        workflow_id: str,
        *,
        start_step: Optional[int] = None,
        application_version: Optional[str] = None,
        queue_name: Optional[str] = None,
        queue_partition_key: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> "WorkflowHandle[Any]":
        """Run an ended workflow again from a step (see ``DBOS.rewind_workflow``)."""
        sched.refuse_shard_key("DBOSClient.rewind_workflow", shard_key)
        op = comm.rewind_op(
            workflow_id, start_step, application_version=application_version, queue_name=queue_name,
            queue_partition_key=queue_partition_key,
        )
        drive(self._engine, op)
        return WorkflowHandle(self._engine, workflow_id)

    async def rewind_workflow_async(
        self,
        workflow_id: str,
        *,
        start_step: Optional[int] = None,
        application_version: Optional[str] = None,
        queue_name: Optional[str] = None,
        queue_partition_key: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> "WorkflowHandleAsync[Any]":
        sched.refuse_shard_key("DBOSClient.rewind_workflow_async", shard_key)
        op = comm.rewind_op(
            workflow_id, start_step, application_version=application_version, queue_name=queue_name,
            queue_partition_key=queue_partition_key,
        )
        await drive_async(self._engine, op)
        return WorkflowHandleAsync(self._engine, workflow_id)

    def delete_workflow(self, workflow_id: str, *, delete_children: bool = False, shard_key: Optional[str] = None) -> None:
        self.delete_workflows([workflow_id], delete_children=delete_children, shard_key=shard_key)

    async def delete_workflow_async(
        self, workflow_id: str, *, delete_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        await self.delete_workflows_async([workflow_id], delete_children=delete_children, shard_key=shard_key)

    def delete_workflows(
        self, workflow_ids: List[str], *, delete_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        """Delete workflows with everything stored under them (with
        ``delete_children``, the workflows they started, recursively)."""
        sched.refuse_shard_key("DBOSClient.delete_workflows", shard_key)
        drive(self._engine, comm.delete_op(workflow_ids, delete_children))

    async def delete_workflows_async(
        self, workflow_ids: List[str], *, delete_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOSClient.delete_workflows_async", shard_key)
        await drive_async(self._engine, comm.delete_op(workflow_ids, delete_children))

    def update_workflow_attributes(
        self, workflow_id: str, attributes: Optional[Dict[str, Any]], *, merge: bool = False, shard_key: Optional[str] = None
    ) -> None:
        """Replace a workflow's attributes (None clears them), or merge
        top-level keys into them."""
        sched.refuse_shard_key("DBOSClient.update_workflow_attributes", shard_key)
        drive(self._engine, comm.update_attributes_op(workflow_id, attributes, merge))

    async def update_workflow_attributes_async(
        self, workflow_id: str, attributes: Optional[Dict[str, Any]], *, merge: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOSClient.update_workflow_attributes_async", shard_key)
        await drive_async(self._engine, comm.update_attributes_op(workflow_id, attributes, merge))
