"""The times a workflow's waits record on their steps, as DBOS Python records
them: DBOS.sleep spans the sleep (its completion is the projected wake time),
the deadline a recv or get_event registers (their DBOS.sleep) is an instant,
and the DBOS.recv / DBOS.getEvent step spans the wait, from the call to the
message or event."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List

from dbos_agent import DBOS, SetWorkflowID

from conftest import new_id, step_names, wait_until

SLEEP = 0.3
WAIT = 0.5


@DBOS.workflow()
def timing_sleeper() -> None:
    DBOS.sleep(SLEEP)


@DBOS.workflow()
async def timing_sleeper_async() -> None:
    await DBOS.sleep_async(SLEEP)


@DBOS.workflow()
def timing_receiver() -> Any:
    return DBOS.recv(timeout_seconds=60)


@DBOS.workflow()
def timing_getter(target: str) -> Any:
    return DBOS.get_event(target, "k", timeout_seconds=60)


@DBOS.workflow()
def timing_setter() -> None:
    DBOS.set_event("k", "v")


def only_step(workflow_id: str, name: str) -> Dict[str, Any]:
    steps: List[Dict[str, Any]] = [s for s in DBOS.list_workflow_steps(workflow_id) if s["function_name"] == name]
    assert len(steps) == 1, f"one {name} step expected, got {steps}"
    return steps[0]


def span(step: Dict[str, Any]) -> int:
    assert step["started_at_epoch_ms"] is not None and step["completed_at_epoch_ms"] is not None
    return int(step["completed_at_epoch_ms"] - step["started_at_epoch_ms"])


def test_sleep_spans_the_sleep(dbos: Any) -> None:
    handle = DBOS.start_workflow(timing_sleeper)
    handle.get_result()
    assert span(only_step(handle.workflow_id, "DBOS.sleep")) == int(SLEEP * 1000)


def test_async_sleep_spans_the_sleep(dbos: Any) -> None:
    async def main() -> str:
        handle = await DBOS.start_workflow_async(timing_sleeper_async)
        await handle.get_result()
        return handle.workflow_id

    assert span(only_step(asyncio.run(main()), "DBOS.sleep")) == int(SLEEP * 1000)


def test_recv_spans_the_wait_and_its_deadline_is_an_instant(dbos: Any) -> None:
    wid = new_id("timing-recv")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(timing_receiver)
    wait_until(lambda: "DBOS.sleep" in step_names(wid), "the recv registered its deadline")
    threading.Event().wait(WAIT)  # the wait whose span is measured
    DBOS.send(wid, "msg")
    assert handle.get_result() == "msg"

    assert span(only_step(wid, "DBOS.sleep")) == 0, "the deadline's registration is an instant"
    recv_ms = span(only_step(wid, "DBOS.recv"))
    assert recv_ms >= WAIT * 1000 - 50
    assert recv_ms < 60_000, "the recv ended when the message came, not at its deadline"


def test_get_event_spans_the_wait_and_its_deadline_is_an_instant(dbos: Any) -> None:
    target, wid = new_id("timing-target"), new_id("timing-getter")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(timing_getter, target)
    wait_until(lambda: "DBOS.sleep" in step_names(wid), "the get_event registered its deadline")
    threading.Event().wait(WAIT)  # the wait whose span is measured
    with SetWorkflowID(target):
        timing_setter()
    assert handle.get_result() == "v"

    assert span(only_step(wid, "DBOS.sleep")) == 0, "the deadline's registration is an instant"
    assert WAIT * 1000 - 50 <= span(only_step(wid, "DBOS.getEvent")) < 60_000
