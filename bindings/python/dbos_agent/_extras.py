"""The rest of DBOS Python 3.4's ``DBOS`` class: identity and roles,
tracing, the shard key, alert handlers, and the calls that manage the system
database or need an integration the agent does not have (each of those
raises when called, never when imported). ``DBOS`` inherits them."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Type, TypeVar

from . import _auth as auth
from . import _classes
from . import _registry
from . import _reservation as reservation
from ._context import current_ctx
from ._error import DBOSException, DBOSNotSupportedError
from ._facade import check_no_running_loop
from ._migrate import migrate_system_database, reset_system_database
from ._tracing import DBOSTracer, dbos_tracer

if TYPE_CHECKING:
    from ._core import Engine

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

AlertHandler = Callable[[str, str, Dict[str, str]], None]


class _classproperty:
    def __init__(self, fget: Callable[[Any], Any]):
        self.fget = fget

    def __get__(self, obj: Any, owner: Any) -> Any:
        return self.fget(owner)


def run_dbos_database_migrations(
    system_database_url: str,
    *,
    schema: str = "dbos",
    application_role: Optional[str] = None,
    sharding: bool = False,
) -> None:
    """Create or migrate the system database with a privileged role, as
    ``DBOS.migrate`` does (by the agent's own migrator, ``dbos-agent migrate``)."""
    migrate_system_database(
        "run_dbos_database_migrations", system_database_url,
        schema=schema, application_role=application_role, sharding=sharding,
    )


class DBOSExtras:
    # -- identity and roles

    @classmethod
    def required_roles(cls, roles: List[str]) -> Callable[[F], F]:
        """Require one of ``roles`` to call the decorated workflow or step
        (above or below ``@DBOS.workflow()`` / ``@DBOS.step()``). The first
        of them the caller holds becomes ``DBOS.assumed_role``."""
        return auth.required_roles(roles)

    @classmethod
    def default_required_roles(cls, roles: List[str]) -> Callable[[Type[T]], Type[T]]:
        """The roles every workflow of the decorated class requires, unless
        one names its own with ``required_roles``. As in DBOS Python, it
        registers the class (as ``@DBOS.dbos_class()`` would), so its
        instance and class methods can be workflows without that decorator."""
        set_roles = auth.default_required_roles(roles)

        def register(target: Type[T]) -> Type[T]:
            _classes.register_class(target, _classes.get_or_create_class_info(target))
            return set_roles(target)

        return register

    @_classproperty
    def authenticated_roles(cls) -> Optional[List[str]]:
        """The roles granted to the current authenticated user, if any."""
        return auth.get_authentication().roles

    @_classproperty
    def assumed_role(cls) -> Optional[str]:
        """The role the current code runs as, if any."""
        return auth.get_authentication().assumed_role

    @classmethod
    def set_authentication(cls, authenticated_user: Optional[str], authenticated_roles: Optional[List[str]]) -> None:
        """Set the authenticated user and granted roles of the innermost
        context (a ``DBOSContextSetAuth`` / ``DBOSContextEnsure`` block, or
        the running workflow)."""
        auth.set_authentication(authenticated_user, authenticated_roles)

    # -- tracing and sharding

    @_classproperty
    def tracer(cls) -> DBOSTracer:
        """DBOS's OpenTelemetry tracer (its spans do nothing without
        OpenTelemetry)."""
        return dbos_tracer

    @_classproperty
    def span(cls) -> Any:
        """The current active OpenTelemetry span, else None."""
        return dbos_tracer.get_current_span()

    @_classproperty
    def shard_key(cls) -> Optional[str]:
        """The running workflow's shard key: always None, the agent's system
        database being unsharded (as DBOS reports on an unsharded one)."""
        return None

    # -- Conductor alerts

    @classmethod
    def alert_handler(cls, func: AlertHandler) -> AlertHandler:
        """Register the handler of Conductor alerts, with DBOS's rules (one
        handler, declared before launch). The agent does not connect to
        DBOS Conductor, so no alert reaches it."""
        inst = _registry._instance
        if inst is None:
            raise DBOSException("DBOS is not configured: create DBOS(config=...) before declaring an alert_handler")
        if inst._launched:
            raise DBOSException("alert_handler must be defined before DBOS is launched")
        if getattr(inst, "_alert_handler", None) is not None:
            raise DBOSException("An alert_handler is already defined. You can only declare one alert_handler.")
        inst._alert_handler = func  # type: ignore[attr-defined]
        return func

    # -- the system database, owned by the agent

    @staticmethod
    def migrate(
        system_database_url: str,
        *,
        schema: str = "dbos",
        application_role: Optional[str] = None,
        sharding: bool = False,
    ) -> None:
        """Create or migrate the system database with a privileged role,
        optionally granting ``application_role`` the use of the system schema.
        The agent's own migrator does it (``dbos-agent migrate``, found on PATH
        or named by env ``DBOS_AGENT_BINARY``), so the schema is the one the
        agent serves; ``dbos-agent serve`` also migrates at start."""
        migrate_system_database(
            "DBOS.migrate", system_database_url,
            schema=schema, application_role=application_role, sharding=sharding,
        )

    @classmethod
    def reset_system_database(
        cls, *, system_database_url: Optional[str] = None, schema: Optional[str] = None, truncate: bool = False
    ) -> None:
        """Destroy the system database, or with ``truncate=True`` empty its
        tables (faster, and the schema stays): for tests only, before
        ``DBOS.launch()``. The agent's ``dbos-agent reset`` does it, on
        ``system_database_url`` or the configured one; an agent serving the
        database sees its sessions ended and reconnects."""
        inst = _registry._instance
        if inst is None:
            if system_database_url is None:
                logging.getLogger("dbos").warning(
                    "reset_system_database has no effect because global DBOS object does not exist"
                )
                return
            url = system_database_url
        else:
            if inst._launched:
                raise DBOSException(
                    "The system database cannot be reset after DBOS is launched. Resetting the system "
                    "database is a destructive operation that should only be used in a test environment."
                )
            config = inst._config
            url = system_database_url or config.get("system_database_url") or ""
            if not url:
                raise DBOSException(
                    "DBOS.reset_system_database needs the system database's URL: pass system_database_url= "
                    "or configure system_database_url"
                )
            schema = schema if schema is not None else config.get("dbos_system_schema")
        reset_system_database("DBOS.reset_system_database", url, schema=schema, truncate=truncate)

    # -- Kafka

    @classmethod
    def kafka_consumer(
        cls,
        config: Dict[str, Any],
        topics: List[str],
        *,
        ordering: Optional[str] = None,
        batch_size: int = 250,
        queue_name: Optional[str] = None,
    ) -> Callable[[F], F]:
        """Consume ``topics`` with confluent-kafka (``config`` is its consumer
        configuration) and enqueue the decorated workflow once per message,
        with the message (``KafkaMessage``) as its argument; put it above
        ``@DBOS.workflow()``. ``ordering``: "none" (default), "partition"
        (one workflow at a time per partition, in offset order, partitions in
        parallel) or "topic" (one at a time per topic); ``queue_name``: a
        queue of your own for ordering="none". A message delivered again
        starts no second workflow. Needs ``dbos-agent[kafka]``."""
        from ._kafka import kafka_consumer

        return kafka_consumer(config, topics, ordering=ordering, batch_size=batch_size, queue_name=queue_name)

    # -- step reservations

    @classmethod
    def reserve_step(cls) -> "StepReservation":
        """Draw the next step id now, so a step can run at it later (for
        example from another task). Must be called from workflow code, not
        from a step; run the reservation with ``run`` or ``run_async``."""
        ctx = current_ctx()
        if ctx is None or ctx.step_id is not None or ctx.run.ended:
            raise DBOSException("DBOS.reserve_step must be called from a workflow, outside any step or transaction")
        reserved = StepReservation(ctx.run, ctx.run.next_function_id())
        reserved._steps = cls  # DBOS, whose run_step runs it
        return reserved


class StepReservation:
    """A step id drawn by ``DBOS.reserve_step``, run exactly once later with
    ``run`` or ``run_async``, in the workflow that reserved it. A
    reservation that never runs leaves a gap in the step ids (as in DBOS)."""

    def __init__(self, run: Any, function_id: int) -> None:
        self._run = run
        self._function_id = function_id
        self._used = False
        self._steps: Any = None  # what runs the step: DBOS (set by DBOS.reserve_step)

    @property
    def step_id(self) -> int:
        """The reserved step id."""
        return self._function_id

    def _claim(self) -> None:
        if self._used:
            raise DBOSException("A step reservation can only be run once")
        if self._steps is None:
            raise DBOSException("A step reservation is made with DBOS.reserve_step()")
        ctx = current_ctx()
        if ctx is None or ctx.step_id is not None or ctx.run.ended or ctx.run.workflow_id != self._run.workflow_id:
            raise DBOSException(
                f"Step {self._function_id} was reserved in workflow {self._run.workflow_id} "
                "and must be run from that workflow, outside any step"
            )
        self._used = True

    def run(self, dbos_step_options: Optional[Dict[str, Any]], func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``func`` as a step at the reserved step id and checkpoint it
        (``DBOS.run_step`` at that id). Refused on a thread that runs an
        event loop before the reservation is used up, as in DBOS."""
        check_no_running_loop("run")
        self._claim()
        token = reservation.hold(self._run, self._function_id)
        try:
            return self._steps.run_step(dbos_step_options, func, *args, **kwargs)
        finally:
            reservation.release(token)

    async def run_async(
        self, dbos_step_options: Optional[Dict[str, Any]], func: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        self._claim()
        token = reservation.hold(self._run, self._function_id)
        try:
            return await self._steps.run_step_async(dbos_step_options, func, *args, **kwargs)
        finally:
            reservation.release(token)


_IN_TRANSACTION_REASON = (
    "the system database is the agent's, reached only through it, so a caller's own SQLAlchemy "
    "transaction on it cannot include the agent's write; use the call without _in_transaction"
)


class ClientExtras:
    """The rest of DBOS Python 3.4's ``DBOSClient``; ``DBOSClient`` inherits
    them."""

    _engine: "Engine"

    def check_connection(self) -> None:
        """Raise unless the agent answers and reaches the system database (a
        status lookup of an id no workflow has goes to the database)."""
        self._engine.get_status(_probe_id())

    async def check_connection_async(self) -> None:
        await self._engine.get_status_async(_probe_id())

    # Refusals: they take DBOS's arguments as they come and raise.

    def enqueue_in_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """Raises DBOSNotSupportedError (see the README)."""
        raise DBOSNotSupportedError("DBOSClient.enqueue_in_transaction", _IN_TRANSACTION_REASON)

    def send_in_transaction(self, *args: Any, **kwargs: Any) -> None:
        raise DBOSNotSupportedError("DBOSClient.send_in_transaction", _IN_TRANSACTION_REASON)

    def send_bulk_in_transaction(self, *args: Any, **kwargs: Any) -> None:
        raise DBOSNotSupportedError("DBOSClient.send_bulk_in_transaction", _IN_TRANSACTION_REASON)


def _probe_id() -> str:
    """An id no workflow has: a fresh random one."""
    return f"dbos-agent-check-connection-{uuid.uuid4()}"
