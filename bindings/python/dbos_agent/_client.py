"""``DBOSClient``: for processes that run no workflows but enqueue them,
wait for them and manage them (a web frontend, a script)."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional, TypedDict, TypeVar

from . import _protocol as proto
from ._core import (
    Engine,
    StepInfo,
    WorkflowHandle,
    WorkflowHandleAsync,
    WorkflowStatus,
    _EnqueueOptions,
)
from ._error import DBOSException, DBOSNonExistentWorkflowError, DBOSNotSupportedError
from ._serialization import DefaultSerializer, Serializer, WorkflowSerializationFormat, tag_for
from ._transport import AgentLink, Connection, resolve_socket_path

R = TypeVar("R")
logger = logging.getLogger("dbos_agent")


class _EnqueueOptionsRequired(TypedDict):
    workflow_name: str
    queue_name: str


class EnqueueOptions(_EnqueueOptionsRequired, total=False):
    """What ``DBOSClient.enqueue`` takes, as in DBOS Python."""

    workflow_id: str
    app_version: str
    deduplication_id: str
    priority: int
    serialization_type: WorkflowSerializationFormat
    class_name: str
    instance_name: str
    authenticated_user: str
    # Accepted by DBOS Python; refused here until the agent serves them.
    workflow_timeout: float
    delay_seconds: float
    queue_partition_key: str
    authenticated_roles: List[str]
    attributes: Dict[str, Any]
    application_name: Optional[str]
    duplication_policy: str
    workflow_id_reuse_policy: str


_UNSUPPORTED_OPTIONS = {
    "workflow_timeout": "workflow timeouts",
    "delay_seconds": "delayed workflows",
    "queue_partition_key": "partitioned queues",
    "authenticated_roles": None,
    "attributes": "workflow attributes",
    "otel_context": None,
    "shard_key": None,
}


class DBOSClient:
    """A connection to the agent for enqueueing and managing workflows.

    ``agent_socket`` names the agent (else env ``DBOS_AGENT_SOCKET``, else its
    default path). DBOS Python's ``system_database_url`` and
    ``dbos_system_schema`` are accepted so that code written for it runs
    unchanged; the agent's own database is the one used.
    """

    def __init__(
        self,
        *,
        agent_socket: Optional[str] = None,
        application_name: Optional[str] = None,
        system_database_url: Optional[str] = None,
        dbos_system_schema: Optional[str] = None,
        serializer: Serializer = DefaultSerializer(),
        **ignored: Any,
    ) -> None:
        if system_database_url is not None or dbos_system_schema is not None or ignored:
            logger.info("DBOSClient: database settings are the agent's business and are ignored here")
        self._app_name = application_name or ""
        self._serializer = serializer
        self._engine = Engine(serializer)
        self._link = AgentLink(resolve_socket_path(agent_socket), self._hello, self._on_push, self._on_connected, self._on_lost)
        self._engine.link = self._link
        self._link.start()

    def _hello(self) -> Dict[str, Any]:
        from ._dbos import __version__

        return {
            "min_version": proto.MIN_PROTOCOL_VERSION,
            "max_version": proto.PROTOCOL_VERSION,
            "role": proto.ROLE_CLIENT,
            "app_name": self._app_name,
            "language": "python",
            "binding_version": __version__,
            "pid": os.getpid(),
        }

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

    def _enqueue_body(self, options: EnqueueOptions, args: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        opts: Dict[str, Any] = dict(options)
        for key, what in _UNSUPPORTED_OPTIONS.items():
            if opts.get(key) is not None:
                raise DBOSNotSupportedError(f"DBOSClient.enqueue(options[{key!r}])", what)
        if opts.get("duplication_policy") not in (None, "reject"):
            raise DBOSNotSupportedError("DBOSClient.enqueue(options['duplication_policy'])", "only 'reject'")
        if opts.get("workflow_id_reuse_policy") not in (None, "return-existing"):
            raise DBOSNotSupportedError("DBOSClient.enqueue(options['workflow_id_reuse_policy'])", "only 'return-existing'")
        app = opts.get("application_name")
        if app is not None and app != self._app_name:
            raise DBOSNotSupportedError(
                "DBOSClient.enqueue(options['application_name'])",
                "a client enqueues for the application it was created with (DBOSClient(application_name=...))",
            )
        if "workflow_name" not in opts or "queue_name" not in opts:
            raise DBOSException("DBOSClient.enqueue needs options workflow_name and queue_name")
        priority = opts.get("priority")
        if priority is not None and not (1 <= priority <= 2**31 - 1):
            raise DBOSException(f"Invalid priority {priority}. Priority must be between 1~{2**31 - 1}.")
        return self._engine.start_request(
            opts["workflow_name"], tuple(args), kwargs,
            tag=tag_for(opts.get("serialization_type"), self._serializer),
            workflow_id=opts.get("workflow_id"),
            queue_name=opts["queue_name"],
            run_here=False,
            class_name=opts.get("class_name"),
            config_name=opts.get("instance_name"),
            enqueue=_EnqueueOptions(opts.get("deduplication_id"), priority, opts.get("app_version"), None),
            authenticated_user=opts.get("authenticated_user"),
        )

    def enqueue(self, options: EnqueueOptions, *args: Any, **kwargs: Any) -> "WorkflowHandle[Any]":
        """Enqueue a workflow by name on a queue; a worker serving that queue
        runs it."""
        body = self._enqueue_body(options, args, kwargs)
        self._engine.start(body)
        return WorkflowHandle(self._engine, body["workflow_id"])

    async def enqueue_async(self, options: EnqueueOptions, *args: Any, **kwargs: Any) -> "WorkflowHandleAsync[Any]":
        body = self._enqueue_body(options, args, kwargs)
        await self._engine.start_async(body)
        return WorkflowHandleAsync(self._engine, body["workflow_id"])

    def retrieve_workflow(self, workflow_id: str, existing_workflow: bool = True) -> "WorkflowHandle[Any]":
        if existing_workflow and self._engine.get_status(workflow_id) is None:
            raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandle(self._engine, workflow_id)

    async def retrieve_workflow_async(self, workflow_id: str, existing_workflow: bool = True) -> "WorkflowHandleAsync[Any]":
        if existing_workflow and await self._engine.get_status_async(workflow_id) is None:
            raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandleAsync(self._engine, workflow_id)

    def cancel_workflow(self, workflow_id: str, *, cancel_children: bool = False) -> None:
        if cancel_children:
            raise DBOSNotSupportedError("DBOSClient.cancel_workflow(cancel_children=True)", "child workflows")
        self._engine.cancel(workflow_id)

    async def cancel_workflow_async(self, workflow_id: str, *, cancel_children: bool = False) -> None:
        if cancel_children:
            raise DBOSNotSupportedError("DBOSClient.cancel_workflow_async(cancel_children=True)", "child workflows")
        await self._engine.cancel_async(workflow_id)

    def resume_workflow(self, workflow_id: str, *, queue_name: Optional[str] = None) -> "WorkflowHandle[Any]":
        self._engine.resume(workflow_id, queue_name)
        return WorkflowHandle(self._engine, workflow_id)

    async def resume_workflow_async(self, workflow_id: str, *, queue_name: Optional[str] = None) -> "WorkflowHandleAsync[Any]":
        await self._engine.resume_async(workflow_id, queue_name)
        return WorkflowHandleAsync(self._engine, workflow_id)

    def list_workflows(self, **filters: Any) -> List[WorkflowStatus]:
        return self._engine.list_workflows("DBOSClient.list_workflows", filters)

    async def list_workflows_async(self, **filters: Any) -> List[WorkflowStatus]:
        return await self._engine.list_workflows_async("DBOSClient.list_workflows_async", filters)

    def list_queued_workflows(self, **filters: Any) -> List[WorkflowStatus]:
        filters["queues_only"] = True
        return self._engine.list_workflows("DBOSClient.list_queued_workflows", filters)

    def list_workflow_steps(
        self, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None, offset: Optional[int] = None
    ) -> List[StepInfo]:
        return self._engine.list_steps(workflow_id, load_output, limit, offset)

    async def list_workflow_steps_async(
        self, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None, offset: Optional[int] = None
    ) -> List[StepInfo]:
        return await self._engine.list_steps_async(workflow_id, load_output, limit, offset)

    def _later(self, call: str, what: str) -> Any:
        raise DBOSNotSupportedError(f"DBOSClient.{call}", what)

    def send(self, *args: Any, **kwargs: Any) -> None:
        self._later("send", "messages come with a later release")

    async def send_async(self, *args: Any, **kwargs: Any) -> None:
        self._later("send_async", "messages come with a later release")

    def get_event(self, *args: Any, **kwargs: Any) -> Any:
        self._later("get_event", "events come with a later release")

    async def get_event_async(self, *args: Any, **kwargs: Any) -> Any:
        self._later("get_event_async", "events come with a later release")

    def read_stream(self, *args: Any, **kwargs: Any) -> Any:
        self._later("read_stream", "streams come with a later release")

    def fork_workflow(self, *args: Any, **kwargs: Any) -> Any:
        self._later("fork_workflow", "fork comes with a later release")
