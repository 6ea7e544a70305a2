"""DBOS Python 3.4's ``DBOSClient.register_queue`` (and ``_async``): the
queue's row written for the client's application, served by no one here.

The agent takes a client's ``register_queues`` as exactly that: it writes
the registration (options update a stored row; a bare name leaves it as it
is) and serves nothing, and the workers serving the queue poll it again
under the new limits. Written once as an op generator, driven by ``drive``
for sync callers and ``drive_async`` for async ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _protocol as proto
from ._core import Call, Engine, Op
from ._error import DBOSException

from ._queue import Queue

if TYPE_CHECKING:
    from ._queue import QueueRateLimit

_ON_CONFLICT = ("always_update", "never_update")


def _registered(queues: Any, name: str) -> Optional[Dict[str, Any]]:
    for info in queues.get("queues") or []:
        if info.get("name") == name and info.get("registered"):
            return dict(info)
    return None


def register_queue_op(
    name: str,
    *,
    application_name: Optional[str],
    global_concurrency: Optional[int],
    partition_concurrency: Optional[int],
    partition_worker_concurrency: Optional[int],
    partition_limiter: "Optional[QueueRateLimit]",
    limiter: "Optional[QueueRateLimit]",
    worker_concurrency: Optional[int],
    polling_interval_sec: float,
    on_conflict: str,
    concurrency: Optional[int],
    client: Optional[Engine] = None,
) -> "Op[Queue]":
    """Validate as DBOS's Queue does, write the row by ``on_conflict``
    ("always_update" overwrites a stored configuration, "never_update"
    keeps it), and return the queue as stored (its getters and setters
    going through ``client``)."""
    q = Queue.__new__(Queue)
    q._configure(  # DBOS's checks (ValueError), as Queue(...) runs them
        name, concurrency, limiter,
        worker_concurrency=worker_concurrency, global_concurrency=global_concurrency,
        priority_enabled=True, partition_queue=False,
        partition_concurrency=partition_concurrency, partition_worker_concurrency=partition_worker_concurrency,
        partition_limiter=partition_limiter, polling_interval_sec=polling_interval_sec,
    )
    if on_conflict not in _ON_CONFLICT:
        raise DBOSException(
            "DBOSClient.register_queue does not support "
            "on_conflict='update_if_latest_version' because clients are "
            "not associated with an application version. Use "
            "'always_update' or 'never_update'."
        )
    registration = q._full_registration()
    if on_conflict == "never_update":
        stored = _registered((yield Call(proto.OP_LIST_QUEUES, {})), name)
        if stored is not None:
            registration = {"name": name}  # a bare name leaves the row as it is
    body: Dict[str, Any] = {"queues": [registration]}
    if application_name:
        body["application_name"] = application_name  # the owner, else the client's application
    yield Call(proto.OP_REGISTER_QUEUES, body)
    stored = _registered((yield Call(proto.OP_LIST_QUEUES, {})), name)
    if stored is None:  # deleted meanwhile by another caller
        raise DBOSException(f"Queue {name} missing from database after upsert")
    queue = Queue._from_info(stored, client)
    if queue.application_name is None:
        queue.application_name = application_name
    if not stored.get("polling_interval_sec"):  # an agent that does not report it
        queue._polling_interval_sec = float(polling_interval_sec)
    return queue
