"""Debouncing from workflow code and under SetWorkflowTimeout, on the real
agent: the debounce is the caller's step DBOS.debounce_delayed_workflow,
recorded with the bounce, and a workflow it creates is the caller's child at
the next step, as DBOS Python 3.4 numbers and records them; a replay (here
after a SIGKILL of the worker) answers from the history and bounces nothing;
a debounced workflow's SetWorkflowTimeout starts when it is dequeued."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Dict, List, Tuple

import pytest

from dbos_agent import (
    DBOS,
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

from conftest import AgentEnv, Worker, effect_counts

DEBOUNCE_STEP = "DBOS.debounce_delayed_workflow"
LONG = 1_000_000.0  # a period that keeps the debounced workflow DELAYED until a later call shortens it
FREE = {
    "bounced_workflow_id": None,
    "holder_workflow_id": None,
    "holder_is_debounced": False,
    "holder_workflow_name": None,
    "holder_application_name": None,
}

tdb_queue = Queue("tdb_queue")


@DBOS.workflow()
def tdb_target(x: int) -> int:
    return x


@DBOS.workflow()
async def tdb_target_async(x: int) -> int:
    return x


debouncer = Debouncer.create(tdb_target, queue=tdb_queue)


@DBOS.workflow()
def tdb_parent(key: str, pinned: str) -> Tuple[str, str, str]:
    first = debouncer.debounce(key, LONG, 1)  # steps 1 and 2: the key is free
    second = debouncer.debounce(key, 0.2, 2)  # step 3: a bounce
    second.get_result()  # step 4
    with SetWorkflowID(pinned):
        third = debouncer.debounce(key, 0.2, 3)  # steps 5 and 6, the child under the pinned id
    return first.workflow_id, second.workflow_id, third.workflow_id


@DBOS.workflow()
def tdb_collides(key: str) -> str:
    try:
        debouncer.debounce(key, 1.0, 1)
    except DBOSQueueDeduplicatedError as e:
        return f"deduplicated {e.workflow_id} {e.queue_name} {e.deduplication_id}"
    return "debounced"


@DBOS.workflow()
def tdb_short_lived_parent(key: str) -> str:
    return debouncer.debounce(key, 2.0, 5).workflow_id


@DBOS.step()
def tdb_step_debounces(key: str) -> str:
    return debouncer.debounce(key, 1.0, 1).workflow_id


@DBOS.workflow()
def tdb_in_step(key: str) -> str:
    return tdb_step_debounces(key)


@DBOS.workflow()
async def tdb_parent_async(key: str) -> Tuple[str, str, int]:
    d = Debouncer.create_async(tdb_target_async)
    first = await d.debounce_async(key, LONG, 1)
    second = await d.debounce_async(key, 0.2, 2)
    return first.workflow_id, second.workflow_id, await second.get_result()


def _steps(workflow_id: str) -> List[Tuple[int, str, Any, Any]]:
    return [
        (s["function_id"], s["function_name"], s["output"], s["child_workflow_id"])
        for s in DBOS.list_workflow_steps(workflow_id)
    ]


def test_a_debounce_from_workflow_code_is_its_step_and_creates_its_child(dbos: Any) -> None:
    key, wid, pinned = uuid.uuid4().hex[:8], f"tdb-{uuid.uuid4()}", f"pinned-{uuid.uuid4()}"
    with SetWorkflowID(wid):
        first, second, third = tdb_parent(key, pinned)
    # DBOS's ids: the created workflow is the child at the step after the debounce.
    assert first == second == f"{wid}-2"
    assert third == pinned
    assert DBOS.retrieve_workflow(first).get_result() == 2
    assert DBOS.retrieve_workflow(third).get_result() == 3
    bounced = dict(FREE, bounced_workflow_id=first)
    assert _steps(wid) == [
        (1, DEBOUNCE_STEP, FREE, None),
        (2, "tdb_target", None, first),
        (3, DEBOUNCE_STEP, bounced, None),
        (4, "DBOS.getResult", 2, first),
        (5, DEBOUNCE_STEP, FREE, None),
        (6, "tdb_target", None, pinned),
    ]
    status = DBOS.get_workflow_status(first)
    assert status is not None
    assert status.parent_workflow_id == wid and status.queue_name == "tdb_queue"
    assert len([w for w in DBOS.list_workflows(name="tdb_target") if w.workflow_id in (first, third)]) == 2


def test_a_debounce_from_workflow_code_that_collides_is_recorded_once(dbos: Any) -> None:
    key = uuid.uuid4().hex[:8]
    dedup_id = f"tdb_target-{key}"
    with SetEnqueueOptions(deduplication_id=dedup_id):
        holder = tdb_queue.enqueue(tdb_target, 0)
    holder.get_result()
    # Released: the holder no longer holds the key, so hold it with a delayed plain enqueue.
    with SetEnqueueOptions(deduplication_id=dedup_id, delay_seconds=LONG):
        holder = tdb_queue.enqueue(tdb_target, 0)
    wid = f"tdb-{uuid.uuid4()}"
    try:
        with SetWorkflowID(wid):
            assert tdb_collides(key) == f"deduplicated {holder.workflow_id} tdb_queue {dedup_id}"
        recorded = dict(
            FREE, holder_workflow_id=holder.workflow_id, holder_workflow_name="tdb_target", holder_application_name="pytest"
        )
        assert _steps(wid) == [(1, DEBOUNCE_STEP, recorded, None)]
    finally:
        DBOS.cancel_workflow(holder.workflow_id)


def test_a_debounced_workflow_does_not_inherit_its_callers_deadline(dbos: Any) -> None:
    with SetWorkflowTimeout(1.0):
        parent = DBOS.start_workflow(tdb_short_lived_parent, uuid.uuid4().hex[:8])
    assert parent.get_status().workflow_deadline_epoch_ms is not None
    debounced = DBOS.retrieve_workflow(parent.get_result())
    status = debounced.get_status()
    assert status.status == "DELAYED"
    assert status.workflow_deadline_epoch_ms is None and status.workflow_timeout_ms is None
    # Its delay outlasts the caller's deadline; it runs rather than being cancelled.
    assert debounced.get_result() == 5
    assert debounced.get_status().status == "SUCCESS"


def test_a_debounce_inside_a_step_is_a_bounce_of_its_own(dbos: Any) -> None:
    # As in DBOS: the step's outcome (the debounced workflow's id) is what
    # the workflow records; the bounce is no step of it and no child.
    key, wid = uuid.uuid4().hex[:8], f"tdb-step-{uuid.uuid4()}"
    with SetWorkflowID(wid):
        debounced_id = tdb_in_step(key)
    steps = _steps(wid)
    assert [(fid, name, out) for fid, name, out, _ in steps] == [(1, "tdb_step_debounces", debounced_id)]
    assert steps[0][3] is None
    debounced = DBOS.retrieve_workflow(debounced_id)
    assert debounced.get_status().parent_workflow_id is None
    assert debounced.get_result() == 1


def test_set_workflow_timeout_around_a_debounce_times_the_debounced_workflow(dbos: Any) -> None:
    key = uuid.uuid4().hex[:8]
    with SetWorkflowTimeout(5.0):
        first = debouncer.debounce(key, LONG, 1)
        second = debouncer.debounce(key, 0.2, 2)
    assert first.workflow_id == second.workflow_id
    delayed = first.get_status()
    assert delayed.workflow_timeout_ms == 5000
    assert delayed.workflow_deadline_epoch_ms is None  # set when it is dequeued, as DBOS sets it
    assert second.get_result() == 2
    done = second.get_status()
    assert done.workflow_timeout_ms == 5000
    assert done.workflow_deadline_epoch_ms is not None


def test_a_debouncer_clients_workflow_timeout_times_the_debounced_workflow(dbos: Any, agent_env: AgentEnv) -> None:
    client = DBOSClient(agent_socket=agent_env.socket, application_name="pytest")
    try:
        deb: DebouncerClient[int] = DebouncerClient(
            client, {"workflow_name": "tdb_target", "queue_name": "tdb_queue", "workflow_timeout": 7.0}
        )
        handle = deb.debounce(uuid.uuid4().hex[:8], 0.2, 4)
        assert handle.get_result() == 4
        status = handle.get_status()
        assert status.workflow_timeout_ms == 7000
        assert status.workflow_deadline_epoch_ms is not None
    finally:
        client.destroy()


def test_an_async_workflow_debounces(dbos: Any) -> None:
    key, wid = uuid.uuid4().hex[:8], f"tdb-{uuid.uuid4()}"

    async def main() -> Tuple[str, str, int]:
        with SetWorkflowID(wid):
            return await tdb_parent_async(key)

    first, second, result = asyncio.run(main())
    assert first == second == f"{wid}-2"
    assert result == 2
    assert [(fid, name) for fid, name, _, _ in _steps(wid)] == [
        (1, DEBOUNCE_STEP), (2, "tdb_target_async"), (3, DEBOUNCE_STEP), (4, "DBOS.getResult"),
    ]


def _worker_env(env: AgentEnv, effects: str, block: bool) -> Dict[str, str]:
    return {"DBOS_AGENT_SOCKET": env.socket, "EFFECTS_FILE": effects, "BLOCK": "1" if block else "0"}


def test_a_worker_killed_after_its_debounces_does_not_debounce_again(agent_env: AgentEnv, workers: List[Worker]) -> None:
    effects = agent_env.path("effects-debounce")
    first = Worker("debounce_worker.py", _worker_env(agent_env, effects, block=True))
    workers.append(first)
    first.out.wait_for("ready")
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        key = uuid.uuid4().hex[:8]
        handle = client.enqueue({"workflow_name": "debounce_parent", "queue_name": "debounce_crash_queue"}, key, LONG)
        wid = handle.workflow_id
        first.out.wait_for(f"blocking {wid}")
        debounced = client.retrieve_workflow(f"{wid}-2")
        before = debounced.get_status()
        assert before.status == "DELAYED"
        first.kill()

        # A new worker replays the parent: both debounces come from its
        # history, so the delayed workflow is neither bounced nor created again.
        second = Worker("debounce_worker.py", _worker_env(agent_env, effects, block=False))
        workers.append(second)
        assert handle.get_result() == [f"{wid}-2", f"{wid}-2"]
        steps = client.list_workflow_steps(wid)
        assert [(s["function_id"], s["function_name"], s["child_workflow_id"]) for s in steps] == [
            (1, DEBOUNCE_STEP, None), (2, "debounce_target", f"{wid}-2"), (3, DEBOUNCE_STEP, None), (4, "debounce_gate", None),
        ]
        assert steps[2]["output"] == dict(FREE, bounced_workflow_id=f"{wid}-2")
        after = debounced.get_status()
        assert after.status == "DELAYED"
        assert after.delay_until_epoch_ms == before.delay_until_epoch_ms
        assert after.updated_at == before.updated_at
        assert after.parent_workflow_id == wid
        assert after.workflow_timeout_ms == 30_000
        assert [w.workflow_id for w in client.list_workflows(name="debounce_target")] == [f"{wid}-2"]

        # Released, it runs once, with the bounce's inputs.
        client.set_workflow_delay(f"{wid}-2", delay_seconds=0)
        assert debounced.get_result() == 2
        assert effect_counts(effects) == {f"{wid}-2 2": 1}
        assert debounced.get_status().workflow_deadline_epoch_ms is not None
    finally:
        client.destroy()
