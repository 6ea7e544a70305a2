"""async def workflows and steps, and the _async twins of the API, against
the real agent."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from typing import Any, Dict, List

import pytest

from dbos_agent import (
    DBOS,
    DBOSAwaitedWorkflowCancelledError,
    DBOSClient,
    DBOSMaxStepRetriesExceeded,
    DBOSNonExistentWorkflowError,
    Queue,
    SetWorkflowID,
)
from dbos_agent import _registry as dbos_module

from conftest import AgentEnv

WAIT = 30.0
runs: Counter = Counter()
async_queue = Queue("pytest_async")


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@DBOS.step()
async def fetch_price(item: str) -> float:
    runs[("price", item)] += 1
    await asyncio.sleep(0)
    return {"apple": 1.5, "pear": 2.0}[item]


@DBOS.step()
def sync_tax(amount: float) -> float:
    runs["tax"] += 1
    return round(amount * 0.2, 2)


@DBOS.workflow()
async def basket_workflow(items: List[str]) -> Dict[str, Any]:
    ids = (DBOS.workflow_id, DBOS.step_id)
    total = 0.0
    for item in items:
        total += await fetch_price(item)
    tax = sync_tax(total)
    return {"total": total, "tax": tax, "ctx": ids}


@DBOS.workflow()
def sync_tax_workflow(amount: float) -> float:
    return sync_tax(amount)


flaky: Counter = Counter()


@DBOS.step(retries_allowed=True, interval_seconds=0.01, max_attempts=3)
async def flaky_async_step(key: str, fail_times: int) -> int:
    flaky[key] += 1
    if flaky[key] <= fail_times:
        raise TimeoutError(f"attempt {flaky[key]}")
    return flaky[key]


@DBOS.workflow()
async def flaky_async_workflow(key: str, fail_times: int) -> int:
    return await flaky_async_step(key, fail_times)


gates: Dict[str, threading.Event] = {}
reached: Dict[str, threading.Event] = {}


@DBOS.step()
async def async_stage(key: str, n: int) -> int:
    runs[(key, n)] += 1
    return n


@DBOS.workflow()
async def pausing_async_workflow(key: str) -> List[int]:
    out = [await async_stage(key, 1)]
    reached[key].set()
    await asyncio.get_running_loop().run_in_executor(None, gates[key].wait, WAIT)
    out.append(await async_stage(key, 2))
    return out


def test_async_workflow_called_from_sync_code_runs_on_the_background_loop(dbos: Any) -> None:
    handle = DBOS.start_workflow(basket_workflow, ["apple", "pear"])
    out = handle.get_result()
    assert out["total"] == 3.5 and out["tax"] == 0.7
    assert out["ctx"] == (handle.workflow_id, None)
    steps = DBOS.list_workflow_steps(handle.workflow_id)
    assert [(s["function_name"], s["output"]) for s in steps] == [("fetch_price", 1.5), ("fetch_price", 2.0), ("sync_tax", 0.7)]


def test_async_api(dbos: Any) -> None:
    async def main() -> None:
        wid = new_id("basket")
        with SetWorkflowID(wid):
            direct = await basket_workflow(["apple"])
        assert direct["total"] == 1.5 and direct["ctx"] == (wid, None)

        handle = await DBOS.start_workflow_async(basket_workflow, ["pear", "pear"])
        assert (await handle.get_result())["total"] == 4.0
        assert (await handle.get_status()).status == "SUCCESS"
        assert (await DBOS.get_result_async(handle.workflow_id))["total"] == 4.0
        status = await DBOS.get_workflow_status_async(handle.workflow_id)
        assert status is not None and status.input == {"args": (["pear", "pear"],), "kwargs": {}}
        again = await DBOS.retrieve_workflow_async(wid)
        assert (await again.get_result())["total"] == 1.5
        listed = await DBOS.list_workflows_async(workflow_ids=[wid, handle.workflow_id])
        assert {w.workflow_id for w in listed} == {wid, handle.workflow_id}
        steps = await DBOS.list_workflow_steps_async(wid)
        assert [s["function_name"] for s in steps] == ["fetch_price", "sync_tax"]
        with pytest.raises(DBOSNonExistentWorkflowError):
            await DBOS.retrieve_workflow_async("no-such-workflow")

        queued = await async_queue.enqueue_async(basket_workflow, ["apple", "apple"])
        assert (await queued.get_result())["total"] == 3.0

        # A sync workflow started from async code runs on a thread.
        sync_handle = await DBOS.start_workflow_async(sync_tax_workflow, 10.0)
        assert await sync_handle.get_result() == 2.0

        # Many workflows at once share the one connection.
        handles = await asyncio.gather(*[DBOS.start_workflow_async(basket_workflow, ["apple"]) for _ in range(20)])
        results = await asyncio.gather(*[h.get_result() for h in handles])
        assert [r["total"] for r in results] == [1.5] * 20

    asyncio.run(main())


def test_async_step_retries_and_exhaustion(dbos: Any) -> None:
    async def main() -> None:
        key = new_id("aflaky")
        with SetWorkflowID(key):
            assert await flaky_async_workflow(key, 2) == 3
        steps = await DBOS.list_workflow_steps_async(key)
        assert [(s["function_name"], s["output"]) for s in steps] == [("flaky_async_step", 3)]
        key2 = new_id("aflaky")
        with pytest.raises(DBOSMaxStepRetriesExceeded):
            with SetWorkflowID(key2):
                await flaky_async_workflow(key2, 10)
        assert flaky[key2] == 3

    asyncio.run(main())


def test_async_cancel_and_resume(dbos: Any) -> None:
    key = new_id("acancel")
    gates[key], reached[key] = threading.Event(), threading.Event()

    async def main() -> None:
        handle = await DBOS.start_workflow_async(pausing_async_workflow, key)
        await asyncio.get_running_loop().run_in_executor(None, reached[key].wait, WAIT)
        run = dbos_module._instance._engine.runs[handle.workflow_id]  # type: ignore[union-attr]
        await DBOS.cancel_workflow_async(handle.workflow_id)
        assert await asyncio.get_running_loop().run_in_executor(None, run.stop_event.wait, WAIT)
        gates[key].set()
        with pytest.raises(DBOSAwaitedWorkflowCancelledError):
            await handle.get_result()
        assert runs[(key, 2)] == 0
        resumed = await DBOS.resume_workflow_async(handle.workflow_id)
        assert await resumed.get_result() == [1, 2]
        assert runs[(key, 1)] == 1 and runs[(key, 2)] == 1

    asyncio.run(main())


def test_async_client(dbos: Any, agent_env: AgentEnv) -> None:
    async def main() -> None:
        client = DBOSClient(agent_socket=agent_env.socket)
        try:
            handle = await client.enqueue_async({"workflow_name": "basket_workflow", "queue_name": "pytest_async"}, ["pear"])
            assert (await handle.get_result())["total"] == 2.0
            assert (await handle.get_status()).status == "SUCCESS"
            steps = await client.list_workflow_steps_async(handle.workflow_id)
            assert [s["function_name"] for s in steps] == ["fetch_price", "sync_tax"]
            listed = await client.list_workflows_async(workflow_ids=[handle.workflow_id])
            assert listed[0].name == "basket_workflow"
        finally:
            client.destroy()

    asyncio.run(main())


def test_a_wait_abandoned_by_its_task_leaves_the_connection_working(dbos: Any) -> None:
    key = new_id("abandon")
    gates[key], reached[key] = threading.Event(), threading.Event()

    link = dbos_module._instance._engine.link  # type: ignore[union-attr]
    conn = link.current()
    assert conn is not None

    async def main() -> None:
        handle = await DBOS.start_workflow_async(pausing_async_workflow, key)
        await asyncio.get_running_loop().run_in_executor(None, reached[key].wait, WAIT)
        polling = await DBOS.retrieve_workflow_async(handle.workflow_id)
        # The task waiting on the agent's answer is cancelled; the answer
        # arrives later, when the workflow ends, and must be dropped quietly.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(polling.get_result(), 0.05)
        gates[key].set()
        assert await handle.get_result() == [1, 2]
        assert await DBOS.get_result_async(handle.workflow_id) == [1, 2]

    asyncio.run(main())
    # The same connection still serves requests after the late answer.
    assert DBOS.get_workflow_status("no-such-workflow") is None
    assert link.current() is conn, "the connection was not torn down"
