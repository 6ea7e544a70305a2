"""Queue and start behaviours where DBOS Python 3.4's own tests found the
binding (or the agent) differing from DBOS, each checked on the real agent:
the words of a conflicting start, an enqueue option's app_version on a start
without a queue, SetWorkflowTimeout(None) inside a workflow with a deadline, a
deduplicated enqueue recorded as the caller's step (so a replay raises it
again), a worker_concurrency of 0 (DBOS's pause of a queue), and
DBOS.listen_queues leaving a declared queue unserved."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any, List

import pytest

from dbos_agent import (
    DBOS,
    DBOSClient,
    DBOSConflictingWorkflowError,
    DBOSException,
    DBOSQueueDeduplicatedError,
    SetEnqueueOptions,
    SetWorkflowID,
    SetWorkflowTimeout,
)

from conftest import AgentEnv, Worker
from holds import queue_env, ready_version


@DBOS.workflow()
def qd_echo(x: str) -> str:
    return x


@DBOS.workflow()
def qd_other() -> str:
    return "other"


def test_a_start_of_a_taken_id_as_another_function_says_so_in_dbos_words(dbos: Any) -> None:
    wid = str(uuid.uuid4())
    with SetWorkflowID(wid):
        assert qd_echo("a") == "a"
    with SetWorkflowID(wid):
        with pytest.raises(DBOSConflictingWorkflowError) as info:
            DBOS.start_workflow(qd_other)
    assert str(info.value).endswith(
        f"Conflicting workflow invocation with the same ID ({wid}): Workflow already exists with a different "
        f"function name: {qd_echo.__qualname__}, but the provided function name is: {qd_other.__qualname__}"
    )


def test_an_app_version_option_applies_to_a_start_without_a_queue(dbos: Any) -> None:
    # The other enqueue options need a queue and are refused before any row
    # is written; app_version decides which workers run the workflow, so DBOS
    # stamps it on a plain start too.
    refused = str(uuid.uuid4())
    with SetEnqueueOptions(priority=5), SetWorkflowID(refused):
        with pytest.raises(DBOSException, match="not being enqueued"):
            DBOS.start_workflow(qd_echo, "x")
    assert DBOS.get_workflow_status(refused) is None
    pinned = str(uuid.uuid4())
    with SetEnqueueOptions(app_version="qd-some-other-version"), SetWorkflowID(pinned):
        DBOS.start_workflow(qd_echo, "x")
    status = DBOS.get_workflow_status(pinned)
    assert status is not None and status.app_version == "qd-some-other-version"


@DBOS.workflow()
def qd_timed_parent(inherits: str, unset: str) -> None:
    with SetWorkflowID(unset), SetWorkflowTimeout(None):
        DBOS.enqueue_workflow("qd_plain", qd_echo, "unset")
    with SetWorkflowID(inherits):
        DBOS.enqueue_workflow("qd_plain", qd_echo, "inherits")


def test_set_workflow_timeout_none_leaves_the_parents_deadline_behind(dbos: Any) -> None:
    DBOS.register_queue("qd_plain")
    parent, inherits, unset = (str(uuid.uuid4()) for _ in range(3))
    with SetWorkflowID(parent), SetWorkflowTimeout(60.0):
        DBOS.start_workflow(qd_timed_parent, inherits, unset).get_result()
    deadline = DBOS.get_workflow_status(parent).workflow_deadline_epoch_ms  # type: ignore[union-attr]
    assert deadline
    assert DBOS.retrieve_workflow(inherits).get_result() == "inherits"
    assert DBOS.retrieve_workflow(unset).get_result() == "unset"
    assert DBOS.get_workflow_status(inherits).workflow_deadline_epoch_ms == deadline  # type: ignore[union-attr]
    assert DBOS.get_workflow_status(unset).workflow_deadline_epoch_ms is None  # type: ignore[union-attr]


@DBOS.workflow()
def qd_dedup_parent(dedup_id: str) -> str:
    with SetEnqueueOptions(deduplication_id=dedup_id):
        first = DBOS.enqueue_workflow("qd_dedup", qd_echo, "child")
        try:
            DBOS.enqueue_workflow("qd_dedup", qd_echo, "again")
        except DBOSQueueDeduplicatedError:
            return "deduplicated:" + first.workflow_id
    return "enqueued twice"


def test_a_deduplicated_enqueue_is_the_callers_step_and_replays_as_it_failed(dbos: Any) -> None:
    # The queue is paused (worker_concurrency 0), so the first child holds the
    # deduplication id when the second enqueue is made.
    queue = DBOS.register_queue("qd_dedup", worker_concurrency=0)
    parent, dedup_id = str(uuid.uuid4()), f"qd-{uuid.uuid4()}"
    with SetWorkflowID(parent):
        outcome = qd_dedup_parent(dedup_id)
    assert outcome.startswith("deduplicated:")
    steps = DBOS.list_workflow_steps(parent)
    assert len(steps) == 2
    assert steps[0]["child_workflow_id"] == outcome.split(":", 1)[1]
    assert isinstance(steps[1]["error"], DBOSQueueDeduplicatedError)
    # Once the child is done its id is free again: a replay that asked the
    # agent again would enqueue, one that reads the step raises as before.
    queue.set_worker_concurrency(1)
    assert DBOS.retrieve_workflow(outcome.split(":", 1)[1]).get_result() == "child"
    forked = DBOS.fork_workflow(parent, 3)
    assert forked.get_result() == outcome


def test_worker_concurrency_zero_pauses_the_queue_until_it_is_raised(dbos: Any) -> None:
    paused = DBOS.register_queue("qd_paused", worker_concurrency=0)
    assert paused.worker_concurrency == 0
    DBOS.register_queue("qd_open")
    waiting = paused.enqueue(qd_echo, "paused")
    # Enqueued after it, on a queue polled the same way: done while the paused
    # queue's workflow has not started.
    assert DBOS.enqueue_workflow("qd_open", qd_echo, "open").get_result() == "open"
    assert waiting.get_status().status == "ENQUEUED"
    paused.set_worker_concurrency(1)
    assert waiting.get_result() == "paused"


def test_listen_queues_leaves_a_declared_queue_it_does_not_name_unserved(
    dbos: Any, agent_env: AgentEnv, workers: List[Worker]
) -> None:
    queues = [{"name": "qd_listened"}, {"name": "qd_unlistened", "worker_concurrency": 3}]
    one = Worker("queue_worker.py", queue_env(agent_env.socket, "pytest-qd", queues, LISTEN='["qd_listened"]'))
    workers.append(one)
    one.out.wait_for("ready")
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-qd") as c:
        version = ready_version(one)
        unserved = c.enqueue({"workflow_name": "quick", "queue_name": "qd_unlistened"}, "u")
        served = c.enqueue({"workflow_name": "quick", "queue_name": "qd_listened"}, "l")
        assert served.get_result() == f"l@{version}"
        assert unserved.get_status().status == "ENQUEUED"
        # Declared there, so stored all the same, for the workers that serve it.
        stored = c.retrieve_queue("qd_unlistened")
        assert stored is not None and stored.worker_concurrency == 3
        two = Worker("queue_worker.py", queue_env(agent_env.socket, "pytest-qd", LISTEN='["qd_unlistened"]'))
        workers.append(two)
        two.out.wait_for("ready")
        assert unserved.get_result() == f"u@{version}"


def test_two_thousand_waits_at_once_leave_room_for_other_requests(dbos: Any) -> None:
    # DBOS's pattern of a thousand children each in a wait and a parent
    # awaiting each of them is two thousand waits on one connection: past the
    # agent's bound of requests in flight, the requests that would end them
    # could not be sent. Here 2100 get_result waits are parked at once on a
    # paused queue's workflows; a status read still goes through, and once the
    # queue is raised every wait is answered.
    paused = DBOS.register_queue("qd_many_waits", worker_concurrency=0)
    count = 2100

    async def main() -> List[str]:
        handles = await asyncio.gather(*[paused.enqueue_async(qd_echo, f"w{i}") for i in range(count)])
        waits = [asyncio.ensure_future(h.get_result()) for h in handles]
        await asyncio.sleep(0)  # let every wait be sent
        status = await asyncio.wait_for(DBOS.get_workflow_status_async(handles[-1].workflow_id), 30)
        assert status is not None and status.status == "ENQUEUED"
        await paused.set_worker_concurrency_async(None)
        return list(await asyncio.wait_for(asyncio.gather(*waits), 120))

    assert asyncio.run(main()) == [f"w{i}" for i in range(count)]


qd_parked = threading.Event()
qd_gate = asyncio.Event()


@DBOS.workflow()
async def qd_waits_on_the_callers_event() -> str:
    qd_parked.set()
    await qd_gate.wait()
    return "woken"


def test_an_async_workflow_sees_an_event_set_from_the_callers_loop(dbos: Any) -> None:
    # DBOS's tests (test_priority_queue_async) set an asyncio.Event of their
    # own loop while queued async workflows wait on it on the binding's loop.
    # That set does not wake the binding's loop; with nothing else due there,
    # the workflow waited for good.
    DBOS.register_queue("qd_async")

    async def main() -> str:
        handle = await DBOS.enqueue_workflow_async("qd_async", qd_waits_on_the_callers_event)
        assert await asyncio.get_running_loop().run_in_executor(None, qd_parked.wait, 30)
        qd_gate.set()
        return str(await asyncio.wait_for(handle.get_result(), 10))

    assert asyncio.run(main()) == "woken"
