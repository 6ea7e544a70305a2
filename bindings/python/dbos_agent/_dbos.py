"""``DBOS``: the public API, mirroring DBOS Python's names, arguments and
semantics, served by the dbos-agent."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import os
import threading
import time
from concurrent.futures import Future
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
)

from . import _auth as auth
from . import _protocol as proto
from . import _tracing as tracing
from . import _datasource as dsrc
from . import _kafka as kafka
from . import _ops as ops
from . import _start as start
from . import _registry
from ._queue import _CONFLICT_POLICIES, Queue, QueueRateLimit, _legacy_priority_enabled
from ._registry import (
    _dbos,
    _declare_queue,
    _declare_workflow,
    _forget_queue,
    _hello_queues,
    _listened,
    _queues,
    _registration_of,
    _scheduled,
    _started,
    _step_workflow,
    _workflow_form,
    _workflows,
)
from ._version import __version__, client_hello, compute_app_version
from ._extras import DBOSExtras
from ._facade import Scope, check_no_running_loop, handle_twins, twins
from ._context import current_ctx
from ._core import (
    DEFAULT_MAX_RECOVERY_ATTEMPTS,
    DEFAULT_POLLING_INTERVAL,
    Engine,
    StepConfig,
    StepOptions,
    WorkflowHandle,
    WorkflowHandleAsync,
    WorkflowRegistration,
    WorkflowRun,
    Op,
    drive,
    drive_async,
    run_step_async,
    run_step_config,
    run_step_sync,
    run_sync_step_async,
    wait_first,
    wait_first_async,
)
from ._error import (
    check_no_shard_key,
    SCHEDULE_SHARD_KEY_REFUSAL,
    DBOSException,
    DBOSInitializationError,
    DBOSNotSupportedError,
    DBOSWorkflowCancelledError,
    DBOSWorkflowConflictIDError,
    DBOSWorkflowFunctionNotFoundError,
)
from ._executor import RunExecutor, executor_cap
from ._loop_wake import keep_waking
from ._management import StepStatus
from ._management import asyncio_wait as _asyncio_wait
from ._management import step_status as _step_status
from ._step_options import check_async_only_options
from ._serialization import (
    DefaultSerializer,
    Serializer,
    WorkflowSerializationFormat,
)
from ._validation import ValidateArgsCallable, resolve_validator
from ._library import resolve_endpoint
from ._transport import AgentLink, Connection
from . import _classes
from . import _scheduling as sched
from ._announce import announcer as _announcer
from ._scheduling import ScheduleInput

if TYPE_CHECKING:
    from ._start import EnqueueOptions

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
T = TypeVar("T")

logger = logging.getLogger("dbos_agent")



# Config keys DBOS Python reads that have no meaning here, because the agent
# owns the system database and its background work. They are accepted so
# that a DBOS Python configuration works unchanged.
_AGENT_OWNED_KEYS = {
    "system_database_url",
    "database_url",
    "application_database_url",
    "dbos_system_schema",
    "sys_db_pool_size",
    "db_engine_kwargs",
    "system_database_engine",
    "run_admin_server",
    "admin_port",
    "use_listen_notify",
    "notification_listener_polling_interval_sec",
}
_KNOWN_KEYS = {
    "name",
    "enable_patching",
    "max_executor_threads",
    "application_version",
    "executor_id",
    "agent_socket",
    "agent_trusted_uids",
    "agent_library",
    "agent_mode",
    "serializer",
    "kafka_queue_polling_interval_sec",
} | _AGENT_OWNED_KEYS | tracing.CONFIG_KEYS

# How long the handshake of the version probe may take (AgentLink's default).
_CONNECT_TIMEOUT_SEC = 10.0



def __getattr__(name: str) -> Any:
    # DBOS Python's name for the process's instance (module attribute), which
    # code written for DBOS reads to learn whether DBOS is launched.
    if name == "_dbos_global_instance":
        return _registry._instance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class classproperty:
    """A read-only property of the class (``DBOS.workflow_id``)."""

    def __init__(self, fget: Callable[[Any], Any]):
        self.fget = fget

    def __get__(self, obj: Any, owner: Any) -> Any:
        return self.fget(owner)


def _unsupported(call: str, reason: Optional[str] = None) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise DBOSNotSupportedError(call, reason)

    fn.__name__ = call.split(".")[-1]
    fn.__doc__ = "Not supported by dbos-agent yet: raises DBOSNotSupportedError."
    return fn


def _schedule_of(scope: Scope, /, call: str, entry: Mapping[str, Any]) -> Dict[str, Any]:
    """The schedule message of a schedule naming its workflow function."""
    check_no_shard_key(entry.get("shard_key"), SCHEDULE_SHARD_KEY_REFUSAL)
    workflow_fn = entry["workflow_fn"]
    step = getattr(workflow_fn, "__dbos_step__", None)
    if isinstance(step, StepConfig):
        # DBOS Python names a step by its step name, which no workflow has.
        raise DBOSException(f"Workflow function '{step.name}' is not registered")
    reg = _registration_of(workflow_fn)
    return sched.schedule_message(
        schedule_name=entry["schedule_name"], workflow_name=reg.name, schedule=entry["schedule"],
        workflow_class_name=_classes.schedule_class_name(reg.method), context=entry.get("context"),
        automatic_backfill=entry.get("automatic_backfill", False), cron_timezone=entry.get("cron_timezone"),
        queue_name=entry.get("queue_name"), serializer=scope.serializer,
    )


def _create_schedule(
    scope: Scope,
    /,
    *,
    schedule_name: str,
    workflow_fn: Callable[..., Any],
    schedule: str,
    context: Any = None,
    automatic_backfill: bool = False,
    cron_timezone: Optional[str] = None,
    queue_name: Optional[str] = None,
    shard_key: Optional[str] = None,
) -> "Op[None]":
    """Create a cron schedule (5 fields, or 6 with seconds first) that
    enqueues ``workflow_fn(scheduled_time, context)`` on every tick, on
    ``queue_name`` (default: the internal queue). ``context`` must be
    JSON-serializable. Inside a workflow it is recorded as a step."""
    message = _schedule_of(scope, "create_schedule", dict(locals()))
    return ops.create_schedule_message(scope, message, queue_name)


def _enqueue_by_name(scope: Scope, /, options: "EnqueueOptions", *args: Any, **kwargs: Any) -> "Op[str]":
    """Enqueue a workflow by name with ``DBOSClient.enqueue``'s options;
    another process may implement it."""
    return start.enqueue_by_name_op(
        scope.engine, options, args, kwargs, scope.name("enqueue_workflow_with_options"), scope.app_name
    )


def _apply_schedules(scope: Scope, /, schedules: List[ScheduleInput]) -> "Op[None]":
    """Create or replace these schedules (made ACTIVE). The agent has no
    transaction over several schedules: each is applied in turn, and a
    changed one is deleted and created again."""
    if scope.ctx is not None:
        raise DBOSException("DBOS.apply_schedules cannot be called from within a workflow")
    messages = []
    for i, entry in enumerate(schedules):
        for required in ("schedule_name", "workflow_fn", "schedule"):
            if required not in entry:
                raise DBOSException(f"Schedule entry {i} is missing required field '{required}'")
        messages.append(_schedule_of(scope, "apply_schedules", entry))
    return ops.apply_schedule_messages(scope, messages)


# The engines of destroyed DBOS instances, until the next is made: their
# handles then act through its engine (Engine.successor).
_retired_engines: List[Engine] = []


def _name_for_tooling(name: str, func: Callable[..., Any]) -> None:
    """The registered name on the function, under the attribute DBOS Python
    sets (``dbos_function_name``), which tooling written against DBOS reads
    to name a workflow or step (an EnqueueOptions' ``workflow_name``). The
    decorator's wrapper copies it from ``func`` (functools.wraps)."""
    try:
        func.dbos_function_name = name  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass  # a builtin or bound method: nothing to set it on


class DBOS(ops.SharedOperations, DBOSExtras):
    """Durable workflows: decorate functions with ``@DBOS.workflow()`` and
    ``@DBOS.step()``, create ``DBOS(config=...)`` and call ``DBOS.launch()``.

    Config keys: ``name`` (the application), ``application_version``,
    ``executor_id`` (must match the agent's, which owns it), ``agent_socket``
    (else env ``DBOS_AGENT_SOCKET``, else the agent's default path),
    ``agent_trusted_uids`` (users besides this process's own and root whose
    agent it talks to, else env ``DBOS_AGENT_TRUSTED_UIDS``),
    ``agent_library`` and ``agent_mode`` (the agent through ``libdbos.so``,
    else envs ``DBOS_AGENT_LIBRARY`` and ``DBOS_AGENT_MODE``: embedded in
    this process or a sidecar on ``system_database_url`` and
    ``dbos_system_schema``, or connecting to ``agent_socket``) and
    ``serializer``. DBOS Python's other database keys are accepted and
    ignored: the agent owns the system database.
    """

    # The operations bound into this class (see _facade) are classmethods,
    # and their sync forms refuse to block a running event loop, as DBOS's.
    _ops_on_class = True
    _refuses_blocking_on_loop = True

    def __new__(cls, *, config: Dict[str, Any], **kwargs: Any) -> "DBOS":
        with _registry._instance_lock:
            if _registry._instance is None:
                inst = super().__new__(cls)
                inst._setup(config)
                _registry._instance = inst
                for retired in _retired_engines:
                    retired.successor = inst._engine
                _retired_engines.clear()
            return _registry._instance

    def __init__(self, *, config: Dict[str, Any], **kwargs: Any) -> None:
        pass  # __new__ configured the singleton

    def _setup(self, config: Dict[str, Any]) -> None:
        if not isinstance(config, dict):
            raise DBOSInitializationError("config must be a dict (DBOSConfig)")
        name = config.get("name")
        if not name:
            raise DBOSInitializationError("the config needs an application name (key 'name')")
        unknown = sorted(set(config) - _KNOWN_KEYS)
        if unknown:
            logger.warning("dbos-agent: ignoring config keys it does not know: %s", ", ".join(unknown))
        self._endpoint = resolve_endpoint(
            library=config.get("agent_library"),
            mode=config.get("agent_mode"),
            socket=config.get("agent_socket"),
            trusted_uids=config.get("agent_trusted_uids"),
            database_url=config.get("system_database_url"),
            schema=config.get("dbos_system_schema"),
            executor_id=config.get("executor_id") or os.environ.get("DBOS__VMID") or None,
        )
        ignored = sorted(set(config) & _AGENT_OWNED_KEYS)
        if self._endpoint.runs_agent:
            # The library runs the agent here, on these.
            ignored = [k for k in ignored if k not in ("system_database_url", "dbos_system_schema")]
        if ignored:
            logger.info("dbos-agent: config keys %s are the agent's business and are ignored here", ", ".join(ignored))
        kafka.check_config(config)
        metadata = config.get("conductor_executor_metadata")
        if metadata is not None:
            # DBOS refuses it at construction, conductor or not.
            try:
                json.dumps(metadata)
            except Exception as e:
                raise DBOSException(f"conductor_executor_metadata must be JSON-serializable: {e}") from e
        self._config = config
        tracing.dbos_tracer.config(config)
        self._app_name: str = name
        # The configured version, else DBOS__APPVERSION; when neither is set,
        # the first hello computes one from the workflows' source, as DBOS
        # Python does at launch (compute_app_version).
        self._app_version: str = str(config.get("application_version") or os.environ.get("DBOS__APPVERSION") or "")
        if config.get("enable_patching") is True:
            # DBOS 3.4's deprecated flag: one version for every deployment,
            # unless a version is configured.
            if config.get("application_version") is None:
                self._app_version = "PATCHING_ENABLED"
            logging.getLogger("dbos").warning(
                "enable_patching is deprecated and will be removed in a future release. "
                "DBOS.patch and DBOS.deprecate_patch no longer require it. "
                "To keep every deployment on one application version, as the flag does, set application_version explicitly."
            )
        self._executor_id_wanted: Optional[str] = config.get("executor_id") or os.environ.get("DBOS__VMID") or None
        self._executor_id: str = self._executor_id_wanted or "local"
        serializer = config.get("serializer")
        self._serializer: Serializer = serializer if serializer is not None else DefaultSerializer()
        self._engine = Engine(self._serializer)
        # Sync runs execute on at most max_executor_threads threads, and the
        # worker's hello announces that cap for the agent to keep.
        self._engine.executor = RunExecutor(executor_cap(config.get("max_executor_threads")))
        self._launched = False
        self._loop_thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------------
    # Lifecycle

    @classmethod
    def _op_scope(cls) -> Scope:
        """The scope of an operation called now: the launched instance, and
        the calling workflow when called from one."""
        inst = _dbos()
        return Scope(inst._engine, current_ctx(), inst._app_name, "DBOS", _queues, _forget_queue)

    @classmethod
    def launch(cls) -> None:
        """Connect to the agent and register this process's workflows and
        queues; from then on the agent dispatches their runs here."""
        inst = _registry._instance
        if inst is None:
            raise DBOSException("DBOS.launch() was called without a DBOS instance: construct DBOS(config=...) first")
        with _registry._instance_lock:
            if inst._launched:
                return
            inst._launch()

    def _hello(self) -> Dict[str, Any]:
        # First, before the registries are read: what this hello covers of
        # the declarations made after launch (the rest is sent once the
        # connection is live, _on_connected).
        _announcer.hello_begins()
        # The version is decided when the first hello is sent, which is
        # launch, from the workflows declared by then, as DBOS Python
        # computes it at launch: every reconnection announces the same
        # version (the runs this worker claimed carry it), whatever was
        # declared since.
        if not self._app_version:
            self._app_version = self._agent_default_version() or compute_app_version(
                self._app_name, [r.func for r in _workflows.values()]
            )
        return {
            "min_version": proto.MIN_PROTOCOL_VERSION,
            "max_version": proto.PROTOCOL_VERSION,
            "role": proto.ROLE_WORKER,
            "app_name": self._app_name,
            "app_version": self._app_version,
            "language": "python",
            "binding_version": __version__,
            "pid": os.getpid(),
            "workflows": [_workflow_form(r) for r in list(_workflows.values())],
            "queues": _hello_queues(),
            # The agent pushes no more runs at once than the sync executor
            # runs (async runs count too: see the README).
            "max_concurrency": self._engine.executor.cap or 0,
            "wake_time_format": proto.WAKE_TIME_FORMAT,
        }

    def _agent_default_version(self) -> str:
        """The agent's own default version (its --app-version, or its
        DBOS__APPVERSION), which a worker that was given no version runs as
        rather than a computed one, so that an operator's choice on the agent
        stands. A hello names the version a connection runs as, so a short
        client connection, which registers nothing, asks. An agent the
        library runs here has no default but what this process's environment
        gives it, which the binding reads itself (DBOS__APPVERSION): nothing
        to ask, and no engine to start and stop for the asking."""
        if self._endpoint.runs_agent:
            return ""
        probe = Connection(self._endpoint, lambda op, body, conn: None, lambda conn, reason: None)
        try:
            reply = probe.open(client_hello(self._app_name), _CONNECT_TIMEOUT_SEC)
        finally:
            probe.close()
        return str(reply.get("app_version") or "")

    def _launch(self) -> None:
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run_loop() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            keep_waking(loop)
            loop.run_forever()

        self._loop_thread = threading.Thread(target=run_loop, name="dbos-agent-event-loop", daemon=True)
        self._loop_thread.start()
        started.wait()
        self._engine.background_loop = loop
        try:
            self._engine.main_loop = asyncio.get_running_loop()
        except RuntimeError:
            self._engine.main_loop = None  # launched outside a loop
        link = AgentLink(self._endpoint, self._hello, self._on_push, self._on_connected, self._on_lost)
        self._engine.link = link
        # Declarations made from here on are sent on the link's connections
        # (one made while the handshake is on its way, once it is live).
        _announcer.attach(link)
        try:
            reply = link.start()
        except BaseException:
            _announcer.detach()
            self._engine.link = None
            link.close()
            loop.call_soon_threadsafe(loop.stop)
            raise
        agent_executor = reply.get("executor_id") or "local"
        if self._executor_id_wanted is not None and self._executor_id_wanted != agent_executor:
            _announcer.detach()
            link.close()
            loop.call_soon_threadsafe(loop.stop)
            self._engine.link = None
            raise DBOSInitializationError(
                f"executor_id {self._executor_id_wanted!r} was configured, but the agent {self._endpoint.where} "
                f"runs as executor {agent_executor!r}: the agent owns the executor id "
                f"(start it with --executor-id {self._executor_id_wanted})"
            )
        self._executor_id = agent_executor
        self._app_version = reply.get("app_version") or self._app_version
        tracing.dbos_tracer.application_version, tracing.dbos_tracer.executor_id = self._app_version, self._executor_id
        try:
            # Queues whose stored configuration this process overwrites only
            # when it runs the latest version (DBOS Python's default) are
            # decided now that the agent has registered this version.
            for q in list(_queues.values()):
                if q._registered is None:
                    form = q._hello_form()
                    if form is not None:
                        q._registered = form  # the handshake carried it
                    else:
                        self._register_queue(q, None)
            for reg in list(_scheduled.values()):
                self._write_decorated_schedule(reg)
            # A consumer's custom queue may be declared after it: checked now,
            # before any consumer starts.
            kafka.validate_consumers(self)
        except BaseException:
            _announcer.detach()
            link.close()
            loop.call_soon_threadsafe(loop.stop)
            self._engine.link = None
            raise
        self._launched = True
        kafka.start_consumers(self)
        logger.info(
            "DBOS launched on dbos-agent %s (%s): application %s, version %r, executor %s",
            reply.get("agent_version", "?"), self._endpoint.where, self._app_name, self._app_version, self._executor_id,
        )

    def _on_connected(self, conn: Connection, reply: Dict[str, Any]) -> None:
        _announcer.connected(conn)

    def _register_queue(self, q: "Queue", previous: "Optional[Queue]") -> None:
        """Tell the agent about a queue declared here (register), in the form
        its on_conflict rule picks; the handshake of any later reconnection
        carries the same form."""
        reg = q._decide_registration(self._engine, self._app_version)
        if previous is not None and previous._registered == reg:
            q._registered = reg
            return
        # Decided before it is sent, so that a hello built meanwhile carries it.
        q._registered = reg
        try:
            _announcer.announce(queues=[_listened.form(reg)])
        except BaseException:
            q._registered = None
            raise
        logger.debug("registered queue %s with the agent: %s", q.name, reg)

    def _write_decorated_schedule(self, reg: WorkflowRegistration) -> None:
        assert reg.scheduled_cron is not None
        message = sched.schedule_message(
            schedule_name=reg.name, workflow_name=reg.name, schedule=reg.scheduled_cron, context=None
        )
        drive(self._engine, sched.upsert_schedule(self._serializer, message, keep_status=True, own=self._app_name))

    def _on_lost(self, conn: Connection, reason: BaseException) -> None:
        # The agent hands this connection's runs to another worker: stop them
        # here, so none of them writes an outcome.
        self._engine.on_connection_lost(conn.generation)

    def _on_push(self, op: str, body: Dict[str, Any], conn: Connection) -> None:
        if op == proto.PUSH_RUN:
            reg = _workflows.get(body.get("name", ""))
            if reg is None:
                logger.error("the agent pushed workflow %s of unknown function %r", body.get("workflow_id"), body.get("name"))
                return
            run = WorkflowRun(body, conn.generation)
            try:
                run.target = _classes.pushed_target(run.workflow_id, reg.method, run.class_name, run.config_name)
            except DBOSWorkflowFunctionNotFoundError as e:
                # As DBOS Python: the workflow does not run here (it stays
                # PENDING, and is recovered once the instance exists).
                logger.error("%s", e)
                return
            logger.debug("running workflow %s (%s), %d recorded steps", run.workflow_id, reg.name, len(run.history))
            fut = self._engine.run_in_background(run, reg)
            fut.add_done_callback(functools.partial(_log_run_outcome, run.workflow_id))
        elif op == proto.PUSH_CANCEL:
            self._engine.on_cancel_push(body.get("workflow_id", ""))
        else:
            logger.debug("ignoring unknown push %r", op)

    @classmethod
    def destroy(cls, *, destroy_registry: bool = False, workflow_completion_timeout_sec: int = 0) -> None:
        """Disconnect from the agent; the workflows still running here go to
        another worker. With ``workflow_completion_timeout_sec``, wait that
        long for them to finish first."""
        with _registry._instance_lock:
            inst = _registry._instance
            _registry._instance = None
            if inst is not None:
                _retired_engines.append(inst._engine)
            if destroy_registry:
                _workflows.clear()
                _classes.clear()
                _queues.clear()
                _scheduled.clear()
                dsrc.forget_datasources()
            _listened.names = None  # the instance's setting, as in DBOS
            for q in _queues.values():
                q._registered = None  # a new launch decides again
        tracing.teardown_logs()
        # The consumers stop first, while their enqueues can still reach the agent.
        kafka.stop_consumers(forget=destroy_registry)
        if inst is None:
            return
        _registry._last_identity = (inst._app_version, inst._executor_id)
        _announcer.detach()
        if workflow_completion_timeout_sec > 0:
            deadline = time.monotonic() + workflow_completion_timeout_sec
            while inst._engine.runs and time.monotonic() < deadline:
                time.sleep(0.05)
        if inst._engine.link is not None:
            inst._engine.link.close()
        loop = inst._engine.background_loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        inst._engine.main_loop = None
        inst._launched = False

    # ------------------------------------------------------------------
    # Decorators

    @classmethod
    def workflow(
        cls,
        *,
        name: Optional[str] = None,
        max_recovery_attempts: Optional[int] = DEFAULT_MAX_RECOVERY_ATTEMPTS,
        serialization_type: Optional[WorkflowSerializationFormat] = None,
        validate_args: "Optional[ValidateArgsCallable]" = None,
        **unsupported: Any,
    ) -> Callable[[F], F]:
        """Make a function a durable workflow. ``serialization_type`` =
        ``WorkflowSerializationFormat.PORTABLE`` stores its inputs and outcome
        as portable JSON. ``validate_args`` checks (and may convert) the
        inputs of a run the agent hands over before the body runs."""
        given = sorted(k for k, v in unsupported.items() if v is not None)
        if given:
            raise DBOSNotSupportedError("DBOS.workflow(" + ", ".join(given) + "=...)")

        def decorate(func: F) -> F:
            wf_name = name if name is not None else func.__qualname__
            _name_for_tooling(wf_name, func)
            reg = WorkflowRegistration(func, wf_name, max_recovery_attempts, serialization_type)
            reg.validate_args = resolve_validator(validate_args, func)  # type: ignore[attr-defined]
            _declare_workflow(reg)

            if reg.is_async:

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    engine = _dbos()._engine
                    return await drive_async(engine, start.call_op(engine, reg, args, kwargs))

                async_wrapper.__dbos_workflow__ = reg  # type: ignore[attr-defined]
                return cast(F, async_wrapper)

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                engine = _dbos()._engine
                return drive(engine, start.call_op(engine, reg, args, kwargs))

            wrapper.__dbos_workflow__ = reg  # type: ignore[attr-defined]
            return cast(F, wrapper)

        return decorate

    @classmethod
    def dbos_class(cls, class_name: Optional[str] = None) -> Callable[[Type[T]], Type[T]]:
        """Register a class whose methods are workflows or steps, under
        ``class_name`` (default its ``__qualname__``; names are unique).
        Its instance-method workflows need a ``DBOSConfiguredInstance``."""
        return _classes.dbos_class(class_name)

    @classmethod
    def step(
        cls,
        *,
        name: Optional[str] = None,
        retries_allowed: bool = False,
        interval_seconds: float = 1.0,
        max_attempts: int = 3,
        backoff_rate: float = 2.0,
        should_retry: Optional[Callable[[BaseException], Union[bool, Awaitable[bool]]]] = None,
        preemptible: bool = False,
        timeout_seconds: Optional[float] = None,
    ) -> Callable[[F], F]:
        """Make a function a step: inside a workflow its outcome is recorded
        once and replayed on recovery; with ``retries_allowed`` it is retried
        up to ``max_attempts`` times, waiting ``interval_seconds`` times
        ``backoff_rate`` to the attempt number between tries. An async step
        may be ``preemptible`` (cancelled with its workflow) and have a
        ``timeout_seconds`` per attempt (DBOSStepTimeoutError)."""

        def decorate(func: F) -> F:
            step_name = name if name is not None else func.__qualname__
            check_async_only_options(step_name, func, preemptible, timeout_seconds)
            _name_for_tooling(step_name, func)
            opts = StepConfig(
                step_name, retries_allowed, interval_seconds, max_attempts, backoff_rate, should_retry,
                preemptible, timeout_seconds,
            )
            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    return await run_step_async(opts, func, args, kwargs)

                async_wrapper.__dbos_step__ = opts  # type: ignore[attr-defined]
                return cast(F, _step_workflow(opts.name, async_wrapper))

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return run_step_sync(opts, func, args, kwargs)

            wrapper.__dbos_step__ = opts  # type: ignore[attr-defined]
            return cast(F, _step_workflow(opts.name, wrapper))

        return decorate

    # ------------------------------------------------------------------
    # Starting workflows

    def _start(
        self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str], what: str,
    ) -> "WorkflowHandle[Any]":
        """A start or an enqueue (``_start.start_op``) from sync code."""
        workflow_id, future = drive(self._engine, start.start_op(self._engine, reg, args, kwargs, queue_name, what))
        return WorkflowHandle(self._engine, workflow_id, future)

    async def _start_async(
        self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str], what: str,
    ) -> "WorkflowHandleAsync[Any]":
        workflow_id, task = await drive_async(self._engine, start.start_op(self._engine, reg, args, kwargs, queue_name, what))
        return WorkflowHandleAsync(self._engine, workflow_id, task)

    @classmethod
    def start_workflow(cls, func: Callable[..., R], *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        """Start a workflow in the background and return its handle."""
        reg, args = _started(func, args)
        return cast("WorkflowHandle[R]", _dbos()._start(reg, args, kwargs, None, f"starting workflow {reg.name}"))

    @classmethod
    async def start_workflow_async(cls, func: Callable[..., Coroutine[Any, Any, R]], *args: Any, **kwargs: Any) -> "WorkflowHandleAsync[R]":
        """Start a workflow (on this event loop when it is async) and return
        its handle."""
        reg, args = _started(func, args)
        return cast(
            "WorkflowHandleAsync[R]", await _dbos()._start_async(reg, args, kwargs, None, f"starting workflow {reg.name}")
        )

    # ------------------------------------------------------------------
    # DBOS's own operations (those it shares with DBOSClient are bound in
    # SharedOperations), each a sync method and its async twin. From
    # workflow code a management call is the step DBOS Python records.

    enqueue_workflow_with_options, enqueue_workflow_with_options_async = handle_twins(_enqueue_by_name, check_loop=False)
    get_result, get_result_async = twins(ops.get_result)
    get_workflow_status, get_workflow_status_async = twins(ops.get_workflow_status)
    create_schedule, create_schedule_async = twins(_create_schedule, check_loop=False)
    apply_schedules, apply_schedules_async = twins(_apply_schedules, check_loop=False)
    send, send_async = twins(ops.send)
    recv, recv_async = twins(ops.recv)
    sleep, sleep_async = twins(ops.sleep)
    set_event, set_event_async = twins(ops.set_event)
    write_stream, write_stream_async = twins(ops.write_stream, check_loop=False)
    close_stream, close_stream_async = twins(ops.close_stream, check_loop=False)
    patch, patch_async = twins(ops.patch, check_loop=False)
    deprecate_patch, deprecate_patch_async = twins(ops.deprecate_patch, check_loop=False)

    # ------------------------------------------------------------------
    # Workflow management

    @classmethod
    async def asyncio_wait(
        cls, fs: List[Awaitable[Any]], *, timeout: Optional[float] = None, return_when: str = asyncio.ALL_COMPLETED
    ) -> "Tuple[Set[asyncio.Future[Any]], Set[asyncio.Future[Any]]]":
        """asyncio.wait, durable in a workflow: which awaitables were done is
        recorded (step DBOS.asyncio_wait), so recovery sees the same split."""
        return await _asyncio_wait(fs, timeout=timeout, return_when=return_when)

    @classproperty
    def step_status(cls) -> Optional[StepStatus]:
        """The step executing here (its id, and with retries its attempt
        from 0 and most attempts), or None outside a step."""
        return _step_status()

    # ------------------------------------------------------------------
    # Queues

    @classmethod
    def register_queue(
        cls,
        name: str,
        *,
        worker_concurrency: Optional[int] = None,
        global_concurrency: Optional[int] = None,
        partition_concurrency: Optional[int] = None,
        partition_worker_concurrency: Optional[int] = None,
        partition_limiter: "Optional[QueueRateLimit]" = None,
        limiter: "Optional[QueueRateLimit]" = None,
        polling_interval_sec: float = 1.0,
        on_conflict: str = "update_if_latest_version",
        concurrency: Optional[int] = None,
        **legacy: Any,
    ) -> "Queue":
        """Declare a queue and store its configuration, as DBOS Python 3 does
        (before or after launch). This process serves it: the agent dequeues
        its workflows for this process within the stored limits, shared by
        every agent and SDK on the database.

        ``on_conflict`` decides what happens to a configuration already
        stored: "update_if_latest_version" (default) overwrites it only when
        this process runs the latest application version, "always_update"
        always, "never_update" never. A queue owned by another application
        is refused.

        ``priority_enabled=`` is taken too, for DBOS Python 2 code (DBOS 3.4's
        signature has it no more: it always stores True and always orders
        by priority): it is stored in the row's column the other SDKs read."""
        check_no_running_loop("register_queue")  # as DBOS: await register_queue_async on a loop
        priority_enabled = _legacy_priority_enabled("register_queue", legacy)
        if on_conflict not in _CONFLICT_POLICIES:
            raise ValueError(f"on_conflict must be one of {', '.join(_CONFLICT_POLICIES)}")
        q = Queue.__new__(Queue)
        q._configure(
            name, concurrency, limiter,
            worker_concurrency=worker_concurrency, global_concurrency=global_concurrency,
            priority_enabled=priority_enabled, partition_queue=False,
            partition_concurrency=partition_concurrency, partition_worker_concurrency=partition_worker_concurrency,
            partition_limiter=partition_limiter, polling_interval_sec=polling_interval_sec,
        )
        q.database_backed_queue = True
        _declare_queue(q, on_conflict)
        return q

    @classmethod
    async def register_queue_async(
        cls,
        name: str,
        *,
        worker_concurrency: Optional[int] = None,
        global_concurrency: Optional[int] = None,
        partition_concurrency: Optional[int] = None,
        partition_worker_concurrency: Optional[int] = None,
        partition_limiter: "Optional[QueueRateLimit]" = None,
        limiter: "Optional[QueueRateLimit]" = None,
        polling_interval_sec: float = 1.0,
        on_conflict: str = "update_if_latest_version",
        concurrency: Optional[int] = None,
        **legacy: Any,
    ) -> "Queue":
        priority_enabled = _legacy_priority_enabled("register_queue_async", legacy)
        return await asyncio.to_thread(
            lambda: cls.register_queue(
                name, worker_concurrency=worker_concurrency, global_concurrency=global_concurrency,
                partition_concurrency=partition_concurrency, partition_worker_concurrency=partition_worker_concurrency,
                partition_limiter=partition_limiter, limiter=limiter, polling_interval_sec=polling_interval_sec,
                on_conflict=on_conflict, concurrency=concurrency, priority_enabled=priority_enabled,
            )
        )

    @classmethod
    def listen_queues(cls, queues: Sequence[str]) -> None:
        """Dequeue only these queues (and the internal one), by name, as
        DBOS Python does: a queue configured elsewhere (by another process
        or SDK) is served by naming it; a queue declared here but not named
        is stored for the processes that serve it, not served here. Call it
        before launch, once per DBOS instance."""
        with _registry._instance_lock:
            inst = _registry._instance
            if inst is not None and inst._launched:
                raise DBOSException("listen_queues called after DBOS is launched")
            if _listened.names is not None:
                raise DBOSException("listen_queues called more than once")
            _listened.names = list(queues)

    @classmethod
    def enqueue_workflow(cls, queue_name: str, func: Callable[..., R], *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        """Enqueue a workflow on a queue by the queue's name."""
        reg, args = _started(func, args)
        return cast("WorkflowHandle[R]", _dbos()._start(reg, args, kwargs, queue_name, f"enqueueing workflow {reg.name}"))

    @classmethod
    async def enqueue_workflow_async(
        cls, queue_name: str, func: Callable[..., Coroutine[Any, Any, R]], *args: Any, **kwargs: Any
    ) -> "WorkflowHandleAsync[R]":
        reg, args = _started(func, args)
        what = f"enqueueing workflow {reg.name}"
        return cast("WorkflowHandleAsync[R]", await _dbos()._start_async(reg, args, kwargs, queue_name, what))

    # ------------------------------------------------------------------
    # Schedules

    @classmethod
    def scheduled(cls, cron: str) -> Callable[[F], F]:
        """Run a workflow on a cron schedule (5 fields, or 6 with seconds
        first), as DBOS Python's decorator did: put it above
        ``@DBOS.workflow()``; the workflow takes ``(scheduled_time: datetime,
        actual_time: datetime)``. At launch the binding writes a schedule
        named after the workflow, which the agent fires once per tick across
        every agent (workflow id ``sched-<name>-<tick in ISO 8601>``)."""

        def decorate(func: F) -> F:
            reg = getattr(func, "__dbos_workflow__", None)
            # A step's <temp> workflow (see _step_workflow) is not a workflow to schedule.
            if not isinstance(reg, WorkflowRegistration) or reg.name.startswith("<temp>."):
                name = getattr(func, "__qualname__", repr(func))
                raise DBOSException(
                    f"@DBOS.scheduled applies to a workflow: put it above @DBOS.workflow() on {name}"
                )
            with _registry._instance_lock:
                reg.scheduled_cron = cron
                _scheduled[reg.name] = reg
                inst = _registry._instance
                launched = inst is not None and inst._launched
            if launched:
                # Declared after launch: its schedule is written now (its
                # workflow was registered by @DBOS.workflow below this).
                assert inst is not None
                inst._write_decorated_schedule(reg)
            return func

        return decorate

    # ------------------------------------------------------------------
    # Context

    @classproperty
    def workflow_id(cls) -> Optional[str]:
        """The id of the workflow this code runs in, else None."""
        ctx = current_ctx()
        return ctx.run.workflow_id if ctx is not None else None

    @classproperty
    def step_id(cls) -> Optional[int]:
        """The step id (function id) of the step this code runs in, else None."""
        ctx = current_ctx()
        return ctx.step_id if ctx is not None else None

    @classproperty
    def application_version(cls) -> str:
        inst = _registry._instance
        return inst._app_version if inst is not None else _registry._last_identity[0]

    @classproperty
    def executor_id(cls) -> str:
        inst = _registry._instance
        return inst._executor_id if inst is not None else _registry._last_identity[1]

    @classproperty
    def logger(cls) -> logging.Logger:
        return logging.getLogger("dbos")

    @classproperty
    def authenticated_user(cls) -> Optional[str]:
        return auth.get_authentication().user

    @classmethod
    def run_step(
        cls,
        dbos_step_options: Optional[StepOptions],
        func: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Run ``func(*args, **kwargs)`` as a step: inside a workflow its
        outcome is recorded once (under ``dbos_step_options["name"]``, else
        the function's qualified name) and replayed on recovery, with the
        retries the options ask for; elsewhere it is a plain call. An async
        ``func`` runs on DBOS's event loop."""
        check_no_running_loop("run_step")
        inst = _dbos()
        config = run_step_config("DBOS.run_step", dbos_step_options, func)
        if inspect.iscoroutinefunction(func):
            loop = inst._engine.target_loop()
            # The coroutine's task starts from a copy of this context: it
            # runs in the calling workflow.
            return asyncio.run_coroutine_threadsafe(run_step_async(config, func, args, kwargs), loop).result()
        return run_step_sync(config, func, args, kwargs)

    @classmethod
    async def run_step_async(
        cls,
        dbos_step_options: Optional[StepOptions],
        func: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """``run_step`` from async code; a sync ``func`` runs on a thread."""
        _dbos()
        config = run_step_config("DBOS.run_step_async", dbos_step_options, func)
        if inspect.iscoroutinefunction(func):
            return await run_step_async(config, func, args, kwargs)
        return await run_sync_step_async(config, func, args, kwargs)

    @classmethod
    def wait_first(
        cls, handles: List["WorkflowHandle[Any]"], *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL
    ) -> "WorkflowHandle[Any]":
        """The handle of the first of ``handles`` whose workflow ends (with
        any outcome). Inside a workflow the step DBOS.waitFirst records which
        one, so recovery returns the same handle. The agent wakes the waits,
        so ``polling_interval_sec`` is accepted and not used."""
        check_no_running_loop("wait_first")
        return wait_first(_dbos()._engine, "DBOS.wait_first", handles, recorded=True)

    @classmethod
    async def wait_first_async(
        cls, handles: List["WorkflowHandleAsync[Any]"], *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL
    ) -> "WorkflowHandleAsync[Any]":
        return await wait_first_async(_dbos()._engine, "DBOS.wait_first_async", handles, recorded=True)

    # ------------------------------------------------------------------
    # Not served: these raise rather than do less than DBOS Python.

    transaction = staticmethod(_unsupported("DBOS.transaction", "transactions on an application database"))


def _log_run_outcome(workflow_id: str, fut: "Future[Any]") -> None:
    try:
        fut.result()
    except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError) as e:
        logger.info("workflow %s stopped here: %s", workflow_id, e)
    except BaseException as e:  # the workflow's own error: recorded as its outcome
        logger.debug("workflow %s ended with an error: %r", workflow_id, e)


