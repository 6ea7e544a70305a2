"""``DBOS.kafka_consumer``: a confluent-kafka consumer that enqueues one
workflow per message, with DBOS Python 3.4's semantics.

Each message becomes a workflow whose id names the message
(``kafka-unique-id-<topic>-<partition>-<group>-<offset>``), so a message
Kafka delivers again starts no second workflow. Offsets are stored only once
the message's workflow is durably enqueued (the agent's start reply comes
after its row is committed), and auto-commit flushes what was stored: a
consumer killed between the enqueue and the commit gets the messages again
and enqueues nothing new.

``ordering``: "none" (the default) enqueues on ``_dbos_kafka_queue`` or the
caller's ``queue_name``; "partition" and "topic" enqueue on the partitioned
``_dbos_kafka_ordered_queue`` (one workflow at a time per partition key), the
key naming the group and the topic (and the partition). The queues are
declared through the registry, so the agent serves them whenever they are
declared. One thread per consumer, started at launch (or at declaration after
launch), stopped and joined by ``DBOS.destroy``.

confluent-kafka is imported only here, when a consumer is declared or runs
(``dbos-agent[kafka]``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, TypeVar

from . import _registry
from . import _scheduling as sched
from ._context import SetEnqueueOptions, SetWorkflowID
from ._core import WorkflowRegistration, drive
from ._error import DBOSInitializationError
from ._types import KafkaMessage

if TYPE_CHECKING:
    from ._dbos import DBOS
    from ._queue import Queue

logger = logging.getLogger("dbos_agent")

# The queue of ordering="none" consumers that name none of their own.
KAFKA_QUEUE_NAME = "_dbos_kafka_queue"
# The partitioned queue every ordered consumer shares: one workflow at a time
# per partition key, so serial per key and parallel across keys.
KAFKA_ORDERED_QUEUE_NAME = "_dbos_kafka_ordered_queue"
_ORDERINGS = ("none", "partition", "topic")

_MIN_RETRY_WAIT_SEC = 1.0
_MAX_RETRY_WAIT_SEC = 60.0
# How long DBOS.destroy waits for one consumer thread (a consume() call lasts
# at most a second; an enqueue in flight is waited for).
_JOIN_TIMEOUT_SEC = 30.0
# How long a stopped consumer still waits for the enqueue in flight before it
# gives it up (safe either way: nothing is stored, so Kafka delivers again).
_STOP_GRACE_SEC = 5.0
# Unordered messages of one batch are enqueued on this many lanes at once.
# A lane's enqueues go one after another: the agent dequeues an enqueue made
# after another returned after it, however close, so a partition keeps its
# order.
_UNORDERED_LANES = 16

T = TypeVar("T")


@dataclass
class KafkaConsumerRegistration:
    """A declared consumer: what cross-consumer validation compares, and what
    its thread runs."""

    func_name: str
    group_id: str
    topics: List[str]
    ordering: str
    # The caller's queue, or None for an internal one.
    queue_name: Optional[str]
    func: Any = None
    config: Dict[str, Any] = field(default_factory=dict)
    batch_size: int = 250
    consumer_queue: str = KAFKA_QUEUE_NAME


# Every consumer this process declared (kept across DBOS.destroy, dropped
# with destroy_registry, as DBOS keeps its pollers), and the running ones.
_registrations: List[KafkaConsumerRegistration] = []
_running: List[Tuple[threading.Thread, threading.Event]] = []
_lock = threading.Lock()


def safe_group_name(method_name: str, topics: List[str]) -> str:
    """The group id of a consumer configured without one: its function and
    topics, reduced to [a-zA-Z0-9-], at most 255 characters."""
    parts = [re.sub(r"[^a-zA-Z0-9\-]", "", str(p)) for p in [method_name, *topics]]
    return ("dbos-kafka-group-" + "-".join(parts))[:255]


def _describe_kafka_error(err: Any) -> str:
    """A KafkaError as "NAME (code): detail", never raising: librdkafka's
    callback dispatch can leave an exception pending, which makes every C
    accessor raise; catching clears it, so the fallbacks work."""
    try:
        return f"{err.name()} ({err.code()}): {err.str()}"
    except BaseException:
        pass
    try:
        return repr(err)
    except BaseException:
        return "<KafkaError that could not be formatted>"


def _make_error_cb(
    func_name: str, group_id: str, topics: List[str], user_error_cb: Optional[Callable[[Any], None]]
) -> Callable[[Any], None]:
    """librdkafka's error_cb (where connection, DNS and authentication
    failures surface): logged with the consumer's identity, then handed to the
    caller's own callback, whose exceptions are contained (one escaping into
    librdkafka's dispatch corrupts the errors reported after it)."""

    def on_error(err: Any) -> None:
        logger.error(
            f"Kafka consumer {func_name} (group.id {group_id}, topics {', '.join(topics)}) "
            f"error: {_describe_kafka_error(err)}"
        )
        if user_error_cb is not None:
            try:
                user_error_cb(err)
            except Exception as e:
                logger.warning(f"Kafka error_cb for {func_name} failed: {e}")

    return on_error


def _retry_until_success(stop: threading.Event, operation: Callable[[], T], description: str) -> Optional[T]:
    """``operation()``, retried with a doubling wait (1 s to 60 s) until it
    succeeds; None only once ``stop`` is set."""
    wait = _MIN_RETRY_WAIT_SEC
    while not stop.is_set():
        try:
            return operation()
        except Exception as e:
            logger.error(f"Kafka consumer failed to {description}: {e}. Retrying in {wait:.0f}s.")
            if stop.wait(wait):
                return None
            wait = min(wait * 2.0, _MAX_RETRY_WAIT_SEC)
    return None


def _last_message_per_partition(cmsgs: List[Any]) -> List[Any]:
    """The message of highest offset of each (topic, partition): consume()
    keeps each partition's order, so the last one seen."""
    last: Dict[Tuple[str, int], Any] = {}
    for m in cmsgs:
        last[(m.topic(), m.partition())] = m
    return list(last.values())


def _func_name(func: Any) -> str:
    reg = getattr(func, "__dbos_workflow__", None)
    if isinstance(reg, WorkflowRegistration):
        return reg.name
    return str(getattr(func, "__qualname__", getattr(func, "__name__", repr(func))))


def _check_custom_queue(func_name: str, queue_name: str, inst: "DBOS") -> None:
    """A custom queue must not be partitioned: ordering="none" enqueues no
    partition key, and a partitioned queue never dequeues a keyless
    workflow. Checked on the queue declared in this process, else on its
    stored configuration (a queue stored nowhere is allowed; one that cannot
    be read is warned about, as DBOS does)."""
    from ._queue import Queue

    q: "Optional[Queue]" = _registry._queues.get(queue_name)
    if q is None:
        try:
            info = drive(inst._engine, sched.get_queue(queue_name))
        except Exception as e:
            logger.warning(f"Could not check the configuration of Kafka consumer {func_name}'s queue {queue_name}: {e}")
            return
        if info is None or not info.get("registered"):
            return
        q = Queue._from_info(info)
    if q._has_partition_limits():
        raise DBOSInitializationError(
            f"Error: Kafka consumer {func_name}'s queue {queue_name} is a "
            "partitioned queue, which a custom Kafka queue must not be; "
            'use ordering="partition" or "topic" for ordered processing'
        )


def validate_consumers(inst: "DBOS") -> None:
    """At launch, connected: the custom queue of every consumer declared
    before it (its queue may have been declared after the consumer)."""
    for reg in list(_registrations):
        if reg.queue_name is not None:
            _check_custom_queue(reg.func_name, reg.queue_name, inst)


def check_config(config: Dict[str, Any]) -> None:
    """DBOSConfig's kafka_queue_polling_interval_sec, checked as DBOS checks
    it (NaN and infinity too, which a bare comparison lets through)."""
    interval = config.get("kafka_queue_polling_interval_sec")
    if interval is not None and (not math.isfinite(interval) or interval < 0.001):
        raise DBOSInitializationError(
            f"kafka_queue_polling_interval_sec must be a finite number at least 0.001 seconds, got {interval}"
        )


def _internal_queue(name: str, **limits: Any) -> "Queue":
    """Declare (once) one of the internal Kafka queues, through the registry
    like any queue, so the agent serves it from launch or at once after it.
    Its polling interval is DBOSConfig's kafka_queue_polling_interval_sec
    when a DBOS instance is configured."""
    from ._queue import Queue

    existing = _registry._queues.get(name)
    if existing is not None:
        return existing
    inst = _registry._instance
    interval = None if inst is None else inst._config.get("kafka_queue_polling_interval_sec")
    q = Queue.__new__(Queue)
    q._configure(
        name, None, None, worker_concurrency=None, global_concurrency=None, priority_enabled=False,
        partition_queue=False, partition_concurrency=limits.get("partition_concurrency"),
        partition_worker_concurrency=None, partition_limiter=None,
        polling_interval_sec=float(interval) if interval is not None else 1.0,
        validate=False,  # DBOS's own queue: its reserved name is for this
    )
    q.database_backed_queue = True
    # The internal queues' configuration is DBOS's, the same in every version.
    _registry._declare_queue(q, "always_update")
    return q


def kafka_consumer(
    config: Dict[str, Any],
    topics: List[str],
    *,
    ordering: Optional[str] = None,
    batch_size: int = 250,
    queue_name: Optional[str] = None,
) -> Callable[[Any], Any]:
    """``DBOS.kafka_consumer``'s decorator (see the module's doc)."""
    if ordering is None:
        resolved = "none"
    elif ordering in _ORDERINGS:
        resolved = ordering
    else:
        raise DBOSInitializationError(
            f'Error: invalid Kafka ordering "{ordering}": must be "none", "partition", or "topic"'
        )
    if batch_size < 1:
        raise DBOSInitializationError("Error: Kafka batch_size must be positive")
    if queue_name is not None and resolved != "none":
        raise DBOSInitializationError(
            'Error: a custom queue is only supported with ordering="none"; '
            "ordered consumers share an internal partitioned queue"
        )
    try:
        import confluent_kafka  # noqa: F401  (the consumer's client, checked when declared)
    except ImportError as e:
        raise DBOSInitializationError(
            "Error: DBOS.kafka_consumer needs confluent-kafka (pip install 'dbos-agent[kafka]')"
        ) from e

    def decorator(func: Any) -> Any:
        func_name = _func_name(func)
        # Checked before anything is declared, so a refused consumer leaves
        # no trace; one declared before launch is checked at launch.
        inst = _registry._instance
        if inst is not None and inst._launched and queue_name is not None:
            _check_custom_queue(func_name, queue_name, inst)
        cfg = _consumer_config(config, func_name, topics)
        group_id = str(cfg["group.id"])
        with _lock:
            for other in _registrations:
                if other.group_id != group_id:
                    continue
                shared = sorted(set(other.topics) & set(topics))
                if shared:
                    raise DBOSInitializationError(
                        f"Error: Kafka consumers {other.func_name} and {func_name} share "
                        f"group.id {group_id} and topic(s) {shared}, so each message "
                        "would be delivered to only one of them. Use distinct group IDs."
                    )
                logger.warning(
                    f"Kafka consumers {other.func_name} and {func_name} share group.id "
                    f"{group_id} with different topics. This can cause rebalance churn; "
                    "consider using distinct group IDs."
                )
            reg = KafkaConsumerRegistration(
                func_name=func_name, group_id=group_id, topics=list(topics), ordering=resolved,
                queue_name=queue_name, func=func, config=cfg, batch_size=batch_size,
            )
            _registrations.append(reg)
        if resolved == "none":
            reg.consumer_queue = queue_name if queue_name is not None else _internal_queue(KAFKA_QUEUE_NAME).name
        else:
            reg.consumer_queue = _internal_queue(KAFKA_ORDERED_QUEUE_NAME, partition_concurrency=1).name
        inst = _registry._instance
        if inst is not None and inst._launched:
            _start_consumer(inst, reg)
        return func

    return decorator


def _consumer_config(config: Dict[str, Any], func_name: str, topics: List[str]) -> Dict[str, Any]:
    """The caller's configuration (copied, never changed) with what DBOS
    decides: earliest offsets by default, offsets stored by DBOS (after the
    durable enqueue) and flushed by auto-commit, a generated group id when
    none is given, and the error callback chained."""
    cfg = dict(config)
    cfg.setdefault("auto.offset.reset", "earliest")
    if cfg.get("enable.auto.offset.store", True) is not False:
        if cfg.get("enable.auto.offset.store") is True:
            logger.warning(
                "Overriding enable.auto.offset.store=True: DBOS manages Kafka "
                "offset storage to avoid committing past durable workflow state."
            )
        cfg["enable.auto.offset.store"] = False
    if str(cfg.get("enable.auto.commit", True)).strip().lower() in ("false", "0"):
        logger.warning(
            "Overriding enable.auto.commit=False: DBOS relies on Kafka auto-commit "
            "to flush the offsets it stores after durable enqueue."
        )
        cfg["enable.auto.commit"] = True
    if cfg.get("group.id") is None:
        cfg["group.id"] = safe_group_name(func_name, topics)
        logger.warning(f"Consumer group ID not found. Using generated group.id {cfg['group.id']}")
    cfg["error_cb"] = _make_error_cb(func_name, str(cfg["group.id"]), list(topics), cfg.get("error_cb"))
    return cfg


# ----------------------------------------------------------------------
# Lifecycle (DBOS.launch and DBOS.destroy call these)


def start_consumers(inst: "DBOS") -> None:
    """At launch: a thread for every declared consumer."""
    for reg in list(_registrations):
        _start_consumer(inst, reg)


def _start_consumer(inst: "DBOS", reg: KafkaConsumerRegistration) -> None:
    stop = threading.Event()
    thread = threading.Thread(
        target=_consume_loop, args=(inst, reg, stop), name=f"dbos-kafka-{reg.func_name}", daemon=True
    )
    with _lock:
        _running.append((thread, stop))
    thread.start()


def stop_consumers(forget: bool) -> None:
    """At destroy: stop every consumer thread and wait for it (it closes its
    consumer, which commits the offsets it stored); with ``forget``
    (destroy_registry) the declarations go too."""
    with _lock:
        running = list(_running)
        _running.clear()
        if forget:
            _registrations.clear()
    for _, stop in running:
        stop.set()
    for thread, _ in running:
        thread.join(_JOIN_TIMEOUT_SEC)
        if thread.is_alive():
            logger.warning(f"Kafka consumer thread {thread.name} did not stop within {_JOIN_TIMEOUT_SEC:.0f}s")


# ----------------------------------------------------------------------
# The consumer loop


class _Stopped(BaseException):
    """The consumer was stopped while a batch was being enqueued."""


def _message_of(cmsg: Any) -> KafkaMessage:
    return KafkaMessage(
        headers=cmsg.headers(), key=cmsg.key(), latency=cmsg.latency(), leader_epoch=cmsg.leader_epoch(),
        offset=cmsg.offset(), partition=cmsg.partition(), timestamp=cmsg.timestamp(), topic=cmsg.topic(),
        value=cmsg.value(),
    )


def _workflow_id(msg: KafkaMessage, group_id: str) -> str:
    # The deduplication key of a message delivered again: DBOS's format,
    # never to change (rows written by DBOS Python's consumers match it).
    return f"kafka-unique-id-{msg.topic}-{msg.partition}-{group_id}-{msg.offset}"


def _partition_key(msg: KafkaMessage, group_id: str, ordering: str) -> Optional[str]:
    if ordering == "partition":
        return f"{group_id}:{msg.topic}:{msg.partition}"
    if ordering == "topic":
        return f"{group_id}:{msg.topic}"
    return None


_Planned = Tuple[KafkaMessage, str, Optional[str]]


def _plan(reg: KafkaConsumerRegistration, cmsgs: List[Any]) -> List[_Planned]:
    """Each message's workflow input, id and partition key; a message that
    cannot be turned into one (deterministic, so retrying would wedge the
    consumer), or a consumer whose function is no workflow, is dropped with
    an error."""
    planned: List[_Planned] = []
    try:
        _registry._registration_of(reg.func)
    except Exception as e:
        logger.error(f"Dropping {len(cmsgs)} Kafka messages of consumer {reg.func_name}: {e}")
        return planned
    for cmsg in cmsgs:
        try:
            msg = _message_of(cmsg)
            planned.append((msg, _workflow_id(msg, reg.group_id), _partition_key(msg, reg.group_id, reg.ordering)))
        except Exception as e:
            logger.error(f"Dropping unprocessable Kafka message {cmsg.topic()}[{cmsg.partition()}]@{cmsg.offset()}: {e}")
    return planned


def _lanes(planned: List[_Planned]) -> List[List[_Planned]]:
    """Lanes enqueued at once: one per partition key (in offset order), the
    unordered messages spread over a few."""
    keyed: Dict[str, List[_Planned]] = {}
    loose: List[List[_Planned]] = [[] for _ in range(_UNORDERED_LANES)]
    n = 0
    for p in planned:
        if p[2] is None:
            loose[n % _UNORDERED_LANES].append(p)
            n += 1
        else:
            keyed.setdefault(p[2], []).append(p)
    return list(keyed.values()) + [lane for lane in loose if lane]


async def _enqueue_lane(inst: "DBOS", wf: WorkflowRegistration, queue_name: str, lane: List[_Planned]) -> None:
    what = f"enqueueing workflow {wf.name}"
    for msg, wid, key in lane:
        with SetWorkflowID(wid):
            if key is None:
                await inst._start_async(wf, (msg,), {}, queue_name, what)
                continue
            with SetEnqueueOptions(queue_partition_key=key):
                await inst._start_async(wf, (msg,), {}, queue_name, what)


async def _enqueue_all(inst: "DBOS", wf: WorkflowRegistration, queue_name: str, planned: List[_Planned]) -> None:
    await asyncio.gather(*(_enqueue_lane(inst, wf, queue_name, lane) for lane in _lanes(planned)))


def _enqueue_batch(inst: "DBOS", reg: KafkaConsumerRegistration, planned: List[_Planned], stop: threading.Event) -> bool:
    """Enqueue a batch's workflows through the start machinery, on the
    instance's event loop, returning once every row is committed. An id
    already taken (a message delivered again) starts nothing new, so a
    retried batch is harmless. True once durable; raises _Stopped if
    stopped first."""
    wf = _registry._registration_of(reg.func)
    loop = inst._engine.background_loop
    if loop is None:
        raise RuntimeError("DBOS is not launched")
    fut = asyncio.run_coroutine_threadsafe(_enqueue_all(inst, wf, reg.consumer_queue, planned), loop)
    stopped_at: Optional[float] = None
    while True:
        try:
            fut.result(timeout=0.5)
            return True
        except concurrent.futures.TimeoutError:
            if not stop.is_set():
                continue
            now = time.monotonic()
            stopped_at = now if stopped_at is None else stopped_at
            if now - stopped_at >= _STOP_GRACE_SEC or not inst._launched:
                fut.cancel()
                raise _Stopped() from None


def _consume_loop(inst: "DBOS", reg: KafkaConsumerRegistration, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    def make() -> Any:
        c = Consumer(reg.config)
        c.subscribe(reg.topics)
        return c

    def replace(old: Any) -> Any:
        if old is not None:
            try:
                old.close()
            except Exception as e:
                logger.warning(f"Error closing Kafka consumer: {e}")
        return _retry_until_success(stop, make, "create the Kafka consumer")

    consumer = replace(None)
    if consumer is None:
        return
    retry_wait = _MIN_RETRY_WAIT_SEC
    try:
        while not stop.is_set():
            try:
                cmsgs = consumer.consume(reg.batch_size, timeout=1.0)
                if stop.is_set():
                    return  # nothing stored for these: Kafka delivers them again
                fatal = False
                valid: List[Any] = []
                for cmsg in cmsgs:
                    err = cmsg.error()
                    if err is None:
                        valid.append(cmsg)
                        continue
                    logger.error(f"Kafka consumer error (group.id {reg.group_id}): {_describe_kafka_error(err)}")
                    if err.code() == KafkaError._FATAL or err.fatal():
                        fatal = True  # a fatal error needs a new consumer
                if valid:
                    planned = _plan(reg, valid)
                    if planned:
                        # The same batch until it is durable: consume() has moved the
                        # fetch position past it whether or not offsets are stored.
                        try:
                            done = _retry_until_success(
                                stop, functools.partial(_enqueue_batch, inst, reg, planned, stop),
                                "durably enqueue consumed messages",
                            )
                        except _Stopped:
                            done = None
                        if done is None:
                            return  # stopped before durable: nothing stored, redelivered
                    # Every valid message is enqueued or dropped: store past all of
                    # them (auto-commit flushes), so a poison message is not
                    # delivered forever.
                    for cmsg in _last_message_per_partition(valid):
                        try:
                            consumer.store_offsets(message=cmsg)
                        except KafkaException as e:
                            # Partition revoked and the like: delivered again, enqueued as before.
                            logger.warning(f"Failed to store Kafka offset: {e}")
                if fatal:
                    consumer = replace(consumer)
                    if consumer is None:
                        return
                retry_wait = _MIN_RETRY_WAIT_SEC
            except Exception as e:
                logger.error(f"Unexpected error in Kafka consumer loop: {e}. Retrying in {retry_wait:.0f}s.")
                if stop.wait(retry_wait):
                    return
                retry_wait = min(retry_wait * 2.0, _MAX_RETRY_WAIT_SEC)
                # A new consumer starts from the stored offsets: what was consumed
                # but not durably enqueued comes again.
                consumer = replace(consumer)
                if consumer is None:
                    return
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except Exception as e:
                logger.warning(f"Error closing Kafka consumer: {e}")
