"""The context of the calling code: the workflow run (and step) it
executes in, and what ``SetWorkflowID``, ``SetWorkflowTimeout``,
``SetWorkflowAttributes`` and ``SetEnqueueOptions`` set for the next start
or enqueue. Context variables, so each thread and each asyncio task sees
its own."""

from __future__ import annotations

import contextvars
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Tuple

from ._error import DBOSException, DBOSNotSupportedError

if TYPE_CHECKING:
    from ._core import Engine, StepConfig, WorkflowRun


class _Ctx:
    """What the current thread or task is executing: a run, and inside it
    possibly a step (then ``step_id`` is its function id, and for a step
    with retries ``attempt`` its current attempt, from 0, of
    ``max_attempts``: DBOS.step_status)."""

    __slots__ = ("run", "step_id", "engine", "attempt", "max_attempts")

    def __init__(self, engine: "Engine", run: WorkflowRun, step_id: Optional[int] = None):
        self.engine = engine
        self.run = run
        self.step_id = step_id
        self.attempt: Optional[int] = None
        self.max_attempts: Optional[int] = None

    def set_attempt(self, opts: "StepConfig", attempt: int) -> None:
        if opts.retries_allowed:
            self.attempt, self.max_attempts = attempt, opts.max_attempts


_current: "contextvars.ContextVar[Optional[_Ctx]]" = contextvars.ContextVar("dbos_agent_ctx", default=None)


def current_ctx() -> Optional[_Ctx]:
    return _current.get()


class _AssignedID:
    __slots__ = ("workflow_id", "reuse_policy", "used")

    def __init__(self, workflow_id: str, reuse_policy: Optional[str] = None):
        self.workflow_id = workflow_id
        self.reuse_policy = reuse_policy
        self.used = False


_assigned_id: "contextvars.ContextVar[Optional[_AssignedID]]" = contextvars.ContextVar(
    "dbos_agent_assigned_id", default=None
)


class _Setting:
    """What the ``Set...`` blocks share: one context variable set for the
    length of a ``with`` block. As in DBOS, an instance is in one block at a
    time (re-entering it is an error, reusing it after is fine), and its
    exit may run in another ``contextvars`` Context than its entry (a
    threadpool-run generator dependency's): the value before the block is
    restored there."""

    _token: "Optional[contextvars.Token[Any]]" = None
    _previous: Any = None

    def _enter(self, var: "contextvars.ContextVar[Any]", value: Any) -> None:
        if self._token is not None:
            raise DBOSException(f"This {type(self).__name__} is already in use; create a new one for each with block.")
        self._previous = var.get()
        self._token = var.set(value)

    def _exit(self, var: "contextvars.ContextVar[Any]") -> None:
        token, self._token = self._token, None
        if token is None:
            return
        try:
            var.reset(token)
        except ValueError:  # created in another Context
            var.set(self._previous)


class SetWorkflowID(_Setting):
    """Set the id of the next workflow started in the block (only the first
    one takes it), as in DBOS Python::

        with SetWorkflowID("order-42"):
            handle = DBOS.start_workflow(process_order, 42)
    """

    def __init__(self, wfid: str, *, workflow_id_reuse_policy: Optional[str] = None) -> None:
        validate_workflow_id(wfid)
        validate_workflow_id_reuse_policy(workflow_id_reuse_policy)
        self.wfid = wfid
        self.workflow_id_reuse_policy = workflow_id_reuse_policy

    def __enter__(self) -> "SetWorkflowID":
        self._enter(_assigned_id, _AssignedID(self.wfid, self.workflow_id_reuse_policy))
        return self

    def __exit__(self, *exc: Any) -> None:
        self._exit(_assigned_id)


# Outside any SetWorkflowTimeout block: a child keeps its parent's deadline.
_NO_TIMEOUT_BLOCK = -1

_workflow_timeout: "contextvars.ContextVar[Optional[int]]" = contextvars.ContextVar(
    "dbos_agent_workflow_timeout", default=_NO_TIMEOUT_BLOCK
)


class SetWorkflowTimeout(_Setting):
    """Set the timeout (in seconds) of the workflows started, called or
    enqueued in the block, as in DBOS Python::

        with SetWorkflowTimeout(10):
            handle = queue.enqueue(process_order, 42)

    A started or called workflow's deadline is now plus the timeout; an
    enqueued one's is set when it is dequeued. Past its deadline a workflow is
    cancelled (by whichever agent sweeps first, on the database clock): it
    stops at its next step, and waiting for it raises
    ``DBOSAwaitedWorkflowCancelledError``. ``None`` clears an enclosing
    timeout."""

    def __init__(self, workflow_timeout_sec: Optional[float]) -> None:
        if workflow_timeout_sec and not workflow_timeout_sec > 0:
            raise Exception(f"Invalid workflow timeout {workflow_timeout_sec}. Timeouts must be positive.")
        self.workflow_timeout_ms: Optional[int] = (
            int(workflow_timeout_sec * 1000) if workflow_timeout_sec is not None else None
        )

    def __enter__(self) -> "SetWorkflowTimeout":
        self._enter(_workflow_timeout, self.workflow_timeout_ms)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._exit(_workflow_timeout)


_workflow_attributes: "contextvars.ContextVar[Optional[Dict[str, Any]]]" = contextvars.ContextVar(
    "dbos_agent_workflow_attributes", default=None
)


def validate_workflow_attributes(attributes: Optional[Dict[str, Any]]) -> Optional[str]:
    """DBOS Python's check of workflow attributes (a JSON-serializable dict,
    or None); returns their JSON text."""
    if attributes is None:
        return None
    if not isinstance(attributes, dict):
        raise DBOSException(f"Invalid workflow attributes {attributes}. Attributes must be a dict.")
    try:
        return json.dumps(attributes)
    except (TypeError, ValueError) as e:
        raise DBOSException(f"Invalid workflow attributes {attributes}. Attributes must be JSON-serializable.") from e


class SetWorkflowAttributes(_Setting):
    """Attach attributes (a JSON-serializable dict) to the workflows started
    or enqueued in the block, as in DBOS Python::

        with SetWorkflowAttributes({"customer": "acme"}):
            handle = queue.enqueue(process_order, 42)

    They are stored with the workflow's status (``WorkflowStatus.attributes``)
    and are not inherited by its children; ``DBOS.update_workflow_attributes``
    changes them later."""

    def __init__(self, attributes: Optional[Dict[str, Any]]) -> None:
        validate_workflow_attributes(attributes)
        self.attributes = dict(attributes) if attributes is not None else None

    def __enter__(self) -> "SetWorkflowAttributes":
        self._enter(_workflow_attributes, self.attributes)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._exit(_workflow_attributes)


def current_attributes() -> Optional[Dict[str, Any]]:
    """The attributes SetWorkflowAttributes set for the next workflows."""
    return _workflow_attributes.get()


def current_timeout_ms() -> Optional[int]:
    """The timeout SetWorkflowTimeout set for the next workflow, if any."""
    timeout = _workflow_timeout.get()
    return timeout if timeout is not None and timeout > 0 else None


def in_timeout_block() -> bool:
    """Whether a SetWorkflowTimeout block encloses the caller: its workflows
    take that timeout (None: none) instead of their parent's deadline, as
    DBOS's ignore_propagated_deadline has it."""
    return _workflow_timeout.get() != _NO_TIMEOUT_BLOCK


class StartOptionsCleared:
    """For a step's body: the Set... blocks of the workflow around it
    (SetWorkflowID, SetWorkflowTimeout, SetWorkflowAttributes,
    SetEnqueueOptions) are for the workflows it starts, not for the step, as
    in DBOS Python; a workflow a step starts (or forks) takes none of them.
    ``close`` puts them back."""

    _VARS: "Tuple[contextvars.ContextVar[Any], ...]" = ()

    def __init__(self) -> None:
        # On every step: a variable already None is left alone (a set costs
        # a new context mapping), so a workflow outside any block pays gets.
        self._tokens = [(var, var.set(None)) for var in self._VARS if var.get() is not None]

    def close(self) -> None:
        for var, token in reversed(self._tokens):
            var.reset(token)


def take_assigned_id() -> Optional[str]:
    a = take_assigned()
    return a.workflow_id if a is not None else None


def take_assigned() -> Optional[_AssignedID]:
    """The SetWorkflowID id (with its reuse policy) for the workflow being
    started, once: only the first start in the block takes it."""
    a = _assigned_id.get()
    if a is None or a.used:
        return None
    a.used = True
    return a


def validate_workflow_id(workflow_id: Optional[str]) -> None:
    """DBOS's check of a workflow id given by the caller (SetWorkflowID, an
    enqueue's options): not empty, not only whitespace."""
    if not isinstance(workflow_id, str) or not workflow_id.strip():
        raise DBOSException(
            f"Invalid workflow ID {workflow_id!r}: workflow IDs must be non-empty and cannot be only whitespace."
        )


def validate_workflow_id_reuse_policy(policy: Optional[str]) -> None:
    """DBOS's check of a workflow_id_reuse_policy."""
    if policy is not None and policy not in ("return-existing", "reject"):
        raise DBOSException(f"Invalid workflow_id_reuse_policy {policy}. Must be either 'return-existing' or 'reject'.")


# DBOS Python's duplication and id reuse policies.
DuplicationPolicy = Literal["reject", "return-existing"]
WorkflowIDReusePolicy = Literal["return-existing", "reject"]
MIN_PRIORITY = 1
MAX_PRIORITY = 2**31 - 1


@dataclass(slots=True)
class _EnqueueOptions:
    deduplication_id: Optional[str] = None
    priority: Optional[int] = None
    app_version: Optional[str] = None
    queue_partition_key: Optional[str] = None
    delay_until_epoch_ms: Optional[int] = None
    duplication_policy: Optional[str] = None

    def enqueue_only_options(self) -> List[str]:
        """The options set that only an enqueue may carry."""
        return [
            name
            for name, value in (
                ("deduplication_id", self.deduplication_id),
                ("priority", self.priority),
                ("queue_partition_key", self.queue_partition_key),
                ("delay_seconds", self.delay_until_epoch_ms),
            )
            if value is not None
        ]


def validate_priority(priority: Optional[int]) -> None:
    if priority is not None and not (MIN_PRIORITY <= priority <= MAX_PRIORITY):
        raise DBOSException(f"Invalid priority {priority}. Priority must be between {MIN_PRIORITY}~{MAX_PRIORITY}.")


def validate_duplication_policy(policy: Optional[str], queue_name: Optional[str], deduplication_id: Optional[str]) -> None:
    """As DBOS Python: 'return-existing' needs a queue and a deduplication id."""
    if policy is None or policy == "reject":
        return
    if policy != "return-existing":
        raise DBOSException(f"Invalid duplication_policy {policy}. Must be either 'reject' or 'return-existing'.")
    if queue_name is None:
        raise DBOSException(
            "duplication_policy 'return-existing' requires a queue. It is only "
            "supported when enqueueing a workflow onto a queue."
        )
    if deduplication_id is None:
        raise DBOSException("duplication_policy 'return-existing' requires a deduplication_id.")


_enqueue_options: "contextvars.ContextVar[Optional[_EnqueueOptions]]" = contextvars.ContextVar(
    "dbos_agent_enqueue_options", default=None
)
StartOptionsCleared._VARS = (_assigned_id, _workflow_timeout, _workflow_attributes, _enqueue_options)


class SetEnqueueOptions(_Setting):
    """Options for the workflows enqueued in the block, as in DBOS Python:
    ``deduplication_id`` (with ``duplication_policy`` "reject", the default,
    or "return-existing"), ``priority`` (1 is the highest; workflows without
    one come first), ``app_version``, ``queue_partition_key`` (for a
    partitioned queue) and ``delay_seconds`` (the workflow waits DELAYED that
    long, counted from here, before it can be dequeued)."""

    def __init__(
        self,
        *,
        deduplication_id: Optional[str] = None,
        priority: Optional[int] = None,
        app_version: Optional[str] = None,
        queue_partition_key: Optional[str] = None,
        delay_seconds: Optional[float] = None,
        duplication_policy: Optional[DuplicationPolicy] = None,
        **unsupported: Any,
    ) -> None:
        if unsupported:
            raise DBOSNotSupportedError(
                "SetEnqueueOptions(" + ", ".join(sorted(unsupported)) + "=...)"
            )
        if priority is not None and not (MIN_PRIORITY <= priority <= MAX_PRIORITY):
            raise Exception(f"Invalid priority {priority}. Priority must be between {MIN_PRIORITY}~{MAX_PRIORITY}.")
        delay_until = int((time.time() + delay_seconds) * 1000) if delay_seconds is not None else None
        self._opts = _EnqueueOptions(
            deduplication_id, priority, app_version, queue_partition_key, delay_until, duplication_policy
        )

    def __enter__(self) -> "SetEnqueueOptions":
        self._enter(_enqueue_options, self._opts)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._exit(_enqueue_options)
