"""DBOS Python 3.4's async-only step options, ``timeout_seconds`` and
``preemptible`` (on @DBOS.step and in DBOS.run_step's StepOptions), and its
checks of step options, with its errors and messages, on the real agent."""

from __future__ import annotations

import asyncio
import math
import threading
from collections import Counter
from typing import Any, Dict, List

import pytest

from dbos_agent import DBOS, DBOSException, DBOSMaxStepRetriesExceeded, DBOSStepTimeoutError, SetWorkflowID

from conftest import new_id

WAIT = 30.0
attempts: Counter = Counter()
cleaned: Dict[str, threading.Event] = {}
entered: Dict[str, threading.Event] = {}
let_finish: Dict[str, bool] = {}


def event(d: Dict[str, threading.Event], key: str) -> threading.Event:
    return d.setdefault(key, threading.Event())


@DBOS.step(timeout_seconds=0.2)
async def slow_step(key: str, seconds: float) -> str:
    attempts[key] += 1
    try:
        await asyncio.sleep(seconds)
        return "done"
    finally:
        event(cleaned, key).set()


@DBOS.workflow()
async def timed_out(key: str) -> str:
    return await slow_step(key, WAIT)


@DBOS.step(timeout_seconds=0.3, retries_allowed=True, interval_seconds=0, max_attempts=3)
async def slow_then_quick(key: str) -> int:
    attempts[key] += 1
    if attempts[key] == 1:
        await asyncio.sleep(WAIT)  # cut by the timeout; the retry is quick
    return attempts[key]


@DBOS.workflow()
async def retried_after_timeout(key: str) -> int:
    return await slow_then_quick(key)


@DBOS.step(timeout_seconds=0.1, retries_allowed=True, interval_seconds=0, max_attempts=2)
async def always_slow(key: str) -> None:
    attempts[key] += 1
    await asyncio.sleep(WAIT)


@DBOS.workflow()
async def exhausted_by_timeouts(key: str) -> None:
    await always_slow(key)


@DBOS.step(preemptible=True)
async def preemptible_step(key: str) -> str:
    attempts[key] += 1
    event(entered, key).set()
    try:
        while not let_finish.get(key):
            await asyncio.sleep(0.01)
        return f"finished on attempt {attempts[key]}"
    finally:
        event(cleaned, key).set()


@DBOS.workflow()
async def preempted(key: str) -> str:
    return await preemptible_step(key)


async def sleepy(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "slept"


@DBOS.workflow()
async def run_step_with_timeout(seconds: float) -> str:
    return await DBOS.run_step_async({"name": "sleepy", "timeout_seconds": 0.2}, sleepy, seconds)


async def async_validator(e: BaseException) -> bool:
    return True


@DBOS.step(retries_allowed=True, should_retry=async_validator)
def sync_step_async_validator(key: str) -> str:
    attempts[key] += 1
    return "ran"


@DBOS.workflow()
def calls_sync_step_with_async_validator(key: str) -> str:
    return sync_step_async_validator(key)


def test_step_option_checks_at_declaration(dbos: Any) -> None:
    def sync(x: int) -> int:
        return x

    async def coro(x: int) -> int:
        return x

    with pytest.raises(DBOSException, match=r"^DBOS Error: Step .*sync is sync but preemptible=True\. Preemption is only supported for async steps\.$"):
        DBOS.step(preemptible=True)(sync)
    # preemptible is checked first.
    with pytest.raises(DBOSException, match="preemptible=True"):
        DBOS.step(preemptible=True, timeout_seconds=1)(sync)
    with pytest.raises(DBOSException, match=r"^DBOS Error: Step named is sync but timeout_seconds is set\. Step timeouts are only supported for async steps\.$"):
        DBOS.step(name="named", timeout_seconds=1)(sync)
    for bad in (0, -1.5, math.nan, math.inf):
        with pytest.raises(DBOSException, match=rf"^DBOS Error: Step t has timeout_seconds={bad}\. Step timeouts must be positive and finite\.$"):
            DBOS.step(name="t", timeout_seconds=bad)(coro)
    # Valid ones declare, and outside a workflow the step is a plain call.
    assert asyncio.run(DBOS.step(timeout_seconds=0.01, preemptible=True)(sleepy)(0.05)) == "slept"


def test_sync_step_with_async_validator_fails_when_called_in_a_workflow(dbos: Any) -> None:
    key = new_id("validator")
    # Declared without complaint (above) and a plain call outside a workflow...
    assert sync_step_async_validator(key) == "ran"
    # ... refused when a workflow calls it, before it runs.
    with pytest.raises(DBOSException, match=r"^DBOS Error: Step .*sync_step_async_validator is sync but should_retry is async\. Use an async step to pair with an async validator\.$"):
        calls_sync_step_with_async_validator(key)
    assert attempts[key] == 1


def test_a_step_past_its_timeout_is_cancelled_and_fails_with_step_timeout(dbos: Any) -> None:
    key = new_id("timeout")
    wid = new_id("wf-timeout")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(timed_out, key)
    with pytest.raises(DBOSStepTimeoutError) as info:
        handle.get_result()
    name = slow_step.__qualname__
    assert str(info.value) == f"DBOS Error 18: Step {name} was cancelled after exceeding its timeout of 0.2 seconds"
    assert info.value.step_name == name and info.value.timeout_seconds == 0.2
    assert event(cleaned, key).is_set()  # its cleanup ran before the error surfaced
    # The timeout is the step's recorded outcome, as in DBOS.
    steps = DBOS.list_workflow_steps(wid)
    assert [s["function_name"] for s in steps] == [name]
    assert isinstance(steps[0]["error"], DBOSStepTimeoutError)
    assert handle.get_status().status == "ERROR"


def test_each_retry_gets_a_fresh_timeout(dbos: Any) -> None:
    key = new_id("retry")
    assert DBOS.start_workflow(retried_after_timeout, key).get_result() == 2
    key = new_id("exhaust")
    with pytest.raises(DBOSMaxStepRetriesExceeded) as info:
        DBOS.start_workflow(exhausted_by_timeouts, key).get_result()
    assert attempts[key] == 2
    assert [type(e) for e in info.value.errors] == [DBOSStepTimeoutError, DBOSStepTimeoutError]


def test_run_step_takes_timeout_seconds(dbos: Any) -> None:
    assert DBOS.start_workflow(run_step_with_timeout, 0.01).get_result() == "slept"
    with pytest.raises(DBOSStepTimeoutError, match="Step sleepy was cancelled after exceeding its timeout of 0.2 seconds"):
        DBOS.start_workflow(run_step_with_timeout, WAIT).get_result()


def test_a_preemptible_step_stops_with_its_cancelled_workflow_and_runs_again_on_resume(dbos: Any) -> None:
    key = new_id("preempt")
    wid = new_id("wf-preempt")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(preempted, key)
    assert event(entered, key).wait(WAIT)
    DBOS.cancel_workflow(wid)
    # Cancelled at once (its cleanup ran), not at its next step, and nothing
    # was recorded for it.
    assert event(cleaned, key).wait(WAIT)
    assert handle.get_status().status == "CANCELLED"
    assert DBOS.list_workflow_steps(wid) == []
    let_finish[key] = True
    resumed = DBOS.resume_workflow(wid)
    assert resumed.get_result() == "finished on attempt 2"
    steps: List[Any] = DBOS.list_workflow_steps(wid)
    assert [s["output"] for s in steps] == ["finished on attempt 2"]
