"""``DBOS``: the public API, mirroring DBOS Python's names, arguments and
semantics, served by the dbos-agent."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import threading
import time
from concurrent.futures import Future
from typing import (
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from . import _protocol as proto
from ._core import (
    DEFAULT_MAX_RECOVERY_ATTEMPTS,
    Engine,
    StepInfo,
    StepOptions,
    WorkflowHandle,
    WorkflowHandleAsync,
    WorkflowRegistration,
    WorkflowRun,
    WorkflowStatus,
    _enqueue_options,
    _get_result_recorded,
    _get_result_recorded_async,
    call_as_step,
    call_as_step_async,
    current_ctx,
    run_step_async,
    run_step_sync,
    take_assigned_id,
)
from ._error import (
    DBOSException,
    DBOSInitializationError,
    DBOSNonExistentWorkflowError,
    DBOSNotSupportedError,
    DBOSWorkflowCancelledError,
    DBOSWorkflowConflictIDError,
    DBOSWorkflowFunctionNotFoundError,
)
from ._serialization import (
    DefaultSerializer,
    Serializer,
    WorkflowSerializationFormat,
    tag_for,
)
from ._transport import AgentLink, Connection, resolve_socket_path

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

logger = logging.getLogger("dbos_agent")

__version__ = "0.1.0"

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
    "log_level",
    "run_admin_server",
    "admin_port",
    "enable_otlp",
    "otlp_traces_endpoints",
    "otlp_logs_endpoints",
    "otlp_attributes",
    "use_listen_notify",
    "notification_listener_polling_interval_sec",
    "max_executor_threads",
}
_KNOWN_KEYS = {"name", "application_version", "executor_id", "agent_socket", "serializer"} | _AGENT_OWNED_KEYS

# The workflows and queues of this process, declared at import time (before
# DBOS exists, as in DBOS Python) and announced to the agent at launch.
_workflows: Dict[str, WorkflowRegistration] = {}
_queues: Dict[str, "Queue"] = {}
_instance: Optional["DBOS"] = None
_instance_lock = threading.RLock()


def _dbos() -> "DBOS":
    inst = _instance
    if inst is None:
        raise DBOSException("DBOS is not configured: create DBOS(config=...) and call DBOS.launch()")
    if not inst._launched:
        raise DBOSException("DBOS is not launched: call DBOS.launch() first")
    return inst


def _registration_of(func: Callable[..., Any]) -> WorkflowRegistration:
    if getattr(func, "__self__", None) is not None and not inspect.ismodule(getattr(func, "__self__")):
        raise DBOSNotSupportedError("workflows that are methods of a class (DBOS.dbos_class)")
    reg = getattr(func, "__dbos_workflow__", None)
    if not isinstance(reg, WorkflowRegistration):
        name = getattr(func, "__name__", repr(func))
        raise DBOSWorkflowFunctionNotFoundError("<NONE>", f"{name} is not a registered workflow function")
    return reg


def _refuse_child(what: str) -> None:
    if current_ctx() is not None:
        raise DBOSNotSupportedError(f"{what} from inside a workflow or step (child workflows)")


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


class DBOS:
    """Durable workflows: decorate functions with ``@DBOS.workflow()`` and
    ``@DBOS.step()``, create ``DBOS(config=...)`` and call ``DBOS.launch()``.

    Config keys: ``name`` (the application), ``application_version``,
    ``executor_id`` (must match the agent's, which owns it), ``agent_socket``
    (else env ``DBOS_AGENT_SOCKET``, else the agent's default path) and
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
        self._app_name: str = name
        self._app_version: str = config.get("application_version") or os.environ.get("DBOS__APPVERSION", "")
        self._executor_id_wanted: Optional[str] = config.get("executor_id") or os.environ.get("DBOS__VMID") or None
        self._executor_id: str = self._executor_id_wanted or "local"
        self._socket = resolve_socket_path(config.get("agent_socket"))
        serializer = config.get("serializer")
        self._serializer: Serializer = serializer if serializer is not None else DefaultSerializer()
        self._engine = Engine(self._serializer)
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
        return {
            "min_version": proto.MIN_PROTOCOL_VERSION,
            "max_version": proto.PROTOCOL_VERSION,
            "role": proto.ROLE_WORKER,
            "app_name": self._app_name,
            "app_version": self._app_version,
            "language": "python",
            "binding_version": __version__,
            "pid": os.getpid(),
            "workflows": [
                {"name": r.name, "max_recovery_attempts": r.max_recovery_attempts}
                for r in _workflows.values()
            ],
            "queues": [q._registration() for q in _queues.values()],
        }

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
        link = AgentLink(self._socket, self._hello, self._on_push, self._on_connected, self._on_lost)
        self._engine.link = link
        try:
            reply = link.start()
        except BaseException:
            self._engine.link = None
            link.close()
            loop.call_soon_threadsafe(loop.stop)
            raise
        agent_executor = reply.get("executor_id") or "local"
        if self._executor_id_wanted is not None and self._executor_id_wanted != agent_executor:
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
        self._launched = True
        logger.info(
            "DBOS launched on dbos-agent %s (%s): application %s, version %r, executor %s",
            reply.get("agent_version", "?"), self._socket, self._app_name, self._app_version, self._executor_id,
        )

    def _on_connected(self, conn: Connection, reply: Dict[str, Any]) -> None:
        pass

    def _reregister(self, what: str) -> None:
        link = self._engine.link
        assert link is not None
        running = len(self._engine.runs)
        logger.info(
            "dbos-agent: registering %s with the agent (a new handshake%s)", what,
            f"; {running} running workflows resume from their last step" if running else "",
        )
        link.rehandshake()

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
                _queues.clear()
        if inst is None:
            return
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
        **unsupported: Any,
    ) -> Callable[[F], F]:
        """Make a function a durable workflow. ``serialization_type`` =
        ``WorkflowSerializationFormat.PORTABLE`` stores its inputs and outcome
        as portable JSON."""
        given = sorted(k for k, v in unsupported.items() if v is not None)
        if given:
            raise DBOSNotSupportedError("DBOS.workflow(" + ", ".join(given) + "=...)")

        def decorate(func: F) -> F:
            wf_name = name if name is not None else func.__qualname__
            with _instance_lock:
                if _instance is not None and _instance._launched:
                    raise DBOSException(
                        f"workflow {wf_name} was declared after DBOS.launch(): the agent learns a "
                        "process's workflows when it connects, so declare them before launch"
                    )
                if wf_name in _workflows and _workflows[wf_name].func is not func:
                    logger.warning("workflow %s is declared twice; the last declaration wins", wf_name)
                reg = WorkflowRegistration(func, wf_name, max_recovery_attempts, serialization_type)
                _workflows[wf_name] = reg

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
    def step(
        cls,
        *,
        name: Optional[str] = None,
        retries_allowed: bool = False,
        interval_seconds: float = 1.0,
        max_attempts: int = 3,
        backoff_rate: float = 2.0,
        should_retry: Optional[Callable[[BaseException], Union[bool, Awaitable[bool]]]] = None,
        **unsupported: Any,
    ) -> Callable[[F], F]:
        """Make a function a step: inside a workflow its outcome is recorded
        once and replayed on recovery; with ``retries_allowed`` it is retried
        up to ``max_attempts`` times, waiting ``interval_seconds`` times
        ``backoff_rate`` to the attempt number between tries."""
        given = sorted(k for k, v in unsupported.items() if v not in (None, False))
        if given:
            raise DBOSNotSupportedError("DBOS.step(" + ", ".join(given) + "=...)")

        def decorate(func: F) -> F:
            opts = StepOptions(
                name if name is not None else func.__qualname__,
                retries_allowed, interval_seconds, max_attempts, backoff_rate, should_retry,
            )
            if should_retry is not None and inspect.iscoroutinefunction(should_retry) and not inspect.iscoroutinefunction(func):
                raise DBOSException(f"Step {opts.name} is sync but should_retry is async. Use an async step to pair with an async validator.")
            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    return await run_step_async(opts, func, args, kwargs)

                return cast(F, async_wrapper)

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return run_step_sync(opts, func, args, kwargs)

            return cast(F, wrapper)

        return decorate

    # ------------------------------------------------------------------
    # Starting workflows

    def _start_body(self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str]) -> Dict[str, Any]:
        return self._engine.start_request(
            reg.name, args, kwargs,
            tag=tag_for(reg.serialization_type, self._serializer),
            workflow_id=take_assigned_id(),
            queue_name=queue_name,
            run_here=queue_name is None,
            enqueue=_enqueue_options.get() if queue_name is not None else None,
        )

    def _call_workflow(self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        _refuse_child(f"calling workflow {reg.name}")
        if reg.is_async:
            raise DBOSException(f"workflow {reg.name} is async: await it")
        body = self._start_body(reg, args, kwargs, None)
        reply, generation = self._engine.start(body)
        wid = body["workflow_id"]
        grant = reply.get("run")
        if grant:
            run = WorkflowRun(grant, generation)
            self._engine.register_run(run)
            try:
                return self._engine.execute_sync(run, reg, args, kwargs)
            except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
                pass  # this run stopped: the recorded outcome decides
        return self._engine.await_result(wid)

    async def _call_workflow_async(self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        _refuse_child(f"calling workflow {reg.name}")
        body = self._start_body(reg, args, kwargs, None)
        reply, generation = await self._engine.start_async(body)
        wid = body["workflow_id"]
        grant = reply.get("run")
        if grant:
            run = WorkflowRun(grant, generation)
            self._engine.register_run(run)
            try:
                return await self._engine.execute_async(run, reg, args, kwargs)
            except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
                pass
        return await self._engine.await_result_async(wid)

    def _start(self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str]) -> "WorkflowHandle[Any]":
        body = self._start_body(reg, args, kwargs, queue_name)
        reply, generation = self._engine.start(body)
        grant = reply.get("run")
        fut: "Optional[Future[Any]]" = None
        if grant:
            fut = self._engine.run_in_background(WorkflowRun(grant, generation), reg, {"args": args, "kwargs": kwargs})
        return WorkflowHandle(self._engine, body["workflow_id"], fut)

    async def _start_async(self, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str]) -> "WorkflowHandleAsync[Any]":
        body = self._start_body(reg, args, kwargs, queue_name)
        reply, generation = await self._engine.start_async(body)
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
        return WorkflowHandleAsync(self._engine, body["workflow_id"], task)

    @classmethod
    def start_workflow(cls, func: Callable[..., R], *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        """Start a workflow in the background and return its handle."""
        reg = _registration_of(func)
        _refuse_child(f"starting workflow {reg.name}")
        return cast("WorkflowHandle[R]", _dbos()._start(reg, args, kwargs, None))

    @classmethod
    async def start_workflow_async(cls, func: Callable[..., Coroutine[Any, Any, R]], *args: Any, **kwargs: Any) -> "WorkflowHandleAsync[R]":
        """Start a workflow (on this event loop when it is async) and return
        its handle."""
        reg = _registration_of(func)
        _refuse_child(f"starting workflow {reg.name}")
        return cast("WorkflowHandleAsync[R]", await _dbos()._start_async(reg, args, kwargs, None))

    # ------------------------------------------------------------------
    # Workflow management

    @classmethod
    def retrieve_workflow(cls, workflow_id: str, existing_workflow: bool = True) -> "WorkflowHandle[Any]":
        """A handle to a workflow by id; raises DBOSNonExistentWorkflowError
        for an unknown id unless ``existing_workflow=False``."""
        engine = _dbos()._engine
        if existing_workflow:
            stat = call_as_step("DBOS.getStatus", lambda: engine.get_status(workflow_id))
            if stat is None:
                raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandle(engine, workflow_id)

    @classmethod
    async def retrieve_workflow_async(cls, workflow_id: str, existing_workflow: bool = True) -> "WorkflowHandleAsync[Any]":
        engine = _dbos()._engine
        if existing_workflow:
            stat = await call_as_step_async("DBOS.getStatus", lambda: engine.get_status_async(workflow_id))
            if stat is None:
                raise DBOSNonExistentWorkflowError("target", workflow_id)
        return WorkflowHandleAsync(engine, workflow_id)

    @classmethod
    def get_result(cls, workflow_id: str) -> Any:
        """Wait for a workflow and return its output (or raise its error)."""
        engine = _dbos()._engine
        return _get_result_recorded(engine, workflow_id, lambda: engine.await_result(workflow_id))

    @classmethod
    async def get_result_async(cls, workflow_id: str) -> Any:
        engine = _dbos()._engine
        return await _get_result_recorded_async(engine, workflow_id, lambda: engine.await_result_async(workflow_id))

    @classmethod
    def get_workflow_status(cls, workflow_id: str) -> Optional[WorkflowStatus]:
        """A workflow's status, or None for an unknown id."""
        engine = _dbos()._engine
        return call_as_step("DBOS.getStatus", lambda: engine.get_status(workflow_id))

    @classmethod
    async def get_workflow_status_async(cls, workflow_id: str) -> Optional[WorkflowStatus]:
        engine = _dbos()._engine
        return await call_as_step_async("DBOS.getStatus", lambda: engine.get_status_async(workflow_id))

    @classmethod
    def cancel_workflow(cls, workflow_id: str, *, cancel_children: bool = False) -> None:
        """Cancel a workflow: it stops at its next step and is not recovered."""
        if cancel_children:
            raise DBOSNotSupportedError("DBOS.cancel_workflow(cancel_children=True)", "child workflows")
        engine = _dbos()._engine
        call_as_step("DBOS.cancelWorkflow", lambda: engine.cancel(workflow_id))

    @classmethod
    async def cancel_workflow_async(cls, workflow_id: str, *, cancel_children: bool = False) -> None:
        if cancel_children:
            raise DBOSNotSupportedError("DBOS.cancel_workflow_async(cancel_children=True)", "child workflows")
        engine = _dbos()._engine
        await call_as_step_async("DBOS.cancelWorkflow", lambda: engine.cancel_async(workflow_id))

    @classmethod
    def resume_workflow(cls, workflow_id: str, *, queue_name: Optional[str] = None) -> "WorkflowHandle[Any]":
        """Resume a cancelled (or dead-lettered) workflow from its last
        recorded step."""
        engine = _dbos()._engine
        call_as_step("DBOS.resumeWorkflow", lambda: engine.resume(workflow_id, queue_name))
        return WorkflowHandle(engine, workflow_id)

    @classmethod
    async def resume_workflow_async(cls, workflow_id: str, *, queue_name: Optional[str] = None) -> "WorkflowHandleAsync[Any]":
        engine = _dbos()._engine
        await call_as_step_async("DBOS.resumeWorkflow", lambda: engine.resume_async(workflow_id, queue_name))
        return WorkflowHandleAsync(engine, workflow_id)

    @classmethod
    def list_workflows(
        cls,
        *,
        workflow_ids: Optional[List[str]] = None,
        status: Optional[Union[str, List[str]]] = None,
        start_time: Optional[str] = None,
        end_time: Optional[str] = None,
        name: Optional[Union[str, List[str]]] = None,
        app_version: Optional[Union[str, List[str]]] = None,
        parent_workflow_id: Optional[Union[str, List[str]]] = None,
        queue_name: Optional[Union[str, List[str]]] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        sort_desc: bool = False,
        workflow_id_prefix: Optional[Union[str, List[str]]] = None,
        load_input: bool = True,
        load_output: bool = True,
        executor_id: Optional[Union[str, List[str]]] = None,
        queues_only: bool = False,
        **unsupported: Any,
    ) -> List[WorkflowStatus]:
        """List workflows, filtered as in DBOS Python (times are ISO 8601)."""
        filters = dict(locals())
        filters.pop("cls")
        filters.update(filters.pop("unsupported"))
        engine = _dbos()._engine
        return call_as_step("DBOS.listWorkflows", lambda: engine.list_workflows("DBOS.list_workflows", filters))

    @classmethod
    async def list_workflows_async(
        cls,
        *,
        workflow_ids: Optional[List[str]] = None,
        status: Optional[Union[str, List[str]]] = None,
        start_time: Optional[str] = None,
        end_time: Optional[str] = None,
        name: Optional[Union[str, List[str]]] = None,
        app_version: Optional[Union[str, List[str]]] = None,
        parent_workflow_id: Optional[Union[str, List[str]]] = None,
        queue_name: Optional[Union[str, List[str]]] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        sort_desc: bool = False,
        workflow_id_prefix: Optional[Union[str, List[str]]] = None,
        load_input: bool = True,
        load_output: bool = True,
        executor_id: Optional[Union[str, List[str]]] = None,
        queues_only: bool = False,
        **unsupported: Any,
    ) -> List[WorkflowStatus]:
        filters = dict(locals())
        filters.pop("cls")
        filters.update(filters.pop("unsupported"))
        engine = _dbos()._engine
        return await call_as_step_async(
            "DBOS.listWorkflows", lambda: engine.list_workflows_async("DBOS.list_workflows_async", filters)
        )

    @classmethod
    def list_queued_workflows(cls, **filters: Any) -> List[WorkflowStatus]:
        """The workflows waiting in or running from a queue."""
        filters["queues_only"] = True
        if "queue_name" in filters and filters["queue_name"] is None:
            filters.pop("queue_name")
        engine = _dbos()._engine
        return call_as_step("DBOS.listQueuedWorkflows", lambda: engine.list_workflows("DBOS.list_queued_workflows", filters))

    @classmethod
    def list_workflow_steps(
        cls, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None, offset: Optional[int] = None
    ) -> List[StepInfo]:
        """The recorded steps of a workflow, in order."""
        engine = _dbos()._engine
        return call_as_step(
            "DBOS.listWorkflowSteps", lambda: engine.list_steps(workflow_id, load_output, limit, offset)
        )

    @classmethod
    async def list_workflow_steps_async(
        cls, workflow_id: str, *, load_output: bool = True, limit: Optional[int] = None, offset: Optional[int] = None
    ) -> List[StepInfo]:
        engine = _dbos()._engine
        return await call_as_step_async(
            "DBOS.listWorkflowSteps", lambda: engine.list_steps_async(workflow_id, load_output, limit, offset)
        )

    @classmethod
    def register_queue(
        cls,
        name: str,
        *,
        worker_concurrency: Optional[int] = None,
        global_concurrency: Optional[int] = None,
        limiter: Optional[Dict[str, Any]] = None,
        concurrency: Optional[int] = None,
        polling_interval_sec: float = 1.0,
        **unsupported: Any,
    ) -> "Queue":
        """Declare a queue (before launch): the agent polls it for this
        process with these limits."""
        return Queue(
            name, concurrency, limiter,
            worker_concurrency=worker_concurrency, global_concurrency=global_concurrency,
            polling_interval_sec=polling_interval_sec, **unsupported,
        )

    @classmethod
    def retrieve_queue(cls, name: str) -> Optional["Queue"]:
        return _queues.get(name)

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
        ctx = current_ctx()
        return ctx.run.authenticated_user if ctx is not None else None

    # ------------------------------------------------------------------
    # Later issues: these raise rather than do less than DBOS Python.

    send = staticmethod(_unsupported("DBOS.send", "messages come with a later release"))
    send_async = staticmethod(_unsupported("DBOS.send_async", "messages come with a later release"))
    recv = staticmethod(_unsupported("DBOS.recv", "messages come with a later release"))
    recv_async = staticmethod(_unsupported("DBOS.recv_async", "messages come with a later release"))
    set_event = staticmethod(_unsupported("DBOS.set_event", "events come with a later release"))
    set_event_async = staticmethod(_unsupported("DBOS.set_event_async", "events come with a later release"))
    get_event = staticmethod(_unsupported("DBOS.get_event", "events come with a later release"))
    get_event_async = staticmethod(_unsupported("DBOS.get_event_async", "events come with a later release"))
    get_all_events = staticmethod(_unsupported("DBOS.get_all_events", "events come with a later release"))
    sleep = staticmethod(_unsupported("DBOS.sleep", "durable sleep comes with a later release"))
    sleep_async = staticmethod(_unsupported("DBOS.sleep_async", "durable sleep comes with a later release"))
    write_stream = staticmethod(_unsupported("DBOS.write_stream", "streams come with a later release"))
    write_stream_async = staticmethod(_unsupported("DBOS.write_stream_async", "streams come with a later release"))
    close_stream = staticmethod(_unsupported("DBOS.close_stream", "streams come with a later release"))
    read_stream = staticmethod(_unsupported("DBOS.read_stream", "streams come with a later release"))
    read_stream_async = staticmethod(_unsupported("DBOS.read_stream_async", "streams come with a later release"))
    fork_workflow = staticmethod(_unsupported("DBOS.fork_workflow", "fork comes with a later release"))
    fork_workflow_async = staticmethod(_unsupported("DBOS.fork_workflow_async", "fork comes with a later release"))
    enqueue_workflow = staticmethod(_unsupported("DBOS.enqueue_workflow", "use Queue.enqueue"))
    wait_first = staticmethod(_unsupported("DBOS.wait_first"))
    scheduled = staticmethod(_unsupported("DBOS.scheduled", "the scheduler comes with a later release"))
    create_schedule = staticmethod(_unsupported("DBOS.create_schedule", "the scheduler comes with a later release"))
    dbos_class = staticmethod(_unsupported("DBOS.dbos_class", "workflows on classes"))
    run_step = staticmethod(_unsupported("DBOS.run_step"))
    patch = staticmethod(_unsupported("DBOS.patch"))
    delete_workflow = staticmethod(_unsupported("DBOS.delete_workflow"))
    transaction = staticmethod(_unsupported("DBOS.transaction", "transactions on an application database"))


def _log_run_outcome(workflow_id: str, fut: "Future[Any]") -> None:
    try:
        fut.result()
    except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError) as e:
        logger.info("workflow %s stopped here: %s", workflow_id, e)
    except BaseException as e:  # the workflow's own error: recorded as its outcome
        logger.debug("workflow %s ended with an error: %r", workflow_id, e)


class Queue:
    """A queue of workflows this process serves. Declare queues before
    ``DBOS.launch()``; the agent polls them for this process, taking at most
    ``worker_concurrency`` at once here and ``concurrency`` across all
    workers, and at most ``limiter["limit"]`` per ``limiter["period"]``
    seconds."""

    def __init__(
        self,
        name: str,
        concurrency: Optional[int] = None,
        limiter: Optional[Dict[str, Any]] = None,
        *,
        worker_concurrency: Optional[int] = None,
        global_concurrency: Optional[int] = None,
        priority_enabled: bool = False,
        polling_interval_sec: float = 1.0,
        **unsupported: Any,
    ) -> None:
        given = sorted(k for k, v in unsupported.items() if v not in (None, False))
        if given:
            raise DBOSNotSupportedError("Queue(" + ", ".join(given) + "=...)")
        if name.startswith("_dbos"):
            raise ValueError(f"Queue name {name} is reserved for DBOS's internal queues")
        if concurrency is not None and global_concurrency is not None:
            raise ValueError("concurrency is deprecated in favor of global_concurrency; set only one of them")
        self.name = name
        self.concurrency = concurrency if global_concurrency is None else global_concurrency
        self.worker_concurrency = worker_concurrency
        self.limiter = limiter
        self.priority_enabled = priority_enabled
        self.polling_interval_sec = polling_interval_sec
        if worker_concurrency is not None and self.concurrency is not None and worker_concurrency > self.concurrency:
            raise ValueError("concurrency must be greater than or equal to worker_concurrency")
        if limiter is not None and (limiter.get("limit") is None or limiter.get("period") is None):
            raise ValueError("limiter must specify both 'limit' and 'period'")
        with _instance_lock:
            existing = _queues.get(name)
            _queues[name] = self
            inst = _instance
            if inst is not None and inst._launched and (existing is None or existing._registration() != self._registration()):
                # DBOS Python declares queues after launch too. The agent
                # learns a worker's queues in its handshake, so shake hands
                # again with the new list.
                inst._reregister(f"queue {name}")

    def _registration(self) -> Dict[str, Any]:
        reg: Dict[str, Any] = {
            "name": self.name,
            "worker_concurrency": self.worker_concurrency,
            "concurrency": self.concurrency,
            "priority_enabled": self.priority_enabled or None,
        }
        if self.limiter is not None:
            reg["rate_limit_max"] = int(self.limiter["limit"])
            reg["rate_limit_period_sec"] = float(self.limiter["period"])
        return reg

    def enqueue(self, func: Callable[..., R], *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        """Enqueue a workflow; a worker serving this queue runs it when the
        queue's limits allow."""
        reg = _registration_of(func)
        _refuse_child(f"enqueueing workflow {reg.name}")
        return cast("WorkflowHandle[R]", _dbos()._start(reg, args, kwargs, self.name))

    async def enqueue_async(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> "WorkflowHandleAsync[Any]":
        reg = _registration_of(func)
        _refuse_child(f"enqueueing workflow {reg.name}")
        return await _dbos()._start_async(reg, args, kwargs, self.name)
