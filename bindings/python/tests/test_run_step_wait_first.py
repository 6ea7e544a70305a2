"""DBOS.run_step (a function run as a step without a decorator) and
wait_first (the first of several workflows to end), with their async twins
and DBOSClient's (whose waits outlast an agent restart), against the real
agent. Workflows end in an order the test chooses: each waits for a message
the test sends."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any, List, Optional, Tuple

import pytest

from dbos_agent import (
    DBOS,
    DBOSClient,
    DBOSException,
    DBOSMaxStepRetriesExceeded,
    SetWorkflowID,
    WorkflowHandle,
)

from conftest import AgentEnv, new_id, wait_until

WAIT = 30.0
executed: Counter = Counter()


def tally(tag: str, what: str) -> str:
    executed[(tag, what)] += 1
    return f"{what}-{executed[(tag, what)]}"


async def tally_async(tag: str, what: str) -> str:
    await asyncio.sleep(0)
    return tally(tag, what)


def fail_until(tag: str, what: str, successful_attempt: int) -> str:
    """Raises until its ``successful_attempt``-th execution."""
    out = tally(tag, what)
    if executed[(tag, what)] < successful_attempt:
        raise ConnectionError(out)
    return out


async def fail_until_async(tag: str, what: str, successful_attempt: int) -> str:
    await asyncio.sleep(0)
    return fail_until(tag, what, successful_attempt)


def no_retry_for_key_errors(e: BaseException) -> bool:
    return not isinstance(e, KeyError)


def raise_key_error(tag: str) -> None:
    tally(tag, "key-error")
    raise KeyError(tag)


@DBOS.workflow()
def adhoc_steps(tag: str) -> List[str]:
    return [
        DBOS.run_step(None, tally, tag, "plain"),
        DBOS.run_step({"name": "named"}, tally, tag, what="named"),
        DBOS.run_step({"name": "coroutine"}, tally_async, tag, "coroutine"),
        DBOS.run_step({}, tally, tag, "last"),
    ]


@DBOS.workflow()
async def adhoc_steps_async(tag: str) -> List[str]:
    return [
        await DBOS.run_step_async(None, tally_async, tag, "plain"),
        await DBOS.run_step_async({"name": "on-a-thread"}, tally, tag, what="on-a-thread"),
        await DBOS.run_step_async(
            {"retries_allowed": True, "interval_seconds": 0, "max_attempts": 3}, fail_until_async, tag, "flaky", 2
        ),
        await DBOS.run_step_async(None, tally_async, tag, "last"),
    ]


@DBOS.workflow()
def retrying_steps(tag: str) -> List[str]:
    out = [DBOS.run_step({"retries_allowed": True, "interval_seconds": 0, "max_attempts": 3}, fail_until, tag, "flaky", 3)]
    try:
        DBOS.run_step(
            {"name": "doomed", "retries_allowed": True, "interval_seconds": 0, "max_attempts": 2},
            fail_until, tag, "doomed", 10,
        )
    except DBOSMaxStepRetriesExceeded as e:
        out.append(f"gave up: {e}")
    try:
        DBOS.run_step(
            {"retries_allowed": True, "interval_seconds": 0, "should_retry": no_retry_for_key_errors},
            raise_key_error, tag,
        )
    except KeyError:
        out.append("key error not retried")
    try:
        DBOS.run_step(None, fail_until, tag, "once", 2)
    except ConnectionError:
        out.append("no retries by default")
    out.append(DBOS.run_step(None, tally, tag, "last"))
    return out


@DBOS.step()
def outer_step(tag: str) -> str:
    return DBOS.run_step({"name": "inner"}, tally, tag, "inner")


@DBOS.workflow()
def run_step_in_a_step(tag: str) -> str:
    return outer_step(tag)


async def async_validator(e: BaseException) -> bool:
    return True


@DBOS.workflow()
def refused_step_options(which: str) -> str:
    if which == "preemptible":
        DBOS.run_step({"preemptible": True}, tally, which, "x")
    elif which == "timeout":
        DBOS.run_step({"timeout_seconds": 5.0}, tally, which, "x")
    else:
        DBOS.run_step({"retries_allowed": True, "should_retry": async_validator}, tally, which, "x")
    return "ran"


@DBOS.workflow()
def waiter(name: str) -> str:
    """Ends when the test sends it "go" (or raises on "fail")."""
    if DBOS.recv("go", timeout_seconds=WAIT) == "fail":
        raise ValueError(f"{name} failed")
    return name


@DBOS.workflow()
def choose_first(ids: List[str], tag: str) -> Tuple[str, str]:
    first = DBOS.wait_first([DBOS.retrieve_workflow(i, existing_workflow=False) for i in ids])
    return first.workflow_id, DBOS.run_step(None, tally, tag, "after")


@DBOS.workflow()
async def choose_first_async(ids: List[str], tag: str) -> Tuple[str, str]:
    handles = [await DBOS.retrieve_workflow_async(i, existing_workflow=False) for i in ids]
    first = await DBOS.wait_first_async(handles)
    return first.workflow_id, await DBOS.run_step_async(None, tally_async, tag, "after")


def start_waiters(n: int) -> List["WorkflowHandle[str]"]:
    handles = []
    for _ in range(n):
        wid = new_id("waiter")
        with SetWorkflowID(wid):
            handles.append(DBOS.start_workflow(waiter, wid))
    return handles


def finish(handle: Any, how: str = "go") -> None:
    DBOS.send(handle.workflow_id, how, "go")


async def finish_async(handle: Any, how: str = "go") -> None:
    # From a coroutine: DBOS refuses a blocking call on a running loop.
    await DBOS.send_async(handle.workflow_id, how, "go")


def step_records(workflow_id: str) -> List[Tuple[int, str, Any]]:
    return [(s["function_id"], s["function_name"], s["output"]) for s in DBOS.list_workflow_steps(workflow_id)]


# ---------------------------------------------------------------------------
# run_step


def test_run_step_records_a_step_that_a_fork_replays(dbos: Any) -> None:
    tag, wid = new_id("adhoc"), new_id("adhoc-wf")
    with SetWorkflowID(wid):
        assert adhoc_steps(tag) == ["plain-1", "named-1", "coroutine-1", "last-1"]
    # Named as DBOS Python names them: the options' name, else the
    # function's qualified name. The coroutine ran on DBOS's loop, as a step
    # of this workflow.
    assert step_records(wid) == [
        (1, "tally", "plain-1"), (2, "named", "named-1"), (3, "coroutine", "coroutine-1"), (4, "tally", "last-1"),
    ]
    # A fork from step 4 replays steps 1-3 from their records: only the last
    # function runs again.
    assert DBOS.fork_workflow(wid, 4).get_result() == ["plain-1", "named-1", "coroutine-1", "last-2"]
    assert [executed[(tag, w)] for w in ("plain", "named", "coroutine", "last")] == [1, 1, 1, 2]


def test_run_step_honours_retry_options_and_replays_errors(dbos: Any) -> None:
    tag, wid = new_id("retry"), new_id("retry-wf")
    with SetWorkflowID(wid):
        out = retrying_steps(tag)
    assert out[0] == "flaky-3" and out[2:] == ["key error not retried", "no retries by default", "last-1"]
    assert out[1] == "gave up: DBOS Error 7: Step doomed has exceeded its maximum of 2 retries"
    # Attempts made: until success (3), max_attempts (2), one where
    # should_retry says no, one without retries_allowed.
    assert [executed[(tag, w)] for w in ("flaky", "doomed", "key-error", "once")] == [3, 2, 1, 1]
    steps = DBOS.list_workflow_steps(wid)
    assert [s["function_name"] for s in steps] == ["fail_until", "doomed", "raise_key_error", "fail_until", "tally"]
    assert isinstance(steps[1]["error"], DBOSMaxStepRetriesExceeded) and isinstance(steps[2]["error"], KeyError)
    # Replayed, the recorded outcomes (errors too) come back without a run.
    assert DBOS.fork_workflow(wid, 5).get_result() == out[:-1] + ["last-2"]
    assert [executed[(tag, w)] for w in ("flaky", "doomed", "key-error", "once", "last")] == [3, 2, 1, 1, 2]


def test_run_step_async_records_async_and_thread_steps(dbos: Any) -> None:
    tag, wid = new_id("adhoc-async"), new_id("adhoc-async-wf")

    async def main() -> List[str]:
        with SetWorkflowID(wid):
            return await adhoc_steps_async(tag)

    assert asyncio.run(main()) == ["plain-1", "on-a-thread-1", "flaky-2", "last-1"]
    assert [name for _, name, _ in step_records(wid)] == ["tally_async", "on-a-thread", "fail_until_async", "tally_async"]
    assert DBOS.fork_workflow(wid, 4).get_result() == ["plain-1", "on-a-thread-1", "flaky-2", "last-2"]
    assert [executed[(tag, w)] for w in ("plain", "on-a-thread", "flaky", "last")] == [1, 1, 2, 2]


def test_run_step_outside_a_workflow_or_in_a_step_is_a_plain_call(dbos: Any) -> None:
    tag = new_id("plain")
    # As DBOS Python: no record, no retries, the step-only options inert.
    assert DBOS.run_step(None, tally, tag, "sync") == "sync-1"
    assert DBOS.run_step({"name": "x", "preemptible": True}, tally_async, tag, "coroutine") == "coroutine-1"
    with pytest.raises(ConnectionError):
        DBOS.run_step({"retries_allowed": True, "interval_seconds": 0}, fail_until, tag, "no-retry", 3)
    assert executed[(tag, "no-retry")] == 1

    async def from_async() -> List[str]:
        return [
            await DBOS.run_step_async(None, tally_async, tag, "async"),
            await DBOS.run_step_async(None, tally, tag, "thread"),
        ]

    assert asyncio.run(from_async()) == ["async-1", "thread-1"]
    # Inside a step, run_step is part of that step.
    wid = new_id("in-step")
    with SetWorkflowID(wid):
        assert run_step_in_a_step(tag) == "inner-1"
    assert step_records(wid) == [(1, "outer_step", "inner-1")]


def test_run_step_refuses_what_it_cannot_honour(dbos: Any) -> None:
    # From a thread running an event loop, as DBOS Python: use run_step_async.
    async def blocking_call() -> None:
        DBOS.run_step(None, tally, "loop", "x")

    with pytest.raises(RuntimeError, match="run_step_async"):
        asyncio.run(blocking_call())
    # The async-only options on a sync function, refused when called in a
    # workflow with DBOS Python's errors.
    with pytest.raises(DBOSException, match=r"Step .*tally is sync but preemptible=True\. Preemption is only supported for async steps\."):
        refused_step_options("preemptible")
    with pytest.raises(DBOSException, match=r"Step .*tally is sync but timeout_seconds is set\. Step timeouts are only supported"):
        refused_step_options("timeout")
    with pytest.raises(DBOSException, match="sync but should_retry is async"):
        refused_step_options("validator")
    assert executed[("preemptible", "x")] == executed[("timeout", "x")] == executed[("validator", "x")] == 0


# ---------------------------------------------------------------------------
# wait_first


def test_wait_first_returns_the_handle_of_the_first_to_end(dbos: Any) -> None:
    a, b, c = start_waiters(3)
    # The last one ends first: the waits are made together, not in turn.
    finish(c)
    assert DBOS.wait_first([a, b, c]) is c
    finish(b, "fail")  # an error is an end too
    assert DBOS.wait_first([a, b]) is b
    DBOS.cancel_workflow(a.workflow_id)  # and so is a cancellation
    assert DBOS.wait_first([a]) is a
    # The answers the earlier calls dropped (a's, b's) came on the same
    # connection and disturbed nothing.
    assert c.get_result() == c.workflow_id
    with pytest.raises(ValueError, match="failed"):
        b.get_result()


def test_wait_first_waits_for_a_workflow_not_created_yet(dbos: Any) -> None:
    ghost_id = new_id("ghost")
    ghost = DBOS.retrieve_workflow(ghost_id, existing_workflow=False)
    (other,) = start_waiters(1)
    got: List[Any] = []
    waiting = threading.Thread(target=lambda: got.append(DBOS.wait_first([ghost, other])))
    waiting.start()
    with SetWorkflowID(ghost_id):
        handle = DBOS.start_workflow(waiter, ghost_id)
    finish(handle)
    waiting.join(WAIT)
    assert got == [ghost]
    finish(other)
    assert other.get_result() == other.workflow_id


def test_wait_first_in_a_workflow_is_a_step_a_fork_replays(dbos: Any) -> None:
    a, b, c = start_waiters(3)
    tag, wid = new_id("choose"), new_id("chooser")
    with SetWorkflowID(wid):
        chooser = DBOS.start_workflow(choose_first, [a.workflow_id, b.workflow_id, c.workflow_id], tag)
    finish(b)
    assert chooser.get_result() == (b.workflow_id, "after-1")
    assert step_records(wid) == [(1, "DBOS.waitFirst", b.workflow_id), (2, "tally", "after-1")]
    for h in (a, c):
        finish(h)
        h.get_result()
    # Now all three have ended, but the replayed step answers what the first
    # run saw.
    assert DBOS.fork_workflow(wid, 2).get_result() == (b.workflow_id, "after-2")


def test_wait_first_async_in_and_out_of_a_workflow(dbos: Any) -> None:
    a, b = start_waiters(2)
    tag, wid = new_id("choose-async"), new_id("chooser-async")

    async def main() -> Tuple[Any, Any]:
        handles = [await DBOS.retrieve_workflow_async(h.workflow_id) for h in (a, b)]
        with SetWorkflowID(wid):
            chooser = await DBOS.start_workflow_async(choose_first_async, [a.workflow_id, b.workflow_id], tag)
        await finish_async(b)
        first = await DBOS.wait_first_async(handles)
        return first is handles[1], await chooser.get_result()

    assert asyncio.run(main()) == (True, (b.workflow_id, "after-1"))
    assert step_records(wid) == [(1, "DBOS.waitFirst", b.workflow_id), (2, "tally_async", "after-1")]
    finish(a)
    a.get_result()
    assert DBOS.fork_workflow(wid, 2).get_result() == (b.workflow_id, "after-2")


def test_wait_first_refuses_what_dbos_python_refuses(dbos: Any, agent_env: AgentEnv) -> None:
    handle = DBOS.retrieve_workflow("anything", existing_workflow=False)

    async def from_async(call: Any, handles: List[Any]) -> Any:
        return await call(handles)

    with DBOSClient(agent_socket=agent_env.socket) as client:
        for call in (DBOS.wait_first, client.wait_first):
            with pytest.raises(ValueError, match="handles must not be empty"):
                call([])
            with pytest.raises(ValueError, match="handles must not contain duplicate workflow IDs"):
                call([handle, DBOS.retrieve_workflow("anything", existing_workflow=False)])
        for call in (DBOS.wait_first_async, client.wait_first_async):
            with pytest.raises(ValueError, match="handles must not be empty"):
                asyncio.run(from_async(call, []))
            with pytest.raises(ValueError, match="duplicate"):
                asyncio.run(from_async(call, [handle, handle]))

    async def blocking_call() -> None:
        DBOS.wait_first([handle])

    with pytest.raises(RuntimeError, match="wait_first_async"):
        asyncio.run(blocking_call())


def test_client_wait_first_and_its_async_twin(dbos: Any, agent_env: AgentEnv) -> None:
    a, b, c = start_waiters(3)
    with DBOSClient(agent_socket=agent_env.socket) as client:
        ha, hb, hc = (client.retrieve_workflow(h.workflow_id) for h in (a, b, c))
        finish(b)
        assert client.wait_first([ha, hb, hc]) is hb

        async def main() -> Optional[bool]:
            handles = [await client.retrieve_workflow_async(h.workflow_id) for h in (a, c)]
            await finish_async(c)
            return await client.wait_first_async(handles) is handles[1]

        assert asyncio.run(main())
    finish(a)
    assert a.get_result() == a.workflow_id


def test_client_wait_first_outlasts_an_agent_restart(dbos: Any, agent_env: AgentEnv) -> None:
    # Last in this module: it restarts the module's agent.
    a, b = start_waiters(2)
    with DBOSClient(agent_socket=agent_env.socket) as client:
        handles = [client.retrieve_workflow(h.workflow_id) for h in (a, b)]
        conn = client._link.current()
        assert conn is not None
        got: List[Any] = []
        waiting = threading.Thread(target=lambda: got.append(client.wait_first(handles)))
        waiting.start()
        wait_until(lambda: len(conn._pending) == 2, "both waits sent")
        agent_env.agent.kill()
        agent_env.start_agent()
        # The waits are made again on the client's next connection; the
        # restarted agent hands the waiters back to this process.
        finish(b)
        waiting.join(WAIT)
        assert got == [handles[1]] and conn.closed
    finish(a)
    assert a.get_result() == a.workflow_id
