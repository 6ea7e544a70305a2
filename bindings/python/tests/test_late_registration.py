"""Declarations after DBOS.launch(), on the real agent: workflows, steps,
queues and scheduled workflows declared inside a function once launched
work as if declared before (the binding registers them on the live
connection), across a restart of the agent too, and a declaration the
agent refuses is refused where it is made."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime
from typing import Any, Dict, Iterator, List

import pytest

import dbos_agent._registry as dbos_module
from dbos_agent import DBOS, DBOSException, Queue, SetWorkflowID

from conftest import AgentEnv, gate, new_id, query, wait_until


@pytest.fixture(autouse=True)
def launched(dbos: type) -> Iterator[None]:
    yield


def _declare_everything(tag: str) -> Dict[str, Any]:
    """What an application declares inside a function after launch."""
    calls: List[str] = []

    @DBOS.step()
    def late_step(x: int) -> int:
        calls.append(f"step {x}")
        return x * 10

    @DBOS.workflow()
    def late_workflow(x: int) -> int:
        return late_step(x) + 1

    @DBOS.workflow()
    async def late_async_workflow(x: int) -> int:
        await asyncio.sleep(0)
        return x + 2

    queue = Queue(f"late_q_{tag}", worker_concurrency=1)
    return {"step": late_step, "workflow": late_workflow, "async_workflow": late_async_workflow,
            "queue": queue, "calls": calls}


def test_workflow_step_and_queue_declared_after_launch_run_here(agent_env: AgentEnv) -> None:
    got = _declare_everything(new_id("a").replace("-", "_"))
    wid = new_id("late")
    with SetWorkflowID(wid):
        assert got["workflow"](4) == 41
    assert [s["function_name"] for s in DBOS.list_workflow_steps(wid)] == [got["step"].__qualname__]
    assert got["calls"] == ["step 4"]
    assert asyncio.run(got["async_workflow"](1)) == 3

    # Enqueued on the late queue: dequeued by this process, one at a time
    # (the queue's worker_concurrency was registered with it).
    handles = [got["queue"].enqueue(got["workflow"], i) for i in range(3)]
    assert [_result(h) for h in handles] == [1, 11, 21]
    rows = query(f'SELECT name, worker_concurrency FROM "{agent_env.schema}".queues WHERE name = %s', (got["queue"].name,))
    assert rows == [(got["queue"].name, 1)]


def test_scheduled_workflow_and_schedule_target_declared_after_launch_fire() -> None:
    fired: Dict[str, threading.Event] = {"decorated": threading.Event(), "created": threading.Event()}

    @DBOS.scheduled("* * * * * *")
    @DBOS.workflow()
    def late_every_second(scheduled: datetime, actual: datetime) -> None:
        fired["decorated"].set()

    @DBOS.workflow()
    def late_schedule_target(scheduled: datetime, context: Any) -> None:
        assert context == {"from": "late"}
        fired["created"].set()

    name = new_id("late-sched")
    DBOS.create_schedule(schedule_name=name, workflow_fn=late_schedule_target, schedule="* * * * * *",
                         context={"from": "late"})
    try:
        assert fired["decorated"].wait(30), "the @DBOS.scheduled workflow declared after launch never ran"
        assert fired["created"].wait(30), "the schedule of a workflow declared after launch never ran"
    finally:
        DBOS.delete_schedule(late_every_second.__qualname__)
        DBOS.delete_schedule(name)


def test_concurrent_declarations_all_register() -> None:
    n = 16
    barrier = threading.Barrier(n)
    declared: List[Any] = [None] * n
    errors: List[BaseException] = []

    def declare(i: int) -> None:
        try:
            barrier.wait(10)

            def body(x: int) -> int:
                return x + i

            body.__qualname__ = f"late_concurrent_{i}_{id(barrier)}"
            declared[i] = DBOS.workflow()(body)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=declare, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    q = Queue(new_id("late_cq").replace("-", "_"))
    # Enqueued, not run here: each runs only if the agent registered it.
    handles = [q.enqueue(declared[i], 100) for i in range(n)]
    assert [_result(h) for h in handles] == [100 + i for i in range(n)]


def test_a_declaration_the_agent_refuses_is_refused_where_it_is_made() -> None:
    with pytest.raises(DBOSException, match=r"register\.workflows\[0\]\.name"):

        @DBOS.workflow(name="bad\x00name")
        def refused() -> None:
            pass

    assert "bad\x00name" not in dbos_module._workflows
    # The connection is fine, and so is the next declaration.

    @DBOS.workflow()
    def accepted_after() -> str:
        return "ok"

    assert accepted_after() == "ok"


def test_late_workflow_is_recovered_here_after_an_agent_restart(agent_env: AgentEnv) -> None:
    key = new_id("late-hold")
    ran: List[str] = []

    @DBOS.step()
    def first_step() -> str:
        ran.append("first")
        return "one"

    @DBOS.step()
    def held_step() -> str:
        ran.append("held")
        assert gate(key).wait(60)
        return "two"

    @DBOS.workflow()
    def late_recovered() -> str:
        return first_step() + held_step()

    late_queue = Queue(new_id("late_rq").replace("-", "_"), worker_concurrency=2)
    wid = new_id("late-rec")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(late_recovered)
    wait_until(lambda: ran == ["first", "held"], "the first run to reach its held step")

    # The agent dies with the workflow PENDING; the restarted one recovers
    # it, and only this process, reconnected, can run it: its hello must
    # announce the workflow declared after launch.
    agent_env.agent.kill()
    agent_env.start_agent()
    gate(key).set()
    assert _result(handle) == "onetwo"
    status = DBOS.get_workflow_status(wid)
    assert status is not None and status.recovery_attempts == 2
    assert ran.count("first") == 1, "the recovered run replayed the recorded step"
    # The queue declared after launch is served after the restart too (the
    # reconnection's hello announced it), with its limit.
    assert _result(late_queue.enqueue(late_recovered)) == "onetwo"
    rows = query(f'SELECT worker_concurrency FROM "{agent_env.schema}".queues WHERE name = %s', (late_queue.name,))
    assert rows == [(2,)]


def test_declaration_while_the_connection_is_replaced_reaches_the_new_one(agent_env: AgentEnv) -> None:
    """A workflow declared after the reconnection's hello was built, before
    the connection is live, is in neither the hello nor on the old
    connection: it goes in a register on the new one."""
    inst = dbos_module._instance
    assert inst is not None and inst._engine.link is not None
    link = inst._engine.link
    build_hello = link._hello
    declared: List[Any] = []
    # Reconnection attempts fail until the new agent listens, so that the
    # declaration comes after the hello of the attempt that succeeds.
    armed = threading.Event()

    def hello_then_declare() -> Dict[str, Any]:
        if not armed.is_set():
            raise ConnectionRefusedError("the test holds the reconnection back")
        hello = build_hello()
        if not declared:

            @DBOS.workflow()
            def declared_mid_handshake(x: int) -> int:
                return -x

            declared.append(declared_mid_handshake)
            assert "declared_mid_handshake" not in str(hello["workflows"])
        return hello

    link._hello = hello_then_declare  # type: ignore[method-assign]
    try:
        agent_env.agent.kill()
        agent_env.start_agent()
        armed.set()
        wait_until(lambda: bool(declared) and link.current() is not None, "the reconnection")
    finally:
        link._hello = build_hello  # type: ignore[method-assign]
    q = Queue(new_id("late_mid").replace("-", "_"))
    # Enqueued: only a worker that registered it runs it.
    assert _result(q.enqueue(declared[0], 5)) == -5


def _result(handle: Any, timeout: float = 30.0) -> Any:
    """The workflow's result, once it has ended within timeout (a workflow
    no worker registered would wait for ever)."""
    wait_until(lambda: handle.get_status().status not in ("ENQUEUED", "PENDING"), f"{handle.workflow_id} to end", timeout)
    return handle.get_result()


def test_declaring_the_same_workflow_again_sends_nothing_new() -> None:
    """A function that declares its workflow at every call (as code written
    for DBOS does) costs a round trip only when the declaration changes."""
    inst = dbos_module._instance
    assert inst is not None and inst._engine.link is not None
    conn = inst._engine.link.connection()

    @DBOS.workflow()
    def declared_once(x: int) -> int:
        return x

    def handler(n: int, attempts: int) -> int:
        @DBOS.workflow(name="late_redeclared", max_recovery_attempts=attempts)
        def redeclared(x: int) -> int:
            return x * n

        return redeclared(3)

    def requests_sent() -> int:
        return next(conn._ids)  # the next request id (a peek uses one up)

    def ids_used(calls: Any) -> int:
        before = requests_sent()
        calls()
        return requests_sent() - before - 1

    assert handler(1, 5) == 3
    # What ten calls cost with no declaration in them, then with the same
    # declaration in each (the latest declaration runs).
    baseline = ids_used(lambda: [declared_once(3) for _ in range(10)])
    assert ids_used(lambda: [handler(n, 5) for n in range(2, 12)]) == baseline
    assert handler(7, 5) == 21
    one_call = ids_used(lambda: declared_once(3))
    assert ids_used(lambda: handler(2, 6)) == one_call + 1, "a changed declaration is registered again"


def test_a_name_declared_again_follows_dbos_rules(caplog: pytest.LogCaptureFixture) -> None:
    """DBOS's rules and messages: another function of a declared name is
    warned about (a step's too, named without its <temp>. prefix); the same
    name from another module and file is refused; the same code declared
    again is no news."""
    name = new_id("dup_wf")

    @DBOS.workflow(name=name)
    def first() -> int:
        return 1

    with caplog.at_level("WARNING", logger="dbos_agent"):
        @DBOS.workflow(name=name)
        def second() -> int:
            return 2

        step_name = new_id("dup_step")

        @DBOS.step(name=step_name)
        def step_one() -> int:
            return 1

        @DBOS.step(name=step_name)
        def step_two() -> int:
            return 2

    assert f"Duplicate registration of function '{name}'. A function named '{name}' has already been registered" in caplog.text
    assert f"Duplicate registration of function '{step_name}'." in caplog.text
    assert second() == 2  # the last declaration wins

    caplog.clear()
    with caplog.at_level("WARNING", logger="dbos_agent"):
        for _ in range(3):
            @DBOS.workflow(name=name)
            def again() -> int:
                return 3
    # Only the first of the three is another function's declaration.
    assert caplog.text.count("Duplicate registration") == 1

    # A function of another module and file under the name.
    elsewhere: Dict[str, Any] = {"__name__": "another_module", "DBOS": DBOS}
    source = compile(f"@DBOS.workflow(name={name!r})\ndef third():\n    return 3\n", "/elsewhere/another_module.py", "exec")
    with pytest.raises(DBOSException, match=rf"Operation \(Name: {name}\) is registered by two different functions"):
        exec(source, elsewhere)
    assert again() == 3  # the refused declaration changed nothing
