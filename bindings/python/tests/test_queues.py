"""Queues in full, observed from the outside on the real agent: worker and
global concurrency (across two agents and two worker processes), rate
limits, priorities, deduplication, partitions, delays, debouncing and
workflow timeouts, and the queue API (register, retrieve, list, on_conflict)
without reconnecting."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import datetime
from typing import Any, Dict, Iterator, List

import pytest

import dbos_agent
from dbos_agent import (
    DBOS,
    DBOSAwaitedWorkflowCancelledError,
    DBOSClient,
    DBOSException,
    DBOSQueueDeduplicatedError,
    Debouncer,
    DebouncerClient,
    Queue,
    SetEnqueueOptions,
    SetWorkflowID,
    SetWorkflowTimeout,
)

from conftest import AgentEnv, AgentProcess, LineWaiter, Worker
from holds import ProcessHolds, Tracker, drive, queue_env, quick_lines, ready_version

worker_queue = Queue("qt_worker", worker_concurrency=2)
prio_queue = Queue("qt_prio", worker_concurrency=1, priority_enabled=True)
dedup_queue = Queue("qt_dedup")
part_queue = Queue("qt_part", partition_concurrency=1)
legacy_part_queue = Queue("qt_part_legacy", concurrency=1, partition_queue=True)
part_worker_queue = Queue("qt_part_worker", partition_worker_concurrency=1)
part_rate_queue = Queue("qt_part_rate", partition_limiter={"limit": 1, "period": 1.0})
plain_queue = Queue("qt_plain")
debounce_queue = Queue("qt_debounce")

state: Dict[str, Any] = {"tracker": Tracker()}
records_lock = threading.Condition()
records: List[Any] = []


@pytest.fixture(autouse=True)
def fresh_tracker() -> Iterator[Tracker]:
    t = Tracker()
    state["tracker"] = t
    yield t
    t.open()  # nothing stays held after a test


@DBOS.workflow()
def qt_held(tag: str) -> str:
    wid = DBOS.workflow_id
    assert wid is not None
    state["tracker"].enter(wid, tag)
    return tag


@DBOS.workflow()
def qt_record(tag: str) -> str:
    with records_lock:
        records.append((DBOS.workflow_id, tag))
        records_lock.notify_all()
    return tag


def recorded_for(wid: str) -> List[str]:
    with records_lock:
        return [tag for (w, tag) in records if w == wid]


@DBOS.workflow()
async def qt_async_record(tag: str) -> str:
    return f"async-{tag}"


@DBOS.workflow()
async def qt_async_tick(at: datetime, context: Any) -> str:
    return f"{at.isoformat()} {context}"


step_effects: List[str] = []
slow_started = threading.Event()
slow_gate = threading.Event()
slow_done = threading.Event()


@DBOS.step()
def qt_effect(name: str) -> str:
    step_effects.append(f"{DBOS.workflow_id}:{name}")
    return name


@DBOS.workflow()
def qt_slow() -> str:
    try:
        qt_effect("before")
        slow_started.set()
        assert slow_gate.wait(60)
        qt_effect("after")
        return "done"
    finally:
        slow_done.set()


@pytest.fixture(scope="module")
def client(dbos: Any, agent_env: AgentEnv) -> Iterator[DBOSClient]:
    c = DBOSClient(agent_socket=agent_env.socket, application_name="pytest")
    yield c
    c.destroy()


@pytest.fixture(scope="module")
def agent_b(agent_env: AgentEnv) -> AgentProcess:
    """A second agent on the module's database, as on a second host."""
    return agent_env.start_other_agent("exec-b")


def two_workers(agent_env: AgentEnv, agent_b: AgentProcess, workers: List[Worker], queues: List[Dict[str, Any]]) -> LineWaiter:
    log = LineWaiter()
    for i, sock in enumerate([agent_env.socket, agent_b.socket]):
        w = Worker("queue_worker.py", dict(queue_env(sock, "pytest-q", queues), NAME=f"w{i}"), sink=log)
        workers.append(w)
    for w in workers:
        w.out.wait_for("ready")
    return log

# ---------------------------------------------------------------------------
# Concurrency and rate limits


def test_worker_concurrency_caps_the_runs_in_one_process(dbos: Any, fresh_tracker: Tracker) -> None:
    handles = [worker_queue.enqueue(qt_held, f"w{i}") for i in range(5)]
    drive(fresh_tracker, total=5, limit=2)
    assert [h.get_result() for h in handles] == [f"w{i}" for i in range(5)]


def test_global_concurrency_holds_across_two_agents_and_worker_processes(
    dbos: Any, agent_env: AgentEnv, agent_b: AgentProcess, workers: List[Worker]
) -> None:
    # Each worker process may run 2 of the queue at once, so 3 running means
    # both take part, and only the stored global limit, shared through the
    # database by the two agents, keeps a fourth from starting.
    log = two_workers(
        agent_env, agent_b, workers, [{"name": "qt_global", "global_concurrency": 3, "worker_concurrency": 2}]
    )
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-q") as c:
        handles = [c.enqueue({"workflow_name": "held", "queue_name": "qt_global"}, f"g{i}") for i in range(7)]
        holds = ProcessHolds(log, workers)
        drive(holds, total=7, limit=3)
        # Both workers run one source, so both computed one version.
        version = ready_version(workers[0])
        assert ready_version(workers[1]) == version
        assert sorted(h.get_result() for h in handles) == sorted(f"g{i}@{version}" for i in range(7))
        assert max(holds.max_running_in(w) for w in workers) == 2  # each within its worker_concurrency
        assert set(holds.started_where().values()) == {"w0", "w1"}
        stored = c.retrieve_queue("qt_global")
        assert stored is not None and (stored.global_concurrency, stored.worker_concurrency) == (3, 2)


def test_rate_limit_counts_starts_per_period_across_agents(
    dbos: Any, agent_env: AgentEnv, agent_b: AgentProcess, workers: List[Worker]
) -> None:
    log = two_workers(agent_env, agent_b, workers, [{"name": "qt_rate", "limiter": {"limit": 2, "period": 1.0}}])
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-q") as c:
        handles = [c.enqueue({"workflow_name": "quick", "queue_name": "qt_rate"}, f"r{i}") for i in range(6)]
        for h in handles:
            h.get_result()
        # Start times on the database clock, which the limit is counted on.
        starts = sorted(h.get_status().dequeued_at or 0 for h in handles)
    assert len(quick_lines(log)) == 6
    for i in range(len(starts) - 2):
        assert starts[i + 2] - starts[i] >= 995, f"3 starts within a period: {starts}"
    assert starts[-1] - starts[0] >= 1995


def test_priority_orders_the_waiting_workflows(dbos: Any, fresh_tracker: Tracker) -> None:
    blocker = prio_queue.enqueue(qt_held, "blocker")
    fresh_tracker.wait_started(1)
    handles = []
    for p in [5, 1, None, 4, 2, 3]:
        with SetEnqueueOptions(priority=p):
            handles.append((p, prio_queue.enqueue(qt_record, f"p{p}")))
    fresh_tracker.open()
    blocker.get_result()
    for _, h in handles:
        h.get_result()
    ids = {h.workflow_id: p for p, h in handles}
    with records_lock:
        ran = [tag for (w, tag) in records if w in ids]
    # Workflows without a priority come first, then 1 (the highest), 2...
    assert ran == ["pNone", "p1", "p2", "p3", "p4", "p5"]
    assert sorted(h.get_status().priority or 0 for _, h in handles) == [0, 1, 2, 3, 4, 5]


def test_deduplication_refuses_or_returns_the_existing_workflow(dbos: Any, fresh_tracker: Tracker, client: DBOSClient) -> None:
    dedup = f"dd-{uuid.uuid4().hex[:6]}"
    with SetEnqueueOptions(deduplication_id=dedup):
        first = dedup_queue.enqueue(qt_held, "first")
        with pytest.raises(DBOSQueueDeduplicatedError) as info:
            dedup_queue.enqueue(qt_held, "second")
    assert (info.value.queue_name, info.value.deduplication_id) == ("qt_dedup", dedup)
    with SetEnqueueOptions(deduplication_id=dedup, duplication_policy="return-existing"):
        again = dedup_queue.enqueue(qt_held, "third")
    assert again.workflow_id == first.workflow_id
    via_client = client.enqueue(
        {"workflow_name": "qt_held", "queue_name": "qt_dedup", "deduplication_id": dedup, "duplication_policy": "return-existing"},
        "fourth",
    )
    assert via_client.workflow_id == first.workflow_id
    with pytest.raises(DBOSQueueDeduplicatedError):
        client.enqueue({"workflow_name": "qt_held", "queue_name": "qt_dedup", "deduplication_id": dedup}, "fifth")
    fresh_tracker.open()
    assert first.get_result() == "first"
    # Once the holder is done, the id is free again.
    with SetEnqueueOptions(deduplication_id=dedup):
        later = dedup_queue.enqueue(qt_held, "later")
    assert later.workflow_id != first.workflow_id and later.get_result() == "later"
    assert [fresh_tracker.tags[w] for w in fresh_tracker.started] == ["first", "later"]


@pytest.mark.parametrize(
    "queue", [part_queue, legacy_part_queue, part_worker_queue],
    ids=["partition_concurrency", "partition_queue", "partition_worker_concurrency"],
)
def test_partitions_are_isolated(dbos: Any, fresh_tracker: Tracker, queue: Queue) -> None:
    handles = {}
    for tag, key in [("a1", "a"), ("a2", "a"), ("b1", "b")]:
        with SetEnqueueOptions(queue_partition_key=key):
            handles[tag] = queue.enqueue(qt_held, tag)
    # One per partition at once: a1 and b1 run, a2 waits for a1 only.
    started = fresh_tracker.wait_started(2)
    assert sorted(fresh_tracker.tags[w] for w in started) == ["a1", "b1"]
    assert fresh_tracker.stays_below(3, 1.0), "a second workflow of partition a started"
    fresh_tracker.release([handles["a1"].workflow_id])
    third = fresh_tracker.wait_started(3)[2]
    assert fresh_tracker.tags[third] == "a2"
    assert handles["b1"].workflow_id in fresh_tracker.running()
    fresh_tracker.open()
    assert {t: h.get_result() for t, h in handles.items()} == {"a1": "a1", "a2": "a2", "b1": "b1"}
    assert handles["a2"].get_status().queue_partition_key == "a"


served_by_partition: Dict[str, int] = {}
served_cond = threading.Condition()


@DBOS.workflow()
def qt_count_partition(partition: str) -> str:
    with served_cond:
        served_by_partition[partition] = served_by_partition.get(partition, 0) + 1
        served_cond.notify_all()
    return partition


def test_partitions_take_turns_when_the_worker_cannot_serve_them_all(dbos: Any) -> None:
    """Two partitions with a backlog sort first and the worker runs two at
    once: served in a fixed order, they would take both slots at every poll
    until drained. Each small partition must be served while they still have
    most of their backlog (counted in work done, not time, and at the
    moment the last one is served). Measured here: 6 busy workflows done by
    then in sorted order, 0 to 3 with the poller's shuffled order."""
    busy, small, backlog = ["aaa-busy-1", "aaa-busy-2"], [f"zzz-small-{i}" for i in range(4)], 60
    name = f"qt_turns_{uuid.uuid4().hex[:8]}"
    served_by_partition.clear()
    handles = []
    # Enqueued before the queue is declared, so the first poll sees every partition.
    for partition in busy + small:
        with SetEnqueueOptions(queue_partition_key=partition):
            for _ in range(backlog if partition in busy else 1):
                handles.append(DBOS.enqueue_workflow(name, qt_count_partition, partition))
    DBOS.register_queue(name, partition_concurrency=1, worker_concurrency=2, polling_interval_sec=0.1)
    with served_cond:
        assert served_cond.wait_for(lambda: all(served_by_partition.get(p, 0) > 0 for p in small), 120)
        busy_done = sum(served_by_partition.get(p, 0) for p in busy)
    assert busy_done < backlog, f"the small partitions waited for {busy_done} of the busy ones' {2 * backlog}"
    for h in handles:
        h.get_result()


def test_listen_queues_serves_a_queue_configured_elsewhere(dbos: Any, agent_env: AgentEnv, workers: List[Worker]) -> None:
    # One deploy configures the queue and goes away; a worker that only
    # names it (DBOS.listen_queues) serves it with the stored limits.
    configurer = Worker("queue_worker.py", queue_env(agent_env.socket, "pytest-l", [{"name": "qt_listened", "worker_concurrency": 1}]))
    workers.append(configurer)
    configurer.out.wait_for("ready")
    configurer.stop()
    listener = Worker("queue_worker.py", queue_env(agent_env.socket, "pytest-l", LISTEN='["qt_listened"]'))
    workers.append(listener)
    listener.out.wait_for("ready")
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-l") as c:
        handles = [c.enqueue({"workflow_name": "quick", "queue_name": "qt_listened"}, f"l{i}") for i in range(3)]
        # The configurer and the listener run one source: one version.
        version = ready_version(listener)
        assert ready_version(configurer) == version
        assert [h.get_result() for h in handles] == [f"l{i}@{version}" for i in range(3)]
        stored = c.retrieve_queue("qt_listened")
        assert stored is not None and stored.worker_concurrency == 1
    assert sorted(t[1] for t in quick_lines(listener.out)) == ["l0", "l1", "l2"]


def test_a_partition_rate_limit_counts_each_partition_apart(dbos: Any) -> None:
    handles = []
    for tag, key in [("a1", "a"), ("a2", "a"), ("b1", "b")]:
        with SetEnqueueOptions(queue_partition_key=key):
            handles.append(part_rate_queue.enqueue(qt_record, tag))
    for h in handles:
        h.get_result()
    a1, a2, b1 = (h.get_status().dequeued_at or 0 for h in handles)
    assert a2 - a1 >= 995, "two starts of partition a within its period"
    assert abs(b1 - a1) < 900, "partition b waited for partition a's limit"


def test_enqueue_workflow_with_options_takes_the_clients_options(dbos: Any) -> None:
    handle = DBOS.enqueue_workflow_with_options(
        {"workflow_name": "qt_record", "queue_name": "qt_plain", "priority": 3, "delay_seconds": 0.2,
         "workflow_id": f"ewo-{uuid.uuid4().hex[:6]}"},
        "by-options",
    )
    assert handle.workflow_id.startswith("ewo-")
    assert handle.get_result() == "by-options"
    status = handle.get_status()
    assert (status.priority, status.queue_name) == (3, "qt_plain")


# ---------------------------------------------------------------------------
# Delays and debouncing


def test_a_delayed_workflow_does_not_start_before_its_time(dbos: Any, client: DBOSClient) -> None:
    with SetEnqueueOptions(delay_seconds=1.5):
        handle = plain_queue.enqueue(qt_record, "late")
    assert handle.get_status().status == "DELAYED"
    assert handle.get_result() == "late"
    status = handle.get_status()
    assert status.dequeued_at is not None and status.created_at is not None
    assert status.dequeued_at - status.created_at >= 1450

    via_client = client.enqueue({"workflow_name": "qt_record", "queue_name": "qt_plain", "delay_seconds": 1.0}, "c-late")
    assert via_client.get_status().status == "DELAYED"
    assert via_client.get_result() == "c-late"
    st = via_client.get_status()
    assert st.dequeued_at is not None and st.created_at is not None and st.dequeued_at - st.created_at >= 950

    # DBOS.set_workflow_delay moves the release time of a DELAYED workflow
    # (and leaves any other alone).
    with SetEnqueueOptions(delay_seconds=3600):
        parked = DBOS.enqueue_workflow("qt_plain", qt_record, "parked")
    assert parked.get_status().status == "DELAYED"
    DBOS.set_workflow_delay(parked.workflow_id, delay_seconds=0)
    assert parked.get_result() == "parked"
    DBOS.set_workflow_delay(parked.workflow_id, delay_seconds=10)  # done: nothing happens
    assert parked.get_status().status == "SUCCESS"
    with pytest.raises(DBOSException, match="either"):
        DBOS.set_workflow_delay(parked.workflow_id)


def test_debounce_coalesces_onto_one_workflow_with_the_last_inputs(dbos: Any) -> None:
    debouncer = Debouncer.create(qt_record, queue=debounce_queue)
    key = uuid.uuid4().hex[:6]
    first = debouncer.debounce(key, 1.0, "a")
    assert first.get_status().status == "DELAYED"
    debouncer.debounce(key, 1.0, "b")
    last_call_ms = time.time() * 1000
    last = debouncer.debounce(key, 1.0, "c")
    assert last.workflow_id == first.workflow_id
    assert last.get_result() == "c"
    assert recorded_for(first.workflow_id) == ["c"]  # ran once, with the last inputs
    started = last.get_status().dequeued_at
    assert started is not None and started >= last_call_ms + 950, "started before a quiet period after the last call"
    assert last.get_status().queue_name == "qt_debounce"
    # The key is free again: the next call makes a new workflow.
    with SetWorkflowID(f"deb-{key}"):
        fresh = debouncer.debounce(key, 0.1, "d")
    assert fresh.workflow_id == f"deb-{key}" and fresh.get_result() == "d"


def ran_within(wid: str, seconds: float) -> bool:
    with records_lock:
        return records_lock.wait_for(lambda: any(w == wid for (w, _) in records), seconds)


def test_debounce_timeout_caps_how_long_calls_can_push_it_back(dbos: Any) -> None:
    key = uuid.uuid4().hex[:6]
    debouncer = Debouncer.create(qt_record, debounce_timeout_sec=1.5)
    first_ms = time.time() * 1000
    first = debouncer.debounce(key, 1.0, "v0")
    last_tag = "v0"
    calls = 1
    # Keep calling faster than the period (every quarter period, unless it
    # runs meanwhile): only the timeout lets it start.
    while True:
        if ran_within(first.workflow_id, 0.25):
            break
        tag = f"v{calls}"
        h = debouncer.debounce(key, 1.0, tag)
        calls += 1
        if h.workflow_id != first.workflow_id:
            break  # released meanwhile: this call started a new debounce
        last_tag = tag
        if first.get_status().status != "DELAYED":
            break
    result = first.get_result()
    assert result == last_tag
    status = first.get_status()
    assert status.dequeued_at is not None
    waited = status.dequeued_at - first_ms
    assert 1450 <= waited < 2600, f"started {waited:.0f} ms after the first call"
    assert calls >= 5


def test_debouncer_client_debounces_by_name(dbos: Any, client: DBOSClient) -> None:
    deb: DebouncerClient[Any] = DebouncerClient(client, {"workflow_name": "qt_record", "queue_name": "qt_debounce"})
    key = uuid.uuid4().hex[:6]
    h1 = deb.debounce(key, 0.5, "x")
    h2 = deb.debounce(key, 0.5, "y")
    assert h1.workflow_id == h2.workflow_id
    assert h2.get_result() == "y"
    with pytest.raises(DBOSException, match="deduplication_id"):
        DebouncerClient(
            client, {"workflow_name": "qt_record", "queue_name": "qt_debounce", "deduplication_id": "x"}
        ).debounce(key, 0.5, "z")
    with SetEnqueueOptions(priority=1):
        with pytest.raises(DBOSException, match="priority"):
            Debouncer.create(qt_record).debounce(key, 0.5, "z")


# ---------------------------------------------------------------------------
# Workflow timeouts


def test_a_timeout_cancels_a_running_workflow_at_its_next_step(dbos: Any) -> None:
    slow_gate.clear()
    slow_done.clear()
    with SetWorkflowTimeout(1.0):
        handle = DBOS.start_workflow(qt_slow)
    status = handle.get_status()
    assert status.workflow_timeout_ms == 1000
    assert status.workflow_deadline_epoch_ms is not None and status.created_at is not None
    # The agent's sweeper cancels it at its deadline; waiting for it says so.
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        DBOS.retrieve_workflow(handle.workflow_id).get_result()
    assert DBOS.get_workflow_status(handle.workflow_id).status == "CANCELLED"  # type: ignore[union-attr]
    slow_gate.set()
    assert slow_done.wait(30)
    # It stopped at its next step, which did not run.
    assert step_effects.count(f"{handle.workflow_id}:before") == 1
    assert f"{handle.workflow_id}:after" not in step_effects
    assert [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)] == ["qt_effect"]


def test_an_enqueued_workflows_timeout_counts_from_its_dequeue(dbos: Any, client: DBOSClient) -> None:
    slow_gate.clear()
    slow_done.clear()
    slow_started.clear()
    with SetEnqueueOptions(delay_seconds=1.0):
        with SetWorkflowTimeout(1.0):
            handle = plain_queue.enqueue(qt_slow)
    status = handle.get_status()
    # Not dequeued yet: a timeout, but no deadline.
    assert status.status == "DELAYED" and status.workflow_timeout_ms == 1000
    assert status.workflow_deadline_epoch_ms is None
    assert slow_started.wait(30)
    status = handle.get_status()
    assert status.status == "PENDING"
    assert status.dequeued_at is not None and status.workflow_deadline_epoch_ms is not None
    assert status.workflow_deadline_epoch_ms - status.dequeued_at == 1000
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        DBOS.retrieve_workflow(handle.workflow_id).get_result()
    slow_gate.set()
    assert slow_done.wait(30)
    assert f"{handle.workflow_id}:after" not in step_effects

    # A timeout that is not reached changes nothing; the client sets one too.
    quick = client.enqueue({"workflow_name": "qt_record", "queue_name": "qt_plain", "workflow_timeout": 30}, "in-time")
    assert quick.get_result() == "in-time"
    assert quick.get_status().workflow_timeout_ms == 30000


# ---------------------------------------------------------------------------
# The queue API


def test_queues_declared_after_launch_register_without_reconnecting(
    dbos: Any, client: DBOSClient, agent_env: AgentEnv, workers: List[Worker]
) -> None:
    inst = dbos_agent._registry._instance
    assert inst is not None and inst._engine.link is not None
    link = inst._engine.link
    generation = link.current().generation  # type: ignore[union-attr]
    late = DBOS.register_queue("qt_late", worker_concurrency=1, global_concurrency=3, limiter={"limit": 10, "period": 2.5})
    assert late.enqueue(qt_record, "late").get_result() == "late"
    assert link.current().generation == generation, "declaring a queue reconnected"  # type: ignore[union-attr]
    assert DBOS.retrieve_queue("qt_late") is late
    stored = client.retrieve_queue("qt_late")
    assert stored is not None
    assert (stored.global_concurrency, stored.worker_concurrency, stored.limiter) == (3, 1, {"limit": 10, "period": 2.5})
    assert "qt_late" in [q.name for q in DBOS.list_queues()]
    # DBOS 3.4's flag: a registered queue and one read from the table are
    # database-backed; a queue only declared in code is not.
    assert late.database_backed_queue and stored.database_backed_queue
    assert all(q.database_backed_queue for q in DBOS.list_queues())
    assert client.register_queue("qt_client_registered").database_backed_queue
    assert not Queue("qt_in_code_only").database_backed_queue

    # on_conflict: never_update keeps the stored limits, always_update writes them.
    DBOS.register_queue("qt_late", global_concurrency=7, on_conflict="never_update")
    assert client.retrieve_queue("qt_late").global_concurrency == 3  # type: ignore[union-attr]
    DBOS.register_queue("qt_late", global_concurrency=7, on_conflict="always_update")
    assert client.retrieve_queue("qt_late").global_concurrency == 7  # type: ignore[union-attr]
    # A queue named alone serves the stored configuration without changing it.
    Queue("qt_late")
    assert client.retrieve_queue("qt_late").global_concurrency == 7  # type: ignore[union-attr]
    assert link.current().generation == generation  # type: ignore[union-attr]
    assert client.retrieve_queue("qt_never_declared") is None

    with pytest.raises(ValueError, match="worker_concurrency"):
        Queue("qt_bad", concurrency=1, worker_concurrency=2)
    with pytest.raises(ValueError, match="partition_limiter"):
        Queue("qt_bad", partition_limiter={"limit": 1})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="reserved"):
        Queue("_dbos_mine")
    # A queue another application registered is refused, as in DBOS Python,
    # and the refusal leaves this process's registrations as they were.
    other = Worker("queue_worker.py", queue_env(agent_env.socket, "other-app", [{"name": "qt_owned", "worker_concurrency": 1}]))
    workers.append(other)
    other.out.wait_for("ready")
    with pytest.raises(DBOSException, match="belongs to application other-app"):
        Queue("qt_owned")
    assert DBOS.retrieve_queue("qt_owned") is not None  # stored, but not served here
    assert "qt_owned" not in dbos_agent._registry._queues
    assert plain_queue.enqueue(qt_record, "still-fine").get_result() == "still-fine"


def test_async_twins_of_the_queue_schedule_debounce_and_version_calls(dbos: Any, client: DBOSClient) -> None:
    key = uuid.uuid4().hex[:6]

    async def main() -> None:
        h = await plain_queue.enqueue_async(qt_async_record, "a1")
        assert await h.get_result() == "async-a1"
        with SetEnqueueOptions(delay_seconds=0.3):
            delayed = await DBOS.enqueue_workflow_async("qt_plain", qt_async_record, "a2")
        assert (await delayed.get_status()).status == "DELAYED"
        assert await delayed.get_result() == "async-a2"
        q = await DBOS.register_queue_async("qt_async_q", worker_concurrency=1)
        assert await DBOS.retrieve_queue_async("qt_async_q") is q
        assert "qt_async_q" in [x.name for x in await DBOS.list_queues_async()]

        deb = Debouncer.create_async(qt_async_record, queue=q)
        d1 = await deb.debounce_async(key, 0.3, "d1")
        d2 = await deb.debounce_async(key, 0.3, "d2")
        assert d1.workflow_id == d2.workflow_id and await d2.get_result() == "async-d2"

        name = f"async-{key}"
        await DBOS.create_schedule_async(schedule_name=name, workflow_fn=qt_async_tick, schedule="0 0 1 1 *", context=7)
        assert (await DBOS.get_schedule_async(name)) is not None
        assert [s["schedule_name"] for s in await DBOS.list_schedules_async(schedule_name_prefix=name)] == [name]
        await DBOS.apply_schedules_async([{"schedule_name": name, "workflow_fn": qt_async_tick, "schedule": "0 0 2 1 *"}])
        tick = DBOS.trigger_schedule(name)
        assert tick.get_result().endswith(" None")
        await DBOS.delete_schedule_async(name)
        assert await DBOS.get_schedule_async(name) is None

        with SetEnqueueOptions(delay_seconds=3600):
            parked = await plain_queue.enqueue_async(qt_async_record, "parked")
        await DBOS.set_workflow_delay_async(parked.workflow_id, delay_seconds=0)
        assert await parked.get_result() == "async-parked"
        # This module's DBOS, given no version, registered the one it computed.
        versions = await DBOS.list_application_versions_async()
        assert [v["version_name"] for v in versions] == [DBOS.application_version]

        c = await client.enqueue_async({"workflow_name": "qt_async_record", "queue_name": "qt_plain", "delay_seconds": 0.2}, "c")
        await client.set_workflow_delay_async(c.workflow_id, delay_seconds=0)
        assert await c.get_result() == "async-c"
        cname = f"async-client-{key}"
        await client.create_schedule_async(schedule_name=cname, workflow_name="qt_async_tick", schedule="0 0 1 1 *")
        assert [s["schedule_name"] for s in await client.list_schedules_async(schedule_name_prefix=cname)] == [cname]
        assert (await client.get_schedule_async(cname)) is not None
        await client.apply_schedules_async([{"schedule_name": cname, "workflow_name": "qt_async_tick", "schedule": "0 0 3 1 *"}])
        await client.delete_schedule_async(cname)
        assert [v["version_name"] for v in await client.list_application_versions_async()] == [DBOS.application_version]
        assert (await client.retrieve_queue_async("qt_async_q")) is not None
        assert "qt_async_q" in [x.name for x in await client.list_queues_async()]
        cd = DebouncerClient(client, {"workflow_name": "qt_async_record", "queue_name": "qt_plain"})
        e1 = await cd.debounce_async(key, 0.2, "e1")
        assert await e1.get_result() == "async-e1"

    asyncio.run(main())
