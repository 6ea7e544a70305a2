"""Messages between workflows against the real agent: send and recv from
workflows and from outside, topics, idempotency keys, messages that wait for
their receiver, timeouts, bulk sends, concurrency (every message consumed
once), and what each call records."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List, Optional

import pytest

from dbos_agent import (
    DBOS,
    DBOSAwaitedWorkflowCancelledError,
    DBOSClient,
    DBOSNonExistentWorkflowError,
    Queue,
    SendMessage,
    SetEnqueueOptions,
    SetWorkflowID,
    WorkflowSerializationFormat,
)
from dbos_agent import _registry as dbos_module

from conftest import AgentEnv, new_id, query, step_names, wait_until

WAIT = 30.0
msg_queue = Queue("pytest_messages")
started: Dict[str, threading.Event] = {}


def on_start(wid: str) -> threading.Event:
    return started.setdefault(wid, threading.Event())


@DBOS.workflow()
def receiver(n: int, topic: Optional[str] = None, timeout: float = WAIT) -> List[Any]:
    wid = DBOS.workflow_id
    assert wid is not None
    on_start(wid).set()
    return [DBOS.recv(topic, timeout_seconds=timeout) for _ in range(n)]


@DBOS.workflow()
def sender(destination: str, messages: List[Any], topic: Optional[str] = None) -> int:
    for m in messages:
        DBOS.send(destination, m, topic)
    return len(messages)


@DBOS.step()
def send_from_step(destination: str, message: Any) -> str:
    DBOS.send(destination, message, "from-step")
    return "sent"


@DBOS.workflow()
def step_sender(destination: str) -> str:
    return send_from_step(destination, {"via": "step"})


@DBOS.workflow()
def bad_sender(destination: str) -> str:
    try:
        DBOS.send(destination, "lost")
    except DBOSNonExistentWorkflowError as e:
        return f"caught {e.destination_id}"
    return "sent"


@DBOS.workflow()
async def async_pair_receiver(topic: str) -> List[Any]:
    # Two receives in flight at once on one destination and topic. Woken by
    # one message, both try to take it: one gets it, the other gets nothing
    # (None, as in DBOS Python) and never the same message; a later receive
    # takes what is left.
    got = [m for m in await asyncio.gather(DBOS.recv_async(topic, 10), DBOS.recv_async(topic, 10)) if m is not None]
    while len(got) < 2:
        got.append(await DBOS.recv_async(topic, 10))
    return got


@DBOS.workflow(serialization_type=WorkflowSerializationFormat.PORTABLE)
def portable_sender(destination: str) -> None:
    DBOS.send(destination, {"n": 1}, "portable")


def test_send_from_outside_and_recv_in_a_workflow(dbos: Any) -> None:
    wid = new_id("recv")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(receiver, 2, "orders")
    DBOS.send(wid, {"order": 1}, "orders")
    DBOS.send(wid, "second", "orders")
    DBOS.send(wid, "other topic", "returns")
    assert handle.get_result() == [{"order": 1}, "second"]
    # recv takes N and N+1 (its deadline), as DBOS records them.
    assert step_names(wid) == ["DBOS.recv", "DBOS.sleep", "DBOS.recv", "DBOS.sleep"]
    steps = DBOS.list_workflow_steps(wid)
    assert [s["output"] for s in steps[::2]] == [{"order": 1}, "second"]


def test_default_topic_and_send_from_a_workflow(dbos: Any, agent_env: AgentEnv) -> None:
    rid, sid = new_id("recv-default"), new_id("sender")
    with SetWorkflowID(rid):
        handle = DBOS.start_workflow(receiver, 3)
    with SetWorkflowID(sid):
        assert sender(rid, ["a", None, 3]) == 3
    assert handle.get_result() == ["a", None, 3]
    assert step_names(sid) == ["DBOS.send", "DBOS.send", "DBOS.send"]
    rows = query(f'SELECT topic FROM "{agent_env.schema}".notifications WHERE destination_uuid = %s', (rid,))
    assert {r[0] for r in rows} == {"__null__topic__"}


def test_recv_times_out_with_none(dbos: Any) -> None:
    wid = new_id("recv-timeout")
    with SetWorkflowID(wid):
        assert receiver(1, "nothing", 0.3) == [None]
    assert step_names(wid) == ["DBOS.recv", "DBOS.sleep"]


def test_message_sent_before_the_receiver_runs_is_delivered(dbos: Any) -> None:
    wid = new_id("recv-later")
    with SetWorkflowID(wid), SetEnqueueOptions(delay_seconds=60):
        handle = msg_queue.enqueue(receiver, 1, "early")
    assert handle.get_status().status == "DELAYED"
    DBOS.send(wid, "waiting for you", "early")
    DBOS.set_workflow_delay(wid, delay_seconds=0)
    assert handle.get_result() == ["waiting for you"]


def test_idempotency_key_delivers_once(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("recv-idem")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(receiver, 2, "idem", 1.0)
    with DBOSClient(agent_socket=agent_env.socket) as client:
        client.send(wid, "once", "idem", "key-1")
        client.send(wid, "once again", "idem", "key-1")
    DBOS.send(wid, "twice", "idem", idempotency_key="key-1")
    assert handle.get_result() == ["once", None]


def test_send_to_a_missing_workflow_raises_and_is_recorded(dbos: Any) -> None:
    missing = new_id("nobody")
    with pytest.raises(DBOSNonExistentWorkflowError):
        DBOS.send(missing, "hello")
    wid = new_id("bad-sender")
    with SetWorkflowID(wid):
        assert bad_sender(missing) == f"caught {missing}"
    (step,) = DBOS.list_workflow_steps(wid)
    assert step["function_name"] == "DBOS.send"
    assert isinstance(step["error"], DBOSNonExistentWorkflowError) and step["error"].destination_id == missing


def test_bulk_send_is_all_or_nothing(dbos: Any, agent_env: AgentEnv) -> None:
    a, b = new_id("bulk-a"), new_id("bulk-b")
    with SetWorkflowID(a):
        ha = DBOS.start_workflow(receiver, 1, "bulk", 5.0)
    with SetWorkflowID(b):
        hb = DBOS.start_workflow(receiver, 1, "bulk", 5.0)
    with pytest.raises(DBOSNonExistentWorkflowError):
        DBOS.send_bulk([SendMessage(a, "x", "bulk"), SendMessage(new_id("nobody"), "y", "bulk")])
    with DBOSClient(agent_socket=agent_env.socket) as client:
        client.send_bulk([SendMessage(a, "to a", "bulk"), SendMessage(b, "to b", "bulk")])
    assert (ha.get_result(), hb.get_result()) == (["to a"], ["to b"])


def test_bulk_send_is_received_in_list_order(dbos: Any, agent_env: AgentEnv) -> None:
    # One transaction, so one database clock for all: the order is the list's,
    # and created_at says so to every reader (the SDKs order by it alone).
    wid = new_id("bulk-order")
    n = 30
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(receiver, n, "order")
    DBOS.send_bulk([SendMessage(wid, i, "order") for i in range(n)])
    assert handle.get_result() == list(range(n))
    rows = query(
        f'SELECT created_at_epoch_ms FROM "{agent_env.schema}".notifications WHERE destination_uuid = %s'
        " ORDER BY created_at_epoch_ms",
        (wid,),
    )
    stamps = [r[0] for r in rows]
    assert len(set(stamps)) == n, "a millisecond each: no tie left for a reader to break"


def test_send_from_a_step_is_not_a_step_of_its_own(dbos: Any) -> None:
    rid, sid = new_id("recv-step"), new_id("step-sender")
    with SetWorkflowID(rid):
        handle = DBOS.start_workflow(receiver, 1, "from-step")
    with SetWorkflowID(sid):
        assert step_sender(rid) == "sent"
    assert handle.get_result() == [{"via": "step"}]
    assert step_names(sid) == ["send_from_step"]


def test_concurrent_senders_every_message_received_once_in_order(dbos: Any) -> None:
    wid = new_id("recv-many")
    per_sender, senders = 15, 3
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(receiver, per_sender * senders, "many")

    def send_all(s: int) -> None:
        for i in range(per_sender):
            DBOS.send(wid, f"{s}:{i}", "many")

    threads = [threading.Thread(target=send_all, args=(s,)) for s in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = handle.get_result()
    assert sorted(got) == sorted(f"{s}:{i}" for s in range(senders) for i in range(per_sender))
    for s in range(senders):
        assert [m for m in got if m.startswith(f"{s}:")] == [f"{s}:{i}" for i in range(per_sender)]


def test_two_receives_in_flight_never_get_one_message_twice(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("recv-pair")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(async_pair_receiver, "pair")
    DBOS.send(wid, "first", "pair")
    DBOS.send(wid, "second", "pair")
    assert sorted(handle.get_result()) == ["first", "second"]
    rows = query(
        f'SELECT consumed, consumed_by_function_id FROM "{agent_env.schema}".notifications WHERE destination_uuid = %s',
        (wid,),
    )
    assert len(rows) == 2 and all(r[0] for r in rows) and len({r[1] for r in rows}) == 2


def test_portable_workflow_sends_portable_json(dbos: Any, agent_env: AgentEnv) -> None:
    rid = new_id("recv-portable")
    with SetWorkflowID(rid):
        handle = DBOS.start_workflow(receiver, 1, "portable")
    portable_sender(rid)
    assert handle.get_result() == [{"n": 1}]
    rows = query(
        f'SELECT message, serialization FROM "{agent_env.schema}".notifications WHERE destination_uuid = %s', (rid,)
    )
    assert rows == [('{"n":1}', "portable_json")]


def test_async_twins_send_and_recv(dbos: Any, agent_env: AgentEnv) -> None:
    async def main() -> List[Any]:
        wid = new_id("recv-async")
        with SetWorkflowID(wid):
            handle = await DBOS.start_workflow_async(async_pair_receiver, "async")
        await DBOS.send_async(wid, 1, "async")
        with DBOSClient(agent_socket=agent_env.socket) as client:
            await client.send_async(wid, 2, "async")
        return await handle.get_result()

    assert sorted(asyncio.run(main())) == [1, 2]


@DBOS.workflow()
def long_sleeper() -> str:
    DBOS.sleep(WAIT)
    return "woke"


@DBOS.workflow()
async def long_async_sleeper() -> str:
    await DBOS.sleep_async(WAIT)
    return "woke"


def test_cancel_interrupts_waits_in_recv_and_sleep(dbos: Any) -> None:
    runs = dbos_module._instance._engine.runs  # type: ignore[union-attr]
    handles = []
    for wf, args in ((receiver, (1, "never", WAIT)), (long_sleeper, ()), (long_async_sleeper, ())):
        wid = new_id("interrupted")
        with SetWorkflowID(wid):
            handles.append(DBOS.start_workflow(wf, *args))
        wait_until(lambda: len(DBOS.list_workflow_steps(wid)) == 1, f"{wid} waits")
    for h in handles:
        DBOS.cancel_workflow(h.workflow_id)
    for h in handles:
        with pytest.raises(DBOSAwaitedWorkflowCancelledError):
            h.get_result()
        # The run here stopped waiting at once, long before its timeout.
        wait_until(lambda: h.workflow_id not in runs, f"{h.workflow_id} stops", timeout=5)
