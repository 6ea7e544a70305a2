"""DBOS Python 3.4's register_queue(priority_enabled=), delete_queue,
resume_workflows, list_queued_workflows_async, asyncio_wait and step_status
(and their async twins), on the real agent."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List, Tuple

import pytest

from dbos_agent import DBOS, DBOSClient, DBOSNonExistentWorkflowError, SetWorkflowID

from conftest import AgentEnv, new_id, query, step_names

WAIT = 30.0
gates: Dict[str, threading.Event] = {}
statuses: List[Any] = []


def gate(key: str) -> threading.Event:
    return gates.setdefault(key, threading.Event())


@DBOS.workflow()
def mg_held(key: str) -> str:
    gate(key).wait(WAIT)
    DBOS.sleep(0)  # a durable step after the wait: a cancelled run stops here
    return key


@DBOS.workflow()
def resumes_from_a_workflow(ids: List[str]) -> int:
    return len(DBOS.resume_workflows(ids))


@DBOS.step()
async def mg_fast(x: int) -> int:
    return x


@DBOS.step()
async def mg_slow(key: str) -> str:
    await asyncio.to_thread(gate(key).wait, WAIT)
    return key


@DBOS.workflow()
async def waits_for_the_first(key: str) -> Tuple[List[int], List[int]]:
    first = asyncio.ensure_future(mg_fast(1))
    second = asyncio.ensure_future(mg_slow(key))
    futs = [first, second]
    done, pending = await DBOS.asyncio_wait(futs, return_when=asyncio.FIRST_COMPLETED)
    split = ([i for i, f in enumerate(futs) if f in done], [i for i, f in enumerate(futs) if f in pending])
    gate(key).set()
    await second
    await mg_fast(2)
    return split


@DBOS.step(retries_allowed=True, interval_seconds=0, max_attempts=3)
def flaky_status(key: str) -> Any:
    statuses.append((key, DBOS.step_status))
    if len([s for k, s in statuses if k == key]) < 2:
        raise ConnectionError("once more")
    return DBOS.step_status


@DBOS.step()
def plain_status() -> Any:
    return DBOS.step_status


@DBOS.workflow()
def reports_step_status(key: str) -> List[Any]:
    return [DBOS.step_status, plain_status(), flaky_status(key)]


def queue_row(env: AgentEnv, name: str) -> List[Tuple[Any, ...]]:
    return query(f'SELECT priority_enabled FROM "{env.schema}".queues WHERE name = %s', (name,))


def test_register_queue_priority_enabled(dbos: Any, agent_env: AgentEnv) -> None:
    default, legacy = new_id("prio-default"), new_id("prio-off")
    assert DBOS.register_queue(default).priority_enabled is True
    assert DBOS.register_queue(legacy, priority_enabled=False).priority_enabled is False
    assert queue_row(agent_env, default) == [(True,)]
    assert queue_row(agent_env, legacy) == [(False,)]

    async def main() -> None:
        q = await DBOS.register_queue_async(new_id("prio-async"), priority_enabled=False)
        assert q.priority_enabled is False
        assert queue_row(agent_env, q.name) == [(False,)]

    asyncio.run(main())
    with pytest.raises(TypeError, match="unexpected keyword argument 'priority'"):
        DBOS.register_queue(new_id("typo"), priority=True)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"concurrency": 1, "global_concurrency": 1}, "only one of them"),
        ({"global_concurrency": 1, "partition_concurrency": 2}, "greater than or equal"),
        ({"worker_concurrency": 1, "partition_worker_concurrency": 2}, "greater than or equal"),
        ({"partition_concurrency": 1, "partition_worker_concurrency": 2}, "greater than or equal"),
        ({"global_concurrency": 1, "partition_worker_concurrency": 2}, "greater than or equal"),
        ({"partition_concurrency": 0}, "at least 1"),
        ({"partition_worker_concurrency": 0}, "at least 1"),
        ({"partition_limiter": {"limit": 1}}, "both 'limit' and 'period'"),
    ],
)
def test_partition_limits_are_checked_as_dbos_checks_them(dbos: Any, kwargs: Dict[str, Any], message: str) -> None:
    # DBOS Python's cases and error type: ValueError, before anything is stored.
    name = new_id("invalid")
    with pytest.raises(ValueError, match=message):
        DBOS.register_queue(name, **kwargs)
    assert DBOS.retrieve_queue(name) is None


def test_signatures_are_dbos_pythons() -> None:
    import inspect

    import dbos

    def params(fn: Any) -> List[Tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    for m in ("resume_workflows", "resume_workflows_async", "delete_queue", "delete_queue_async", "asyncio_wait"):
        assert params(getattr(DBOS, m)) == params(getattr(dbos.DBOS, m)), m
    assert params(DBOSClient.delete_queue) == params(dbos.DBOSClient.delete_queue)
    assert params(DBOSClient.delete_queue_async) == params(dbos.DBOSClient.delete_queue_async)
    assert isinstance(inspect.getattr_static(DBOS, "step_status"), type(inspect.getattr_static(DBOS, "step_id")))
    step = inspect.signature(DBOS.step).parameters
    official = inspect.signature(dbos.DBOS.step).parameters
    assert [(p.name, p.default) for p in step.values()] == [(p.name, p.default) for p in official.values()]


def test_delete_queue_stops_serving_it_until_registered_again(dbos: Any, agent_env: AgentEnv) -> None:
    name = new_id("doomed")
    DBOS.register_queue(name)
    DBOS.delete_queue(name)
    assert DBOS.retrieve_queue(name) is None
    assert queue_row(agent_env, name) == []
    DBOS.delete_queue(name)  # harmless twice, as in DBOS
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        key = new_id("orphan")
        gate(key).set()
        handle = client.enqueue({"workflow_name": "mg_held", "queue_name": name}, key)
        # Nobody serves the deleted queue: the workflow is not dispatched...
        assert agent_env.agent.log.stays_below(lambda l: "dispatching a run" in l and handle.workflow_id in l, 1, 1.5)
        assert handle.get_status().status == "ENQUEUED"
        # ... until the queue is registered again.
        DBOS.register_queue(name)
        assert handle.get_result() == key

        other = new_id("doomed-client")
        DBOS.register_queue(other)
        client.delete_queue(other)
        assert client.retrieve_queue(other) is None

        async def main() -> None:
            third = new_id("doomed-async")
            await DBOS.register_queue_async(third)
            await DBOS.delete_queue_async(third)
            assert await DBOS.retrieve_queue_async(third) is None
            await client.delete_queue_async(third)
            with pytest.raises(RuntimeError, match=r"delete_queue\(\) was called while an event loop is running"):
                DBOS.delete_queue(third)

        asyncio.run(main())
    finally:
        client.destroy()


def cancelled_pair() -> List[str]:
    ids = [new_id("resume"), new_id("resume")]
    for wid in ids:
        with SetWorkflowID(wid):
            DBOS.start_workflow(mg_held, wid)
        DBOS.cancel_workflow(wid)
        gate(wid).set()
    for wid in ids:
        assert DBOS.retrieve_workflow(wid).get_status().status == "CANCELLED"
    return ids


def test_resume_workflows_all_or_none(dbos: Any) -> None:
    ids = cancelled_pair()
    missing = new_id("missing")
    with pytest.raises(DBOSNonExistentWorkflowError) as info:
        DBOS.resume_workflows([ids[0], missing, ids[1]])
    assert info.value.destination_id == missing
    assert {DBOS.get_workflow_status(w).status for w in ids} == {"CANCELLED"}  # none resumed

    handles = DBOS.resume_workflows(ids)
    assert [h.get_result() for h in handles] == ids

    again = cancelled_pair()

    async def main() -> None:
        handles = await DBOS.resume_workflows_async(again, queue_name=None)
        assert [await h.get_result() for h in handles] == again
        with pytest.raises(DBOSNonExistentWorkflowError, match="a-missing, b-missing"):
            await DBOS.resume_workflows_async(["a-missing", "b-missing"])

    asyncio.run(main())


def test_the_clients_resume_workflows_and_list_queued_workflows_async(dbos: Any, agent_env: AgentEnv) -> None:
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        ids = cancelled_pair()
        with pytest.raises(DBOSNonExistentWorkflowError):
            client.resume_workflows([ids[0], new_id("missing")])
        assert {DBOS.get_workflow_status(w).status for w in ids} == {"CANCELLED"}
        assert [h.get_result() for h in client.resume_workflows(ids)] == ids

        name = new_id("client-listed")
        DBOS.register_queue(name)
        key = new_id("client-queued")
        handle = client.enqueue({"workflow_name": "mg_held", "queue_name": name}, key)

        again = cancelled_pair()

        async def main() -> None:
            handles = await client.resume_workflows_async(again)
            assert [await h.get_result() for h in handles] == again
            assert [w.workflow_id for w in await client.list_queued_workflows_async(queue_name=name)] == [handle.workflow_id]

        asyncio.run(main())
        gate(key).set()
        assert handle.get_result() == key
    finally:
        client.destroy()


def test_resume_workflows_from_a_workflow_is_a_step(dbos: Any) -> None:
    ids = cancelled_pair()
    wid = new_id("resumer")
    with SetWorkflowID(wid):
        assert resumes_from_a_workflow(ids) == 2
    assert step_names(wid) == ["DBOS.resumeWorkflow"]
    assert [DBOS.retrieve_workflow(w).get_result() for w in ids] == ids


def test_list_queued_workflows_async(dbos: Any) -> None:
    name = new_id("listed")
    q = DBOS.register_queue(name)
    key = new_id("queued")
    handle = q.enqueue(mg_held, key)

    async def main() -> List[str]:
        return [w.workflow_id for w in await DBOS.list_queued_workflows_async(queue_name=name)]

    assert asyncio.run(main()) == [handle.workflow_id]
    gate(key).set()
    assert handle.get_result() == key

    async def after() -> List[str]:
        return [w.workflow_id for w in await DBOS.list_queued_workflows_async(queue_name=name)]

    assert asyncio.run(after()) == []


def test_asyncio_wait_records_which_were_done(dbos: Any) -> None:
    key = new_id("wait")
    wid = new_id("waiter")
    with SetWorkflowID(wid):
        assert DBOS.start_workflow(waits_for_the_first, key).get_result() == ([0], [1])
    steps = DBOS.list_workflow_steps(wid)
    assert [s["function_name"] for s in steps][0] == "DBOS.asyncio_wait"
    assert steps[0]["output"] == [0]
    # A replay (a fork from the last step) returns the recorded split,
    # though both awaitables now complete at once from their history.
    last = max(s["function_id"] for s in steps)
    assert DBOS.fork_workflow(wid, last).get_result() == ([0], [1])

    async def outside() -> Tuple[int, int]:
        done, pending = await DBOS.asyncio_wait([asyncio.sleep(0, "x")], timeout=WAIT)
        return len(done), len(pending)

    assert asyncio.run(outside()) == (1, 0)


def test_step_status(dbos: Any) -> None:
    assert DBOS.step_status is None
    key = new_id("status")
    wid = new_id("status-wf")
    with SetWorkflowID(wid):
        in_workflow, plain, flaky = reports_step_status(key)
    assert in_workflow is None  # in a workflow, outside any step
    assert (plain.step_id, plain.current_attempt, plain.max_attempts) == (1, None, None)
    # Attempts count from 0, as in DBOS.
    seen = [(s.step_id, s.current_attempt, s.max_attempts) for k, s in statuses if k == key]
    assert seen == [(2, 0, 3), (2, 1, 3)]
    assert (flaky.step_id, flaky.current_attempt, flaky.max_attempts) == (2, 1, 3)
