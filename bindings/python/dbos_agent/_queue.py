"""``Queue``: a queue of workflows with DBOS Python's limits, declared in
this process (see ``_registry``), and its validation."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, TypedDict, TypeVar, cast

from ._core import Engine, WorkflowHandle, WorkflowHandleAsync, drive
from ._error import DBOSException, DBOSNotSupportedError
from ._queue_config import QueueConfig, _validate_queue
from ._registry import _dbos, _declare_queue, _started
from . import _scheduling as sched

R = TypeVar("R")


class QueueRateLimit(TypedDict):
    """At most ``limit`` workflows of a queue start per ``period`` seconds."""

    limit: int
    period: float


_CONFLICT_POLICIES = ("update_if_latest_version", "always_update", "never_update")

# DBOS 3.4's proof that DBOS itself builds a Queue (from register_queue,
# retrieve_queue, list_queues, a client's): a Queue so built is a value
# object of a stored configuration, declared nowhere and served by no one.
# Module-private, so no other token passes.
_INTERNAL_QUEUE_CONSTRUCTION = object()

_CONSTRUCTED_DIRECTLY = (
    "Queue objects cannot be constructed directly. Declare a queue "
    "with DBOS.register_queue(name, ...) and look one up with "
    "DBOS.retrieve_queue(name)."
)


def _legacy_priority_enabled(call: str, legacy: Dict[str, Any]) -> bool:
    """register_queue's ``priority_enabled`` (default True, what DBOS 3.4
    stores); any other unknown keyword is Python's own TypeError."""
    enabled = legacy.pop("priority_enabled", True)
    if legacy:
        raise TypeError(f"{call}() got an unexpected keyword argument '{next(iter(legacy))}'")
    return bool(enabled)


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
    this process serves every queue it declares.

    DBOS 3.4 builds its queues itself, with a private ``token``, as value
    objects of a stored configuration (``database_backed_queue``: their
    getters read the row, their setters write it; ``client_system_database``:
    the client connection they do it through; ``application_name``: the
    row's owner). So does this binding; any other token is DBOS's error."""

    # The application that registered the queue, as the agent reports it
    # (DBOS's Queue.application_name); None for a queue declared here.
    application_name: Optional[str] = None

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
        database_backed_queue: bool = False,
        client_system_database: Optional[Engine] = None,
        application_name: Optional[str] = None,
        token: object = None,
        **unsupported: Any,
    ) -> None:
        given = sorted(k for k, v in unsupported.items() if v not in (None, False))
        if given:
            raise DBOSNotSupportedError("Queue(" + ", ".join(given) + "=...)")
        internal = token is _INTERNAL_QUEUE_CONSTRUCTION
        # DBOS 3.4 refuses every construction but its own; the binding keeps
        # DBOS 2's declaration in code (no token), but not with the options
        # only DBOS's own construction takes, nor with a guessed token.
        if not internal and (
            token is not None or database_backed_queue or client_system_database is not None
            or application_name is not None
        ):
            raise DBOSException(_CONSTRUCTED_DIRECTLY)
        fields: Dict[str, Any] = dict(
            worker_concurrency=worker_concurrency, global_concurrency=global_concurrency,
            priority_enabled=priority_enabled, partition_queue=partition_queue,
            partition_concurrency=partition_concurrency, partition_worker_concurrency=partition_worker_concurrency,
            partition_limiter=partition_limiter, polling_interval_sec=polling_interval_sec,
        )
        if not internal:
            self._configure(name, concurrency, limiter, **fields)
            _declare_queue(self, "update_if_latest_version")
            return
        # A value object, as DBOS builds it: no checks (the row it mirrors
        # was checked when written), declared nowhere.
        self._configure(name, concurrency, limiter, validate=False, **fields)
        self.database_backed_queue = bool(database_backed_queue)
        self.application_name = application_name
        self._client_system_database = client_system_database
        self._explicit = False
        self._on_conflict = "never_update"

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
        validate: bool = True,
    ) -> None:
        """A queue's configuration, checked with DBOS's rules (ValueError)
        unless ``validate`` is off (a value object of a stored row), for a
        declaration (register_queue builds its queue with it)."""
        if validate:
            _validate_queue(
                name=name, concurrency=concurrency, global_concurrency=global_concurrency,
                worker_concurrency=worker_concurrency, limiter=limiter, partition_concurrency=partition_concurrency,
                partition_worker_concurrency=partition_worker_concurrency, partition_limiter=partition_limiter,
                polling_interval_sec=polling_interval_sec,
            )
        # DBOS 3.4's flag: the queue's configuration lives in the queues
        # table (register_queue, or read from it), not only in this code.
        self.database_backed_queue = False
        self.application_name = None
        self._client_system_database = None
        self.name = name
        self._concurrency = concurrency if global_concurrency is None else global_concurrency
        self._worker_concurrency = worker_concurrency
        self._limiter = limiter
        self._priority_enabled = priority_enabled
        self._partition_concurrency = partition_concurrency
        self._partition_worker_concurrency = partition_worker_concurrency
        self._partition_limiter = partition_limiter
        self._partition_queue = partition_queue or self._has_partition_limits()
        self._polling_interval_sec = float(polling_interval_sec) if polling_interval_sec is not None else 1.0
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
    def _from_info(cls, info: Dict[str, Any], client: Optional[Engine] = None) -> "Queue":
        """A queue as the agent reports it (not declared in this process),
        built as DBOS builds a queue read from the database; ``client``: the
        DBOSClient connection its getters and setters go through."""
        return cls(
            info["name"],
            worker_concurrency=info.get("worker_concurrency"),
            global_concurrency=info.get("concurrency"),
            limiter=_limiter_of(info.get("rate_limit_max"), info.get("rate_limit_period_sec")),
            priority_enabled=bool(info.get("priority_enabled")),
            partition_queue=bool(info.get("partition_queue")),
            partition_concurrency=info.get("partition_concurrency"),
            partition_worker_concurrency=info.get("partition_worker_concurrency"),
            partition_limiter=_limiter_of(info.get("partition_rate_limit_max"), info.get("partition_rate_limit_period_sec")),
            polling_interval_sec=info.get("polling_interval_sec") or None,
            database_backed_queue=bool(info.get("registered", True)),
            client_system_database=client,
            application_name=info.get("application_name") or None,
            token=_INTERNAL_QUEUE_CONSTRUCTION,
        )

    # DBOS Python's view of the configuration: a database-backed queue's
    # getters read the stored row afresh (DBOS's), the others the declaration.

    @property
    def concurrency(self) -> Optional[int]:
        """Deprecated in DBOS; use global_concurrency."""
        return self._fresh("Queue.concurrency", "Queue.get_concurrency_async")._concurrency

    @property
    def global_concurrency(self) -> Optional[int]:
        return self._fresh("Queue.global_concurrency", "Queue.get_global_concurrency_async")._concurrency

    @property
    def worker_concurrency(self) -> Optional[int]:
        return self._fresh("Queue.worker_concurrency", "Queue.get_worker_concurrency_async")._worker_concurrency

    @property
    def limiter(self) -> "Optional[QueueRateLimit]":
        return self._fresh("Queue.limiter", "Queue.get_limiter_async")._limiter

    @property
    def priority_enabled(self) -> bool:
        return self._priority_enabled

    @property
    def partition_queue(self) -> bool:
        return self._partition_queue

    @property
    def partition_concurrency(self) -> Optional[int]:
        return self._fresh("Queue.partition_concurrency", "Queue.get_partition_concurrency_async")._partition_concurrency

    @property
    def partition_worker_concurrency(self) -> Optional[int]:
        fresh = self._fresh("Queue.partition_worker_concurrency", "Queue.get_partition_worker_concurrency_async")
        return fresh._partition_worker_concurrency

    @property
    def partition_limiter(self) -> "Optional[QueueRateLimit]":
        return self._fresh("Queue.partition_limiter", "Queue.get_partition_limiter_async")._partition_limiter

    @property
    def polling_interval_sec(self) -> float:
        return self._fresh("Queue.polling_interval_sec", "Queue.get_polling_interval_sec_async")._polling_interval_sec

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
        info = drive(engine, sched.get_queue(self.name))
        if info is None or not info.get("registered"):
            return full
        if self._on_conflict == "never_update":
            return {"name": self.name}
        versions = drive(engine, sched.list_versions())
        if not app_version or not versions or versions[0]["version_name"] == app_version:
            return full
        return {"name": self.name}

    # Enqueueing.

    def _require_dbos_bound(self) -> None:
        """A client's queue enqueues nothing itself, as in DBOS."""
        if self._client_system_database is not None:
            raise DBOSException(
                f"Cannot enqueue on queue {self.name} from a client-bound Queue "
                "object. Use DBOSClient.enqueue instead."
            )

    def enqueue(self, func: Callable[..., R], *args: Any, **kwargs: Any) -> "WorkflowHandle[R]":
        """Enqueue a workflow; a worker serving this queue runs it when the
        queue's limits allow. ``SetEnqueueOptions`` and ``SetWorkflowTimeout``
        around the call apply to it."""
        self._require_dbos_bound()
        reg, args = _started(func, args)
        return cast("WorkflowHandle[R]", _dbos()._start(reg, args, kwargs, self.name, f"enqueueing workflow {reg.name}"))

    async def enqueue_async(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> "WorkflowHandleAsync[Any]":
        self._require_dbos_bound()
        reg, args = _started(func, args)
        return await _dbos()._start_async(reg, args, kwargs, self.name, f"enqueueing workflow {reg.name}")
