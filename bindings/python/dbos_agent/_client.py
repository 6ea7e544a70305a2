"""``DBOSClient``: for processes that run no workflows but enqueue them,
wait for them and manage them (a web frontend, a script)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, TypeVar, Union

from . import _ops as ops
from . import _protocol as proto
from . import _scheduling as sched
from ._client_queue import register_queue_op
from ._core import (
    DEFAULT_POLLING_INTERVAL,
    Call,
    Engine,
    Op,
    WorkflowHandle,
    WorkflowHandleAsync,
    wait_first,
    wait_first_async,
)
from ._error import SCHEDULE_SHARD_KEY_REFUSAL, check_no_shard_key, DBOSException
from ._extras import ClientExtras
from ._facade import Scope, handle_twins, twins
from ._scheduling import ClientScheduleInput
from ._serialization import DBOSDefaultSerializer, Serializer, WorkflowSerializationFormat
from ._library import resolve_endpoint
from ._transport import DEFAULT_RECONNECT_WAIT, AgentLink, Connection
from ._start import EnqueueOptions, enqueue_request
from ._version import client_hello

if TYPE_CHECKING:
    from ._queue import Queue, QueueRateLimit

R = TypeVar("R")
logger = logging.getLogger("dbos_agent")


# ---------------------------------------------------------------------------
# The client's own operations (DBOS's take functions where these take names)


def _enqueue(scope: Scope, /, options: EnqueueOptions, *args: Any, **kwargs: Any) -> "Op[str]":
    """Enqueue a workflow by name on a queue; a worker serving that queue
    runs it."""
    body = enqueue_request(scope.engine, scope.serializer, options, args, kwargs, scope.name("enqueue"), scope.app_name)
    reply = yield Call(proto.OP_START_WORKFLOW, body, target=body["workflow_id"])
    return str(reply.get("workflow_id") or body["workflow_id"])


def _send(
    scope: Scope,
    /,
    destination_id: str,
    message: Any,
    topic: Optional[str] = None,
    idempotency_key: Optional[str] = None,
    *,
    serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
    send_to_forks: bool = False,
    shard_key: Optional[str] = None,
) -> "Op[None]":
    """Send a message to a workflow (see ``DBOS.send``; here
    ``idempotency_key`` may be passed by position, as DBOS's client takes it)."""
    return ops.send(
        scope, destination_id, message, topic, idempotency_key=idempotency_key,
        serialization_type=serialization_type, send_to_forks=send_to_forks, shard_key=shard_key,
    )


def _register_queue(
    scope: Scope,
    /,
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
) -> "Op[Queue]":
    """Store a queue's configuration for this client's application (or
    ``application_name``'s), as DBOS's client does; this client serves
    nothing (workers that declare the queue do). ``on_conflict``:
    "always_update" (default) overwrites a stored configuration,
    "never_update" keeps it."""
    return register_queue_op(
        name, application_name=application_name, global_concurrency=global_concurrency,
        partition_concurrency=partition_concurrency, partition_worker_concurrency=partition_worker_concurrency,
        partition_limiter=partition_limiter, limiter=limiter, worker_concurrency=worker_concurrency,
        polling_interval_sec=polling_interval_sec, on_conflict=on_conflict, concurrency=concurrency,
        client=scope.engine,
    )


def _create_schedule(
    scope: Scope,
    /,
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
) -> "Op[None]":
    """Create a cron schedule of a workflow by name; it belongs to
    ``application_name``, else the client's application
    (``DBOSClient(application_name=...)``; with neither, an unclaimed
    schedule, which every application fires)."""
    check_no_shard_key(shard_key, SCHEDULE_SHARD_KEY_REFUSAL)
    return sched.create_schedule(
        sched.schedule_message(
            schedule_name=schedule_name, workflow_name=workflow_name, schedule=schedule, context=context,
            workflow_class_name=workflow_class_name, automatic_backfill=automatic_backfill,
            cron_timezone=cron_timezone, queue_name=queue_name, application_name=application_name,
            serializer=scope.serializer,
        )
    )


def _apply_schedules(scope: Scope, /, schedules: List[ClientScheduleInput]) -> "Op[None]":
    """Create or replace these schedules (made ACTIVE), one at a time."""
    messages = []
    for i, entry in enumerate(schedules):
        for required in ("schedule_name", "workflow_name", "schedule"):
            if required not in entry:
                raise DBOSException(f"Schedule entry {i} is missing required field '{required}'")
        check_no_shard_key(entry.get("shard_key"), SCHEDULE_SHARD_KEY_REFUSAL)
        messages.append(
            sched.schedule_message(
                schedule_name=entry["schedule_name"], workflow_name=entry["workflow_name"],
                schedule=entry["schedule"], context=entry.get("context"),
                workflow_class_name=entry.get("workflow_class_name"),
                automatic_backfill=entry.get("automatic_backfill", False),
                cron_timezone=entry.get("cron_timezone"), queue_name=entry.get("queue_name"),
                application_name=entry.get("application_name"), serializer=scope.serializer,
            )
        )
    return ops.apply_schedule_messages(scope, messages)


def _rename_application(
    scope: Scope,
    /,
    old_name: Optional[str],
    new_name: str,
    *,
    batch_size: Optional[int] = sched.DEFAULT_RENAME_BATCH_SIZE,
    adopt_unclaimed_rows: bool = False,
) -> "Op[sched.ApplicationRowCounts]":
    """Give ``new_name`` the rows ``old_name`` owns, the unclaimed ones
    (``adopt_unclaimed_rows``), or both, in every owned table; terminal
    workflows and steps move ``batch_size`` at a time (None: in one
    transaction). Stop the renamed application's workers first."""
    return sched.rename_application(old_name, new_name, batch_size, adopt_unclaimed_rows)


class DBOSClient(ops.SharedOperations, ClientExtras):
    """A connection to the agent for enqueueing and managing workflows.

    ``agent_socket`` names the agent (else env ``DBOS_AGENT_SOCKET``, else its
    default path); ``agent_trusted_uids`` are users besides this process's
    own and root whose agent it talks to (else env
    ``DBOS_AGENT_TRUSTED_UIDS``). ``agent_library`` (else env
    ``DBOS_AGENT_LIBRARY``) reaches the agent through ``libdbos.so`` in
    ``agent_mode`` (else env ``DBOS_AGENT_MODE``): ``embedded``, ``sidecar``
    or ``connect`` (see the README). DBOS Python's ``system_database_url``
    and ``dbos_system_schema`` name the system database of an embedded or
    sidecar agent; over a socket they are accepted so that code written for
    it runs unchanged, and the agent's own database is the one used.

    DBOS's connection options, mapped onto the agent socket the client
    talks to: ``lazy`` defers connecting to the agent until the client is
    first used (``check_connection`` connects then); without it the
    constructor raises when no agent answers. ``retry_connection_errors=False``
    makes a call that finds the agent away raise at once instead of waiting
    for it to come back. ``use_listen_notify`` cannot be combined with
    ``lazy``, as in DBOS; the agent wakes every wait, so it changes nothing
    else. The database pool options (``system_database_engine``,
    ``system_database_pool_size``, ``system_database_polling_concurrency``,
    ``sys_db_idle_transaction_timeout_sec``, ``observability_query_timeout_sec``)
    size connections the agent owns, not the client: they are accepted and
    have no effect here.
    """

    def __init__(
        self,
        *,
        agent_socket: Optional[str] = None,
        agent_trusted_uids: Union[None, str, Iterable[int]] = None,
        agent_library: Optional[str] = None,
        agent_mode: Optional[str] = None,
        application_name: Optional[str] = None,
        system_database_url: Optional[str] = None,
        dbos_system_schema: Optional[str] = None,
        serializer: Serializer = DBOSDefaultSerializer,
        use_listen_notify: bool = False,
        lazy: bool = False,
        retry_connection_errors: bool = True,
        **ignored: Any,
    ) -> None:
        if lazy and use_listen_notify:
            raise DBOSException(
                "A DBOSClient cannot be both lazy and use_listen_notify: the notification listener connects immediately."
            )
        endpoint = resolve_endpoint(
            library=agent_library,
            mode=agent_mode,
            socket=agent_socket,
            trusted_uids=agent_trusted_uids,
            database_url=system_database_url,
            schema=dbos_system_schema,
        )
        if ignored or (not endpoint.runs_agent and (system_database_url is not None or dbos_system_schema is not None)):
            logger.info("DBOSClient: database settings are the agent's business and are ignored here")
        self._app_name = application_name or ""
        self._serializer = serializer
        self._engine = Engine(serializer)
        self._link = AgentLink(
            endpoint,
            self._hello,
            self._on_push,
            self._on_connected,
            self._on_lost,
            reconnect_wait=DEFAULT_RECONNECT_WAIT if retry_connection_errors else 0.0,
        )
        self._engine.link = self._link
        if lazy:
            self._link.defer_start()
        else:
            self._link.start()

    def _hello(self) -> Dict[str, Any]:
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
    # The client's own operations (those it shares with DBOS are bound in
    # SharedOperations), each a sync method and its async twin. A client is
    # no workflow: nothing it does is recorded as a step.

    def _op_scope(self) -> Scope:
        return Scope(self._engine, None, self._app_name, "DBOSClient")

    enqueue, enqueue_async = handle_twins(_enqueue)
    register_queue, register_queue_async = twins(_register_queue)
    create_schedule, create_schedule_async = twins(_create_schedule)
    apply_schedules, apply_schedules_async = twins(_apply_schedules)
    rename_application, rename_application_async = twins(_rename_application)
    send, send_async = twins(_send)

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
