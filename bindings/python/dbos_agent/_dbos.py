"""``DBOS``: the public API, mirroring DBOS Python's names, arguments and
semantics, served by the dbos-agent."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import logging
import os
import threading
import time
from concurrent.futures import Future
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncGenerator,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    Generator,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    TypedDict,
    TypeVar,
    Union,
    cast,
)

from . import _ambient as ambient
from . import _auth as auth
from . import _comm as comm
from . import _protocol as proto
from . import _tracing as tracing
from . import _datasource as dsrc
from ._comm import SendMessage
from ._extras import DBOSExtras
from ._queue_config import QueueConfig
from ._core import (
    DEFAULT_MAX_RECOVERY_ATTEMPTS,
    DEFAULT_POLLING_INTERVAL,
    Engine,
    StepConfig,
    StepInfo,
    StepOptions,
    WorkflowHandle,
    WorkflowHandleAsync,
    WorkflowRegistration,
    WorkflowRun,
    WorkflowStatus,
    Op,
    ParentStep,
    _Ctx,
    _enqueue_options,
    _get_result_recorded,
    _get_result_recorded_async,
    _now_ms,
    _record,
    _record_async,
    await_result_op,
    call_as_step,
    call_as_step_async,
    child_outcome_body,
    current_attributes,
    current_ctx,
    current_timeout_ms,
    drive,
    drive_async,
    drive_values,
    drive_values_async,
    run_step_async,
    run_step_config,
    run_step_sync,
    start_position,
    take_assigned,
    wait_first,
    wait_first_async,
)
from ._list_filters import queued_filters
from ._error import (
    DBOSException,
    DBOSInitializationError,
    DBOSNonExistentWorkflowError,
    DBOSNotSupportedError,
    DBOSWorkflowCancelledError,
    DBOSWorkflowConflictIDError,
    DBOSWorkflowFunctionNotFoundError,
)
from ._executor import RunExecutor, executor_cap
from ._management import StepStatus, delete_queue_op, resume_workflows_op
from ._management import asyncio_wait as _asyncio_wait
from ._management import step_status as _step_status
from ._step_options import check_async_only_options
from ._serialization import (
    DefaultSerializer,
    Serializer,
    WorkflowSerializationFormat,
    tag_for,
)
from ._validation import ValidateArgsCallable, resolve_validator
from ._transport import AgentLink, Connection, resolve_socket_path, resolve_trusted_uids
from . import _classes
from . import _scheduling as sched
from ._announce import announcer as _announcer
from ._announce import workflow_form
from ._scheduling import ScheduleInput, VersionInfo, WorkflowSchedule

if TYPE_CHECKING:
    from ._client import EnqueueOptions

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
T = TypeVar("T")

logger = logging.getLogger("dbos_agent")

__version__ = "0.1.0"


class QueueRateLimit(TypedDict):
    """At most ``limit`` workflows of a queue start per ``period`` seconds."""

    limit: int
    period: float


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
    "max_executor_threads",
    "application_version",
    "executor_id",
    "agent_socket",
    "agent_trusted_uids",
    "serializer",
} | _AGENT_OWNED_KEYS | tracing.CONFIG_KEYS

# The workflows and queues of this process, declared at import time (before
# DBOS exists, as in DBOS Python) and announced to the agent at launch.
_workflows: Dict[str, WorkflowRegistration] = {}
_queues: Dict[str, "Queue"] = {}
# @DBOS.scheduled workflows, by name: their schedules are written at launch.
_scheduled: Dict[str, WorkflowRegistration] = {}
# DBOS.listen_queues: queues configured elsewhere that this process serves.
_listened: List[str] = []
_instance: Optional["DBOS"] = None
# How long the handshake of the version probe may take (AgentLink's default).
_CONNECT_TIMEOUT_SEC = 10.0
_instance_lock = threading.RLock()


def _is_launched() -> bool:
    inst = _instance
    return inst is not None and bool(inst._launched)


# A configured instance created after launch draws DBOS Python's warning.
_classes.is_launched = _is_launched


def client_hello(app_name: Optional[str]) -> Dict[str, Any]:
    """The hello of a client connection (DBOSClient's): it takes no runs and
    announces no version, so it runs as the agent's default."""
    return {
        "min_version": proto.MIN_PROTOCOL_VERSION,
        "max_version": proto.PROTOCOL_VERSION,
        "role": proto.ROLE_CLIENT,
        "app_name": app_name,
        "language": "python",
        "binding_version": __version__,
        "pid": os.getpid(),
    }


def compute_app_version(app_name: str, workflows: List[Callable[..., Any]]) -> str:
    """The application version of a worker that was given none, as DBOS
    Python computes it (its registry's ``compute_app_version``): the MD5 hex
    digest of the workflows' source texts, sorted (so the order of
    declaration does not matter), then the library's own version (another
    release may run the same code differently) and the application's name
    (applications built from one source do not share a version). The source
    of a workflow includes its decorators; the bodies of the steps it calls
    are not part of it, as in DBOS. Where the source cannot be read (code
    built at run time, a frozen application), the version is
    ``DEFAULT_VERSION-<app name>``, as in DBOS."""
    try:
        sources = sorted(inspect.getsource(func) for func in workflows)
    except (OSError, TypeError):
        logger.warning(
            "dbos-agent: could not read the source of the workflows to compute an application version; "
            "using DEFAULT_VERSION-%s. Set one with the config's 'application_version'",
            app_name,
        )
        return f"DEFAULT_VERSION-{app_name}"
    sources.append(f"dbos-agent-python {__version__}")
    sources.append(app_name)
    hasher = hashlib.md5(usedforsecurity=False)
    for source in sources:
        hasher.update(source.encode("utf-8"))
    return hasher.hexdigest()


def __getattr__(name: str) -> Any:
    # DBOS Python's name for the process's instance (module attribute), which
    # code written for DBOS reads to learn whether DBOS is launched.
    if name == "_dbos_global_instance":
        return _instance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dbos() -> "DBOS":
    inst = _instance
    if inst is None:
        raise DBOSException("DBOS is not configured: create DBOS(config=...) and call DBOS.launch()")
    if not inst._launched:
        raise DBOSException("DBOS is not launched: call DBOS.launch() first")
    return inst


def _started(func: Callable[..., Any], args: Tuple[Any, ...]) -> Tuple[WorkflowRegistration, Tuple[Any, ...]]:
    """The workflow a start or an enqueue names, and its arguments: a bound
    method (``inst.workflow``, ``Cls.class_workflow``) passes its target
    first, as a call through it would."""
    target = _classes.bound_self(func)
    return _registration_of(func), args if target is None else (target,) + tuple(args)


def _registration_of(func: Callable[..., Any]) -> WorkflowRegistration:
    reg = getattr(func, "__dbos_workflow__", None)
    if not isinstance(reg, WorkflowRegistration):
        name = getattr(func, "__name__", repr(func))
        raise DBOSWorkflowFunctionNotFoundError("<NONE>", f"{name} is not a registered workflow function")
    return reg


def _step_workflow(step_name: str, step: Callable[..., Any]) -> Callable[..., Any]:
    """Make a step startable and enqueueable, as DBOS Python does: a
    workflow named ``<temp>.<step name>`` whose body is the one step (so a
    started or enqueued step is a workflow with that step recorded once).
    Declared before or after launch, it is announced as any workflow is
    (_declare_workflow)."""
    if inspect.iscoroutinefunction(step):

        async def temp_async(*args: Any, **kwargs: Any) -> Any:
            return await step(*args, **kwargs)

        body: Callable[..., Any] = temp_async
    else:

        def temp_sync(*args: Any, **kwargs: Any) -> Any:
            return step(*args, **kwargs)

        body = temp_sync
    body.__dbos_origin__ = step  # type: ignore[attr-defined]  # for _check_redeclaration
    reg = WorkflowRegistration(body, "<temp>." + step_name, DEFAULT_MAX_RECOVERY_ATTEMPTS, None)
    _declare_workflow(reg)
    step.__dbos_workflow__ = reg  # type: ignore[attr-defined]
    return step


class classproperty:
    """A read-only property of the class (``DBOS.workflow_id``)."""

    def __init__(self, fget: Callable[[Any], Any]):
        self.fget = fget

    def __get__(self, obj: Any, owner: Any) -> Any:
        return self.fget(owner)


def _check_async(call: str) -> None:
    """As DBOS Python: a blocking call on a thread that runs an event loop
    would stall it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"{call}() was called while an event loop is running. Use await {call}_async(...) instead.")


def _unsupported(call: str, reason: Optional[str] = None) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise DBOSNotSupportedError(call, reason)

    fn.__name__ = call.split(".")[-1]
    fn.__doc__ = "Not supported by dbos-agent yet: raises DBOSNotSupportedError."
    return fn


class DBOS(DBOSExtras):
    """Durable workflows: decorate functions with ``@DBOS.workflow()`` and
    ``@DBOS.step()``, create ``DBOS(config=...)`` and call ``DBOS.launch()``.

    Config keys: ``name`` (the application), ``application_version``,
    ``executor_id`` (must match the agent's, which owns it), ``agent_socket``
    (else env ``DBOS_AGENT_SOCKET``, else the agent's default path),
    ``agent_trusted_uids`` (users besides this process's own and root whose
    agent it talks to, else env ``DBOS_AGENT_TRUSTED_UIDS``) and
    ``serializer``. DBOS Python's database keys are accepted and ignored:
    the agent owns the system database.
    """

    def __new__(cls, *, config: Dict[str, Any], **kwargs: Any) -> "DBOS":
        global _instance
        with _instance_lock:
            if _instance is None:
                inst = super().__new__(cls)
                inst._setup(config)
                _instance = inst
            return _instance

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
        ignored = sorted(set(config) & _AGENT_OWNED_KEYS)
        if ignored:
            logger.info("dbos-agent: config keys %s are the agent's business and are ignored here", ", ".join(ignored))
        self._config = config
        tracing.dbos_tracer.config(config)
        self._app_name: str = name
        # The configured version, else DBOS__APPVERSION; when neither is set,
        # the first hello computes one from the workflows' source, as DBOS
        # Python does at launch (compute_app_version).
        self._app_version: str = str(config.get("application_version") or os.environ.get("DBOS__APPVERSION") or "")
        self._executor_id_wanted: Optional[str] = config.get("executor_id") or os.environ.get("DBOS__VMID") or None
        self._executor_id: str = self._executor_id_wanted or "local"
        self._socket = resolve_socket_path(config.get("agent_socket"))
        self._trusted_uids = resolve_trusted_uids(config.get("agent_trusted_uids"))
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
    def launch(cls) -> None:
        """Connect to the agent and register this process's workflows and
        queues; from then on the agent dispatches their runs here."""
        inst = _instance
        if inst is None:
            raise DBOSException("DBOS.launch() was called without a DBOS instance: construct DBOS(config=...) first")
        with _instance_lock:
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
        }

    def _agent_default_version(self) -> str:
        """The agent's own default version (its --app-version, or its
        DBOS__APPVERSION), which a worker that was given no version runs as
        rather than a computed one, so that an operator's choice on the agent
        stands. A hello names the version a connection runs as, so a short
        client connection, which registers nothing, asks."""
        probe = Connection(self._socket, lambda op, body, conn: None, lambda conn, reason: None, self._trusted_uids)
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
            loop.run_forever()

        self._loop_thread = threading.Thread(target=run_loop, name="dbos-agent-event-loop", daemon=True)
        self._loop_thread.start()
        started.wait()
        self._engine.background_loop = loop
        link = AgentLink(
            self._socket, self._hello, self._on_push, self._on_connected, self._on_lost, trusted_uids=self._trusted_uids
        )
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
                f"executor_id {self._executor_id_wanted!r} was configured, but the agent at {self._socket} "
                f"runs as executor {agent_executor!r}: the agent owns the executor id "
                f"(start it with --executor-id {self._executor_id_wanted})"
            )
        self._executor_id = agent_executor
        self._app_version = reply.get("app_version") or self._app_version
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
        except BaseException:
            _announcer.detach()
            link.close()
            loop.call_soon_threadsafe(loop.stop)
            self._engine.link = None
            raise
        self._launched = True
        logger.info(
            "DBOS launched on dbos-agent %s (%s): application %s, version %r, executor %s",
            reply.get("agent_version", "?"), self._socket, self._app_name, self._app_version, self._executor_id,
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
            _announcer.announce(queues=[reg])
        except BaseException:
            q._registered = None
            raise
        logger.debug("registered queue %s with the agent: %s", q.name, reg)

    def _write_decorated_schedule(self, reg: WorkflowRegistration) -> None:
        assert reg.scheduled_cron is not None
        message = sched.schedule_message(
            schedule_name=reg.name, workflow_name=reg.name, schedule=reg.scheduled_cron, context=None
        )
        sched.upsert_schedule(self._engine, message, keep_status=True)

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
        global _instance
        with _instance_lock:
            inst = _instance
            _instance = None
            if destroy_registry:
                _workflows.clear()
                _classes.clear()
                _queues.clear()
                _scheduled.clear()
                _listened.clear()
                dsrc.forget_datasources()
            for q in _queues.values():
                q._registered = None  # a new launch decides again
        tracing.teardown_logs()
        if inst is None:
            return
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
            reg = WorkflowRegistration(func, wf_name, max_recovery_attempts, serialization_type)
            reg.validate_args = resolve_validator(validate_args, func)  # type: ignore[attr-defined]
            _declare_workflow(reg)

            if reg.is_async:

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    return await _dbos()._call_workflow_async(reg, args, kwargs)

                async_wrapper.__dbos_workflow__ = reg  # type: ignore[attr-defined]
                return cast(F, async_wrapper)

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return _dbos()._call_workflow(reg, args, kwargs)

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

    def _prepare_start(
        self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str], what: str,
        direct_call: bool = False,
    ) -> Tuple[Optional[ParentStep], Optional[Dict[str, Any]], str]:
        """The start of a workflow: (the parent step when started from
        workflow code, the start_workflow request, the workflow's id). A
        child whose start is recorded (replay) is not started again: the
        request is None and the id the recorded one. A direct call checks
        the workflow's required roles first, as DBOS does (a start or an
        enqueue is checked when the workflow runs)."""
        # A method's target is named in the row, not recorded in its inputs.
        class_name, config_name = _classes.target_names(reg.method, reg.func, args)
        assumed = auth.check_roles(reg.func, reg.name) if direct_call else None
        parent, recorded = start_position(what, reg.name, self._serializer)
        pinned = take_assigned()
        assigned = pinned.workflow_id if pinned is not None else None
        if recorded is not None:
            return parent, None, recorded
        body = self._engine.start_request(
            reg.name, args[1:] if class_name is not None else args, kwargs,
            class_name=class_name, config_name=config_name,
            tag=tag_for(reg.serialization_type, self._serializer),
            workflow_id=assigned or (parent.child_id() if parent is not None else None),
            queue_name=queue_name,
            run_here=queue_name is None,
            enqueue=_enqueue_options.get(),
            timeout_ms=current_timeout_ms(),
            attributes=current_attributes(),
            parent=parent,
        )
        body.update(auth.start_fields(assumed))
        if pinned is not None and pinned.reuse_policy == "reject":
            body["workflow_id_reuse_policy"] = "reject"
        ambient.apply_start(body)
        return parent, body, body["workflow_id"]

    def _reclaim_request(
        self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], wid: str, parent: Optional[ParentStep]
    ) -> Optional[Dict[str, Any]]:
        """For a child called directly whose start its parent recorded but
        not its outcome (a recovered parent calling it again): a run_here
        start of the recorded id. The agent then claims a child recovered
        onto the internal queue for this thread, so the parent does not wait
        for it to get a slot of max_concurrency that its own run may be
        holding. None when there is nothing to ask."""
        if parent is None or parent.run.peek_function_id() in parent.run.history:
            return None  # not a child, or its outcome is recorded
        return self._engine.start_request(
            reg.name, args, kwargs, tag=tag_for(reg.serialization_type, self._serializer),
            workflow_id=wid, queue_name=None, run_here=True, parent=parent,
        )

    def _call_workflow(self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        if reg.is_async:
            raise DBOSException(f"workflow {reg.name} is async: await it")
        engine = self._engine
        parent, body, wid = self._prepare_start(reg, args, kwargs, None, f"calling workflow {reg.name}", direct_call=True)
        body = body or self._reclaim_request(reg, args, kwargs, wid, parent)
        if body is not None:
            reply, generation = engine.start(body, parent)
            wid = reply.get("workflow_id") or wid
            grant = reply.get("run")
            if grant:
                run = WorkflowRun(grant, generation)
                engine.register_run(run)
                if parent is not None:
                    return self._run_child(parent.run, run, reg, args, kwargs)
                try:
                    return engine.execute_sync(run, reg, args, kwargs)
                except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
                    pass  # this run stopped: the recorded outcome decides
        return _get_result_recorded(engine, wid, lambda: engine.await_result(wid))

    def _run_child(
        self, parent: WorkflowRun, run: WorkflowRun, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any],
    ) -> Any:
        """Run a child called directly from workflow code here, then record
        its outcome as the parent's next step (DBOS.getResult)."""
        engine = self._engine
        fid = parent.next_function_id()
        started = _now_ms()
        try:
            output = engine.execute_sync(run, reg, args, kwargs)
        except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
            # The child stopped here: wait for the outcome that stands.
            return drive(engine, await_result_op(engine, run.workflow_id, parent, fid))
        except Exception as e:
            _record(engine, parent, child_outcome_body(engine, parent, fid, run.workflow_id, started, None, e))
            raise
        _record(engine, parent, child_outcome_body(engine, parent, fid, run.workflow_id, started, output, None))
        return output

    async def _call_workflow_async(self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        engine = self._engine
        parent, body, wid = self._prepare_start(reg, args, kwargs, None, f"calling workflow {reg.name}", direct_call=True)
        body = body or self._reclaim_request(reg, args, kwargs, wid, parent)
        if body is not None:
            reply, generation = await engine.start_async(body, parent)
            wid = reply.get("workflow_id") or wid
            grant = reply.get("run")
            if grant:
                run = WorkflowRun(grant, generation)
                engine.register_run(run)
                if parent is not None:
                    return await self._run_child_async(parent.run, run, reg, args, kwargs)
                try:
                    return await engine.execute_async(run, reg, args, kwargs)
                except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
                    pass
        return await _get_result_recorded_async(engine, wid, lambda: engine.await_result_async(wid))

    async def _run_child_async(
        self, parent: WorkflowRun, run: WorkflowRun, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Any:
        engine = self._engine
        fid = parent.next_function_id()
        started = _now_ms()
        try:
            output = await engine.execute_async(run, reg, args, kwargs)
        except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
            return await drive_async(engine, await_result_op(engine, run.workflow_id, parent, fid))
        except Exception as e:
            await _record_async(engine, parent, child_outcome_body(engine, parent, fid, run.workflow_id, started, None, e))
            raise
        await _record_async(engine, parent, child_outcome_body(engine, parent, fid, run.workflow_id, started, output, None))
        return output

    def _start(
        self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str], what: str,
    ) -> "WorkflowHandle[Any]":
        parent, body, wid = self._prepare_start(reg, args, kwargs, queue_name, what)
        if body is None:
            return WorkflowHandle(self._engine, wid)
        reply, generation = self._engine.start(body, parent)
        grant = reply.get("run")
        fut: "Optional[Future[Any]]" = None
        if grant:
            fut = self._engine.run_in_background(WorkflowRun(grant, generation), reg, {"args": args, "kwargs": kwargs})
        # With duplication_policy "return-existing" the reply names the
        # workflow that holds the deduplication id.
        return WorkflowHandle(self._engine, reply.get("workflow_id") or wid, fut)

    async def _start_async(
        self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str], what: str,
    ) -> "WorkflowHandleAsync[Any]":
        parent, body, wid = self._prepare_start(reg, args, kwargs, queue_name, what)
        if body is None:
            return WorkflowHandleAsync(self._engine, wid)
        reply, generation = await self._engine.start_async(body, parent)
        grant = reply.get("run")
        task: "Optional[asyncio.Future[Any]]" = None
        if grant:
            run = WorkflowRun(grant, generation)
            if reg.is_async:
                self._engine.register_run(run)
                task = asyncio.ensure_future(self._engine.execute_async(run, reg, args, kwargs))
                self._engine.keep_task(task)
            else:
                task = asyncio.wrap_future(self._engine.run_in_background(run, reg, {"args": args, "kwargs": kwargs}))
        return WorkflowHandleAsync(self._engine, reply.get("workflow_id") or wid, task)

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
    # Workflow management

    @classmethod
    def retrieve_workflow(
        cls, workflow_id: str, existing_workflow: bool = True, *, shard_key: Optional[str] = None,
    ) -> "WorkflowHandle[Any]":
        """A handle to a workflow by id; raises DBOSNonExistentWorkflowError
        for an unknown id unless ``existing_workflow=False``."""
        sched.refuse_shard_key("DBOS.retrieve_workflow", shard_key)
        engine = _dbos()._engine
        if existing_workflow:
            stat = call_as_step("DBOS.getStatus", lambda: engine.get_status(workflow_id))
            if stat is None:
                raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandle(engine, workflow_id)

    @classmethod
    async def retrieve_workflow_async(
        cls, workflow_id: str, existing_workflow: bool = True, *, shard_key: Optional[str] = None,
    ) -> "WorkflowHandleAsync[Any]":
        sched.refuse_shard_key("DBOS.retrieve_workflow_async", shard_key)
        engine = _dbos()._engine
        if existing_workflow:
            stat = await call_as_step_async("DBOS.getStatus", lambda: engine.get_status_async(workflow_id))
            if stat is None:
                raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandleAsync(engine, workflow_id)

    @classmethod
    def get_result(cls, workflow_id: str, *, shard_key: Optional[str] = None) -> Any:
        """Wait for a workflow and return its output (or raise its error)."""
        sched.refuse_shard_key("DBOS.get_result", shard_key)
        engine = _dbos()._engine
        return _get_result_recorded(engine, workflow_id, lambda: engine.await_result(workflow_id))

    @classmethod
    async def get_result_async(cls, workflow_id: str, *, shard_key: Optional[str] = None) -> Any:
        sched.refuse_shard_key("DBOS.get_result_async", shard_key)
        engine = _dbos()._engine
        return await _get_result_recorded_async(engine, workflow_id, lambda: engine.await_result_async(workflow_id))

    @classmethod
    def get_workflow_status(cls, workflow_id: str, *, shard_key: Optional[str] = None) -> Optional[WorkflowStatus]:
        """A workflow's status, or None for an unknown id."""
        sched.refuse_shard_key("DBOS.get_workflow_status", shard_key)
        engine = _dbos()._engine
        return call_as_step("DBOS.getStatus", lambda: engine.get_status(workflow_id))

    @classmethod
    async def get_workflow_status_async(cls, workflow_id: str, *, shard_key: Optional[str] = None) -> Optional[WorkflowStatus]:
        sched.refuse_shard_key("DBOS.get_workflow_status_async", shard_key)
        engine = _dbos()._engine
        return await call_as_step_async("DBOS.getStatus", lambda: engine.get_status_async(workflow_id))

    @classmethod
    def cancel_workflow(cls, workflow_id: str, *, cancel_children: bool = False, shard_key: Optional[str] = None) -> None:
        """Cancel a workflow: it stops at its next step and is not recovered.
        With ``cancel_children``, every workflow it started is cancelled too,
        recursively."""
        cls.cancel_workflows([workflow_id], cancel_children=cancel_children, shard_key=shard_key)

    @classmethod
    async def cancel_workflow_async(
        cls, workflow_id: str, *, cancel_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        await cls.cancel_workflows_async([workflow_id], cancel_children=cancel_children, shard_key=shard_key)

    @classmethod
    def cancel_workflows(
        cls, workflow_ids: List[str], *, cancel_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        """Cancel several workflows (and with ``cancel_children`` their
        children, recursively)."""
        sched.refuse_shard_key("DBOS.cancel_workflows", shard_key)
        engine = _dbos()._engine
        call_as_step("DBOS.cancelWorkflow", lambda: engine.cancel(workflow_ids, cancel_children))

    @classmethod
    async def cancel_workflows_async(
        cls, workflow_ids: List[str], *, cancel_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOS.cancel_workflows_async", shard_key)
        engine = _dbos()._engine
        await call_as_step_async("DBOS.cancelWorkflow", lambda: engine.cancel_async(workflow_ids, cancel_children))

    @classmethod
    def resume_workflow(
        cls, workflow_id: str, *, queue_name: Optional[str] = None, shard_key: Optional[str] = None,
    ) -> "WorkflowHandle[Any]":
        """Resume a cancelled (or dead-lettered) workflow from its last
        recorded step."""
        sched.refuse_shard_key("DBOS.resume_workflow", shard_key)
        engine = _dbos()._engine
        call_as_step("DBOS.resumeWorkflow", lambda: engine.resume(workflow_id, queue_name))
        return WorkflowHandle(engine, workflow_id)

    @classmethod
    async def resume_workflow_async(
        cls, workflow_id: str, *, queue_name: Optional[str] = None, shard_key: Optional[str] = None,
    ) -> "WorkflowHandleAsync[Any]":
        sched.refuse_shard_key("DBOS.resume_workflow_async", shard_key)
        engine = _dbos()._engine
        await call_as_step_async("DBOS.resumeWorkflow", lambda: engine.resume_async(workflow_id, queue_name))
        return WorkflowHandleAsync(engine, workflow_id)

    @classmethod
    def resume_workflows(
        cls, workflow_ids: List[str], *, queue_name: Optional[str] = None, shard_key: Optional[str] = None
    ) -> List["WorkflowHandle[Any]"]:
        """Resume several workflows, all or none: a missing id raises
        DBOSNonExistentWorkflowError naming the missing ones and resumes
        nothing. In a workflow it is the step DBOS.resumeWorkflow."""
        _check_async("resume_workflows")
        sched.refuse_shard_key("DBOS.resume_workflows", shard_key)
        engine = _dbos()._engine
        call_as_step("DBOS.resumeWorkflow", lambda: drive(engine, resume_workflows_op(workflow_ids, queue_name)))
        return [WorkflowHandle(engine, wid) for wid in workflow_ids]

    @classmethod
    async def resume_workflows_async(
        cls, workflow_ids: List[str], *, queue_name: Optional[str] = None, shard_key: Optional[str] = None
    ) -> List["WorkflowHandleAsync[Any]"]:
        sched.refuse_shard_key("DBOS.resume_workflows_async", shard_key)
        engine = _dbos()._engine
        await call_as_step_async(
            "DBOS.resumeWorkflow", lambda: drive_async(engine, resume_workflows_op(workflow_ids, queue_name))
        )
        return [WorkflowHandleAsync(engine, wid) for wid in workflow_ids]

    @classmethod
    def delete_queue(cls, name: str) -> None:
        """Delete a queue's registration (DBOS's delete_queue): its
        workflows stay, and what waits on it runs only once the queue is
        registered again. This process stops serving it."""
        _check_async("delete_queue")
        _forget_queue(name)
        drive(_dbos()._engine, delete_queue_op(name))

    @classmethod
    async def delete_queue_async(cls, name: str) -> None:
        _forget_queue(name)
        await drive_async(_dbos()._engine, delete_queue_op(name))

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

    @classmethod
    def list_workflows(
        cls,
        *,
        workflow_ids: Optional[List[str]] = None,
        status: Optional[Union[str, List[str]]] = None,
        start_time: Optional[str] = None,
        end_time: Optional[str] = None,
        completed_after: Optional[str] = None,
        completed_before: Optional[str] = None,
        dequeued_after: Optional[str] = None,
        dequeued_before: Optional[str] = None,
        name: Optional[Union[str, List[str]]] = None,
        app_version: Optional[Union[str, List[str]]] = None,
        forked_from: Optional[Union[str, List[str]]] = None,
        parent_workflow_id: Optional[Union[str, List[str]]] = None,
        user: Optional[Union[str, List[str]]] = None,
        queue_name: Optional[Union[str, List[str]]] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        sort_desc: bool = False,
        workflow_id_prefix: Optional[Union[str, List[str]]] = None,
        load_input: bool = True,
        load_output: bool = True,
        executor_id: Optional[Union[str, List[str]]] = None,
        queues_only: bool = False,
        was_forked_from: Optional[bool] = None,
        is_fork: Optional[bool] = None,
        has_parent: Optional[bool] = None,
        attributes: Optional[Dict[str, Any]] = None,
        schedule_name: Optional[Union[str, List[str]]] = None,
        application_name: Optional[Union[str, List[str]]] = None,
        shard_key: Optional[Union[str, List[str]]] = None,
        parent_shard_key: Optional[Union[str, List[str]]] = None,
    ) -> List[WorkflowStatus]:
        """List workflows, filtered as in DBOS Python (times are ISO 8601)."""
        filters = dict(locals())
        filters.pop("cls")
        inst = _dbos()
        return call_as_step(
            "DBOS.listWorkflows", lambda: inst._engine.list_workflows("DBOS.list_workflows", filters, inst._app_name)
        )

    @classmethod
    async def list_workflows_async(
        cls,
        *,
        workflow_ids: Optional[List[str]] = None,
        status: Optional[Union[str, List[str]]] = None,
        start_time: Optional[str] = None,
        end_time: Optional[str] = None,
        completed_after: Optional[str] = None,
        completed_before: Optional[str] = None,
        dequeued_after: Optional[str] = None,
        dequeued_before: Optional[str] = None,
        name: Optional[Union[str, List[str]]] = None,
        app_version: Optional[Union[str, List[str]]] = None,
        forked_from: Optional[Union[str, List[str]]] = None,
        parent_workflow_id: Optional[Union[str, List[str]]] = None,
        user: Optional[Union[str, List[str]]] = None,
        queue_name: Optional[Union[str, List[str]]] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        sort_desc: bool = False,
        workflow_id_prefix: Optional[Union[str, List[str]]] = None,
        load_input: bool = True,
        load_output: bool = True,
        executor_id: Optional[Union[str, List[str]]] = None,
        queues_only: bool = False,
        was_forked_from: Optional[bool] = None,
        is_fork: Optional[bool] = None,
        has_parent: Optional[bool] = None,
        attributes: Optional[Dict[str, Any]] = None,
        schedule_name: Optional[Union[str, List[str]]] = None,
        application_name: Optional[Union[str, List[str]]] = None,
        shard_key: Optional[Union[str, List[str]]] = None,
        parent_shard_key: Optional[Union[str, List[str]]] = None,
    ) -> List[WorkflowStatus]:
        filters = dict(locals())
        filters.pop("cls")
        inst = _dbos()
        return await call_as_step_async(
            "DBOS.listWorkflows",
            lambda: inst._engine.list_workflows_async("DBOS.list_workflows_async", filters, inst._app_name),
        )

    @classmethod
    def list_queued_workflows(cls, **filters: Any) -> List[WorkflowStatus]:
        """The workflows waiting in or running from a queue."""
        inst = _dbos()
        filters = queued_filters("DBOS.list_queued_workflows", filters)
        return call_as_step(
            "DBOS.listQueuedWorkflows",
            lambda: inst._engine.list_workflows("DBOS.list_queued_workflows", filters, inst._app_name),
        )

    @classmethod
    async def list_queued_workflows_async(cls, **filters: Any) -> List[WorkflowStatus]:
        inst = _dbos()
        filters = queued_filters("DBOS.list_queued_workflows_async", filters)
        return await call_as_step_async(
            "DBOS.listQueuedWorkflows",
            lambda: inst._engine.list_workflows_async("DBOS.list_queued_workflows_async", filters, inst._app_name),
        )

    @classmethod
    def list_workflow_steps(
        cls, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None,
        offset: Optional[int] = None, shard_key: Optional[str] = None,
    ) -> List[StepInfo]:
        """The recorded steps of a workflow, in order."""
        sched.refuse_shard_key("DBOS.list_workflow_steps", shard_key)
        engine = _dbos()._engine
        return call_as_step(
            "DBOS.listWorkflowSteps", lambda: engine.list_steps(workflow_id, load_output, limit, offset)
        )

    @classmethod
    async def list_workflow_steps_async(
        cls, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None,
        offset: Optional[int] = None, shard_key: Optional[str] = None,
    ) -> List[StepInfo]:
        sched.refuse_shard_key("DBOS.list_workflow_steps_async", shard_key)
        engine = _dbos()._engine
        return await call_as_step_async(
            "DBOS.listWorkflowSteps", lambda: engine.list_steps_async(workflow_id, load_output, limit, offset)
        )

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
    def retrieve_queue(cls, name: str) -> Optional["Queue"]:
        """The queue of that name: the one declared in this process, else
        the configuration stored in the database (None when there is none).
        A queue retrieved from the database is not served by this process
        unless it is declared here or named in ``DBOS.listen_queues``."""
        declared = _queues.get(name)
        if declared is not None:
            return declared
        info = sched.get_queue(_dbos()._engine, name)
        if info is None or not info.get("registered"):
            return None
        return Queue._from_info(info)

    @classmethod
    async def retrieve_queue_async(cls, name: str) -> Optional["Queue"]:
        return await asyncio.to_thread(cls.retrieve_queue, name)

    @classmethod
    def list_queues(cls, *, application_name: Optional[Union[str, List[str]]] = None) -> List["Queue"]:
        """The queues registered in the system database. (The agent does not
        report a queue's owner, so every application's queues are listed.)"""
        sched.refuse_other_application("DBOS.list_queues", application_name, _dbos()._app_name)
        return [Queue._from_info(i) for i in sched.list_queues(_dbos()._engine) if i.get("registered")]

    @classmethod
    async def list_queues_async(cls, *, application_name: Optional[Union[str, List[str]]] = None) -> List["Queue"]:
        return await asyncio.to_thread(lambda: cls.list_queues(application_name=application_name))

    @classmethod
    def listen_queues(cls, queues: Sequence[str]) -> None:
        """Serve these queues, configured elsewhere (by another process or
        SDK), by name. Call it before launch. (Queues declared in this
        process are served whether listed or not.)"""
        with _instance_lock:
            inst = _instance
            if inst is not None and inst._launched:
                raise DBOSException("listen_queues called after DBOS is launched")
            if _listened:
                raise DBOSException("listen_queues called more than once")
            _listened.extend(queues)

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

    def _enqueue_with_options(
        self, options: "EnqueueOptions", args: Tuple[Any, ...], kwargs: Dict[str, Any], call: str
    ) -> Tuple[Optional[ParentStep], Optional[Dict[str, Any]], str]:
        """As _prepare_start, for an enqueue by the workflow's name."""
        from ._client import enqueue_request

        parent, recorded = start_position(call, str(options.get("workflow_name", "")), self._serializer)
        if recorded is not None:
            return parent, None, recorded
        # As DBOS: options the call leaves unset fall back to SetWorkflowID,
        # whose reuse policy goes with its id only.
        pinned = take_assigned()
        if pinned is not None and options.get("workflow_id") is None:
            options = cast("EnqueueOptions", dict(options, workflow_id=pinned.workflow_id))
            if options.get("workflow_id_reuse_policy") is None and pinned.reuse_policy is not None:
                options["workflow_id_reuse_policy"] = pinned.reuse_policy
        body = enqueue_request(self._engine, self._serializer, options, args, kwargs, call, self._app_name, parent)
        return parent, body, body["workflow_id"]

    @classmethod
    def enqueue_workflow_with_options(cls, options: "EnqueueOptions", *args: Any, **kwargs: Any) -> "WorkflowHandle[Any]":
        """Enqueue a workflow by name with ``DBOSClient.enqueue``'s options;
        another process may implement it."""
        inst = _dbos()
        parent, body, wid = inst._enqueue_with_options(options, args, kwargs, "DBOS.enqueue_workflow_with_options")
        if body is not None:
            reply, _ = inst._engine.start(body, parent)
            wid = reply.get("workflow_id") or wid
        return WorkflowHandle(inst._engine, wid)

    @classmethod
    async def enqueue_workflow_with_options_async(
        cls, options: "EnqueueOptions", *args: Any, **kwargs: Any
    ) -> "WorkflowHandleAsync[Any]":
        inst = _dbos()
        parent, body, wid = inst._enqueue_with_options(options, args, kwargs, "DBOS.enqueue_workflow_with_options_async")
        if body is not None:
            reply, _ = await inst._engine.start_async(body, parent)
            wid = reply.get("workflow_id") or wid
        return WorkflowHandleAsync(inst._engine, wid)

    @classmethod
    def set_workflow_delay(
        cls,
        workflow_id: str,
        *,
        delay_seconds: Optional[float] = None,
        delay_until_epoch_ms: Optional[int] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        """Move a DELAYED workflow's release time (``delay_seconds`` from now,
        or ``delay_until_epoch_ms``); other workflows are left as they are."""
        sched.refuse_shard_key("DBOS.set_workflow_delay", shard_key)
        engine = _dbos()._engine
        call_as_step(
            "DBOS.setWorkflowDelay",
            lambda: sched.set_workflow_delay(engine, workflow_id, delay_seconds, delay_until_epoch_ms),
        )

    @classmethod
    async def set_workflow_delay_async(
        cls,
        workflow_id: str,
        *,
        delay_seconds: Optional[float] = None,
        delay_until_epoch_ms: Optional[int] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        await asyncio.to_thread(
            lambda: cls.set_workflow_delay(
                workflow_id, delay_seconds=delay_seconds, delay_until_epoch_ms=delay_until_epoch_ms, shard_key=shard_key
            )
        )

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
            with _instance_lock:
                reg.scheduled_cron = cron
                _scheduled[reg.name] = reg
                inst = _instance
                launched = inst is not None and inst._launched
            if launched:
                # Declared after launch: its schedule is written now (its
                # workflow was registered by @DBOS.workflow below this).
                assert inst is not None
                inst._write_decorated_schedule(reg)
            return func

        return decorate

    @classmethod
    def create_schedule(
        cls,
        *,
        schedule_name: str,
        workflow_fn: Callable[..., Any],
        schedule: str,
        context: Any = None,
        automatic_backfill: bool = False,
        cron_timezone: Optional[str] = None,
        queue_name: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        """Create a cron schedule (5 fields, or 6 with seconds first) that
        enqueues ``workflow_fn(scheduled_time, context)`` on every tick, on
        ``queue_name`` (default: the internal queue). ``context`` must be
        JSON-serializable. Inside a workflow it is recorded as a step."""
        sched.refuse_shard_key("DBOS.create_schedule", shard_key)
        step = getattr(workflow_fn, "__dbos_step__", None)
        if isinstance(step, StepConfig):
            # DBOS Python names a step by its step name, which no workflow has.
            raise DBOSException(f"Workflow function '{step.name}' is not registered")
        reg = _registration_of(workflow_fn)
        engine = _dbos()._engine
        message = sched.schedule_message(
            schedule_name=schedule_name, workflow_name=reg.name, schedule=schedule, context=context,
            workflow_class_name=_classes.schedule_class_name(reg.method),
            automatic_backfill=automatic_backfill, cron_timezone=cron_timezone, queue_name=queue_name,
        )

        def create() -> None:
            if queue_name is None or queue_name not in _queues:
                sched.check_queue_declared(engine, queue_name)
            sched.create_schedule(engine, message)

        call_as_step("DBOS.createSchedule", create)

    @classmethod
    async def create_schedule_async(
        cls,
        *,
        schedule_name: str,
        workflow_fn: Callable[..., Any],
        schedule: str,
        context: Any = None,
        automatic_backfill: bool = False,
        cron_timezone: Optional[str] = None,
        queue_name: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> None:
        await asyncio.to_thread(
            lambda: cls.create_schedule(
                schedule_name=schedule_name, workflow_fn=workflow_fn, schedule=schedule, context=context,
                automatic_backfill=automatic_backfill, cron_timezone=cron_timezone, queue_name=queue_name,
                shard_key=shard_key,
            )
        )

    @classmethod
    def list_schedules(
        cls,
        *,
        status: Optional[Union[str, List[str]]] = None,
        workflow_name: Optional[Union[str, List[str]]] = None,
        schedule_name_prefix: Optional[Union[str, List[str]]] = None,
        application_name: Optional[Union[str, List[str]]] = None,
    ) -> List[WorkflowSchedule]:
        """This application's schedules, optionally filtered."""
        inst = _dbos()
        sched.refuse_other_application("DBOS.list_schedules", application_name, inst._app_name)
        return call_as_step(
            "DBOS.listSchedules",
            lambda: sched.list_schedules(inst._engine, "DBOS.list_schedules", status, workflow_name, schedule_name_prefix),
        )

    @classmethod
    async def list_schedules_async(
        cls,
        *,
        status: Optional[Union[str, List[str]]] = None,
        workflow_name: Optional[Union[str, List[str]]] = None,
        schedule_name_prefix: Optional[Union[str, List[str]]] = None,
        application_name: Optional[Union[str, List[str]]] = None,
    ) -> List[WorkflowSchedule]:
        return await asyncio.to_thread(
            lambda: cls.list_schedules(
                status=status, workflow_name=workflow_name, schedule_name_prefix=schedule_name_prefix,
                application_name=application_name,
            )
        )

    @classmethod
    def get_schedule(cls, name: str) -> Optional[WorkflowSchedule]:
        """The schedule of that name, or None."""
        engine = _dbos()._engine
        return call_as_step("DBOS.getSchedule", lambda: sched.get_schedule(engine, name))

    @classmethod
    async def get_schedule_async(cls, name: str) -> Optional[WorkflowSchedule]:
        return await asyncio.to_thread(cls.get_schedule, name)

    @classmethod
    def delete_schedule(cls, name: str) -> None:
        """Delete a schedule (nothing happens if there is none)."""
        engine = _dbos()._engine
        call_as_step("DBOS.deleteSchedule", lambda: sched.delete_schedule(engine, name))

    @classmethod
    async def delete_schedule_async(cls, name: str) -> None:
        await asyncio.to_thread(cls.delete_schedule, name)

    @classmethod
    def pause_schedule(cls, name: str) -> None:
        """Pause a schedule: it does not fire until resumed."""
        engine = _dbos()._engine
        call_as_step("DBOS.pauseSchedule", lambda: sched.pause_schedule(engine, name))

    @classmethod
    def resume_schedule(cls, name: str) -> None:
        """Resume a paused schedule."""
        engine = _dbos()._engine
        call_as_step("DBOS.resumeSchedule", lambda: sched.resume_schedule(engine, name))

    @classmethod
    def apply_schedules(cls, schedules: List[ScheduleInput]) -> None:
        """Create or replace these schedules (made ACTIVE). The agent has no
        transaction over several schedules: each is applied in turn, and a
        changed one is deleted and created again."""
        if current_ctx() is not None:
            raise DBOSException("DBOS.apply_schedules cannot be called from within a workflow")
        inst = _dbos()
        messages = []
        for i, entry in enumerate(schedules):
            for required in ("schedule_name", "workflow_fn", "schedule"):
                if required not in entry:
                    raise DBOSException(f"Schedule entry {i} is missing required field '{required}'")
            sched.refuse_shard_key("DBOS.apply_schedules", entry.get("shard_key"))
            reg = _registration_of(entry["workflow_fn"])
            queue_name = entry.get("queue_name")
            if queue_name is not None and queue_name not in _queues:
                sched.check_queue_declared(inst._engine, queue_name)
            messages.append(
                sched.schedule_message(
                    schedule_name=entry["schedule_name"], workflow_name=reg.name, schedule=entry["schedule"],
                    workflow_class_name=_classes.schedule_class_name(reg.method),
                    context=entry.get("context"), automatic_backfill=entry.get("automatic_backfill", False),
                    cron_timezone=entry.get("cron_timezone"), queue_name=queue_name,
                )
            )
        for m in messages:
            sched.upsert_schedule(inst._engine, m, keep_status=False)

    @classmethod
    async def apply_schedules_async(cls, schedules: List[ScheduleInput]) -> None:
        await asyncio.to_thread(cls.apply_schedules, schedules)

    @classmethod
    def backfill_schedule(cls, schedule_name: str, start: datetime, end: datetime) -> List["WorkflowHandle[None]"]:
        """Enqueue every tick of a schedule strictly between ``start`` and
        ``end``, with the ids the live scheduler uses: ticks already enqueued
        are not enqueued again."""
        if current_ctx() is not None:
            raise DBOSException("DBOS.backfill_schedule cannot be called from within a workflow")
        engine = _dbos()._engine
        return [WorkflowHandle(engine, wid) for wid in sched.backfill_schedule(engine, schedule_name, start, end)]

    @classmethod
    def trigger_schedule(cls, schedule_name: str) -> "WorkflowHandle[None]":
        """Enqueue a schedule's workflow now (id ``sched-<name>-trigger-<now>``)."""
        if current_ctx() is not None:
            raise DBOSException("DBOS.trigger_schedule cannot be called from within a workflow")
        engine = _dbos()._engine
        return WorkflowHandle(engine, sched.trigger_schedule(engine, schedule_name))

    # ------------------------------------------------------------------
    # Application versions

    @classmethod
    def list_application_versions(cls) -> List[VersionInfo]:
        """This application's versions, the latest first."""
        return sched.list_versions(_dbos()._engine)

    @classmethod
    def get_latest_application_version(cls) -> VersionInfo:
        """The latest version: the one unversioned work (and schedule ticks)
        goes to."""
        return sched.latest_version(_dbos()._engine)

    @classmethod
    def set_latest_application_version(cls, version_name: str, *, application_name: Optional[str] = None) -> None:
        """Make a registered version the latest (roll forward or back): from
        now on, workers of that version take the unversioned work."""
        inst = _dbos()
        sched.refuse_other_application("DBOS.set_latest_application_version", application_name, inst._app_name)
        sched.promote_version(inst._engine, version_name)

    @classmethod
    async def list_application_versions_async(cls) -> List[VersionInfo]:
        return await asyncio.to_thread(cls.list_application_versions)

    @classmethod
    async def get_latest_application_version_async(cls) -> VersionInfo:
        return await asyncio.to_thread(cls.get_latest_application_version)

    @classmethod
    async def set_latest_application_version_async(
        cls, version_name: str, *, application_name: Optional[str] = None
    ) -> None:
        await asyncio.to_thread(
            lambda: cls.set_latest_application_version(version_name, application_name=application_name)
        )

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
        inst = _instance
        return inst._app_version if inst is not None else ""

    @classproperty
    def executor_id(cls) -> str:
        inst = _instance
        return inst._executor_id if inst is not None else "local"

    @classproperty
    def logger(cls) -> logging.Logger:
        return logging.getLogger("dbos")

    @classproperty
    def authenticated_user(cls) -> Optional[str]:
        return auth.get_authentication().user

    # ------------------------------------------------------------------
    # Messages, events, streams and durable sleep (see _comm for where each
    # call is a step)

    @classmethod
    def send(
        cls,
        destination_id: str,
        message: Any,
        topic: Optional[str] = None,
        *,
        idempotency_key: Optional[str] = None,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
        shard_key: Optional[str] = None,
    ) -> None:
        """Send a message to a workflow (on ``topic``, default the default
        topic). With ``idempotency_key`` it is delivered at most once to its
        destination; with ``send_to_forks``, also to every workflow forked
        from it, recursively."""
        messages = [SendMessage(destination_id, message, topic, idempotency_key, shard_key)]
        _run_op(lambda ser, ctx: comm.send_op(ser, ctx, messages, serialization_type, "DBOS.send", send_to_forks))

    @classmethod
    async def send_async(
        cls,
        destination_id: str,
        message: Any,
        topic: Optional[str] = None,
        *,
        idempotency_key: Optional[str] = None,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
        shard_key: Optional[str] = None,
    ) -> None:
        messages = [SendMessage(destination_id, message, topic, idempotency_key, shard_key)]
        await _run_op_async(lambda ser, ctx: comm.send_op(ser, ctx, messages, serialization_type, "DBOS.send", send_to_forks))

    @classmethod
    def send_bulk(
        cls,
        messages: List[SendMessage],
        *,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
    ) -> None:
        """Send many messages in one transaction: all of them or none."""
        _run_op(lambda ser, ctx: comm.send_op(ser, ctx, messages, serialization_type, "DBOS.sendBulk", send_to_forks))

    @classmethod
    async def send_bulk_async(
        cls,
        messages: List[SendMessage],
        *,
        serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT,
        send_to_forks: bool = False,
    ) -> None:
        await _run_op_async(
            lambda ser, ctx: comm.send_op(ser, ctx, messages, serialization_type, "DBOS.sendBulk", send_to_forks)
        )

    @classmethod
    def recv(cls, topic: Optional[str] = None, timeout_seconds: float = 60) -> Any:
        """Receive the oldest message sent to this workflow on ``topic``,
        waiting up to ``timeout_seconds`` (None when none came). Only from
        workflow code; a recovered recv waits only what is left of its
        timeout."""
        return _run_op(lambda ser, ctx: comm.recv_op(ser, ctx, topic, timeout_seconds))

    @classmethod
    async def recv_async(cls, topic: Optional[str] = None, timeout_seconds: float = 60) -> Any:
        return await _run_op_async(lambda ser, ctx: comm.recv_op(ser, ctx, topic, timeout_seconds))

    @classmethod
    def sleep(cls, seconds: float) -> None:
        """A durable sleep: its wake time is recorded, so a recovered
        workflow sleeps only what is left of it."""
        _run_op(lambda ser, ctx: comm.sleep_op(ctx, seconds))

    @classmethod
    async def sleep_async(cls, seconds: float) -> None:
        await _run_op_async(lambda ser, ctx: comm.sleep_op(ctx, seconds))

    @classmethod
    def set_event(
        cls, key: str, value: Any, *, serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT
    ) -> None:
        """Publish ``value`` under ``key`` for this workflow (from workflow
        code or a step); ``get_event`` reads it."""
        _run_op(lambda ser, ctx: comm.set_event_op(ser, ctx, key, value, serialization_type))

    @classmethod
    async def set_event_async(
        cls, key: str, value: Any, *, serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT
    ) -> None:
        await _run_op_async(lambda ser, ctx: comm.set_event_op(ser, ctx, key, value, serialization_type))

    @classmethod
    def get_event(cls, workflow_id: str, key: str, timeout_seconds: float = 60, *, shard_key: Optional[str] = None) -> Any:
        """A workflow's event, waiting up to ``timeout_seconds`` for it to be
        set (None when it was not)."""
        sched.refuse_shard_key("DBOS.get_event", shard_key)
        return _run_op(lambda ser, ctx: comm.get_event_op(ser, ctx, workflow_id, key, timeout_seconds))

    @classmethod
    async def get_event_async(
        cls, workflow_id: str, key: str, timeout_seconds: float = 60, *, shard_key: Optional[str] = None
    ) -> Any:
        sched.refuse_shard_key("DBOS.get_event_async", shard_key)
        return await _run_op_async(lambda ser, ctx: comm.get_event_op(ser, ctx, workflow_id, key, timeout_seconds))

    @classmethod
    def get_all_events(cls, workflow_id: str, *, shard_key: Optional[str] = None) -> Dict[str, Any]:
        """Every event a workflow has set, by key."""
        sched.refuse_shard_key("DBOS.get_all_events", shard_key)
        inst = _dbos()
        return call_as_step(
            "DBOS.get_events", lambda: drive(inst._engine, comm.get_all_events_op(inst._serializer, workflow_id))
        )

    @classmethod
    async def get_all_events_async(cls, workflow_id: str, *, shard_key: Optional[str] = None) -> Dict[str, Any]:
        sched.refuse_shard_key("DBOS.get_all_events_async", shard_key)
        inst = _dbos()
        return await call_as_step_async(
            "DBOS.get_events", lambda: drive_async(inst._engine, comm.get_all_events_op(inst._serializer, workflow_id))
        )

    @classmethod
    def write_stream(
        cls, key: str, value: Any, *, serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT
    ) -> None:
        """Append a value to this workflow's stream ``key`` (from workflow
        code or a step)."""
        _run_op(lambda ser, ctx: comm.write_stream_op(ser, ctx, key, value, serialization_type))

    @classmethod
    async def write_stream_async(
        cls, key: str, value: Any, *, serialization_type: Optional[WorkflowSerializationFormat] = WorkflowSerializationFormat.DEFAULT
    ) -> None:
        await _run_op_async(lambda ser, ctx: comm.write_stream_op(ser, ctx, key, value, serialization_type))

    @classmethod
    def close_stream(cls, key: str) -> None:
        """Close this workflow's stream ``key``: readers end there."""
        _run_op(lambda ser, ctx: comm.write_stream_op(ser, ctx, key, None, None, close=True))

    @classmethod
    async def close_stream_async(cls, key: str) -> None:
        await _run_op_async(lambda ser, ctx: comm.write_stream_op(ser, ctx, key, None, None, close=True))

    @classmethod
    def read_stream(
        cls,
        workflow_id: str,
        key: str,
        *,
        offset: int = 0,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> Generator[Any, Any, None]:
        """Yield a stream's values from ``offset`` until it is closed or its
        workflow ends; a wait longer than ``timeout_seconds`` for the next
        value raises DBOSStreamTimeoutError. In workflow code each value read
        is a step. (The agent wakes readers: ``polling_interval_sec`` is
        accepted for compatibility.)"""
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOS.read_stream", shard_key)
        inst = _dbos()
        reader = comm.read_stream_op(inst._serializer, current_ctx(), workflow_id, key, offset, timeout_seconds)
        yield from drive_values(inst._engine, reader)

    @classmethod
    async def read_stream_async(
        cls,
        workflow_id: str,
        key: str,
        *,
        offset: int = 0,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> AsyncGenerator[Any, None]:
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOS.read_stream_async", shard_key)
        inst = _dbos()
        reader = comm.read_stream_op(inst._serializer, current_ctx(), workflow_id, key, offset, timeout_seconds)
        async for value in drive_values_async(inst._engine, reader):
            yield value

    @classmethod
    def read_stream_offset(
        cls,
        workflow_id: str,
        key: str,
        offset: int,
        *,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> Any:
        """The value at one offset of a stream, waiting for it to be written
        (DBOSStreamTimeoutError past the timeout, or when the stream ends
        before it)."""
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOS.read_stream_offset", shard_key)
        return _run_op(lambda ser, ctx: comm.read_stream_offset_op(ser, ctx, workflow_id, key, offset, timeout_seconds))

    @classmethod
    async def read_stream_offset_async(
        cls,
        workflow_id: str,
        key: str,
        offset: int,
        *,
        polling_interval_sec: Optional[float] = None,
        timeout_seconds: Optional[float] = None,
        shard_key: Optional[str] = None,
    ) -> Any:
        comm.check_stream_read_args(timeout_seconds, polling_interval_sec)
        sched.refuse_shard_key("DBOS.read_stream_offset_async", shard_key)
        return await _run_op_async(
            lambda ser, ctx: comm.read_stream_offset_op(ser, ctx, workflow_id, key, offset, timeout_seconds)
        )

    # ------------------------------------------------------------------
    # Patches

    @classmethod
    def patch(cls, patch_name: str) -> bool:
        """True where the workflow runs (or ran) the patched code, False when
        it is a replay of an execution that started before the patch."""
        return _run_op(lambda ser, ctx: comm.patch_op(ctx, patch_name, "DBOS.patch", deprecate=False))

    @classmethod
    async def patch_async(cls, patch_name: str) -> bool:
        return await _run_op_async(lambda ser, ctx: comm.patch_op(ctx, patch_name, "DBOS.patch_async", deprecate=False))

    @classmethod
    def deprecate_patch(cls, patch_name: str) -> bool:
        """Always True: the step after a removed ``patch`` keeps its place in
        executions that recorded the patch, and new executions record none."""
        return _run_op(lambda ser, ctx: comm.patch_op(ctx, patch_name, "DBOS.deprecate_patch", deprecate=True))

    @classmethod
    async def deprecate_patch_async(cls, patch_name: str) -> bool:
        return await _run_op_async(
            lambda ser, ctx: comm.patch_op(ctx, patch_name, "DBOS.deprecate_patch_async", deprecate=True)
        )

    # ------------------------------------------------------------------
    # Fork, rewind, delete and attributes (steps inside a workflow)

    @classmethod
    def fork_workflow(
        cls,
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
        """Start a new workflow (SetWorkflowID's id, else a new one) that
        replays the steps of ``workflow_id`` below ``start_step`` and runs
        the rest anew, on ``queue_name`` (default the internal queue)."""
        sched.refuse_shard_key("DBOS.fork_workflow", shard_key)
        engine = _dbos()._engine
        op = functools.partial(
            comm.fork_op, workflow_id, start_step, application_version=application_version, queue_name=queue_name,
            queue_partition_key=queue_partition_key, replacement_children=replacement_children,
            timeout_seconds=timeout_seconds,
        )
        new_id = call_as_step("DBOS.forkWorkflow", lambda: drive(engine, op()))
        return cls.retrieve_workflow(new_id)

    @classmethod
    async def fork_workflow_async(
        cls,
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
        sched.refuse_shard_key("DBOS.fork_workflow_async", shard_key)
        engine = _dbos()._engine
        op = functools.partial(
            comm.fork_op, workflow_id, start_step, application_version=application_version, queue_name=queue_name,
            queue_partition_key=queue_partition_key, replacement_children=replacement_children,
            timeout_seconds=timeout_seconds,
        )
        new_id = await call_as_step_async("DBOS.forkWorkflow", lambda: drive_async(engine, op()))
        return await cls.retrieve_workflow_async(new_id)

    @classmethod
    def rewind_workflow(
        cls,
        workflow_id: str,
        *,
        start_step: Optional[int] = None,
        application_version: Optional[str] = None,
        queue_name: Optional[str] = None,
        queue_partition_key: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> "WorkflowHandle[Any]":
        """Run an ended workflow again under its id from ``start_step``
        (default the first): the steps from there on are forgotten. An
        active workflow cannot be rewound (cancel it first)."""
        sched.refuse_shard_key("DBOS.rewind_workflow", shard_key)
        engine = _dbos()._engine
        op = functools.partial(
            comm.rewind_op, workflow_id, start_step, application_version=application_version,
            queue_name=queue_name, queue_partition_key=queue_partition_key,
        )
        def rewind() -> None:
            dsrc.drop_before_rewind(engine, workflow_id, start_step)  # the data sources' checkpoints first
            drive(engine, op())

        call_as_step("DBOS.rewindWorkflow", rewind)
        return WorkflowHandle(engine, workflow_id)

    @classmethod
    async def rewind_workflow_async(
        cls,
        workflow_id: str,
        *,
        start_step: Optional[int] = None,
        application_version: Optional[str] = None,
        queue_name: Optional[str] = None,
        queue_partition_key: Optional[str] = None,
        shard_key: Optional[str] = None,
    ) -> "WorkflowHandleAsync[Any]":
        sched.refuse_shard_key("DBOS.rewind_workflow_async", shard_key)
        engine = _dbos()._engine
        op = functools.partial(
            comm.rewind_op, workflow_id, start_step, application_version=application_version,
            queue_name=queue_name, queue_partition_key=queue_partition_key,
        )
        async def rewind() -> None:
            await dsrc.drop_before_rewind_async(engine, workflow_id, start_step)  # the data sources' checkpoints first
            await drive_async(engine, op())

        await call_as_step_async("DBOS.rewindWorkflow", rewind)
        return WorkflowHandleAsync(engine, workflow_id)

    @classmethod
    def delete_workflow(cls, workflow_id: str, *, delete_children: bool = False, shard_key: Optional[str] = None) -> None:
        """Delete a workflow with everything stored under it (with
        ``delete_children``, the workflows it started too, recursively)."""
        cls.delete_workflows([workflow_id], delete_children=delete_children, shard_key=shard_key)

    @classmethod
    async def delete_workflow_async(
        cls, workflow_id: str, *, delete_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        await cls.delete_workflows_async([workflow_id], delete_children=delete_children, shard_key=shard_key)

    @classmethod
    def delete_workflows(
        cls, workflow_ids: List[str], *, delete_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOS.delete_workflows", shard_key)
        engine = _dbos()._engine
        call_as_step("DBOS.deleteWorkflow", lambda: drive(engine, comm.delete_op(workflow_ids, delete_children)))

    @classmethod
    async def delete_workflows_async(
        cls, workflow_ids: List[str], *, delete_children: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOS.delete_workflows_async", shard_key)
        engine = _dbos()._engine
        await call_as_step_async(
            "DBOS.deleteWorkflow", lambda: drive_async(engine, comm.delete_op(workflow_ids, delete_children))
        )

    @classmethod
    def update_workflow_attributes(
        cls, workflow_id: str, attributes: Optional[Dict[str, Any]], *, merge: bool = False, shard_key: Optional[str] = None
    ) -> None:
        """Replace a workflow's attributes (None clears them), or with
        ``merge`` set the given top-level keys and keep the others."""
        sched.refuse_shard_key("DBOS.update_workflow_attributes", shard_key)
        engine = _dbos()._engine
        call_as_step(
            "DBOS.updateWorkflowAttributes",
            lambda: drive(engine, comm.update_attributes_op(workflow_id, attributes, merge)),
        )

    @classmethod
    async def update_workflow_attributes_async(
        cls, workflow_id: str, attributes: Optional[Dict[str, Any]], *, merge: bool = False, shard_key: Optional[str] = None
    ) -> None:
        sched.refuse_shard_key("DBOS.update_workflow_attributes_async", shard_key)
        engine = _dbos()._engine
        await call_as_step_async(
            "DBOS.updateWorkflowAttributes",
            lambda: drive_async(engine, comm.update_attributes_op(workflow_id, attributes, merge)),
        )

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
        _check_async("run_step")
        inst = _dbos()
        config = run_step_config("DBOS.run_step", dbos_step_options, func)
        if inspect.iscoroutinefunction(func):
            loop = inst._engine.background_loop
            assert loop is not None
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
        return await asyncio.to_thread(run_step_sync, config, func, args, kwargs)

    @classmethod
    def wait_first(
        cls, handles: List["WorkflowHandle[Any]"], *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL
    ) -> "WorkflowHandle[Any]":
        """The handle of the first of ``handles`` whose workflow ends (with
        any outcome). Inside a workflow the step DBOS.waitFirst records which
        one, so recovery returns the same handle. The agent wakes the waits,
        so ``polling_interval_sec`` is accepted and not used."""
        _check_async("wait_first")
        return wait_first(_dbos()._engine, "DBOS.wait_first", handles, recorded=True)

    @classmethod
    async def wait_first_async(
        cls, handles: List["WorkflowHandleAsync[Any]"], *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL
    ) -> "WorkflowHandleAsync[Any]":
        return await wait_first_async(_dbos()._engine, "DBOS.wait_first_async", handles, recorded=True)

    # ------------------------------------------------------------------
    # Not served: these raise rather than do less than DBOS Python.

    transaction = staticmethod(_unsupported("DBOS.transaction", "transactions on an application database"))


def _legacy_priority_enabled(call: str, legacy: Dict[str, Any]) -> bool:
    """register_queue's ``priority_enabled`` (default True, what DBOS 3.4
    stores); any other unknown keyword is Python's own TypeError."""
    enabled = legacy.pop("priority_enabled", True)
    if legacy:
        raise TypeError(f"{call}() got an unexpected keyword argument '{next(iter(legacy))}'")
    return bool(enabled)


def _forget_queue(name: str) -> None:
    """A deleted queue is no longer declared here: retrieve_queue no longer
    finds it, and no later handshake registers it again."""
    with _instance_lock:
        _queues.pop(name, None)
        if name in _listened:
            _listened.remove(name)
    _announcer.forget_queue(name)


def _run_op(make: "Callable[[Serializer, Optional[_Ctx]], Op[R]]") -> R:
    """Run an operation of _comm for the calling code (a workflow, a step or
    none) on this thread."""
    inst = _dbos()
    return drive(inst._engine, make(inst._serializer, current_ctx()))


async def _run_op_async(make: "Callable[[Serializer, Optional[_Ctx]], Op[R]]") -> R:
    inst = _dbos()
    return await drive_async(inst._engine, make(inst._serializer, current_ctx()))


def _log_run_outcome(workflow_id: str, fut: "Future[Any]") -> None:
    try:
        fut.result()
    except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError) as e:
        logger.info("workflow %s stopped here: %s", workflow_id, e)
    except BaseException as e:  # the workflow's own error: recorded as its outcome
        logger.debug("workflow %s ended with an error: %r", workflow_id, e)


_CONFLICT_POLICIES = ("update_if_latest_version", "always_update", "never_update")


def _workflow_form(reg: WorkflowRegistration) -> Dict[str, Any]:
    """A workflow's registration as hello and register carry it."""
    return workflow_form(reg.name, reg.max_recovery_attempts, getattr(reg, "class_name", None))


def _user_function(reg: WorkflowRegistration) -> Any:
    """The user's function behind a registration (a step's, for its <temp>
    workflow)."""
    return inspect.unwrap(getattr(reg.func, "__dbos_origin__", reg.func))


def _code_origin(fn: Any) -> Tuple[Optional[str], Optional[str]]:
    """A function's module and real source path."""
    code = getattr(fn, "__code__", None)
    return getattr(fn, "__module__", None), os.path.realpath(code.co_filename) if code is not None else None


def _check_redeclaration(previous: WorkflowRegistration, reg: WorkflowRegistration) -> None:
    """DBOS's rules for a name declared again: two workflows of one name from
    different modules and files are an error; another function of the name
    is warned about (DBOS's message, with the <temp>. of a step's workflow
    left out); the same code declared again (a function that declares its
    workflow at every call) is no news."""
    old_fn, new_fn = _user_function(previous), _user_function(reg)
    if getattr(old_fn, "__code__", None) is getattr(new_fn, "__code__", 0):
        return  # the common case, checked before any path is resolved
    (old_module, old_file), (new_module, new_file) = _code_origin(old_fn), _code_origin(new_fn)
    if (not reg.name.startswith("<temp>.") and None not in (old_module, new_module, old_file, new_file)
            and old_module != new_module and old_file != new_file):
        raise DBOSException(
            f"Operation (Name: {reg.name}) is registered by two different functions, "
            f"{old_module} at {old_file} and {new_module} at {new_file}."
        )
    name = reg.name.replace("<temp>.", "")
    logger.warning(
        f"Duplicate registration of function '{name}'. A function named '{name}' has already been "
        "registered with DBOS. All functions registered with DBOS must have unique names."
    )


def _declare_workflow(reg: WorkflowRegistration) -> None:
    """Record a declared workflow; once launched, register it with the agent
    before returning (_announce_workflow)."""
    with _instance_lock:
        previous = _workflows.get(reg.name)
        if previous is not None:
            _check_redeclaration(previous, reg)
        _workflows[reg.name] = reg
    try:
        _announce_workflow(reg)
    except BaseException:
        _undeclare(_workflows, reg.name, reg, previous)
        raise


def _undeclare(registry: Dict[str, Any], name: str, declared: Any, previous: Any) -> None:
    """Undo a declaration the agent refused: the registry as it was, unless
    the name was declared again meanwhile."""
    with _instance_lock:
        if registry.get(name) is declared:
            if previous is not None:
                registry[name] = previous
            else:
                del registry[name]


def _announce_workflow(reg: WorkflowRegistration) -> None:
    """Register a workflow already in the registry (``_workflows``) with the
    agent, if this process is launched: from its return on, the agent runs
    it here, as if declared before launch (a recovered or queued workflow
    of it included). Before launch it does nothing: the launch's hello
    carries it. Raises what the agent refuses (DBOSException)."""
    _announcer.announce(workflows=[_workflow_form(reg)])


def _hello_queues() -> List[Dict[str, Any]]:
    """The queues a handshake registers: every declared queue in the form
    decided for it (queues still to be decided after the handshake are left
    out), and the queues named in DBOS.listen_queues, by name."""
    regs: List[Dict[str, Any]] = []
    for q in list(_queues.values()):
        form = q._hello_form()
        if form is not None:
            regs.append(form)
    for name in _listened:
        if name not in _queues:
            regs.append({"name": name})
    return regs


def _declare_queue(q: "Queue", on_conflict: str) -> None:
    """Record a declared queue; once launched, register it with the agent at
    once (register), as DBOS Python registers queues after launch."""
    q._on_conflict = on_conflict
    with _instance_lock:
        previous = _queues.get(q.name)
        _queues[q.name] = q
        inst = _instance
        launched = inst is not None and inst._launched
    if not launched:
        return
    assert inst is not None
    try:
        inst._register_queue(q, previous)
    except BaseException:
        _undeclare(_queues, q.name, q, previous)
        raise


def _limiter_of(max_: Any, period: Any) -> "Optional[QueueRateLimit]":
    if max_ is None:
        return None
    return {"limit": int(max_), "period": float(period)}


class Queue(QueueConfig):
    """A queue of workflows, with DBOS Python's limits::

        queue = Queue("orders", worker_concurrency=2, limiter={"limit": 50, "period": 30})
        handle = queue.enqueue(process_order, order_id)

    - ``concurrency`` (or ``global_concurrency``): at most that many of the
      queue's workflows run at once across all workers and agents;
    - ``worker_concurrency``: at most that many at once in each worker process;
    - ``limiter``: at most ``limit`` workflows start per ``period`` seconds;
    - ``priority_enabled``: kept for DBOS Python 2 code; workflows are always
      taken by ``priority`` (``SetEnqueueOptions``), lowest first;
    - ``partition_concurrency``, ``partition_worker_concurrency``,
      ``partition_limiter``: the same limits within each partition key
      (``SetEnqueueOptions(queue_partition_key=...)``), which makes the queue
      partitioned; ``partition_queue=True`` alone makes the queue-wide limits
      apply to each partition, as in DBOS Python 2.

    A queue declared with any of these options stores them in the database
    (``DBOS.register_queue`` semantics, overwriting a stored configuration
    only when this process runs the latest application version); declared
    with its name alone, it serves a queue configured elsewhere with the
    stored limits. Queues may be declared before or after ``DBOS.launch()``;
    this process serves every queue it declares."""

    def __init__(
        self,
        name: str,
        concurrency: Optional[int] = None,
        limiter: "Optional[QueueRateLimit]" = None,
        *,
        worker_concurrency: Optional[int] = None,
        global_concurrency: Optional[int] = None,
        priority_enabled: bool = False,
        partition_queue: bool = False,
        partition_concurrency: Optional[int] = None,
        partition_worker_concurrency: Optional[int] = None,
        partition_limiter: "Optional[QueueRateLimit]" = None,
        polling_interval_sec: Optional[float] = None,
        **unsupported: Any,
    ) -> None:
        given = sorted(k for k, v in unsupported.items() if v not in (None, False))
        if given:
            raise DBOSNotSupportedError("Queue(" + ", ".join(given) + "=...)")
        self._configure(
            name, concurrency, limiter,
            worker_concurrency=worker_concurrency, global_concurrency=global_concurrency,
            priority_enabled=priority_enabled, partition_queue=partition_queue,
            partition_concurrency=partition_concurrency, partition_worker_concurrency=partition_worker_concurrency,
            partition_limiter=partition_limiter, polling_interval_sec=polling_interval_sec,
        )
        _declare_queue(self, "update_if_latest_version")

    def _configure(
        self,
        name: str,
        concurrency: Optional[int],
        limiter: "Optional[QueueRateLimit]",
        *,
        worker_concurrency: Optional[int],
        global_concurrency: Optional[int],
        priority_enabled: bool,
        partition_queue: bool,
        partition_concurrency: Optional[int],
        partition_worker_concurrency: Optional[int],
        partition_limiter: "Optional[QueueRateLimit]",
        polling_interval_sec: Optional[float],
    ) -> None:
        _validate_queue(
            name=name, concurrency=concurrency, global_concurrency=global_concurrency,
            worker_concurrency=worker_concurrency, limiter=limiter, partition_concurrency=partition_concurrency,
            partition_worker_concurrency=partition_worker_concurrency, partition_limiter=partition_limiter,
            polling_interval_sec=polling_interval_sec,
        )
        self.name = name
        # DBOS 3.4's flag: the queue's configuration lives in the queues
        # table (register_queue, or read from it), not only in this code.
        self.database_backed_queue = False
        self._concurrency = concurrency if global_concurrency is None else global_concurrency
        self._worker_concurrency = worker_concurrency
        self._limiter = limiter
        self._priority_enabled = priority_enabled
        self._partition_concurrency = partition_concurrency
        self._partition_worker_concurrency = partition_worker_concurrency
        self._partition_limiter = partition_limiter
        self._partition_queue = partition_queue or any(
            v is not None for v in (partition_concurrency, partition_worker_concurrency, partition_limiter)
        )
        self._polling_interval_sec = polling_interval_sec if polling_interval_sec is not None else 1.0
        # Whether this declaration configures the queue, or only names it.
        self._explicit = (
            any(
                v is not None
                for v in (concurrency, global_concurrency, worker_concurrency, limiter, partition_concurrency,
                          partition_worker_concurrency, partition_limiter, polling_interval_sec)
            )
            or priority_enabled
            or partition_queue
        )
        self._on_conflict = "update_if_latest_version"
        # The registration sent to the agent (and repeated by every later
        # handshake), once decided.
        self._registered: Optional[Dict[str, Any]] = None

    @classmethod
    def _from_info(cls, info: Dict[str, Any]) -> "Queue":
        """A queue as the agent reports it (not declared in this process)."""
        q = cls.__new__(cls)
        q.name = info["name"]
        q._concurrency = info.get("concurrency")
        q._worker_concurrency = info.get("worker_concurrency")
        q._limiter = _limiter_of(info.get("rate_limit_max"), info.get("rate_limit_period_sec"))
        q._priority_enabled = bool(info.get("priority_enabled"))
        q._partition_concurrency = info.get("partition_concurrency")
        q._partition_worker_concurrency = info.get("partition_worker_concurrency")
        q._partition_limiter = _limiter_of(info.get("partition_rate_limit_max"), info.get("partition_rate_limit_period_sec"))
        q._partition_queue = bool(info.get("partition_queue"))
        q._polling_interval_sec = 1.0
        q.database_backed_queue = bool(info.get("registered", True))
        q._explicit = False
        q._on_conflict = "never_update"
        q._registered = None
        return q

    # DBOS Python's read-only view of the configuration.

    @property
    def concurrency(self) -> Optional[int]:
        return self._concurrency

    @property
    def global_concurrency(self) -> Optional[int]:
        return self._concurrency

    @property
    def worker_concurrency(self) -> Optional[int]:
        return self._worker_concurrency

    @property
    def limiter(self) -> "Optional[QueueRateLimit]":
        return self._limiter

    @property
    def priority_enabled(self) -> bool:
        return self._priority_enabled

    @property
    def partition_queue(self) -> bool:
        return self._partition_queue

    @property
    def partition_concurrency(self) -> Optional[int]:
        return self._partition_concurrency

    @property
    def partition_worker_concurrency(self) -> Optional[int]:
        return self._partition_worker_concurrency

    @property
    def partition_limiter(self) -> "Optional[QueueRateLimit]":
        return self._partition_limiter

    @property
    def polling_interval_sec(self) -> float:
        return self._polling_interval_sec

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    # Registration with the agent.

    def _full_registration(self) -> Dict[str, Any]:
        reg: Dict[str, Any] = {
            "name": self.name,
            "concurrency": self._concurrency,
            "worker_concurrency": self._worker_concurrency,
            "priority_enabled": self._priority_enabled or None,
            "partition_queue": self._partition_queue or None,
            "partition_concurrency": self._partition_concurrency,
            "partition_worker_concurrency": self._partition_worker_concurrency,
            "polling_interval_sec": float(self._polling_interval_sec),
        }
        if self._limiter is not None:
            reg["rate_limit_max"] = int(self._limiter["limit"])
            reg["rate_limit_period_sec"] = float(self._limiter["period"])
        if self._partition_limiter is not None:
            reg["partition_rate_limit_max"] = int(self._partition_limiter["limit"])
            reg["partition_rate_limit_period_sec"] = float(self._partition_limiter["period"])
        return {k: v for k, v in reg.items() if v is not None}

    def _hello_form(self) -> Optional[Dict[str, Any]]:
        """The registration a handshake carries, when it needs no decision."""
        if self._registered is not None:
            return self._registered
        if not self._explicit:
            return {"name": self.name}
        if self._on_conflict == "always_update":
            return self._full_registration()
        return None

    def _decide_registration(self, engine: Engine, app_version: str) -> Dict[str, Any]:
        """Full (store these limits) or bare (serve the stored ones), by the
        on_conflict rule, as DBOS Python's register_queue decides."""
        form = self._hello_form()
        if form is not None:
            return form
        full = self._full_registration()
        if self._on_conflict == "always_update":
            return full
        info = sched.get_queue(engine, self.name)
        if info is None or not info.get("registered"):
            return full
        if self._on_conflict == "never_update":
            return {"name": self.name}
        versions = sched.list_versions(engine)
        if not app_version or not versions or versions[0]["version_name"] == app_version:
            return full
        return {"name": self.name}

    # Enqueueing.

    def enqueue(self, func: Callable[..., R], *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        """Enqueue a workflow; a worker serving this queue runs it when the
        queue's limits allow. ``SetEnqueueOptions`` and ``SetWorkflowTimeout``
        around the call apply to it."""
        reg, args = _started(func, args)
        return cast("WorkflowHandle[R]", _dbos()._start(reg, args, kwargs, self.name, f"enqueueing workflow {reg.name}"))

    async def enqueue_async(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> "WorkflowHandleAsync[Any]":
        reg, args = _started(func, args)
        return await _dbos()._start_async(reg, args, kwargs, self.name, f"enqueueing workflow {reg.name}")


def _validate_queue(
    *,
    name: str,
    concurrency: Optional[int],
    global_concurrency: Optional[int],
    worker_concurrency: Optional[int],
    limiter: "Optional[QueueRateLimit]",
    partition_concurrency: Optional[int],
    partition_worker_concurrency: Optional[int],
    partition_limiter: "Optional[QueueRateLimit]",
    polling_interval_sec: Optional[float],
) -> None:
    """DBOS Python's checks of a queue's configuration (ValueError)."""
    if name.startswith("_dbos"):
        raise ValueError(
            f"Queue name {name} is reserved: names starting with '_dbos_' belong to DBOS's internal queues."
        )
    if concurrency is not None and global_concurrency is not None:
        raise ValueError("concurrency is deprecated in favor of global_concurrency; set only one of them")
    if partition_concurrency is not None and partition_concurrency < 1:
        raise ValueError("partition_concurrency must be at least 1")
    if partition_worker_concurrency is not None and partition_worker_concurrency < 1:
        raise ValueError("partition_worker_concurrency must be at least 1")
    for which, lim in (("limiter", limiter), ("partition_limiter", partition_limiter)):
        if lim is not None and (lim.get("limit") is None or lim.get("period") is None):
            raise ValueError(f"{which} must specify both 'limit' and 'period'")
    if (
        partition_worker_concurrency is not None
        and partition_concurrency is not None
        and partition_worker_concurrency > partition_concurrency
    ):
        raise ValueError("partition_concurrency must be greater than or equal to partition_worker_concurrency")
    if (
        partition_worker_concurrency is not None
        and worker_concurrency is not None
        and partition_worker_concurrency > worker_concurrency
    ):
        raise ValueError("worker_concurrency must be greater than or equal to partition_worker_concurrency")
    queue_concurrency = concurrency if global_concurrency is None else global_concurrency
    if worker_concurrency is not None and queue_concurrency is not None and worker_concurrency > queue_concurrency:
        raise ValueError("concurrency must be greater than or equal to worker_concurrency")
    if partition_concurrency is not None and queue_concurrency is not None and partition_concurrency > queue_concurrency:
        raise ValueError("global_concurrency must be greater than or equal to partition_concurrency")
    if (
        partition_worker_concurrency is not None
        and queue_concurrency is not None
        and partition_worker_concurrency > queue_concurrency
    ):
        raise ValueError("concurrency must be greater than or equal to partition_worker_concurrency")
    if polling_interval_sec is not None and polling_interval_sec <= 0.0:
        raise ValueError("polling_interval_sec must be positive")
