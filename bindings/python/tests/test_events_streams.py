"""Events and streams against the real agent: set_event / get_event /
get_all_events in and out of workflows, waits and timeouts; write, close and
read streams, a reader ending at the close or when its writer ended, reads
recorded in workflows, timeouts, and the async twins."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List

import pytest

from dbos_agent import (
    DBOS,
    DBOSClient,
    DBOSStreamTimeoutError,
    SetWorkflowID,
)

from conftest import AgentEnv, gate, new_id, step_names

WAIT = 30.0


@DBOS.step()
def publish_from_step(key: str, value: Any) -> None:
    DBOS.set_event(key, value)


@DBOS.workflow()
def publisher(wait_key: str) -> str:
    DBOS.set_event("status", "started")
    DBOS.set_event("status", "working")
    publish_from_step("from_step", [1, 2])
    assert gate(wait_key).wait(WAIT)
    DBOS.set_event("status", "done")
    return "published"


@DBOS.workflow()
def late_publisher(wait_key: str) -> None:
    assert gate(wait_key).wait(WAIT)
    DBOS.set_event("late", "finally")


@DBOS.workflow()
def event_reader(target: str, key: str, timeout: float) -> Any:
    return DBOS.get_event(target, key, timeout)


@DBOS.workflow()
def all_events_reader(target: str) -> Dict[str, Any]:
    return DBOS.get_all_events(target)


@DBOS.workflow()
def streamer(key: str, values: List[Any], close: bool, wait_key: str) -> int:
    for i, v in enumerate(values):
        DBOS.write_stream(key, v)
        if i == 0 and wait_key:
            assert gate(wait_key).wait(WAIT)
    if close:
        DBOS.close_stream(key)
    return len(values)


@DBOS.step()
def write_from_step(key: str, value: Any) -> None:
    DBOS.write_stream(key, value)


@DBOS.workflow()
def step_streamer(key: str) -> None:
    write_from_step(key, "in a step")
    DBOS.close_stream(key)


@DBOS.workflow()
def closed_writer(key: str, empty_key: str) -> str:
    DBOS.write_stream(key, "v0")
    DBOS.close_stream(key)
    # As DBOS Python 3.4: a write past the close is accepted, and never read.
    DBOS.write_stream(key, "late")
    DBOS.close_stream(empty_key)
    return "written"


@DBOS.workflow()
def stream_reader(target: str, key: str) -> List[Any]:
    return list(DBOS.read_stream(target, key))


@DBOS.workflow()
async def async_streamer(key: str) -> None:
    await DBOS.write_stream_async(key, "a")
    await DBOS.set_event_async("ready", True)
    await DBOS.write_stream_async(key, "b")
    await DBOS.close_stream_async(key)


@DBOS.workflow()
async def async_reader(target: str, key: str) -> Dict[str, Any]:
    values = [v async for v in DBOS.read_stream_async(target, key)]
    ready = await DBOS.get_event_async(target, "ready", 5)
    return {"values": values, "ready": ready, "all": await DBOS.get_all_events_async(target)}


def test_events_in_and_out_of_workflows(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("publisher")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(publisher, wid)
    assert DBOS.get_event(wid, "from_step", WAIT) == [1, 2]
    assert DBOS.get_event(wid, "status", WAIT) == "working"
    assert DBOS.get_all_events(wid) == {"status": "working", "from_step": [1, 2]}
    # A workflow reading the event records it with its deadline.
    rid = new_id("event-reader")
    with SetWorkflowID(rid):
        assert event_reader(wid, "status", WAIT) == "working"
    assert step_names(rid) == ["DBOS.getEvent", "DBOS.sleep"]
    gate(wid).set()
    assert handle.get_result() == "published"
    with DBOSClient(agent_socket=agent_env.socket) as client:
        assert client.get_event(wid, "status", WAIT) == "done"
        assert client.get_all_events(wid) == {"status": "done", "from_step": [1, 2]}
    # The publisher recorded its own set_event calls; the one in a step is
    # covered by the step.
    assert step_names(wid) == ["DBOS.setEvent", "DBOS.setEvent", "publish_from_step", "DBOS.setEvent"]
    aid = new_id("all-events")
    with SetWorkflowID(aid):
        assert all_events_reader(wid) == {"status": "done", "from_step": [1, 2]}
    assert step_names(aid) == ["DBOS.get_events"]


def test_get_event_waits_for_the_value_and_times_out(dbos: Any) -> None:
    wid = new_id("late-publisher")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(late_publisher, wid)
    assert DBOS.get_event(wid, "late", 0.2) is None
    rid = new_id("event-timeout")
    with SetWorkflowID(rid):
        assert event_reader(wid, "late", 0.2) is None
    assert step_names(rid) == ["DBOS.getEvent", "DBOS.sleep"]
    assert DBOS.list_workflow_steps(rid)[0]["output"] is None
    # Readers waiting for a value still to come get it when it is set.
    wid2 = new_id("event-waiter")
    with SetWorkflowID(wid2):
        waiter = DBOS.start_workflow(event_reader, wid, "late", WAIT)
    got: List[Any] = []
    outside = threading.Thread(target=lambda: got.append(DBOS.get_event(wid, "late", WAIT)))
    outside.start()
    gate(wid).set()
    outside.join()
    assert got == ["finally"]
    assert waiter.get_result() == "finally"
    assert handle.get_result() is None


def test_stream_read_to_its_close(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("streamer")
    key = new_id("gate")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(streamer, "out", [{"n": 0}, "one", None, 3], True, key)
    # The reader gets the first value while the writer is still active.
    reader = DBOS.read_stream(wid, "out")
    assert next(reader) == {"n": 0}
    gate(key).set()
    assert list(reader) == ["one", None, 3]
    assert handle.get_result() == 4
    assert step_names(wid) == ["DBOS.writeStream"] * 4 + ["DBOS.closeStream"]
    with DBOSClient(agent_socket=agent_env.socket) as client:
        assert list(client.read_stream(wid, "out", offset=2)) == [None, 3]
        assert client.read_stream_offset(wid, "out", 1) == "one"
        with pytest.raises(DBOSStreamTimeoutError):
            client.read_stream_offset(wid, "out", 4)
    assert DBOS.read_stream_offset(wid, "out", 3) == 3


def test_stream_ends_when_its_writer_ends_without_closing(dbos: Any) -> None:
    wid = new_id("streamer-open")
    with SetWorkflowID(wid):
        streamer("open", ["x", "y"], False, "")
    assert list(DBOS.read_stream(wid, "open")) == ["x", "y"]
    assert list(DBOS.read_stream(wid, "nothing-here")) == []


def test_stream_read_times_out_while_the_writer_is_silent(dbos: Any) -> None:
    wid = new_id("streamer-slow")
    key = new_id("gate")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(streamer, "slow", ["first", "second"], True, key)
    reader = DBOS.read_stream(wid, "slow", timeout_seconds=0.3)
    assert next(reader) == "first"
    with pytest.raises(DBOSStreamTimeoutError):
        next(reader)
    gate(key).set()
    assert handle.get_result() == 2
    with pytest.raises(ValueError):
        next(DBOS.read_stream(wid, "slow", timeout_seconds=-1))


def test_stream_reads_in_a_workflow_are_recorded(dbos: Any) -> None:
    wid = new_id("streamer-rec")
    with SetWorkflowID(wid):
        streamer("rec", [1, 2], True, "")
    rid = new_id("stream-reader")
    with SetWorkflowID(rid):
        assert stream_reader(wid, "rec") == [1, 2]
    steps = DBOS.list_workflow_steps(rid)
    assert [(s["function_name"], s["output"]) for s in steps] == [
        ("DBOS.readStream", 1), ("DBOS.readStream", 2), ("DBOS.readStream", "__DBOS_STREAM_CLOSED__"),
    ]


def test_stream_written_from_a_step_and_a_closed_stream_ends_at_its_close(dbos: Any) -> None:
    wid = new_id("step-streamer")
    with SetWorkflowID(wid):
        step_streamer("s")
    assert list(DBOS.read_stream(wid, "s")) == ["in a step"]
    assert step_names(wid) == ["write_from_step", "DBOS.closeStream"]
    cid = new_id("closed-writer")
    with SetWorkflowID(cid):
        assert closed_writer("c", "e") == "written"
    assert list(DBOS.read_stream(cid, "c")) == ["v0"]
    assert list(DBOS.read_stream(cid, "e")) == []
    assert step_names(cid) == ["DBOS.writeStream", "DBOS.closeStream", "DBOS.writeStream", "DBOS.closeStream"]


def test_async_events_and_streams(dbos: Any, agent_env: AgentEnv) -> None:
    async def main() -> Dict[str, Any]:
        wid = new_id("async-streamer")
        with SetWorkflowID(wid):
            writer = await DBOS.start_workflow_async(async_streamer, "k")
        rid = new_id("async-reader")
        with SetWorkflowID(rid):
            out = await async_reader(wid, "k")
        await writer.get_result()
        with DBOSClient(agent_socket=agent_env.socket) as client:
            out["client"] = [v async for v in client.read_stream_async(wid, "k")]
            out["client_event"] = await client.get_event_async(wid, "ready", 1)
            out["offset"] = await DBOS.read_stream_offset_async(wid, "k", 1)
        return out

    out = asyncio.run(main())
    assert out == {
        "values": ["a", "b"], "ready": True, "all": {"ready": True},
        "client": ["a", "b"], "client_event": True, "offset": "b",
    }
