"""The engine of the binding: workflow runs, step replay and recording,
handles, and the requests every API call is built from.

A run is one execution of a workflow in this process, granted by the agent
(a ``run`` push, or the reply to a direct start). It carries the workflow's
recorded history, so replay needs no round trip: a step whose function id is
in the history returns its recorded outcome; a step beyond it runs (with its
retries) and is recorded once with ``record_step``. The run ends with
``finish``, unless it was stopped: cancelled, fenced (the agent gave the
workflow to another run), or cut off by a dropped connection. A stopped run
raises inside the workflow at its next step and never writes an outcome.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import threading
import time
import uuid
from concurrent.futures import Future
from datetime import datetime, timezone
from typing import (
    Any,
    AsyncGenerator,
    Awaitable,
    Callable,
    Dict,
    Generator,
    Generic,
    List,
    Optional,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
    cast,
)

from . import _auth as auth
from . import _dbos_log as dbos_log
from . import _reservation as reservation
from . import _run_scope as run_scope
from . import _tracing as tracing
from . import _protocol as proto
from ._classes import Method
from ._error import (
    check_no_shard_key,
    AgentErrorReply,
    DBOSAgentUnavailableError,
    DBOSAwaitedWorkflowCancelledError,
    DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded,
    DBOSException,
    DBOSMaxStepRetriesExceeded,
    DBOSNonExistentWorkflowError,
    DBOSQueueDeduplicatedError,
    DBOSUnexpectedStepError,
    DBOSWorkflowCancelledError,
    DBOSWorkflowConflictIDError,
    DBOSWorkflowIDInUseError,
    map_agent_error,
)
from ._context import (
    StartOptionsCleared,
    _Ctx,
    _current,
    _EnqueueOptions,
    _workflow_attributes,
    current_ctx,
    validate_duplication_policy,
    validate_workflow_attributes,
)
from ._executor import RunExecutor, Slot
from ._list_filters import list_workflows_request
from ._step_options import check_async_only_options, preempted_error, supervise_attempt
from ._serialization import (
    PORTABLE_JSON,
    Serializer,
    WorkflowInputs,
    WorkflowSerializationFormat,
    coerce_portable_args,
    deserialize_args,
    deserialize_exception,
    deserialize_value,
    serialize_args,
    serialize_exception,
    serialize_exception_safely,
    serialize_value,
)
from ._transport import AgentLink, Connection

R = TypeVar("R")
T = TypeVar("T")

logger = logging.getLogger("dbos_agent")

DEFAULT_MAX_RECOVERY_ATTEMPTS = 100
DEFAULT_POLLING_INTERVAL = 1.0
_MAX_RETRY_INTERVAL_SECONDS = 3600.0


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------
# Registrations


class WorkflowRegistration:
    """A function decorated with ``@DBOS.workflow``."""

    def __init__(
        self,
        func: Callable[..., Any],
        name: str,
        max_recovery_attempts: Optional[int],
        serialization_type: Optional[WorkflowSerializationFormat],
    ):
        self.func = func
        self.name = name
        self.max_recovery_attempts = max_recovery_attempts
        self.serialization_type = serialization_type
        self.is_async = inspect.iscoroutinefunction(func)
        # Set by @DBOS.scheduled: the workflow then takes (scheduled_time,
        # actual_time), as DBOS Python's scheduled workflows do.
        self.scheduled_cron: Optional[str] = None
        # Set by @DBOS.dbos_class on the class's workflow methods.
        self.method: Optional[Method] = None


class StepOptions(TypedDict, total=False):
    """The options of ``DBOS.run_step``, as in DBOS Python (each key
    optional): ``name`` (default: the function's qualified name),
    ``retries_allowed``, ``interval_seconds``, ``max_attempts``,
    ``backoff_rate``, ``should_retry``, and for async steps ``preemptible``
    and ``timeout_seconds`` (see _step_options)."""

    name: Optional[str]
    retries_allowed: bool
    interval_seconds: float
    max_attempts: int
    backoff_rate: float
    should_retry: Optional[Callable[[BaseException], Union[bool, Awaitable[bool]]]]
    preemptible: bool
    timeout_seconds: Optional[float]


DEFAULT_STEP_OPTIONS: StepOptions = {
    "name": None,
    "retries_allowed": False,
    "interval_seconds": 1.0,
    "max_attempts": 3,
    "backoff_rate": 2.0,
    "should_retry": None,
    "preemptible": False,
    "timeout_seconds": None,
}


class StepConfig:
    """How a step runs: the options of ``@DBOS.step`` or ``DBOS.run_step``
    with their defaults filled in."""

    def __init__(
        self,
        name: str,
        retries_allowed: bool,
        interval_seconds: float,
        max_attempts: int,
        backoff_rate: float,
        should_retry: Optional[Callable[[BaseException], Any]],
        preemptible: bool = False,
        timeout_seconds: Optional[float] = None,
    ):
        self.name = name
        self.retries_allowed = retries_allowed
        self.interval_seconds = interval_seconds
        self.max_attempts = max_attempts
        self.backoff_rate = backoff_rate
        self.should_retry = should_retry
        self.preemptible = preemptible
        self.timeout_seconds = timeout_seconds

    def check_validator(self, func: Callable[..., Any]) -> None:
        """An async ``should_retry`` needs an async step (DBOS Python's rule,
        checked when the step is called in a workflow, not declared)."""
        if (
            self.should_retry is not None
            and inspect.iscoroutinefunction(self.should_retry)
            and not inspect.iscoroutinefunction(func)
        ):
            raise DBOSException(
                f"Step {self.name} is sync but should_retry is async. Use an async step to pair with an async validator."
            )


# ---------------------------------------------------------------------------
# Runs and the context they execute in


class WorkflowRun:
    """One execution of a workflow in this process."""

    def __init__(self, grant: Dict[str, Any], generation: int):
        self.workflow_id: str = grant["workflow_id"]
        self.name: str = grant.get("name", "")
        self.owner_xid: str = grant.get("owner_xid", "")
        self.inputs: Optional[str] = grant.get("inputs")
        self.serialization: Optional[str] = grant.get("serialization") or None
        self.recovery_attempts: int = int(grant.get("recovery_attempts") or 0)
        self.queue_name: Optional[str] = grant.get("queue_name") or None
        self.authenticated_user: Optional[str] = grant.get("authenticated_user") or None
        self.assumed_role: Optional[str] = grant.get("assumed_role") or None
        self.authenticated_roles: Optional[List[str]] = grant.get("authenticated_roles") or None
        self.attributes: Optional[str] = grant.get("attributes") or None
        self.deadline_epoch_ms: Optional[int] = grant.get("deadline_epoch_ms") or None
        self.class_name: Optional[str] = grant.get("class_name") or None
        self.config_name: Optional[str] = grant.get("config_name") or None
        # A pushed run of a method: its instance or class, found by the names
        # above, passed before the recorded inputs.
        self.target: Tuple[Any, ...] = ()
        self.history: Dict[int, Dict[str, Any]] = {
            int(s["function_id"]): s for s in (grant.get("history") or [])
        }
        self.generation = generation
        self._lock = threading.Lock()
        self._function_id = 0
        self._stop_reason: Optional[str] = None
        self.stop_event = threading.Event()
        self._stop_listeners: List[Callable[[], None]] = []
        # The data sources its transactions used (_datasource.py): their
        # checkpoints are dropped once its outcome is recorded.
        self.datasources: List[Any] = []
        # Set once its body has returned here: a task the body left behind
        # that still holds its context is no longer in the workflow (DBOS
        # Python clears the workflow from such a context).
        self.ended = False

    def next_function_id(self) -> int:
        with self._lock:
            self._function_id += 1
            return self._function_id

    def peek_function_id(self) -> int:
        """The function id the next durable operation will take."""
        with self._lock:
            return self._function_id + 1

    def take_function_id(self, expected: int) -> bool:
        """Take the next function id if it is still ``expected`` (False when
        another task of the workflow took it meanwhile)."""
        with self._lock:
            if self._function_id + 1 != expected:
                return False
            self._function_id = expected
            return True

    def stop(self, reason: str) -> None:
        """Stop the run: "cancelled", "fenced" or "disconnected". The first
        reason stays."""
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = reason
            listeners, self._stop_listeners = self._stop_listeners, []
        self.stop_event.set()
        for fn in listeners:
            fn()

    def on_stop(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn`` when the run stops (at once if it has); returns the
        function that forgets it."""
        with self._lock:
            if self._stop_reason is None:
                self._stop_listeners.append(fn)

                def forget() -> None:
                    with self._lock:
                        if fn in self._stop_listeners:
                            self._stop_listeners.remove(fn)

                return forget
        fn()
        return lambda: None

    @property
    def stop_reason(self) -> Optional[str]:
        return self._stop_reason

    def stop_error(self) -> BaseException:
        if self._stop_reason == "cancelled":
            return DBOSWorkflowCancelledError(f"Workflow {self.workflow_id} is cancelled. Aborting function.")
        return DBOSWorkflowConflictIDError(self.workflow_id)

    def raise_if_stopped(self) -> None:
        if self._stop_reason is not None:
            raise self.stop_error()

    def check_live(self) -> None:
        """Before a new step: raise if the run was stopped, or if its
        deadline passed (then the workflow is being cancelled by whichever
        agent sweeps first, perhaps not this process's, whose cancel may
        reach this run only when it records; so the step must not start)."""
        self.raise_if_stopped()
        if self.deadline_epoch_ms is not None and _now_ms() >= self.deadline_epoch_ms:
            logger.info("workflow %s passed its deadline; it stops before its next step", self.workflow_id)
            self.stop("cancelled")
            raise self.stop_error()


# ---------------------------------------------------------------------------
# What the agent tells about workflows


class WorkflowStatus:
    """A workflow's status, with DBOS Python's field names. Fields the agent
    does not track yet are None (or False)."""

    workflow_id: str
    status: str
    name: str
    class_name: Optional[str]
    config_name: Optional[str]
    authenticated_user: Optional[str]
    assumed_role: Optional[str]
    authenticated_roles: Optional[List[str]]
    input: Optional[WorkflowInputs]
    output: Optional[Any]
    error: Optional[Exception]
    created_at: Optional[int]
    updated_at: Optional[int]
    queue_name: Optional[str]
    executor_id: Optional[str]
    app_version: Optional[str]
    workflow_timeout_ms: Optional[int]
    workflow_deadline_epoch_ms: Optional[int]
    deduplication_id: Optional[str]
    priority: Optional[int]
    queue_partition_key: Optional[str]
    forked_from: Optional[str]
    was_forked_from: bool
    parent_workflow_id: Optional[str]
    dequeued_at: Optional[int]
    delay_until_epoch_ms: Optional[int]
    completed_at: Optional[int]
    attributes: Optional[Dict[str, Any]]
    schedule_name: Optional[str]
    application_name: Optional[str]
    shard_key: Optional[str]
    parent_shard_key: Optional[str]
    app_id: Optional[str]
    recovery_attempts: Optional[int]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"WorkflowStatus({fields})"


def _opt(info: Dict[str, Any], key: str) -> Any:
    v = info.get(key)
    return None if v in ("", 0) else v


def status_from_info(info: Dict[str, Any], serializer: Serializer) -> WorkflowStatus:
    st = WorkflowStatus()
    wid = info["workflow_id"]
    st.workflow_id = wid
    st.status = info.get("status", "")
    st.name = info.get("name", "")
    st.class_name = _opt(info, "class_name")
    st.config_name = _opt(info, "config_name")
    st.authenticated_user = _opt(info, "authenticated_user")
    st.assumed_role = _opt(info, "assumed_role")
    st.authenticated_roles = info.get("authenticated_roles") or None
    tag = info.get("serialization") or None
    st.input = None
    st.output = None
    st.error = None
    # As DBOS Python does, a payload this process cannot read is shown raw
    # rather than failing the whole listing.
    if info.get("inputs") is not None:
        try:
            st.input = deserialize_args(info["inputs"], tag, serializer)
        except Exception as e:
            logger.warning("input of workflow %s could not be deserialized: %s", wid, e)
            st.input = info["inputs"]
    if info.get("output") is not None:
        try:
            st.output = deserialize_value(info["output"], tag, serializer)
        except Exception as e:
            logger.warning("output of workflow %s could not be deserialized: %s", wid, e)
            st.output = info["output"]
    if info.get("error") is not None:
        try:
            st.error = cast(Exception, deserialize_exception(info["error"], tag, serializer))
        except Exception as e:
            logger.warning("error of workflow %s could not be deserialized: %s", wid, e)
            st.error = info["error"]
    st.created_at = info.get("created_at_epoch_ms")
    st.updated_at = info.get("updated_at_epoch_ms")
    st.queue_name = _opt(info, "queue_name")
    st.executor_id = _opt(info, "executor_id")
    st.app_version = _opt(info, "app_version")
    st.workflow_timeout_ms = _opt(info, "timeout_ms")
    st.workflow_deadline_epoch_ms = _opt(info, "deadline_epoch_ms")
    st.deduplication_id = _opt(info, "deduplication_id")
    st.priority = int(info.get("priority") or 0)
    st.queue_partition_key = _opt(info, "partition_key")
    st.forked_from = _opt(info, "forked_from")
    st.was_forked_from = bool(info.get("was_forked_from", False))
    st.parent_workflow_id = _opt(info, "parent_workflow_id")
    st.dequeued_at = _opt(info, "started_at_epoch_ms")
    st.delay_until_epoch_ms = _opt(info, "delay_until_epoch_ms")
    st.completed_at = _opt(info, "completed_at_epoch_ms")
    st.attributes = None
    if info.get("attributes") is not None:
        try:
            st.attributes = json.loads(info["attributes"])
        except ValueError as e:
            logger.warning("attributes of workflow %s are not JSON: %s", wid, e)
    st.schedule_name = _opt(info, "schedule_name")
    st.application_name = _opt(info, "app_name")
    st.shard_key = None
    st.parent_shard_key = None
    st.app_id = info.get("app_id")
    st.recovery_attempts = info.get("recovery_attempts")
    return st


# StepInfo is a TypedDict in DBOS Python; a plain dict with the same keys here.
StepInfo = Dict[str, Any]


def step_info(step: Dict[str, Any], serializer: Serializer, load_output: bool) -> StepInfo:
    tag = step.get("serialization") or None
    output: Any = None
    error: Any = None
    if load_output:
        try:
            output = deserialize_value(step.get("output"), tag, serializer)
        except Exception:
            output = step.get("output")
        try:
            error = deserialize_exception(step.get("error"), tag, serializer)
        except Exception:
            error = step.get("error")
    return {
        "function_id": int(step["function_id"]),
        "function_name": step.get("name", ""),
        "output": output,
        "error": error,
        "child_workflow_id": step.get("child_workflow_id") or None,
        "child_shard_key": None,
        "started_at_epoch_ms": step.get("started_at_epoch_ms") or None,
        "completed_at_epoch_ms": step.get("completed_at_epoch_ms") or None,
    }


# ---------------------------------------------------------------------------
# Schedule ticks


def decode_schedule_context(value: Any, serializer: Serializer) -> Any:
    """A schedule's context as the agent hands it over: the JSON value this
    package stored, or, for a context another SDK serialized (DBOS Python
    pickles it), that text, which the serializer reads back when it can."""
    if isinstance(value, str):
        try:
            return serializer.deserialize(value)
        except Exception:
            return value
    return value


def schedule_tick_inputs(workflow_id: str, inputs: WorkflowInputs, serializer: Serializer) -> WorkflowInputs:
    """The agent fires a schedule's tick with portable inputs [ISO 8601
    scheduled time, context]; DBOS Python passes (datetime, context)."""
    args = inputs["args"]
    if not workflow_id.startswith("sched-") or inputs["kwargs"] or len(args) != 2 or not isinstance(args[0], str):
        return inputs
    try:
        when = datetime.fromisoformat(args[0].replace("Z", "+00:00"))
    except ValueError:
        return inputs
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return {"args": (when, decode_schedule_context(args[1], serializer)), "kwargs": {}}


def _needs_actual_time(inputs: WorkflowInputs) -> bool:
    args = inputs["args"]
    return len(args) == 2 and isinstance(args[0], datetime) and not isinstance(args[1], datetime) and not inputs["kwargs"]


# ---------------------------------------------------------------------------
# The engine: requests to the agent, shared by DBOS and DBOSClient


class Engine:
    """Requests to the agent with DBOS semantics, and (for DBOS) the runs of
    this process."""

    def __init__(self, serializer: Serializer):
        self.serializer = serializer
        self.link: Optional[AgentLink] = None
        self._runs_lock = threading.Lock()
        self.runs: Dict[str, WorkflowRun] = {}
        # Cancellations pushed before their run was registered here (a direct
        # start's grant travels in a reply, which may lose the race).
        self._early_cancels: Dict[str, float] = {}
        self.background_loop: Optional[asyncio.AbstractEventLoop] = None
        # The loop running in the thread that called DBOS.launch(), if any:
        # DBOS Python runs async workflows and steps submitted from outside
        # a loop there while it runs (see target_loop).
        self.main_loop: Optional[asyncio.AbstractEventLoop] = None
        # The engine of the DBOS made after this one's was destroyed: the
        # handles this one made act through it (see live_engine).
        self.successor: Optional["Engine"] = None
        self._tasks: "set[asyncio.Future[Any]]" = set()
        # Where sync runs execute; DBOS replaces it with one of its
        # max_executor_threads.
        self.executor = RunExecutor(None)

    # -- plumbing

    def target_loop(self) -> asyncio.AbstractEventLoop:
        """Where an async run or step submitted from outside a loop goes, as
        in DBOS Python: the loop DBOS was launched from while it runs, else
        the background loop."""
        main = self.main_loop
        if main is not None and main.is_running():
            return main
        loop = self.background_loop
        assert loop is not None, "DBOS is not launched"
        return loop

    def _link(self) -> AgentLink:
        if self.link is None:
            raise DBOSException("DBOS is not launched: call DBOS.launch() first")
        return self.link

    def call(self, op: str, body: Dict[str, Any], *, workflow_id: Optional[str] = None) -> Dict[str, Any]:
        try:
            return self._link().call(op, body)
        except AgentErrorReply as e:
            raise map_agent_error(e, workflow_id=workflow_id) from None

    async def call_async(self, op: str, body: Dict[str, Any], *, workflow_id: Optional[str] = None) -> Dict[str, Any]:
        try:
            return await self._link().call_async(op, body)
        except AgentErrorReply as e:
            raise map_agent_error(e, workflow_id=workflow_id) from None

    @staticmethod
    def _start_failed(body: Dict[str, Any], parent: Optional["ParentStep"], e: BaseException) -> BaseException:
        if parent is not None:
            return _record_failed(parent.run, parent.function_id, body["name"], e, body.get("workflow_id"))
        if isinstance(e, AgentErrorReply):
            return map_agent_error(e, workflow_id=body.get("workflow_id"))
        return e

    # -- runs

    def register_run(self, run: WorkflowRun) -> None:
        with self._runs_lock:
            self.runs[run.workflow_id] = run
            if self._early_cancels.pop(run.workflow_id, None) is not None:
                run.stop("cancelled")

    def unregister_run(self, run: WorkflowRun) -> None:
        with self._runs_lock:
            if self.runs.get(run.workflow_id) is run:
                del self.runs[run.workflow_id]

    def on_cancel_push(self, workflow_id: str) -> None:
        with self._runs_lock:
            run = self.runs.get(workflow_id)
            if run is None:
                now = time.monotonic()
                self._early_cancels[workflow_id] = now
                for k, t in list(self._early_cancels.items()):
                    if now - t > 60:
                        del self._early_cancels[k]
        if run is not None:
            logger.info("workflow %s was cancelled; it stops at its next step", workflow_id)
            run.stop("cancelled")

    def on_connection_lost(self, generation: int) -> None:
        with self._runs_lock:
            runs = [r for r in self.runs.values() if r.generation == generation]
        for r in runs:
            r.stop("disconnected")

    # -- results

    def _result_value(self, res: Dict[str, Any]) -> Any:
        wid = res.get("workflow_id", "")
        status = res.get("status")
        tag = res.get("serialization") or None
        if status == "SUCCESS":
            return deserialize_value(res.get("output"), tag, self.serializer)
        if status == "ERROR":
            err = deserialize_exception(res.get("error"), tag, self.serializer)
            raise err if err is not None else DBOSException(f"workflow {wid} failed without a recorded error")
        if status == "CANCELLED":
            raise DBOSAwaitedWorkflowCancelledError(wid)
        if status == "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
            raise DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded(wid)
        raise DBOSException(f"workflow {wid} has no outcome yet (status {status})")

    def get_status(self, workflow_id: str) -> Optional[WorkflowStatus]:
        return drive(self, workflow_status_op(self.serializer, workflow_id))

    async def get_status_async(self, workflow_id: str) -> Optional[WorkflowStatus]:
        return await drive_async(self, workflow_status_op(self.serializer, workflow_id))

    # -- starting workflows

    def start_request(
        self,
        name: str,
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
        *,
        tag: Optional[str],
        workflow_id: Optional[str],
        queue_name: Optional[str],
        run_here: bool,
        class_name: Optional[str] = None,
        config_name: Optional[str] = None,
        enqueue: Optional[_EnqueueOptions] = None,
        authenticated_user: Optional[str] = None,
        timeout_ms: Optional[int] = None,
        attributes: Optional[Dict[str, Any]] = None,
        parent: "Optional[ParentStep]" = None,
        inherit_deadline: bool = True,
    ) -> Dict[str, Any]:
        """The start_workflow request. A started workflow's deadline is now
        plus its timeout; an enqueued one gets its deadline when dequeued. A
        child without a timeout of its own keeps its parent's deadline,
        unless ``inherit_deadline`` is false (a SetWorkflowTimeout block,
        even of None, sets the child's timeout instead, as in DBOS)."""
        if enqueue is not None:
            if queue_name is None:
                given = enqueue.enqueue_only_options()
                if given:
                    raise DBOSException(
                        f"Enqueue option(s) {', '.join(given)} set on a workflow that is not being enqueued. "
                        "These options are only supported when enqueueing a workflow onto a queue."
                    )
            validate_duplication_policy(enqueue.duplication_policy, queue_name, enqueue.deduplication_id)
            if enqueue.queue_partition_key and enqueue.deduplication_id:
                raise DBOSException("Deduplication is not supported for partitioned queues")
        inputs, serialization = serialize_args(args, kwargs, tag, self.serializer)
        now = _now_ms()
        body: Dict[str, Any] = {
            "workflow_id": workflow_id or str(uuid.uuid4()),
            "name": name,
            "class_name": class_name,
            "config_name": config_name,
            "inputs": inputs,
            "serialization": serialization,
            "queue_name": queue_name,
            "run_here": run_here and queue_name is None,
            "authenticated_user": authenticated_user,
        }
        if timeout_ms:
            body["timeout_ms"] = timeout_ms
            if queue_name is None:
                body["deadline_epoch_ms"] = now + timeout_ms
        elif inherit_deadline and parent is not None and parent.run.deadline_epoch_ms:
            body["deadline_epoch_ms"] = parent.run.deadline_epoch_ms
        if parent is not None:
            body["parent"] = parent.wire()
            if authenticated_user is None:
                body["authenticated_user"] = parent.run.authenticated_user
        body["attributes"] = validate_workflow_attributes(attributes)
        if enqueue is not None and queue_name is not None:
            body["deduplication_id"] = enqueue.deduplication_id
            body["priority"] = enqueue.priority
            body["app_version"] = enqueue.app_version
            body["partition_key"] = enqueue.queue_partition_key
            if enqueue.delay_until_epoch_ms is not None:
                body["delay_ms"] = max(enqueue.delay_until_epoch_ms - now, 0)
            if enqueue.duplication_policy == "return-existing":
                body["deduplication_policy"] = proto.DEDUP_RETURN_EXISTING
        elif enqueue is not None and enqueue.app_version is not None:
            # Without a queue too, as DBOS stamps it: the version decides
            # which workers may run (and recover) the workflow.
            body["app_version"] = enqueue.app_version
        return body

    # -- queues, delays, debounce, schedules and versions

    def call_raw(self, op: str, body: Dict[str, Any]) -> Dict[str, Any]:
        """A request whose error reply is raised as AgentErrorReply, for calls
        that turn some errors into results (a missing schedule is None)."""
        return self._link().call(op, body)

    async def call_raw_async(self, op: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return await self._link().call_async(op, body)

    # -- executing runs

    def _inputs(self, run: WorkflowRun, reg: WorkflowRegistration) -> WorkflowInputs:
        inputs = deserialize_args(run.inputs, run.serialization, self.serializer) or {"args": (), "kwargs": {}}
        inputs = {"args": tuple(inputs["args"]), "kwargs": dict(inputs["kwargs"])}
        validate = getattr(reg, "validate_args", None)
        if run.serialization == PORTABLE_JSON:
            # A schedule's tick (its id says so) carries its time as text.
            inputs = schedule_tick_inputs(run.workflow_id, inputs, self.serializer)
        if run.target:
            inputs = {"args": run.target + tuple(inputs["args"]), "kwargs": inputs["kwargs"]}
        if run.serialization == PORTABLE_JSON and validate is None:  # a validator does the coercion (DBOS)
            inputs = coerce_portable_args(reg.func, inputs)
        if validate is not None:
            # A failure ends the workflow ERROR with it (_fail_inputs).
            args, kwargs = validate(tuple(inputs["args"]), dict(inputs["kwargs"]))
            inputs = {"args": args, "kwargs": kwargs}
        return inputs

    def _actual_time(self, info: Optional[Dict[str, Any]]) -> datetime:
        created = (info or {}).get("created_at_epoch_ms")
        if created:
            return datetime.fromtimestamp(created / 1000.0, tz=timezone.utc)
        return datetime.now(timezone.utc)

    def _decorated_tick_inputs_op(self, run: WorkflowRun, reg: WorkflowRegistration, inputs: WorkflowInputs) -> "Op[WorkflowInputs]":
        """A @DBOS.scheduled workflow takes (scheduled_time, actual_time). The
        tick carries the first; the second is when the tick was enqueued (the
        workflow's creation), the same on every replay."""
        if reg.scheduled_cron is None or not _needs_actual_time(inputs):
            return inputs
        try:
            info: Optional[Dict[str, Any]] = yield Call(proto.OP_GET_WORKFLOW, {"workflow_id": run.workflow_id})
        except Exception as e:
            logger.warning("workflow %s: its creation time could not be read: %s", run.workflow_id, e)
            info = None
        return {"args": (inputs["args"][0], self._actual_time(info)), "kwargs": {}}

    def _finish_body(self, run: WorkflowRun, output: Any, error: Optional[BaseException]) -> Dict[str, Any]:
        body: Dict[str, Any] = {"workflow_id": run.workflow_id, "owner_xid": run.owner_xid}
        if error is None:
            data, tag = serialize_value(output, run.serialization, self.serializer)
            body.update(status="SUCCESS", output=data, serialization=tag)
        else:
            data, tag = serialize_exception_safely(error, run.serialization, self.serializer)
            body.update(status="ERROR", error=data, serialization=tag)
        return body

    def _finished(self, run: WorkflowRun, reply: Dict[str, Any], output: Any, error: Optional[BaseException]) -> Any:
        if reply.get("applied"):
            if error is not None:
                raise error
            return output
        # This run's outcome was discarded: it no longer owned the workflow.
        result = dict(reply.get("result") or {})
        result.setdefault("workflow_id", run.workflow_id)
        if result.get("status") in ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            logger.info("workflow %s: outcome already recorded by another execution; adopting it", run.workflow_id)
            return self._result_value(result)
        # Resumed or running elsewhere: the outcome is still to come.
        run.stop("fenced")
        raise run.stop_error()

    def _finish_failed(self, run: WorkflowRun, e: BaseException) -> BaseException:
        if isinstance(e, DBOSAgentUnavailableError):
            # Whether the outcome was written is unknown: the recorded
            # outcome (this one, or another run's) decides.
            run.stop("disconnected")
        elif isinstance(e, DBOSWorkflowConflictIDError):
            run.stop("fenced")
        elif isinstance(e, DBOSWorkflowCancelledError):
            run.stop("cancelled")
        else:
            return e
        return run.stop_error()

    def execute_op(self, run: WorkflowRun, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> "Op[Any]":
        """Run a workflow body granted to this process (sync on a thread, async
        on a loop: the body is ``Local``) and record its outcome. A stopped
        run raises its stop error and records nothing."""
        token = _current.set(_Ctx(self, run))
        # SetWorkflowAttributes around a call is for the called workflow, not
        # for the children it starts.
        attributes_token = _workflow_attributes.set(None)
        scope = run_scope.enter(run)
        span = tracing.workflow_span(run, reg.name)
        span_open = True
        output: Any = None
        error: Optional[BaseException] = None
        try:
            try:
                # A denied run ends ERROR with DBOSNotAuthorizedError (DBOS 3.4).
                auth.check_run(reg.func, reg.name)
                output = yield Local(reg.func, *args, **kwargs)
            except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
                if run.stop_reason is None:
                    run.stop("cancelled")
                raise run.stop_error() from None
            except Exception as e:
                error = e
            if run.stop_reason is not None:
                raise run.stop_error()
            # The span ends with the body, before the outcome is recorded: a
            # caller whose get_result returns (it waits on the agent, not on
            # this thread) finds the span exported, as under DBOS, whose
            # handles wait for the run's thread.
            span_open = False
            span.end(error)
            try:
                # Waited for even if the run is cancelled meanwhile: the
                # agent's answer says whether this outcome stands.
                reply = yield Call(proto.OP_FINISH, self._finish_body(run, output, error), run, stoppable=False)
            except BaseException as e:
                raise self._finish_failed(run, e) from None
            if reply.get("applied"):
                # The data sources the run used drop its checkpoints now
                # that its steps are all in the system database.
                for ds in run.datasources:
                    yield Local(ds.drop_completed_checkpoints, run.workflow_id)
            return self._finished(run, reply, output, error)
        finally:
            run.ended = True
            if span_open:
                span.end(error)
            scope.close()
            _workflow_attributes.reset(attributes_token)
            _current.reset(token)
            self.unregister_run(run)

    def run_in_background(
        self, run: WorkflowRun, reg: WorkflowRegistration, inputs: Optional[WorkflowInputs] = None
    ) -> "Future[Any]":
        """Execute a run on the executor's threads (sync) or the background
        event loop (async); the future holds its outcome. ``inputs`` are the caller's
        own arguments for a direct start; a pushed run decodes its inputs."""
        self.register_run(run)
        fut: "Future[Any]" = Future()
        bad_inputs: Optional[Exception] = None
        pushed = inputs is None
        tracing.remember_caller(run, pushed)
        if inputs is None:
            try:
                inputs = self._inputs(run, reg)
            except Exception as e:
                logger.error("workflow %s: its inputs cannot be deserialized: %s", run.workflow_id, e)
                bad_inputs = e
        if reg.is_async:
            loop = self.target_loop()

            async def main() -> Any:
                return await drive_async(self, self._background_op(run, reg, inputs, bad_inputs, pushed))

            return asyncio.run_coroutine_threadsafe(main(), loop)

        def target(slot: Slot) -> None:
            # A stopped run's slot frees at once: the agent may push another
            # run in its place while this thread finishes (see _executor).
            forget = run.on_stop(slot.release)
            ctx = contextvars.Context()  # a run starts from an empty context
            try:
                fut.set_result(ctx.run(drive, self, self._background_op(run, reg, inputs, bad_inputs, pushed)))
            except BaseException as e:
                fut.set_exception(e)
            finally:
                forget()

        self.executor.submit(target)
        return fut

    def _background_op(
        self, run: WorkflowRun, reg: WorkflowRegistration, inputs: Optional[WorkflowInputs], bad_inputs: Optional[Exception],
        pushed: bool,
    ) -> "Op[Any]":
        """A run in the background: its body, or when its inputs could not
        be decoded, its workflow ended ERROR with that error."""
        if inputs is None:
            assert bad_inputs is not None
            try:
                body = self._finish_body(run, None, bad_inputs)
                reply = yield Call(proto.OP_FINISH, body, target=run.workflow_id)
                return self._finished(run, reply, None, bad_inputs)
            finally:
                self.unregister_run(run)
        args = (yield from self._decorated_tick_inputs_op(run, reg, inputs)) if pushed else inputs
        return (yield from self.execute_op(run, reg, args["args"], args["kwargs"]))

    def keep_task(self, task: "asyncio.Future[Any]") -> None:
        # The loop keeps only weak references to tasks.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


# ---------------------------------------------------------------------------
# Steps


def _replay(
    run: WorkflowRun, fid: int, rec: Dict[str, Any], name: str, serializer: Serializer, *, empty_ok: bool = False
) -> Any:
    """The recorded outcome of a step: its output, or its error raised. DBOS
    records some operations (send, setEvent, patches...) with neither; they
    replay as None (``empty_ok``)."""
    check_recorded_name(run, fid, rec, name)
    tag = rec.get("serialization") or None
    if rec.get("error") is not None:
        err = deserialize_exception(rec["error"], tag, serializer)
        assert err is not None
        raise err
    if rec.get("output") is not None:
        return deserialize_value(rec["output"], tag, serializer)
    if empty_ok:
        return None
    raise Exception("Output and error are both None")


def check_recorded_name(run: WorkflowRun, fid: int, rec: Dict[str, Any], name: str) -> None:
    if rec.get("name") != name:
        raise DBOSUnexpectedStepError(run.workflow_id, fid, name, rec.get("name", ""))


def raw_record_body(
    run: WorkflowRun,
    fid: int,
    name: str,
    started: int,
    output: Optional[str],
    error: Optional[str],
    serialization: Optional[str],
    child_workflow_id: Optional[str] = None,
) -> Dict[str, Any]:
    """A record_step request for an outcome already serialized (None and
    None: a step with neither, as DBOS records a patch)."""
    return {
        "workflow_id": run.workflow_id,
        "owner_xid": run.owner_xid,
        "function_id": fid,
        "name": name,
        "started_at_epoch_ms": started,
        "completed_at_epoch_ms": _now_ms(),
        "child_workflow_id": child_workflow_id,
        "output": output,
        "error": error,
        "serialization": serialization,
    }


def _record_body(
    run: WorkflowRun, fid: int, name: str, started: int, output: Any, error: Optional[BaseException],
    serializer: Serializer, child_workflow_id: Optional[str] = None,
) -> Dict[str, Any]:
    # Step outcomes use the default format whatever the workflow's format,
    # as in DBOS Python.
    if error is None:
        data, tag = serialize_value(output, None, serializer)
        return raw_record_body(run, fid, name, started, data, None, tag, child_workflow_id)
    data, tag = serialize_exception(error, None, serializer)
    return raw_record_body(run, fid, name, started, None, data, tag, child_workflow_id)


def _record_failed(run: WorkflowRun, fid: int, name: str, e: BaseException, target: Optional[str] = None) -> BaseException:
    """The exception a failed request made on behalf of a run raises inside
    the workflow: the run's own fencing or cancellation stops it; other
    errors are about ``target`` (default: the run's workflow)."""
    if isinstance(e, AgentErrorReply):
        if e.code == 204:
            run.stop("cancelled")
            return run.stop_error()
        if e.code == 203:
            run.stop("fenced")
            return run.stop_error()
        return map_agent_error(e, workflow_id=target or run.workflow_id, step_id=fid, step_name=name)
    if isinstance(e, DBOSAgentUnavailableError):
        run.stop("disconnected")
        return run.stop_error()
    return e


def run_connection(engine: Engine, run: WorkflowRun) -> Connection:
    """The connection a run's writes go through: the one it was granted on.
    A run whose connection dropped is stopped (the agent has handed its
    workflow back to the queue), so it writes nothing on a newer one."""
    run.raise_if_stopped()
    conn = engine._link().current()
    if conn is None or conn.generation != run.generation:
        run.stop("disconnected")
        run.raise_if_stopped()
    assert conn is not None
    return conn


# ---------------------------------------------------------------------------
# Operations written once for sync and async callers
#
# An operation is a generator that yields what it needs done (a request to
# the agent, requests made at once of which the first answer counts, a local
# pause, a call of a local API, or for a stream reader a value for its
# caller) and gets each answer back: ``drive`` runs it on the calling thread,
# ``drive_async`` on the event loop, so the logic of a call (function ids,
# replay, what is recorded) is written once.


class Call:
    """A request to the agent. With ``run`` it is made on behalf of that run:
    on its connection, a wait the run's stopping interrupts, and errors that
    fence or cancel the run stop it; other errors name ``target``. A
    ``raw`` call (made for no run) gets its error reply as AgentErrorReply,
    for an operation that turns some errors into results (a missing
    schedule is None). A call for a run that is not ``stoppable`` (a
    record, a finish) is waited for even when the run stops meanwhile: the
    agent's answer says whether it was applied."""

    __slots__ = ("op", "body", "run", "fid", "name", "target", "raw", "stoppable")

    def __init__(
        self,
        op: str,
        body: Dict[str, Any],
        run: Optional[WorkflowRun] = None,
        fid: int = 0,
        name: str = "",
        target: Optional[str] = None,
        raw: bool = False,
        stoppable: bool = True,
    ):
        self.op = op
        self.body = body
        self.run = run
        self.fid = fid
        self.name = name
        self.target = target
        self.raw = raw
        self.stoppable = stoppable


class Pause:
    """Wait ``seconds`` here (a durable sleep's remainder, a retry's
    backoff); with a run, the run stopping ends it with the run's stop
    error."""

    __slots__ = ("seconds", "run")

    def __init__(self, seconds: float, run: Optional[WorkflowRun]):
        self.seconds = seconds
        self.run = run


class AgentBack:
    """Wait until the agent is reachable again (a wait for a workflow's
    outcome outlives a reconnection); raises when the link is closed."""

    __slots__ = ()


class Local:
    """A call of a local API (a database driver's, the user's function), made
    here rather than by the agent: ``fn(*args, **kwargs)``, whose result is
    the answer. The sync driver calls it on its thread, and refuses an
    awaitable result (it cannot await one). The async driver calls it on the
    event loop and awaits the result when it is awaitable, so one operation
    can serve a library's sync API and its async twin (SQLAlchemy's
    ``Session`` and ``AsyncSession``): an operation driven async gives a
    call that does its I/O in what it returns, not one that blocks the loop.
    The call is made in the driver's context (context variables the
    operation set are seen)."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs


class Start:
    """A start_workflow request (``start_request_op``): the answer is the
    reply and the generation of the connection that answered, which a run
    granted in the reply belongs to. A child (``parent``) is started on its
    parent run's connection, and the parent's fencing or cancellation stops
    the parent."""

    __slots__ = ("body", "parent")

    def __init__(self, body: Dict[str, Any], parent: "Optional[ParentStep]"):
        self.body = body
        self.parent = parent


class InBackground:
    """Execute a run granted to the caller in the background. The answer is
    a future of the caller's kind holding its outcome: a
    ``concurrent.futures.Future`` for sync callers (the run on the
    executor's threads, or the background loop when async), an asyncio
    future for async ones (an async workflow as a task of the caller's
    loop)."""

    __slots__ = ("run", "reg", "args", "kwargs")

    def __init__(self, run: WorkflowRun, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        self.run, self.reg, self.args, self.kwargs = run, reg, args, kwargs


class Emit:
    """A value a stream reader hands to its caller."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class FirstOf:
    """Requests made at once, all for the same run (or none): the answer is
    ``(index, reply)`` of the first one answered. The others are abandoned:
    the agent is told to stop them (``cancel_request``), and their late
    answers are dropped."""

    __slots__ = ("calls", "run")

    def __init__(self, calls: List[Call]):
        assert calls and all(c.run is calls[0].run for c in calls)
        self.calls = calls
        self.run = calls[0].run


# What an operation yields; what the drivers perform (all but Emit).
Item = Union[Call, FirstOf, Pause, AgentBack, Local, Start, InBackground, Emit]
Performed = Union[Call, FirstOf, Pause, AgentBack, Local, Start, InBackground]
Op = Generator[Item, Any, T]


def record_call(run: WorkflowRun, body: Dict[str, Any]) -> Call:
    return Call(proto.OP_RECORD_STEP, body, run, body["function_id"], body["name"], stoppable=False)


def record_op(run: WorkflowRun, body: Dict[str, Any]) -> "Op[None]":
    """Record a step's outcome for ``run``."""
    yield record_call(run, body)


def start_request_op(engine: Engine, body: Dict[str, Any], parent: "Optional[ParentStep]") -> "Op[Tuple[Dict[str, Any], int]]":
    """Start a workflow (``Start``). A child's start rejected by its id's
    reuse policy or by its deduplication id is recorded as the parent's
    step, as DBOS records it: a replay raises it again."""
    started = _now_ms()
    try:
        answer: Tuple[Dict[str, Any], int] = yield Start(body, parent)
        return answer
    except (DBOSWorkflowIDInUseError, DBOSQueueDeduplicatedError) as err:
        if parent is not None:
            yield record_call(parent.run, _record_body(parent.run, parent.function_id, body["name"], started, None, err, engine.serializer))
        raise


def _nothing() -> None:
    pass


def _first_answer(race: FirstOf, futs: "List[Any]") -> Tuple[int, Dict[str, Any]]:
    """Once the wait for ``futs`` (one per call of ``race``) has ended: the
    first answered and its reply, or its error as the caller sees it; the
    run's stop error if the run stopped before any answer."""
    done = [i for i, f in enumerate(futs) if f.done()]
    if not done:
        assert race.run is not None  # only the run's stopping ends the wait without an answer
        race.run.raise_if_stopped()
    first = done[0]
    try:
        return first, futs[first].result()
    except BaseException as e:
        call = race.calls[first]
        if race.run is not None:
            raise _record_failed(race.run, call.fid, call.name, e, call.target) from None
        raise (map_agent_error(e, workflow_id=call.target) if isinstance(e, AgentErrorReply) else e) from None


def _race(engine: Engine, race: FirstOf) -> Tuple[int, Dict[str, Any]]:
    """``race`` on this thread."""
    run = race.run
    conn = run_connection(engine, run) if run is not None else engine._link().connection()
    wake = threading.Event()
    forget = run.on_stop(wake.set) if run is not None else _nothing
    futs: "List[Future[Dict[str, Any]]]" = []
    try:
        for c in race.calls:
            futs.append(conn.request(c.op, c.body))  # one by one: a refused one leaves those sent to cancel
        for f in futs:
            f.add_done_callback(lambda _: wake.set())
        wake.wait()
        return _first_answer(race, futs)
    finally:
        forget()
        for f in futs:
            # Abandons a request still unanswered (the first's losers, or
            # all when the run stopped): the agent stops it (cancel_request)
            # and its late answer is dropped. No-op for an answered one.
            f.cancel()


def _stop_waiter(run: WorkflowRun) -> "Tuple[asyncio.Future[None], Callable[[], None]]":
    """A future of the running loop that the run's stopping completes, and
    the function that drops it."""
    loop = asyncio.get_running_loop()
    stopped: "asyncio.Future[None]" = loop.create_future()

    def wake() -> None:
        if not stopped.done():
            stopped.set_result(None)

    def wake_soon() -> None:
        loop.call_soon_threadsafe(wake)

    forget = run.on_stop(wake_soon)

    def drop() -> None:
        forget()
        stopped.cancel()

    return stopped, drop


async def _race_async(engine: Engine, race: FirstOf) -> Tuple[int, Dict[str, Any]]:
    """``race`` on the event loop."""
    run = race.run
    conn = run_connection(engine, run) if run is not None else await engine._link().connection_async()
    stopped, drop = _stop_waiter(run) if run is not None else (None, _nothing)
    requests: "List[Future[Dict[str, Any]]]" = []
    futs: "List[asyncio.Future[Dict[str, Any]]]" = []
    try:
        for c in race.calls:
            requests.append(await conn.request_async(c.op, c.body))  # one by one: a refused one leaves those sent to cancel
        futs = [asyncio.wrap_future(r) for r in requests]
        waited: "List[asyncio.Future[Any]]" = [*futs, *([stopped] if stopped is not None else [])]
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        return _first_answer(race, futs)
    finally:
        drop()
        for f in futs:
            if not f.done():
                f.cancel()
            elif not f.cancelled():
                f.exception()  # retrieved, so a second failure is not reported as lost
        for r in requests:
            # Abandons a request still unanswered, at once rather than when
            # the loop next runs the cancelled future's callbacks (it may
            # not, when the loop is closing): the agent stops it
            # (cancel_request) and its late answer is dropped.
            r.cancel()


# What a step or a local call most often returns: never awaitable, and told
# apart by one type lookup where inspect.isawaitable walks to an ABC check.
_PLAIN_TYPES = frozenset({type(None), bool, int, float, str, bytes, list, tuple, dict})


def _perform(engine: Optional[Engine], item: Performed) -> Any:
    if isinstance(item, Local):
        reply = item.fn(*item.args, **item.kwargs)
        if type(reply) not in _PLAIN_TYPES and inspect.isawaitable(reply):
            raise DBOSException(f"{getattr(item.fn, '__qualname__', item.fn)} returned an awaitable to a sync caller")
        return reply
    if isinstance(item, AgentBack):
        assert engine is not None
        return engine._link().connection()
    if isinstance(item, Pause):
        if item.run is None:
            time.sleep(item.seconds)
        elif item.run.stop_event.wait(item.seconds):
            item.run.raise_if_stopped()
        return None
    assert engine is not None, "an operation driven without an engine made a request of the agent"
    if isinstance(item, FirstOf):
        return _race(engine, item)
    if isinstance(item, Start):
        parent = item.parent
        conn = run_connection(engine, parent.run) if parent is not None else engine._link().connection()
        try:
            return conn.request(proto.OP_START_WORKFLOW, item.body).result(), conn.generation
        except BaseException as e:
            raise engine._start_failed(item.body, parent, e) from None
    if isinstance(item, InBackground):
        return engine.run_in_background(item.run, item.reg, {"args": item.args, "kwargs": item.kwargs})
    if item.run is None:
        if item.raw:
            return engine.call_raw(item.op, item.body)
        return engine.call(item.op, item.body, workflow_id=item.target)
    if not item.stoppable:
        try:
            return run_connection(engine, item.run).request(item.op, item.body).result()
        except BaseException as e:
            raise _record_failed(item.run, item.fid, item.name, e, item.target) from None
    return _race(engine, FirstOf([item]))[1]


async def _perform_async(engine: Optional[Engine], item: Performed) -> Any:
    if isinstance(item, Local):
        reply = item.fn(*item.args, **item.kwargs)
        return await reply if type(reply) not in _PLAIN_TYPES and inspect.isawaitable(reply) else reply
    if isinstance(item, AgentBack):
        assert engine is not None
        return await engine._link().connection_async()
    if isinstance(item, Pause):
        if item.run is None:
            await asyncio.sleep(item.seconds)
            return None
        stopped, drop = _stop_waiter(item.run)
        try:
            await asyncio.wait([stopped], timeout=item.seconds)
        finally:
            drop()
        item.run.raise_if_stopped()
        return None
    assert engine is not None, "an operation driven without an engine made a request of the agent"
    if isinstance(item, FirstOf):
        return await _race_async(engine, item)
    if isinstance(item, Start):
        parent = item.parent
        conn = run_connection(engine, parent.run) if parent is not None else await engine._link().connection_async()
        try:
            return await asyncio.wrap_future(await conn.request_async(proto.OP_START_WORKFLOW, item.body)), conn.generation
        except BaseException as e:
            raise engine._start_failed(item.body, parent, e) from None
    if isinstance(item, InBackground):
        if item.reg.is_async:
            # On the caller's loop, as a task of it.
            engine.register_run(item.run)
            task = asyncio.ensure_future(drive_async(engine, engine.execute_op(item.run, item.reg, item.args, item.kwargs)))
            engine.keep_task(task)
            return task
        return asyncio.wrap_future(engine.run_in_background(item.run, item.reg, {"args": item.args, "kwargs": item.kwargs}))
    if item.run is None:
        if item.raw:
            return await engine.call_raw_async(item.op, item.body)
        return await engine.call_async(item.op, item.body, workflow_id=item.target)
    if not item.stoppable:
        try:
            return await asyncio.wrap_future(await run_connection(engine, item.run).request_async(item.op, item.body))
        except BaseException as e:
            raise _record_failed(item.run, item.fid, item.name, e, item.target) from None
    return (await _race_async(engine, FirstOf([item])))[1]


def _advance(gen: "Op[Any]", reply: Any, error: Optional[BaseException]) -> Item:
    return gen.throw(error) if error is not None else gen.send(reply)


def drive(engine: Optional[Engine], gen: "Op[T]") -> T:
    """Run an operation on this thread; without an engine, one that makes no
    request of the agent."""
    reply: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            item = _advance(gen, reply, error)
        except StopIteration as stop:
            return cast(T, stop.value)
        assert not isinstance(item, Emit)
        reply, error = None, None
        try:
            reply = _perform(engine, item)
        except BaseException as e:
            error = e


async def drive_async(engine: Optional[Engine], gen: "Op[T]") -> T:
    """Run an operation on the event loop; without an engine, one that makes
    no request of the agent."""
    reply: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            item = _advance(gen, reply, error)
        except StopIteration as stop:
            return cast(T, stop.value)
        assert not isinstance(item, Emit)
        reply, error = None, None
        try:
            reply = await _perform_async(engine, item)
        except BaseException as e:
            error = e


def drive_values(engine: Engine, gen: "Op[None]") -> Generator[Any, None, None]:
    """Run a stream reader on this thread, yielding the values it emits."""
    reply: Any = None
    error: Optional[BaseException] = None
    try:
        while True:
            try:
                item = _advance(gen, reply, error)
            except StopIteration:
                return
            reply, error = None, None
            if isinstance(item, Emit):
                yield item.value
                continue
            try:
                reply = _perform(engine, item)
            except BaseException as e:
                error = e
    finally:
        gen.close()


async def drive_values_async(engine: Engine, gen: "Op[None]") -> AsyncGenerator[Any, None]:
    """Run a stream reader on the event loop, yielding the values it emits."""
    reply: Any = None
    error: Optional[BaseException] = None
    try:
        while True:
            try:
                item = _advance(gen, reply, error)
            except StopIteration:
                return
            reply, error = None, None
            if isinstance(item, Emit):
                yield item.value
                continue
            try:
                reply = await _perform_async(engine, item)
            except BaseException as e:
                error = e
    finally:
        gen.close()


NEW_STEP: Any = object()


def begin_step(run: WorkflowRun, name: str, serializer: Serializer) -> Tuple[int, Any]:
    """A step's start in workflow code: its function id, and its recorded
    outcome when the run's history has it (a recorded error is raised), else
    ``NEW_STEP`` once the run is checked live. A step run by a
    StepReservation takes the id reserved for it."""
    fid = reservation.take(run) or run.next_function_id()
    rec = run.history.get(fid)
    dbos_log.operation(rec is not None, "step", fid, f"name: {name}")
    if rec is not None:
        return fid, _replay(run, fid, rec, name, serializer)
    run.check_live()
    return fid, NEW_STEP


def _serialize_for_record(
    run: WorkflowRun, fid: int, opts: StepConfig, started: int, output: Any, error: Optional[BaseException], serializer: Serializer
) -> Dict[str, Any]:
    try:
        return _record_body(run, fid, opts.name, started, output, error, serializer)
    except Exception as e:
        # The serializer's own error, as DBOS Python raises it (a TypeError
        # for what pickle refuses): callers catch it by its type. Nothing is
        # recorded, so a later execution runs the step again.
        note = f"step {opts.name} of workflow {run.workflow_id}: its outcome cannot be serialized"
        logger.error("%s: %s", note, e)
        if hasattr(e, "add_note"):
            e.add_note(note)
        raise


def _step_op(
    ctx: _Ctx, opts: StepConfig, func: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any], is_async: bool,
    off_loop: bool = False,
) -> "Op[Any]":
    """A step called from workflow code: replayed when its function id is
    recorded, else attempted (with the retries its options allow, waiting
    between attempts in a way the run's stopping interrupts) and its outcome
    recorded. An async step's attempt may be supervised: cancelled when the
    run stops (``preemptible``; then nothing is recorded and a resume runs
    it again) or at its ``timeout_seconds``. A sync ``func`` driven on the
    loop runs ``off_loop``, each attempt on a thread."""
    auth.check_roles(func, opts.name)  # before the step is recorded, as DBOS
    if not is_async:
        opts.check_validator(func)
    engine, run = ctx.engine, ctx.run
    fid, replayed = begin_step(run, opts.name, engine.serializer)
    if replayed is not NEW_STEP:
        return replayed
    started = _now_ms()
    attempts = opts.max_attempts if opts.retries_allowed else 1
    supervised = is_async and (opts.preemptible or opts.timeout_seconds is not None)
    errors: List[Exception] = []
    output: Any = None
    error: Optional[BaseException] = None
    step_ctx = _Ctx(engine, run, fid)
    token = _current.set(step_ctx)
    start_options = StartOptionsCleared()
    span = tracing.step_span(run, opts.name)
    try:
        for attempt in range(attempts):
            step_ctx.set_attempt(opts, attempt)
            try:
                if supervised:
                    output = yield Local(_supervised_attempt, run, opts, func, args, kwargs)
                elif off_loop:
                    output = yield Local(asyncio.to_thread, func, *args, **kwargs)
                else:
                    output = yield Local(func, *args, **kwargs)
                error = None
                break
            except Exception as e:
                if opts.preemptible and run.stop_reason is not None:
                    raise  # preempted: nothing is recorded, a resume runs it again
                error = e
                if not opts.retries_allowed:
                    break
                if opts.should_retry is not None and not (yield Local(opts.should_retry, e)):
                    break
                errors.append(e)
                if attempt == attempts - 1:
                    error = DBOSMaxStepRetriesExceeded(opts.name, attempts, errors)
                    break
                tracing.add_event(f"Step attempt {attempt} failed", {"error": str(e), "retryIntervalSeconds": opts.interval_seconds})
                wait = min(opts.interval_seconds * (opts.backoff_rate**attempt), _MAX_RETRY_INTERVAL_SECONDS)
                logger.warning(
                    "step %s of workflow %s failed (%s); retrying in %.2fs (attempt %d of %d)",
                    opts.name, run.workflow_id, e, wait, attempt + 2, attempts,
                )
                yield Pause(wait, run)
    finally:
        span.end(error)
        start_options.close()
        _current.reset(token)
    yield record_call(run, _serialize_for_record(run, fid, opts, started, output, error, engine.serializer))
    if error is not None:
        raise error
    return output


async def _supervised_attempt(
    run: WorkflowRun, opts: StepConfig, func: Callable[..., Awaitable[Any]], args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Any:
    """One attempt of an async step under supervision (see ``_step_op``)."""
    stopped, drop = _stop_waiter(run) if opts.preemptible else (None, _nothing)
    try:
        return await supervise_attempt(
            func, args, kwargs, step_name=opts.name, timeout_seconds=opts.timeout_seconds, stopped=stopped,
            stop_error=lambda: preempted_error(run.workflow_id, run.stop_reason, run.stop_error),
        )
    finally:
        drop()


def run_step_sync(opts: StepConfig, func: Callable[..., R], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> R:
    ctx = _current.get()
    if ctx is None or ctx.step_id is not None:
        # Outside a workflow, or inside another step: a plain call.
        return func(*args, **kwargs)
    return cast(R, drive(ctx.engine, _step_op(ctx, opts, func, args, kwargs, False)))


async def run_step_async(opts: StepConfig, func: Callable[..., Awaitable[R]], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> R:
    ctx = _current.get()
    if ctx is None or ctx.step_id is not None:
        return await func(*args, **kwargs)
    return cast(R, await drive_async(ctx.engine, _step_op(ctx, opts, func, args, kwargs, True)))


async def run_sync_step_async(opts: StepConfig, func: Callable[..., R], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> R:
    """A sync ``func`` run as a step from async code (``DBOS.run_step_async``):
    its function id is drawn here, on the loop, when it is called, as DBOS
    draws it, so steps that tasks of one workflow start together are
    numbered in the order they were called (and a replay finds each at its
    id); only its attempts run on a thread, off the loop."""
    ctx = _current.get()
    if ctx is None or ctx.step_id is not None:
        return await asyncio.to_thread(func, *args, **kwargs)
    return cast(R, await drive_async(ctx.engine, _step_op(ctx, opts, func, args, kwargs, False, off_loop=True)))


def run_step_config(call: str, options: Optional[StepOptions], func: Callable[..., Any]) -> StepConfig:
    """The step ``DBOS.run_step`` makes of ``func`` with ``options`` (DBOS
    Python's defaults filled in). Inside a workflow its checks apply and the
    options this binding cannot honour are refused; outside one the function
    just runs, so they do not matter."""
    o: Dict[str, Any] = {**DEFAULT_STEP_OPTIONS, **(options or {})}
    ctx = _current.get()
    in_workflow = ctx is not None and ctx.step_id is None
    config = StepConfig(
        o["name"] or (func.__qualname__ if in_workflow else ""),
        o["retries_allowed"], o["interval_seconds"], o["max_attempts"], o["backoff_rate"], o["should_retry"],
        o["preemptible"], o["timeout_seconds"],
    )
    if in_workflow:
        # DBOS Python's order: the validator, then the async-only options.
        config.check_validator(func)
        check_async_only_options(config.name, func, config.preemptible, config.timeout_seconds)
    return config


def as_step(ctx: Optional[_Ctx], name: str, op: "Op[T]") -> "Op[T]":
    """``op`` the way DBOS Python runs a call (listing, status, cancel...)
    from workflow code: as the step ``name`` (``DBOS.listWorkflows``...)
    whose outcome is recorded, so a replay returns what the first execution
    saw without asking again. From a step or outside a workflow it is
    ``op``."""
    if ctx is None or ctx.step_id is not None:
        return (yield from op)
    run, serializer = ctx.run, ctx.engine.serializer
    fid, replayed = begin_step(run, name, serializer)
    if replayed is not NEW_STEP:
        op.close()
        return cast(T, replayed)
    started = _now_ms()
    try:
        out = yield from op
    except Exception as e:
        yield record_call(run, _record_body(run, fid, name, started, None, e, serializer))
        raise
    yield record_call(run, _record_body(run, fid, name, started, out, None, serializer))
    return out


# ---------------------------------------------------------------------------
# Requests every caller makes (DBOS, DBOSClient, handles)


def workflow_status_op(serializer: Serializer, workflow_id: str) -> "Op[Optional[WorkflowStatus]]":
    """A workflow's status, or None for an unknown id."""
    try:
        info = yield Call(proto.OP_GET_WORKFLOW, {"workflow_id": workflow_id, "load_payloads": True}, target=workflow_id)
    except DBOSNonExistentWorkflowError:
        return None
    return status_from_info(info, serializer)


def _get_result_body(workflow_id: str, wait_for_creation: bool) -> Dict[str, Any]:
    # DBOS Python waits for a workflow whose row is not there yet (a child
    # another task is starting, a handle taken before the enqueue commits);
    # only a caller that knows the row exists fails fast when it is gone.
    body: Dict[str, Any] = {"workflow_id": workflow_id}
    if wait_for_creation:
        body["wait_for_creation"] = True
    return body


def outcome_op(engine: Engine, workflow_id: str, wait_for_creation: bool = True) -> "Op[Any]":
    """Wait for a workflow's outcome: its output, or its error raised. The
    wait survives a reconnection to the agent. A workflow that does not
    exist yet is waited for, as DBOS Python waits, unless
    ``wait_for_creation`` is False (the caller started it)."""
    while True:
        try:
            res = yield Call(proto.OP_GET_RESULT, _get_result_body(workflow_id, wait_for_creation), target=workflow_id)
            break
        except DBOSAgentUnavailableError:
            if engine._link().closed:
                raise
            yield AgentBack()
    res.setdefault("workflow_id", workflow_id)
    return engine._result_value(res)


def handle_status_op(serializer: Serializer, workflow_id: str) -> "Op[WorkflowStatus]":
    """A handle's ``get_status``: from workflow code the step
    DBOS.getStatus; an unknown workflow is DBOSNonExistentWorkflowError."""
    stat = yield from as_step(current_ctx(), "DBOS.getStatus", workflow_status_op(serializer, workflow_id))
    if stat is None:
        raise DBOSNonExistentWorkflowError("target", workflow_id)
    return stat


def get_result_op(engine: Engine, ctx: Optional[_Ctx], workflow_id: str, wait_for_creation: bool = True) -> "Op[Any]":
    """``get_result``: from workflow code the step DBOS.getResult, else a
    plain wait."""
    if ctx is None or ctx.step_id is not None:
        return (yield from outcome_op(engine, workflow_id, wait_for_creation))
    return (yield from await_result_op(engine, workflow_id, ctx.run, ctx.run.next_function_id(), wait_for_creation))


def list_workflows_op(serializer: Serializer, call: str, filters: Dict[str, Any], own_app: str) -> "Op[List[WorkflowStatus]]":
    reply = yield Call(proto.OP_LIST_WORKFLOWS, list_workflows_request(call, filters, own_app))
    return [status_from_info(i, serializer) for i in reply.get("workflows") or []]


def list_steps_op(
    serializer: Serializer, workflow_id: str, load_output: bool, limit: Optional[int], offset: Optional[int]
) -> "Op[List[StepInfo]]":
    reply = yield Call(proto.OP_LIST_STEPS, {"workflow_id": workflow_id}, target=workflow_id)
    start = offset or 0
    steps = reply.get("steps") or []
    steps = steps[start : start + limit] if limit is not None else steps[start:]
    return [step_info(s, serializer, load_output) for s in steps]


def cancel_op(workflow_ids: List[str], cancel_children: bool) -> "Op[None]":
    """Cancel workflows (with ``cancel_children``, every workflow they
    started, recursively). As in DBOS Python, an unknown id is no error."""
    for wid in workflow_ids:
        try:
            yield Call(proto.OP_CANCEL, {"workflow_id": wid, "cancel_children": cancel_children or None}, target=wid)
        except DBOSNonExistentWorkflowError:
            pass


def resume_op(workflow_id: str, queue_name: Optional[str]) -> "Op[None]":
    yield Call(proto.OP_RESUME, {"workflow_id": workflow_id, "queue_name": queue_name}, target=workflow_id)


class ParentStep:
    """The step of a running workflow that starts a child workflow: the
    child's row and this step (pointing at it) are written together."""

    __slots__ = ("run", "function_id")

    def __init__(self, run: WorkflowRun, function_id: int):
        self.run = run
        self.function_id = function_id

    def child_id(self) -> str:
        """DBOS's id of a child started here without SetWorkflowID."""
        return f"{self.run.workflow_id}-{self.function_id}"

    def wire(self) -> Dict[str, Any]:
        return {"workflow_id": self.run.workflow_id, "owner_xid": self.run.owner_xid, "function_id": self.function_id}


def start_position(what: str, name: str, serializer: Serializer) -> Tuple[Optional[ParentStep], Optional[str]]:
    """Where a workflow started here stands in the calling workflow, as DBOS
    Python numbers it: outside a workflow (None, None); in one, the parent
    step the start takes and, when that step is recorded (replay), the child
    it started, which is not started again (a recorded error is raised)."""
    ctx = _current.get()
    if ctx is None:
        return None, None
    if ctx.step_id is not None:
        raise DBOSException(f"{what} from inside a step: start child workflows from the workflow itself")
    run = ctx.run
    fid = run.next_function_id()
    rec = run.history.get(fid)
    if rec is None:
        run.check_live()
        return ParentStep(run, fid), None
    check_recorded_name(run, fid, rec, name)
    if rec.get("error") is not None:
        err = deserialize_exception(rec["error"], rec.get("serialization") or None, serializer)
        assert err is not None
        raise err
    child = rec.get("child_workflow_id")
    if not child:
        raise DBOSException(f"step {fid} of workflow {run.workflow_id} ({name}) records no child workflow")
    return ParentStep(run, fid), child


GET_RESULT_STEP = "DBOS.getResult"


def await_result_op(engine: Engine, workflow_id: str, run: WorkflowRun, fid: int, wait_for_creation: bool = True) -> "Op[Any]":
    """Waiting for a workflow's outcome from workflow code: the step
    DBOS.getResult at ``fid``, recording the outcome as stored (replay
    returns it without waiting)."""
    rec = run.history.get(fid)
    if rec is not None:
        return _replay(run, fid, rec, GET_RESULT_STEP, engine.serializer, empty_ok=True)
    started = _now_ms()
    reply = yield Call(proto.OP_GET_RESULT, _get_result_body(workflow_id, wait_for_creation), run, fid, GET_RESULT_STEP, workflow_id)
    reply.setdefault("workflow_id", workflow_id)
    status, tag = reply.get("status"), reply.get("serialization") or None
    if status == "SUCCESS" and reply.get("output") is not None:
        body = raw_record_body(run, fid, GET_RESULT_STEP, started, reply["output"], None, tag, workflow_id)
    elif status == "ERROR" and reply.get("error") is not None:
        body = raw_record_body(run, fid, GET_RESULT_STEP, started, None, reply["error"], tag, workflow_id)
    else:
        try:
            value = engine._result_value(reply)
            body = _record_body(run, fid, GET_RESULT_STEP, started, value, None, engine.serializer, workflow_id)
        except Exception as e:
            body = _record_body(run, fid, GET_RESULT_STEP, started, None, e, engine.serializer, workflow_id)
    yield record_call(run, body)
    return engine._result_value(reply)


WAIT_FIRST_STEP = "DBOS.waitFirst"


def _wait_first_op(engine: Engine, workflow_ids: List[str], run: Optional[WorkflowRun]) -> "Op[str]":
    """The id of the first of ``workflow_ids`` to end (whatever its outcome),
    from one get_result for each, made at once. From workflow code, the step
    DBOS.waitFirst records that id (replay returns it without waiting)."""
    fid = 0
    if run is not None:
        fid, replayed = begin_step(run, WAIT_FIRST_STEP, engine.serializer)
        if replayed is not NEW_STEP:
            return cast(str, replayed)
    started = _now_ms()
    # A workflow not created yet is waited for, as DBOS Python's poll would.
    calls = [
        Call(proto.OP_GET_RESULT, {"workflow_id": wid, "wait_for_creation": True}, run, fid, WAIT_FIRST_STEP, wid)
        for wid in workflow_ids
    ]
    while True:
        try:
            index, _ = yield FirstOf(calls)
            break
        except DBOSAgentUnavailableError:
            # Without a run (a run's lost connection stops it), the waits
            # are made again on the next connection, as get_result's are.
            if run is not None or engine._link().closed:
                raise
    first: str = workflow_ids[index]
    if run is not None:
        yield record_call(run, _record_body(run, fid, WAIT_FIRST_STEP, started, first, None, engine.serializer))
    return first


H = TypeVar("H", "WorkflowHandle[Any]", "WorkflowHandleAsync[Any]")


def _first_candidates(call: str, handles: List[H], recorded: bool) -> Tuple[Dict[str, H], Optional[WorkflowRun]]:
    """wait_first's handles by workflow id (refusing what DBOS Python
    refuses), and the run that records the wait: the calling workflow's when
    ``recorded`` and the caller is workflow code."""
    if not handles:
        raise ValueError("handles must not be empty")
    by_id = {h.workflow_id: h for h in handles}
    if len(by_id) != len(handles):
        raise ValueError("handles must not contain duplicate workflow IDs")
    for h in handles:
        check_no_shard_key(getattr(h, "shard_key", None))
    ctx = _current.get()
    run = ctx.run if recorded and ctx is not None and ctx.step_id is None else None
    return by_id, run


def wait_first(engine: Engine, call: str, handles: List[H], *, recorded: bool) -> H:
    """The handle of the first of ``handles`` whose workflow ends."""
    by_id, run = _first_candidates(call, handles, recorded)
    return by_id[drive(engine, _wait_first_op(engine, list(by_id), run))]


async def wait_first_async(engine: Engine, call: str, handles: List[H], *, recorded: bool) -> H:
    by_id, run = _first_candidates(call, handles, recorded)
    return by_id[await drive_async(engine, _wait_first_op(engine, list(by_id), run))]


def child_outcome_body(
    engine: Engine, parent: WorkflowRun, fid: int, child_id: str, started: int, output: Any, error: Optional[BaseException]
) -> Dict[str, Any]:
    """The DBOS.getResult step of a child called directly and run here: its
    outcome as it returned, in the default format (as DBOS Python records
    it)."""
    return _record_body(parent, fid, GET_RESULT_STEP, started, output, error, engine.serializer, child_id)


# ---------------------------------------------------------------------------
# Handles


_STOPS = (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError)


def live_engine(engine: Engine) -> Engine:
    """The engine a handle acts through: its own, or once its DBOS was
    destroyed and another made, the newest, since DBOS Python's handles
    keep working across DBOS.destroy() and a new launch."""
    while engine.successor is not None:
        engine = engine.successor
    return engine


class WorkflowHandle(Generic[R]):
    """A handle to a workflow execution: its id, its status and its result
    (waited for)."""

    def __init__(self, engine: Engine, workflow_id: str, future: "Optional[Future[R]]" = None):
        self.workflow_id = workflow_id
        self.shard_key: Optional[str] = None
        self._made_by = engine
        self._future = future

    @property
    def _engine(self) -> Engine:
        return live_engine(self._made_by)

    def get_workflow_id(self) -> str:
        return self.workflow_id

    def _wait(self) -> R:
        if self._future is not None:
            try:
                return self._future.result()
            except _STOPS:
                pass  # the run stopped here: the recorded outcome decides
        return cast(R, drive(self._engine, outcome_op(self._engine, self.workflow_id)))

    def get_result(self, *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL) -> R:
        """Wait for the workflow and return its output, or raise its error.
        (The agent wakes the wait when the outcome is written, so
        ``polling_interval_sec`` is accepted for compatibility only.)"""
        ctx = current_ctx()
        if ctx is None or ctx.step_id is not None:
            return self._wait()
        return cast(R, drive(self._engine, get_result_op(self._engine, ctx, self.workflow_id)))

    def get_status(self) -> WorkflowStatus:
        return drive(self._engine, handle_status_op(self._engine.serializer, self.workflow_id))


class WorkflowHandleAsync(Generic[R]):
    """The asyncio twin of ``WorkflowHandle``."""

    def __init__(self, engine: Engine, workflow_id: str, task: "Optional[asyncio.Future[R]]" = None):
        self.workflow_id = workflow_id
        self.shard_key: Optional[str] = None
        self._made_by = engine
        self._task = task

    @property
    def _engine(self) -> Engine:
        return live_engine(self._made_by)

    def get_workflow_id(self) -> str:
        return self.workflow_id

    async def _wait(self) -> R:
        if self._task is not None:
            try:
                return await asyncio.shield(self._task)
            except _STOPS:
                pass
        return cast(R, await drive_async(self._engine, outcome_op(self._engine, self.workflow_id)))

    async def get_result(self, *, polling_interval_sec: float = DEFAULT_POLLING_INTERVAL) -> R:
        ctx = current_ctx()
        if ctx is None or ctx.step_id is not None:
            return await self._wait()
        return cast(R, await drive_async(self._engine, get_result_op(self._engine, ctx, self.workflow_id)))

    async def get_status(self) -> WorkflowStatus:
        return await drive_async(self._engine, handle_status_op(self._engine.serializer, self.workflow_id))
