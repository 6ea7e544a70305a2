"""DBOS Python 3.4's dynamic queue configuration. A database-backed queue
(``queue.database_backed_queue``: from ``register_queue``, ``retrieve_queue``
or ``list_queues``, a worker's or a client's) mirrors a row of the queues
table: its getters read the row afresh, ``Queue.set_*`` (and ``_async``)
change one limit of it, with DBOS's checks and messages, and
``Queue.get_*_async`` read it without blocking a loop. ``Queue`` inherits
them.

A set reads the stored row from the agent, checks the new value against it
as DBOS does, and stores the row with the new value (``always_update``).
Through a client connection (``DBOSClient``'s queues) that only writes the
row; through a worker's, the worker serves the queue from then on, as a DBOS
process serves every queue of its application, and a reconnection stores
the same configuration again."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, cast

from . import _protocol as proto
from . import _registry as d
from . import _scheduling as sched
from ._core import Call, drive
from ._error import DBOSException

if TYPE_CHECKING:
    from ._core import Engine
    from ._queue import QueueRateLimit

logger = logging.getLogger("dbos_agent")


def _warn_sync_call_in_loop(method: str, async_alternative: str) -> None:
    """DBOS's warning for a blocking read or write of the system database
    made on a thread that runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    logger.warning(
        f"Synchronous '{method}' was called from a running asyncio event loop. This blocks the loop on a "
        f"database round-trip. Use '{async_alternative}' instead."
    )


class QueueConfig:
    name: str
    database_backed_queue: bool
    application_name: Optional[str]
    _client_system_database: "Optional[Engine]"
    _concurrency: Optional[int]
    _worker_concurrency: Optional[int]
    _limiter: "Optional[QueueRateLimit]"
    _priority_enabled: bool
    _partition_queue: bool
    _partition_concurrency: Optional[int]
    _partition_worker_concurrency: Optional[int]
    _partition_limiter: "Optional[QueueRateLimit]"
    _polling_interval_sec: float
    _explicit: bool
    _registered: Optional[Dict[str, Any]]

    def _has_partition_limits(self, **overrides: Any) -> bool:
        """Whether any per-partition limit is set, with these fields taking
        these values (DBOS derives the row's partition_queue from it)."""
        values: Dict[str, Any] = {
            "_partition_concurrency": self._partition_concurrency,
            "_partition_worker_concurrency": self._partition_worker_concurrency,
            "_partition_limiter": self._partition_limiter,
        }
        values.update(overrides)
        return any(v is not None for v in values.values())

    # -- reading the stored configuration

    def _engine(self, required: bool) -> "Optional[Engine]":
        """The connection this queue reads and writes its row through: its
        client's, else the process's launched DBOS (None before launch,
        unless ``required``: DBOS's "not launched" error)."""
        if self._client_system_database is not None:
            return self._client_system_database

        if required:
            return d._dbos()._engine
        inst = d._instance
        return inst._engine if inst is not None and inst._launched else None

    def _refresh(self) -> None:
        """Every cached field from the stored row (DBOS's _refresh_fields);
        a queue without a row is DBOS's error."""

        info = drive(self._engine(required=True), sched.get_queue(self.name))
        if info is None or not info.get("registered"):
            raise DBOSException(f"Queue {self.name} not found in the database")
        latest = cast(Any, type(self))._from_info(info)  # self is a Queue
        self._concurrency = latest._concurrency
        self._worker_concurrency = latest._worker_concurrency
        self._limiter = latest._limiter
        self._partition_concurrency = latest._partition_concurrency
        self._partition_worker_concurrency = latest._partition_worker_concurrency
        self._partition_limiter = latest._partition_limiter
        self._partition_queue = latest._partition_queue
        self._priority_enabled = latest._priority_enabled
        if info.get("polling_interval_sec"):
            self._polling_interval_sec = float(info["polling_interval_sec"])
        if info.get("application_name"):
            self.application_name = info["application_name"]

    def _fresh(self, method: str, async_alternative: str) -> "QueueConfig":
        """Self, its fields read afresh first when it is database-backed and
        there is a connection to read through (a DBOS getter's behaviour)."""
        if self.database_backed_queue and self._engine(required=False) is not None:
            _warn_sync_call_in_loop(method, async_alternative)
            self._refresh()
        return self

    async def _read_async(self, field: str) -> Any:
        if self.database_backed_queue and self._engine(required=False) is not None:
            await asyncio.to_thread(self._refresh)
        return getattr(self, field)

    async def get_concurrency_async(self) -> Optional[int]:
        """Deprecated in DBOS; use get_global_concurrency_async."""
        return await self._read_async("_concurrency")  # type: ignore[no-any-return]

    async def get_global_concurrency_async(self) -> Optional[int]:
        return await self._read_async("_concurrency")  # type: ignore[no-any-return]

    async def get_worker_concurrency_async(self) -> Optional[int]:
        return await self._read_async("_worker_concurrency")  # type: ignore[no-any-return]

    async def get_limiter_async(self) -> "Optional[QueueRateLimit]":
        return await self._read_async("_limiter")  # type: ignore[no-any-return]

    async def get_partition_concurrency_async(self) -> Optional[int]:
        return await self._read_async("_partition_concurrency")  # type: ignore[no-any-return]

    async def get_partition_worker_concurrency_async(self) -> Optional[int]:
        return await self._read_async("_partition_worker_concurrency")  # type: ignore[no-any-return]

    async def get_partition_limiter_async(self) -> "Optional[QueueRateLimit]":
        return await self._read_async("_partition_limiter")  # type: ignore[no-any-return]

    async def get_polling_interval_sec_async(self) -> float:
        return await self._read_async("_polling_interval_sec")  # type: ignore[no-any-return]

    # -- changing one limit, with DBOS's checks in DBOS's order

    def _check_set(self, field: str, value: Any) -> None:
        """What DBOS checks of the value alone, before it reads the row."""
        if field in ("partition_concurrency", "partition_worker_concurrency") and value is not None and value < 1:
            raise ValueError(f"{field} must be at least 1")
        if field in ("limiter", "partition_limiter") and value is not None and (
            value.get("limit") is None or value.get("period") is None
        ):
            raise ValueError(f"{field} must specify both 'limit' and 'period'")
        if field == "polling_interval_sec" and value <= 0.0:
            raise ValueError("polling_interval_sec must be positive")

    def _check_against_stored(self, field: str, value: Any) -> None:
        """DBOS's checks of a new limit against the others as stored."""
        if value is None:
            return
        concurrency, worker = self._concurrency, self._worker_concurrency
        partition, partition_worker = self._partition_concurrency, self._partition_worker_concurrency
        if field == "concurrency":
            if worker is not None and worker > value:
                raise ValueError("worker_concurrency must be less than or equal to concurrency")
            if partition is not None and partition > value:
                raise ValueError("partition_concurrency must be less than or equal to global_concurrency")
            if partition_worker is not None and partition_worker > value:
                raise ValueError("partition_worker_concurrency must be less than or equal to concurrency")
        elif field == "worker_concurrency":
            if concurrency is not None and value > concurrency:
                raise ValueError("worker_concurrency must be less than or equal to concurrency")
            if partition_worker is not None and partition_worker > value:
                raise ValueError("partition_worker_concurrency must be less than or equal to worker_concurrency")
        elif field == "partition_concurrency":
            if concurrency is not None and value > concurrency:
                raise ValueError("partition_concurrency must be less than or equal to global_concurrency")
            if partition_worker is not None and partition_worker > value:
                raise ValueError(
                    "partition_concurrency must be greater than or equal to partition_worker_concurrency"
                )
        elif field == "partition_worker_concurrency":
            if partition is not None and value > partition:
                raise ValueError("partition_worker_concurrency must be less than or equal to partition_concurrency")
            if worker is not None and value > worker:
                raise ValueError("partition_worker_concurrency must be less than or equal to worker_concurrency")
            if concurrency is not None and value > concurrency:
                raise ValueError("partition_worker_concurrency must be less than or equal to concurrency")

    def _set(self, call: str, field: str, value: Any) -> None:
        if not self.database_backed_queue:
            raise DBOSException(
                f"Cannot configure queue {self.name}: dynamic configuration is "
                "only supported for queues registered via DBOS.register_queue."
            )
        self._check_set(field, value)
        _warn_sync_call_in_loop(call, call + "_async")
        self._refresh()
        self._check_against_stored(field, value)
        setattr(self, "_" + field, float(value) if field == "polling_interval_sec" else value)
        if field.startswith("partition_"):
            # The legacy column other SDKs still read, kept in step with the limits.
            self._partition_queue = self._has_partition_limits()
        self._explicit = True
        self._registered = None  # the next registration carries the new limits
        self._store()

    def _store(self) -> None:
        """Write this configuration as the queue's row: through a client, a
        registration that serves nothing; through this process's worker
        connection, the queue declared here (always_update), so a
        reconnection stores it again."""

        client = self._client_system_database
        if client is None:
            d._declare_queue(self, "always_update")  # type: ignore[arg-type]  # self is a Queue
            return
        body: Dict[str, Any] = {"queues": [cast(Any, self)._full_registration()]}
        if self.application_name:
            body["application_name"] = self.application_name

        def write() -> Any:
            yield Call(proto.OP_REGISTER_QUEUES, body)

        drive(client, write())

    def _setter(call: str, field: str) -> Callable[["QueueConfig", Any], None]:  # type: ignore[misc]
        def set_value(self: "QueueConfig", value: Any) -> None:
            self._set(f"Queue.{call}", field, value)

        set_value.__name__ = call
        set_value.__doc__ = f"Store the queue's {field} (None removes the limit) for every worker and agent."
        return set_value

    def _async_setter(call: str) -> Callable[..., Any]:  # type: ignore[misc]
        async def set_value_async(self: "QueueConfig", value: Any) -> None:
            await asyncio.to_thread(getattr(self, call), value)

        set_value_async.__name__ = call + "_async"
        return set_value_async

    set_concurrency = _setter("set_concurrency", "concurrency")
    set_global_concurrency = _setter("set_global_concurrency", "concurrency")
    set_worker_concurrency = _setter("set_worker_concurrency", "worker_concurrency")
    set_limiter = _setter("set_limiter", "limiter")
    set_partition_concurrency = _setter("set_partition_concurrency", "partition_concurrency")
    set_partition_worker_concurrency = _setter("set_partition_worker_concurrency", "partition_worker_concurrency")
    set_partition_limiter = _setter("set_partition_limiter", "partition_limiter")
    set_polling_interval_sec = _setter("set_polling_interval_sec", "polling_interval_sec")
    set_concurrency_async = _async_setter("set_concurrency")
    set_global_concurrency_async = _async_setter("set_global_concurrency")
    set_worker_concurrency_async = _async_setter("set_worker_concurrency")
    set_limiter_async = _async_setter("set_limiter")
    set_partition_concurrency_async = _async_setter("set_partition_concurrency")
    set_partition_worker_concurrency_async = _async_setter("set_partition_worker_concurrency")
    set_partition_limiter_async = _async_setter("set_partition_limiter")
    set_polling_interval_sec_async = _async_setter("set_polling_interval_sec")
    del _setter, _async_setter


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
