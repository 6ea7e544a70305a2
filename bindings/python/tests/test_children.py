"""Child workflows against the real agent: ids `<parent>-<step>`, the
parent's step naming its child, direct calls, start_workflow and enqueue
from workflow code, awaiting recorded as DBOS.getResult and replayed
without starting the child again, and cancel / delete cascading to
children."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Dict, List

import pytest

from dbos_agent import (
    DBOS,
    DBOSAwaitedWorkflowCancelledError,
    DBOSClient,
    Queue,
    SetWorkflowID,
)

from conftest import AgentEnv, new_id, wait_until

WAIT = 30.0
child_queue = Queue("pytest_children")
runs: Counter = Counter()


def steps_of(wid: str) -> List[Dict[str, Any]]:
    return DBOS.list_workflow_steps(wid)


@DBOS.step()
def double(x: int) -> int:
    return 2 * x


@DBOS.workflow()
def child(x: int) -> int:
    runs[("child", DBOS.workflow_id)] += 1
    return double(x)


@DBOS.workflow()
def failing_child(msg: str) -> None:
    raise ValueError(msg)


@DBOS.workflow()
def parent_calls(x: int) -> Dict[str, Any]:
    a = child(x)
    with SetWorkflowID(f"{DBOS.workflow_id}-named"):
        b = child(x + 1)
    try:
        failing_child("child failed")
        err = ""
    except ValueError as e:
        err = str(e)
    return {"a": a, "b": b, "err": err}


@DBOS.workflow()
def parent_starts(x: int) -> List[int]:
    h1 = DBOS.start_workflow(child, x)
    h2 = child_queue.enqueue(child, x + 10)
    h3 = DBOS.enqueue_workflow_with_options({"workflow_name": "child", "queue_name": "pytest_children"}, x + 20)
    return [h1.get_result(), h2.get_result(), h3.get_result()]


@DBOS.workflow()
def waiting_child() -> Any:
    return DBOS.recv("go", WAIT)


@DBOS.workflow()
def parent_of_waiter() -> Any:
    return DBOS.start_workflow(waiting_child).get_result()


@DBOS.workflow()
async def async_parent(x: int) -> List[int]:
    a = await async_child(x)
    h = await DBOS.start_workflow_async(async_child, x + 1)
    return [a, await h.get_result()]


@DBOS.workflow()
async def async_child(x: int) -> int:
    await asyncio.sleep(0)
    return x * 3


def test_direct_calls_make_children_with_deterministic_ids(dbos: Any) -> None:
    wid = new_id("parent")
    with SetWorkflowID(wid):
        assert parent_calls(5) == {"a": 10, "b": 12, "err": "child failed"}
    steps = steps_of(wid)
    assert [(s["function_id"], s["function_name"], s["child_workflow_id"]) for s in steps] == [
        (1, "child", f"{wid}-1"),
        (2, "DBOS.getResult", f"{wid}-1"),
        (3, "child", f"{wid}-named"),
        (4, "DBOS.getResult", f"{wid}-named"),
        (5, "failing_child", f"{wid}-5"),
        (6, "DBOS.getResult", f"{wid}-5"),
    ]
    assert steps[1]["output"] == 10 and isinstance(steps[5]["error"], ValueError)
    children = DBOS.list_workflows(parent_workflow_id=wid)
    assert sorted(c.workflow_id for c in children) == sorted([f"{wid}-1", f"{wid}-named", f"{wid}-5"])
    assert {c.parent_workflow_id for c in children} == {wid}
    assert DBOS.retrieve_workflow(f"{wid}-1").get_result() == 10


def test_started_and_enqueued_children_are_awaited_as_steps(dbos: Any) -> None:
    wid = new_id("starter")
    with SetWorkflowID(wid):
        assert parent_starts(1) == [2, 22, 42]
    names = [(s["function_name"], s["child_workflow_id"]) for s in steps_of(wid)]
    assert names == [
        ("child", f"{wid}-1"), ("child", f"{wid}-2"), ("child", f"{wid}-3"),
        ("DBOS.getResult", f"{wid}-1"), ("DBOS.getResult", f"{wid}-2"), ("DBOS.getResult", f"{wid}-3"),
    ]
    assert DBOS.get_workflow_status(f"{wid}-2").queue_name == "pytest_children"  # type: ignore[union-attr]


def test_a_replayed_parent_does_not_start_its_children_again(dbos: Any) -> None:
    wid = new_id("replayed")
    with SetWorkflowID(wid):
        assert parent_calls(1)["a"] == 2
    before = sum(n for (name, _), n in runs.items() if name == "child")
    # A fork from step 2 replays step 1 (the child's start): the fork awaits
    # the original child, records its own DBOS.getResult, and starts new
    # children only from step 3 on.
    fork = DBOS.fork_workflow(wid, 2)
    assert fork.get_result() == {"a": 2, "b": 4, "err": "child failed"}
    steps = steps_of(fork.workflow_id)
    assert steps[0]["child_workflow_id"] == f"{wid}-1"
    assert steps[1]["function_name"] == "DBOS.getResult" and steps[1]["child_workflow_id"] == f"{wid}-1"
    assert steps[2]["child_workflow_id"] == f"{fork.workflow_id}-named"
    assert runs[("child", f"{wid}-1")] == 1
    after = sum(n for (name, _), n in runs.items() if name == "child")
    assert after == before + 1  # only the fork's own second child ran


def test_cancel_with_children_cascades(dbos: Any) -> None:
    wid = new_id("cancel-parent")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(parent_of_waiter)
    child_id = f"{wid}-1"
    # Once the child waits in recv, its deadline is recorded.
    wait_until(lambda: len(steps_of(child_id)) == 1, "the child waits in recv")
    DBOS.cancel_workflow(wid, cancel_children=True)
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        handle.get_result()
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        DBOS.retrieve_workflow(child_id).get_result()
    assert DBOS.get_workflow_status(child_id).status == "CANCELLED"  # type: ignore[union-attr]


def test_delete_with_children_cascades(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("delete-parent")
    with SetWorkflowID(wid):
        parent_calls(2)
    DBOS.delete_workflow(wid)
    assert DBOS.get_workflow_status(wid) is None
    assert DBOS.get_workflow_status(f"{wid}-1") is not None

    wid2 = new_id("delete-tree")
    with SetWorkflowID(wid2):
        parent_calls(3)
    with DBOSClient(agent_socket=agent_env.socket) as client:
        client.delete_workflow(wid2, delete_children=True)
        assert client.list_workflows(workflow_id_prefix=wid2) == []


def test_async_children(dbos: Any) -> None:
    wid = new_id("async-parent")

    async def main() -> List[int]:
        with SetWorkflowID(wid):
            return await async_parent(2)

    assert asyncio.run(main()) == [6, 9]
    assert [(s["function_name"], s["child_workflow_id"]) for s in steps_of(wid)] == [
        ("async_child", f"{wid}-1"), ("DBOS.getResult", f"{wid}-1"),
        ("async_child", f"{wid}-3"), ("DBOS.getResult", f"{wid}-3"),
    ]
