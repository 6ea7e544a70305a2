"""The DBOS API of the binding, in one process, against the real agent:
workflows and steps (plain), handles, ids, listing, retries, errors,
cancellation, resume, nondeterminism, queues, portable JSON, the client."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any, Dict, List

import pytest

from dbos_agent import (
    DBOS,
    DBOSAwaitedWorkflowCancelledError,
    DBOSClient,
    DBOSException,
    DBOSMaxStepRetriesExceeded,
    DBOSNonExistentWorkflowError,
    DBOSNotSupportedError,
    DBOSUnexpectedStepError,
    DBOSWorkflowCancelledError,
    PortableWorkflowError,
    Queue,
    SetWorkflowID,
    WorkflowSerializationFormat,
)
from dbos_agent import _registry as dbos_module

from conftest import AgentEnv, pg_connect

WAIT = 30.0
calls: Counter = Counter()
seen: Dict[str, Any] = {}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def local_run(workflow_id: str) -> Any:
    """The run of a workflow in this process (to wait on its stop signal)."""
    inst = dbos_module._instance
    assert inst is not None
    return inst._engine.runs[workflow_id]


# --------------------------------------------------------------------------
# Workflows used below


@DBOS.step()
def reserve(order: int) -> str:
    calls["reserve"] += 1
    seen["step_ctx"] = (DBOS.workflow_id, DBOS.step_id)
    return f"reserved-{order}"


@DBOS.step(name="charge_card")
def charge(order: int, amount: float) -> Dict[str, Any]:
    calls["charge"] += 1
    return {"order": order, "charged": amount}


@DBOS.workflow()
def order_workflow(order: int, amount: float = 10.0) -> Dict[str, Any]:
    seen["wf_ctx"] = (DBOS.workflow_id, DBOS.step_id)
    r = reserve(order)
    c = charge(order, amount)
    return {"reservation": r, **c}


@DBOS.workflow()
def failing_workflow(msg: str) -> None:
    reserve(0)
    raise ValueError(msg)


attempts: Counter = Counter()


@DBOS.step(retries_allowed=True, interval_seconds=0.01, max_attempts=5, backoff_rate=2.0)
def flaky_step(key: str, fail_times: int) -> str:
    attempts[key] += 1
    if attempts[key] <= fail_times:
        raise ConnectionError(f"{key} attempt {attempts[key]} failed")
    return f"{key} ok after {attempts[key]}"


@DBOS.workflow()
def flaky_workflow(key: str, fail_times: int) -> str:
    return flaky_step(key, fail_times)


gates: Dict[str, threading.Event] = {}
entered: Dict[str, threading.Event] = {}
stage_runs: Counter = Counter()


def gate(key: str) -> threading.Event:
    return gates.setdefault(key, threading.Event())


def reached(key: str) -> threading.Event:
    return entered.setdefault(key, threading.Event())


@DBOS.step()
def stage(key: str, n: int) -> int:
    stage_runs[(key, n)] += 1
    return n


@DBOS.step()
def blocking_stage(key: str, n: int) -> int:
    stage_runs[(key, n)] += 1
    reached(key).set()
    assert gate(key).wait(WAIT)
    return n


@DBOS.workflow()
def pausing_workflow(key: str) -> List[int]:
    """stage 1, then waits outside any step, then stages 2 and 3."""
    out = [stage(key, 1)]
    reached(key).set()
    assert gate(key).wait(WAIT)
    try:
        out.append(stage(key, 2))
    except DBOSWorkflowCancelledError:
        seen[f"cancelled-in-{key}"] = True
        raise
    out.append(stage(key, 3))
    return out


@DBOS.workflow()
def blocked_in_step_workflow(key: str) -> List[int]:
    """stage 1, then a step that blocks, then stage 3."""
    out = [stage(key, 1)]
    out.append(blocking_stage(key, 2))
    out.append(stage(key, 3))
    return out


mode: Dict[str, str] = {}


@DBOS.step()
def step_a() -> str:
    return "a"


@DBOS.step()
def step_b() -> str:
    return "b"


@DBOS.workflow()
def nondeterministic_workflow(key: str) -> str:
    first = step_a() if mode[key] == "a" else step_b()
    reached(key).set()
    assert gate(key).wait(WAIT)
    return first + stage(key, 2).__str__()


@DBOS.workflow(serialization_type=WorkflowSerializationFormat.PORTABLE)
def portable_workflow(order: int, *, express: bool) -> Dict[str, Any]:
    return {"order": order, "express": express, "steps": [reserve(order)]}


class PaymentDeclined(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@DBOS.workflow(serialization_type=WorkflowSerializationFormat.PORTABLE)
def portable_failing_workflow(order: int) -> None:
    raise PaymentDeclined(f"order {order} declined", 402)


@DBOS.workflow()
def introspecting_workflow(other_id: str) -> Dict[str, Any]:
    status = DBOS.get_workflow_status(other_id)
    result = DBOS.retrieve_workflow(other_id).get_result()
    listed = DBOS.list_workflows(workflow_ids=[other_id])
    return {"status": status.status if status else None, "result": result, "listed": len(listed)}


queue_gate = threading.Event()
queue_active: Counter = Counter()
queue_lock = threading.Lock()
limited_queue = Queue("pytest_limited", worker_concurrency=2)


@DBOS.step()
def queued_stage(n: int) -> int:
    with queue_lock:
        queue_active["now"] += 1
        queue_active["max"] = max(queue_active["max"], queue_active["now"])
        queue_active["started"] += 1
    reached("queue").set()
    try:
        assert queue_gate.wait(WAIT)
    finally:
        with queue_lock:
            queue_active["now"] -= 1
    return n * n


@DBOS.workflow()
def queued_workflow(n: int) -> int:
    return queued_stage(n)


# --------------------------------------------------------------------------
# Tests


def test_direct_call_runs_its_steps_once_and_records_them(dbos: Any) -> None:
    wid = new_id("direct")
    before = Counter(calls)
    with SetWorkflowID(wid):
        out = order_workflow(7, amount=12.5)
    assert out == {"reservation": "reserved-7", "order": 7, "charged": 12.5}
    assert calls["reserve"] - before["reserve"] == 1 and calls["charge"] - before["charge"] == 1
    assert seen["wf_ctx"] == (wid, None)
    assert seen["step_ctx"] == (wid, 1)
    assert DBOS.workflow_id is None and DBOS.step_id is None

    steps = DBOS.list_workflow_steps(wid)
    assert [(s["function_id"], s["function_name"], s["output"]) for s in steps] == [
        (1, "reserve", "reserved-7"),
        (2, "charge_card", {"order": 7, "charged": 12.5}),
    ]
    assert all(s["error"] is None and s["started_at_epoch_ms"] for s in steps)
    assert DBOS.list_workflow_steps(wid, limit=1, offset=1)[0]["function_id"] == 2

    status = DBOS.get_workflow_status(wid)
    assert status is not None
    assert status.status == "SUCCESS"
    assert status.name == "order_workflow"
    assert status.input == {"args": (7,), "kwargs": {"amount": 12.5}}
    assert status.output == out
    assert status.executor_id == DBOS.executor_id == "local"
    assert status.application_name == "pytest"


def test_same_workflow_id_returns_the_recorded_result_without_rerunning(dbos: Any) -> None:
    wid = new_id("idem")
    with SetWorkflowID(wid):
        first = order_workflow(1)
    before = Counter(calls)
    with SetWorkflowID(wid):
        again = order_workflow(1)
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(order_workflow, 1)
    assert again == first == handle.get_result()
    assert calls == before, "a finished workflow ran again"


def test_set_workflow_id_applies_to_the_first_start_only(dbos: Any) -> None:
    wid = new_id("first")
    with SetWorkflowID(wid):
        h1 = DBOS.start_workflow(order_workflow, 2)
        h2 = DBOS.start_workflow(order_workflow, 3)
    assert h1.workflow_id == wid and h2.workflow_id != wid
    assert h1.get_result()["order"] == 2 and h2.get_result()["order"] == 3


def test_start_workflow_handle_status_and_retrieve(dbos: Any) -> None:
    handle = DBOS.start_workflow(order_workflow, 11, 3.0)
    assert handle.get_workflow_id() == handle.workflow_id
    assert handle.get_result() == {"reservation": "reserved-11", "order": 11, "charged": 3.0}
    assert handle.get_status().status == "SUCCESS"

    again = DBOS.retrieve_workflow(handle.workflow_id)
    assert again.get_result() == handle.get_result()
    assert DBOS.get_result(handle.workflow_id)["order"] == 11

    with pytest.raises(DBOSNonExistentWorkflowError):
        DBOS.retrieve_workflow("no-such-workflow")
    assert DBOS.get_workflow_status("no-such-workflow") is None
    assert DBOS.retrieve_workflow("no-such-workflow", existing_workflow=False).workflow_id == "no-such-workflow"


def test_workflow_error_is_recorded_and_raised(dbos: Any) -> None:
    wid = new_id("fail")
    with SetWorkflowID(wid):
        with pytest.raises(ValueError, match="card expired"):
            failing_workflow("card expired")
    with pytest.raises(ValueError, match="card expired"):
        DBOS.retrieve_workflow(wid).get_result()
    status = DBOS.get_workflow_status(wid)
    assert status is not None and status.status == "ERROR"
    assert isinstance(status.error, ValueError) and str(status.error) == "card expired"
    handle = DBOS.start_workflow(failing_workflow, "later")
    with pytest.raises(ValueError, match="later"):
        handle.get_result()


def test_step_that_fails_twice_succeeds_on_its_third_attempt_and_is_recorded_once(dbos: Any) -> None:
    key = new_id("flaky")
    with SetWorkflowID(key):
        assert flaky_workflow(key, 2) == f"{key} ok after 3"
    assert attempts[key] == 3
    steps = DBOS.list_workflow_steps(key)
    assert [(s["function_name"], s["output"], s["error"]) for s in steps] == [("flaky_step", f"{key} ok after 3", None)]


def test_step_out_of_retries_records_max_retries_exceeded(dbos: Any) -> None:
    key = new_id("exhausted")
    with SetWorkflowID(key):
        with pytest.raises(DBOSMaxStepRetriesExceeded) as info:
            flaky_workflow(key, 99)
    assert attempts[key] == 5
    assert info.value.step_name == "flaky_step" and len(info.value.errors) == 5
    assert all(isinstance(e, ConnectionError) for e in info.value.errors)
    steps = DBOS.list_workflow_steps(key)
    assert len(steps) == 1 and isinstance(steps[0]["error"], DBOSMaxStepRetriesExceeded)
    assert DBOS.get_workflow_status(key).status == "ERROR"  # type: ignore[union-attr]


def test_cancellation_is_seen_at_the_next_step_and_resume_finishes_it(dbos: Any) -> None:
    key = new_id("cancel")
    handle = DBOS.start_workflow(pausing_workflow, key)
    wid = handle.workflow_id
    assert reached(key).wait(WAIT)
    run = local_run(wid)
    DBOS.cancel_workflow(wid)
    assert run.stop_event.wait(WAIT), "the agent's cancel push reached the run"
    gate(key).set()

    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        handle.get_result()
    assert seen.get(f"cancelled-in-{key}") is True, "DBOSWorkflowCancelledError was raised inside the workflow"
    assert stage_runs[(key, 2)] == 0, "the step after the cancellation did not run"
    assert DBOS.get_workflow_status(wid).status == "CANCELLED"  # type: ignore[union-attr]
    assert [s["function_id"] for s in DBOS.list_workflow_steps(wid)] == [1]

    # Resume: the agent hands it back with its history; step 1 is replayed.
    resumed = DBOS.resume_workflow(wid)
    assert resumed.get_result() == [1, 2, 3]
    assert stage_runs[(key, 1)] == 1 and stage_runs[(key, 2)] == 1 and stage_runs[(key, 3)] == 1
    assert DBOS.get_workflow_status(wid).status == "SUCCESS"  # type: ignore[union-attr]


def test_cancel_during_a_step_stops_the_workflow_when_that_step_records(dbos: Any) -> None:
    key = new_id("cancel-in-step")
    handle = DBOS.start_workflow(blocked_in_step_workflow, key)
    assert reached(key).wait(WAIT)
    DBOS.cancel_workflow(handle.workflow_id)
    gate(key).set()
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        handle.get_result()
    assert stage_runs[(key, 3)] == 0
    # The step that was running when the workflow was cancelled is not
    # recorded: a resume runs it again, as in DBOS Python.
    assert [s["function_id"] for s in DBOS.list_workflow_steps(handle.workflow_id)] == [1]
    DBOS.cancel_workflow("no-such-workflow")  # like DBOS Python: nothing to cancel, no error


def test_nondeterministic_replay_raises_unexpected_step(dbos: Any) -> None:
    key = new_id("nondet")
    mode[key] = "a"
    handle = DBOS.start_workflow(nondeterministic_workflow, key)
    assert reached(key).wait(WAIT)
    run = local_run(handle.workflow_id)
    DBOS.cancel_workflow(handle.workflow_id)
    assert run.stop_event.wait(WAIT)
    gate(key).set()
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        handle.get_result()

    mode[key] = "b"  # the code now takes another path at step 1
    with pytest.raises(DBOSUnexpectedStepError, match="step_a was recorded when step_b was expected"):
        DBOS.resume_workflow(handle.workflow_id).get_result()
    assert DBOS.get_workflow_status(handle.workflow_id).status == "ERROR"  # type: ignore[union-attr]


def test_resume_of_an_unknown_workflow_raises(dbos: Any) -> None:
    with pytest.raises(DBOSNonExistentWorkflowError):
        DBOS.resume_workflow("no-such-workflow")


def test_queue_runs_workflows_within_its_worker_concurrency(dbos: Any) -> None:
    handles = [limited_queue.enqueue(queued_workflow, n) for n in range(5)]
    ids = [h.workflow_id for h in handles]
    assert reached("queue").wait(WAIT)

    def statuses() -> Counter:
        return Counter(w.status for w in DBOS.list_workflows(workflow_ids=ids, load_input=False, load_output=False))

    # The agent claims only what the worker's two slots allow: two run, three
    # stay enqueued however long we look.
    listed = statuses()
    assert listed["SUCCESS"] == 0 and listed["PENDING"] <= 2 and listed["ENQUEUED"] >= 3
    queued = DBOS.list_queued_workflows(queue_name="pytest_limited")
    assert set(ids) <= {w.workflow_id for w in queued}
    queue_gate.set()
    assert sorted(h.get_result() for h in handles) == [0, 1, 4, 9, 16]
    assert queue_active["max"] <= 2 and queue_active["started"] == 5
    assert all(s.queue_name == "pytest_limited" for s in DBOS.list_workflows(workflow_ids=ids))


def test_portable_workflow_stores_portable_json(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("portable")
    with SetWorkflowID(wid):
        out = portable_workflow(7, express=True)
    assert out == {"order": 7, "express": True, "steps": ["reserved-7"]}
    with pg_connect() as conn:
        row = conn.execute(
            f'SELECT i.inputs, o.output, s.serialization FROM "{agent_env.schema}".workflow_status s '
            f'LEFT JOIN "{agent_env.schema}".workflow_input i USING (workflow_uuid) '
            f'LEFT JOIN "{agent_env.schema}".workflow_output o USING (workflow_uuid) WHERE s.workflow_uuid = %s',
            (wid,),
        ).fetchone()
    assert row is not None
    inputs, output, serialization = row
    assert serialization == "portable_json"
    assert inputs == '{"namedArgs":{"express":true},"positionalArgs":[7]}'
    assert output == '{"order":7,"express":true,"steps":["reserved-7"]}'
    assert DBOS.retrieve_workflow(wid).get_result() == out
    assert DBOS.get_workflow_status(wid).input == {"args": (7,), "kwargs": {"express": True}}  # type: ignore[union-attr]


def test_portable_workflow_error_is_stored_as_name_message_code(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("portable-err")
    with SetWorkflowID(wid):
        with pytest.raises(PaymentDeclined):
            portable_failing_workflow(9)
    with pg_connect() as conn:
        (error,) = conn.execute(
            f'SELECT o.error FROM "{agent_env.schema}".workflow_output o WHERE o.workflow_uuid = %s', (wid,)
        ).fetchone()
    assert error == '{"name":"PaymentDeclined","message":"order 9 declined","code":402}'
    with pytest.raises(PortableWorkflowError) as info:
        DBOS.retrieve_workflow(wid).get_result()
    assert (info.value.name, info.value.message, info.value.code) == ("PaymentDeclined", "order 9 declined", 402)


def test_dbos_operations_inside_a_workflow_are_recorded_as_steps(dbos: Any) -> None:
    other = DBOS.start_workflow(order_workflow, 5)
    other.get_result()
    wid = new_id("introspect")
    with SetWorkflowID(wid):
        out = introspecting_workflow(other.workflow_id)
    assert out == {"status": "SUCCESS", "result": other.get_result(), "listed": 1}
    steps = DBOS.list_workflow_steps(wid)
    assert [s["function_name"] for s in steps] == ["DBOS.getStatus", "DBOS.getStatus", "DBOS.getResult", "DBOS.listWorkflows"]
    assert steps[2]["child_workflow_id"] == other.workflow_id


def test_list_workflows_filters(dbos: Any) -> None:
    prefix = new_id("list")
    ids = []
    for n in range(3):
        with SetWorkflowID(f"{prefix}-{n}"):
            order_workflow(n)
        ids.append(f"{prefix}-{n}")
    with SetWorkflowID(f"{prefix}-err"):
        with pytest.raises(ValueError):
            failing_workflow("x")

    listed = DBOS.list_workflows(workflow_id_prefix=prefix)
    assert sorted(w.workflow_id for w in listed) == sorted(ids + [f"{prefix}-err"])
    assert [w.workflow_id for w in DBOS.list_workflows(workflow_id_prefix=prefix, status="ERROR")] == [f"{prefix}-err"]
    assert len(DBOS.list_workflows(workflow_id_prefix=prefix, name="order_workflow")) == 3
    newest = DBOS.list_workflows(workflow_id_prefix=prefix, sort_desc=True, limit=1)
    assert [w.workflow_id for w in newest] == [f"{prefix}-err"]
    bare = DBOS.list_workflows(workflow_ids=ids[:1], load_input=False, load_output=False)
    assert bare[0].input is None and bare[0].output is None and bare[0].status == "SUCCESS"
    full = DBOS.list_workflows(workflow_ids=ids[:1])
    assert full[0].input == {"args": (0,), "kwargs": {}} and full[0].output["order"] == 0
    assert DBOS.list_workflows(workflow_id_prefix=prefix, forked_from="some-workflow") == []


def test_unsupported_calls_raise_naming_the_call(dbos: Any) -> None:
    with pytest.raises(DBOSNotSupportedError, match="DBOS.transaction is not supported"):
        DBOS.transaction()
    with pytest.raises(DBOSNotSupportedError):
        Queue("sharded", shard_key="s")
    with pytest.raises(DBOSException, match="not sharded"):
        DBOS.get_event("wf", "k", shard_key="s")


def test_workflow_only_calls_raise_outside_a_workflow(dbos: Any) -> None:
    # As in DBOS Python: these need a workflow to act for.
    with pytest.raises(DBOSException, match="recv\\(\\) must be called from within a workflow"):
        DBOS.recv()
    with pytest.raises(DBOSException, match="sleep\\(\\) must be called from within a workflow"):
        DBOS.sleep(1)
    with pytest.raises(DBOSException, match="set_event\\(\\) must be called from within a workflow or step"):
        DBOS.set_event("k", "v")
    with pytest.raises(DBOSException, match="write_stream\\(\\) must be called"):
        DBOS.write_stream("k", "v")
    with pytest.raises(DBOSException, match="DBOS.patch must be called from a workflow"):
        DBOS.patch("p")


def test_binding_client_enqueues_waits_and_manages(dbos: Any, agent_env: AgentEnv) -> None:
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handle = client.enqueue({"workflow_name": "order_workflow", "queue_name": "pytest_limited"}, 21, amount=1.0)
        queue_gate.set()
        assert handle.get_result() == {"reservation": "reserved-21", "order": 21, "charged": 1.0}
        assert client.retrieve_workflow(handle.workflow_id).get_status().status == "SUCCESS"
        assert [s["function_name"] for s in client.list_workflow_steps(handle.workflow_id)] == ["reserve", "charge_card"]
        assert client.list_workflows(workflow_ids=[handle.workflow_id])[0].queue_name == "pytest_limited"
        with pytest.raises(DBOSNonExistentWorkflowError):
            client.retrieve_workflow("no-such-workflow")
        with pytest.raises(DBOSException, match="not sharded"):
            client.enqueue({"workflow_name": "order_workflow", "queue_name": "pytest_limited", "shard_key": "s"})
    finally:
        client.destroy()


@pytest.mark.parametrize("bad_id", ["", "   ", "\t\n"])
def test_an_empty_or_blank_workflow_id_is_refused_in_dbos_words(dbos: Any, agent_env: AgentEnv, bad_id: str) -> None:
    with pytest.raises(DBOSException, match="Invalid workflow ID .*workflow IDs must be non-empty and cannot be only whitespace"):
        SetWorkflowID(bad_id)
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        with pytest.raises(DBOSException, match="Invalid workflow ID"):
            client.enqueue({"workflow_name": "order_workflow", "queue_name": "pytest_limited", "workflow_id": bad_id}, 1)
        assert client.list_workflows(workflow_ids=[bad_id]) == []
    finally:
        client.destroy()


def test_a_set_block_is_in_one_block_at_a_time_and_may_exit_in_another_context() -> None:
    import contextvars

    from dbos_agent._context import _enqueue_options, current_timeout_ms

    from dbos_agent import SetEnqueueOptions, SetWorkflowTimeout

    timeout = SetWorkflowTimeout(5)
    with timeout:
        with pytest.raises(DBOSException, match="This SetWorkflowTimeout is already in use; create a new one"):
            with timeout:
                pass
        assert current_timeout_ms() == 5000  # the refused entry changed nothing
    assert current_timeout_ms() is None
    with timeout:  # used again after its block: fine
        assert current_timeout_ms() == 5000
    # Entered in one Context and exited in another (a threadpool-run
    # generator dependency): each Context keeps or gets back its own value.
    options = SetEnqueueOptions(priority=1)
    entered = contextvars.copy_context()
    entered.run(options.__enter__)
    assert entered.run(_enqueue_options.get).priority == 1
    assert _enqueue_options.get() is None
    exited = contextvars.copy_context()
    exited.run(options.__exit__, None, None, None)
    assert exited.run(_enqueue_options.get) is None
