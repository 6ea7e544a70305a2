"""Async workflows under concurrency, as DBOS Python runs them: steps that
tasks of one workflow start together are numbered in the order they were
called, a wait for a workflow that does not exist yet waits for it, a
step reservation runs only from its workflow while it runs, and a DBOS
launched from inside an event loop runs its queued async workflows on that
loop. Against the real agent."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List

from dbos_agent import DBOS, DBOSException, Queue, SetWorkflowID

from conftest import AgentEnv, new_id

WAIT = 30.0
loops_queue = Queue("pytest_async_ordering")


async def _async_value(value: str) -> str:
    await asyncio.sleep(0)
    return value


@DBOS.workflow()
async def gathered_steps_workflow() -> List[str]:
    """Steps started at once by tasks, sync functions (whose bodies run on
    threads) and async ones in turn."""
    # Idle threads in the loop's pool, so a sync step's thread starts at
    # once rather than being created while the loop waits.
    await asyncio.gather(*[asyncio.to_thread(lambda: None) for _ in range(4)])

    async def one(name: str) -> str:
        if name.startswith("sync"):
            return await DBOS.run_step_async({"name": name}, lambda: name)
        return await DBOS.run_step_async({"name": name}, _async_value, name)

    return list(await asyncio.gather(*[asyncio.create_task(one(n)) for n in ORDER]))


ORDER = ["sync_1", "async_2", "sync_3", "async_4", "sync_5", "async_6"]


@DBOS.workflow()
async def awaited_later_workflow(value: str) -> str:
    return value


@DBOS.workflow()
async def loop_identity_workflow() -> int:
    await DBOS.sleep_async(0.01)
    return id(asyncio.get_running_loop())


def test_steps_started_together_are_numbered_in_call_order(dbos: Any) -> None:
    """A sync function run with run_step_async takes its step id when it is
    called, on the loop, not when its thread gets to it."""

    async def main() -> None:
        wid = new_id("gathered")
        with SetWorkflowID(wid):
            assert await gathered_steps_workflow() == ORDER
        steps = await DBOS.list_workflow_steps_async(wid)
        assert [(s["function_id"], s["function_name"], s["output"]) for s in steps] == [
            (i + 1, n, n) for i, n in enumerate(ORDER)
        ]
        # A fork replays each step at its id (a name mismatch would fail it).
        forked = await DBOS.fork_workflow_async(wid, len(ORDER))
        assert await forked.get_result() == ORDER

    asyncio.run(main())


@DBOS.workflow()
async def ordering_child(value: str) -> str:
    return value


@DBOS.workflow()
async def child_and_step_workflow() -> List[str]:
    """A child called directly and a step, started at once by two tasks."""
    tasks = [
        asyncio.create_task(ordering_child("child")),
        asyncio.create_task(DBOS.run_step_async({"name": "beside_the_child"}, _async_value, "step")),
    ]
    return list(await asyncio.gather(*tasks))


def test_a_child_called_directly_takes_its_result_step_when_called(dbos: Any) -> None:
    """The parent's DBOS.getResult step of a child called directly is
    numbered with the child's start, before a step another task starts
    while the child is being started."""

    async def main() -> None:
        wid = new_id("child-order")
        with SetWorkflowID(wid):
            assert await child_and_step_workflow() == ["child", "step"]
        steps = await DBOS.list_workflow_steps_async(wid)
        assert [(s["function_id"], s["function_name"]) for s in steps] == [
            (1, ordering_child.__qualname__),
            (2, "DBOS.getResult"),
            (3, "beside_the_child"),
        ]
        assert steps[0]["child_workflow_id"] == steps[1]["child_workflow_id"] == f"{wid}-1"
        forked = await DBOS.fork_workflow_async(wid, 4)
        assert await forked.get_result() == ["child", "step"]

    asyncio.run(main())


def test_get_result_waits_for_a_workflow_not_created_yet(dbos: Any) -> None:
    """DBOS.get_result (and a handle's) on an id nothing has started yet
    waits for the workflow rather than failing, as DBOS Python does."""

    async def main() -> None:
        wid = new_id("later")
        waiting = asyncio.create_task(DBOS.get_result_async(wid))
        handle = await DBOS.retrieve_workflow_async(wid, existing_workflow=False)
        by_handle = asyncio.create_task(handle.get_result())
        # Nothing can answer them: a wait that failed would be done by now.
        done, _ = await asyncio.wait([waiting, by_handle], timeout=0.5)
        assert not done
        with SetWorkflowID(wid):
            await DBOS.start_workflow_async(awaited_later_workflow, "here")
        assert await asyncio.wait_for(waiting, WAIT) == "here"
        assert await asyncio.wait_for(by_handle, WAIT) == "here"

    asyncio.run(main())

    # The sync twin, from a thread, before the workflow exists.
    wid = new_id("later-sync")
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(DBOS.get_result(wid)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and not got
    with SetWorkflowID(wid):
        DBOS.start_workflow(awaited_later_workflow, "there")
    waiter.join(WAIT)
    assert got == ["there"]


orphans: List["asyncio.Task[Any]"] = []
gates: List[asyncio.Event] = []


@DBOS.workflow()
async def reservation_misuse_workflow() -> List[Any]:
    out: List[Any] = []
    reserved = DBOS.reserve_step()
    # A sync run on the loop's thread is refused, and uses nothing up.
    try:
        reserved.run(None, lambda: None)
    except RuntimeError as e:
        out.append(str(e))
    out.append(await reserved.run_async({"name": "reserved_sync"}, lambda: DBOS.step_id))

    async def run_late(late: Any) -> Any:
        await gates[0].wait()
        return await late.run_async(None, lambda: "ran")

    # A task the workflow leaves behind, holding a reservation of it.
    orphans.append(asyncio.create_task(run_late(DBOS.reserve_step())))
    return out


def test_a_reservation_is_run_async_on_a_loop_and_only_while_its_workflow_runs(dbos: Any) -> None:
    async def main() -> None:
        gate = asyncio.Event()
        gates[:] = [gate]
        wid = new_id("reserve-misuse")
        with SetWorkflowID(wid):
            assert await reservation_misuse_workflow() == [
                "run() was called while an event loop is running. Use await run_async(...) instead.",
                1,
            ]
        gate.set()
        try:
            await orphans[0]
            raise AssertionError("the orphaned reservation ran")
        except DBOSException as e:
            assert str(e) == (
                f"DBOS Error: Step 2 was reserved in workflow {wid} and must be run from that workflow, outside any step"
            )
        steps = await DBOS.list_workflow_steps_async(wid)
        assert [(s["function_id"], s["function_name"]) for s in steps] == [(1, "reserved_sync")]

    asyncio.run(main())


def test_launched_in_a_loop_runs_queued_async_workflows_there(agent_env: AgentEnv) -> None:
    """DBOS launched from a running loop runs the async workflows the agent
    pushes (a dequeued one) on that loop while it runs, and on its own
    background loop otherwise. (Last in the module: it relaunches DBOS.)"""
    DBOS.destroy()
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})

    async def main() -> None:
        DBOS.launch()
        handle = await loops_queue.enqueue_async(loop_identity_workflow)
        assert await handle.get_result() == id(asyncio.get_running_loop())

    try:
        asyncio.run(main())
        # That loop is gone: a queued async workflow runs on the background loop.
        handle = loops_queue.enqueue(loop_identity_workflow)
        background = handle.get_result()
        assert isinstance(background, int)
        handle = loops_queue.enqueue(loop_identity_workflow)
        assert handle.get_result() == background
    finally:
        DBOS.destroy()
