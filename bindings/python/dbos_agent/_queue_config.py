"""DBOS Python 3.4's dynamic queue configuration: ``Queue.set_*`` (and
``_async``) change one limit of a queue, and ``Queue.get_*_async`` read the
stored configuration afresh. ``Queue`` inherits them.

A set reads the queue's stored configuration from the agent, checks the new
value against it with DBOS's rules, and registers the result with the agent
(``always_update``), which stores it for every worker and SDK on the
database. The agent takes a queue's configuration from a worker that serves
the queue, so only a queue this process declared can be configured."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, cast

from ._error import DBOSNotSupportedError

if TYPE_CHECKING:
    from ._queue import QueueRateLimit


class QueueConfig:
    name: str
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

    # -- reading the stored configuration

    def _refresh(self) -> None:
        from . import _registry as d
        from . import _scheduling as sched
        from ._core import drive

        info = drive(d._dbos()._engine, sched.get_queue(self.name))
        if info is None or not info.get("registered"):
            from ._error import DBOSException

            raise DBOSException(f"Queue {self.name} not found in the database")
        latest = cast(Any, type(self))._from_info(info)  # self is a Queue
        self._concurrency = latest._concurrency
        self._worker_concurrency = latest._worker_concurrency
        self._limiter = latest._limiter
        self._partition_concurrency = latest._partition_concurrency
        self._partition_worker_concurrency = latest._partition_worker_concurrency
        self._partition_limiter = latest._partition_limiter
        if info.get("polling_interval_sec"):
            self._polling_interval_sec = float(info["polling_interval_sec"])

    async def _read_async(self, field: str) -> Any:
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

    # -- changing one limit

    def _set(self, call: str, field: str, value: Any) -> None:
        from . import _registry as d

        d._dbos()
        with d._instance_lock:
            served = d._queues.get(self.name) is self
        if not served:
            raise DBOSNotSupportedError(
                f"{call} on a queue this process did not declare",
                "the agent takes a queue's configuration from a worker that serves it; "
                "declare the queue here (Queue(...) or DBOS.register_queue) and configure that object",
            )
        self._refresh()
        fields: Dict[str, Any] = {
            "concurrency": self._concurrency,
            "worker_concurrency": self._worker_concurrency,
            "limiter": self._limiter,
            "partition_concurrency": self._partition_concurrency,
            "partition_worker_concurrency": self._partition_worker_concurrency,
            "partition_limiter": self._partition_limiter,
            "polling_interval_sec": self._polling_interval_sec,
        }
        fields[field] = value
        _validate_queue(name=self.name, global_concurrency=None, **fields)
        setattr(self, "_" + field, value if field != "polling_interval_sec" else float(value))
        self._partition_queue = self._partition_queue or any(
            v is not None
            for v in (self._partition_concurrency, self._partition_worker_concurrency, self._partition_limiter)
        )
        self._explicit = True
        self._registered = None  # the next registration carries the new limits
        d._declare_queue(self, "always_update")  # type: ignore[arg-type]

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
