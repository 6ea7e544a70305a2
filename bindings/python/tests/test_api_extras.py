"""DBOS Python 3.4's remaining public API on the real agent: queue
configuration at run time, steps started and enqueued as workflows,
validate_args with the pydantic validator, SetShardKey and DBOS.shard_key,
PropagateOtelContext and the tracer (with OpenTelemetry, and with it absent),
WorkflowStatusString, DBOSClient.check_connection, dbos.error's exceptions,
and the refusals (raised when used, never at import)."""

from __future__ import annotations

import asyncio
import contextvars
import pickle
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any, Dict, List

import pytest

from dbos_agent import (
    SendMessage,
    DBOS,
    DBOSClient,
    DBOSException,
    DBOSNotSupportedError,
    DBOSWorkflowIDInUseError,
    PortableWorkflowError,
    PropagateOtelContext,
    SetShardKey,
    SetWorkflowAttributes,
    SetWorkflowID,
    StepReservation,
    WorkflowSerializationFormat,
    WorkflowStatusString,
    error,
    pydantic_args_validator,
    make_pydantic_args_validator,
)

from dbos_agent._ambient import _shard_key

from conftest import AgentEnv, new_id, query

config_queue = DBOS.register_queue("config_queue", worker_concurrency=2, global_concurrency=4)
step_queue = DBOS.register_queue("step_queue")
step_calls: Dict[str, int] = {}


@DBOS.step()
def counted_step(tag: str) -> str:
    step_calls[tag] = step_calls.get(tag, 0) + 1
    return f"{tag}-{DBOS.workflow_id}"


@DBOS.step()
async def async_counted_step(tag: str) -> str:
    step_calls[tag] = step_calls.get(tag, 0) + 1
    return tag.upper()


@DBOS.workflow(validate_args=pydantic_args_validator, serialization_type=WorkflowSerializationFormat.PORTABLE)
def typed_workflow(count: int, when: datetime, tags: List[str]) -> str:
    return f"{count + 1} {when.year} {type(when).__name__} {'/'.join(tags)}"


@DBOS.workflow()
def shard_probe() -> Any:
    return DBOS.shard_key


@DBOS.workflow()
def plain_workflow() -> str:
    return "done"


@DBOS.workflow()
def trace_of_run() -> Any:
    span = DBOS.span
    return format(span.get_span_context().trace_id, "032x") if span is not None else None


def plain(x: str) -> str:
    step_calls[x] = step_calls.get(x, 0) + 1
    return x


@DBOS.workflow()
def uses_a_reservation() -> List[Any]:
    r = DBOS.reserve_step()
    later = counted_step("after-reservation")  # takes the next id
    early = r.run({"name": "reserved"}, plain, "at-reserved-id")
    try:
        r.run(None, plain, "twice")
        again = "ran twice"
    except DBOSException as e:
        again = str(e)
    return [r.step_id, early, later, again]


@DBOS.workflow()
async def reserves_for_tasks() -> List[Any]:
    first, second = DBOS.reserve_step(), DBOS.reserve_step()

    async def work(x: str) -> str:
        return x

    # Run out of order from concurrent tasks: each lands at its own id.
    got = await asyncio.gather(second.run_async({"name": "second"}, work, "b"), first.run_async({"name": "first"}, work, "a"))
    return [first.step_id, second.step_id, *got]


def test_queue_configuration_is_stored_for_every_worker(dbos: Any, agent_env: AgentEnv) -> None:
    config_queue.set_global_concurrency(6)
    config_queue.set_worker_concurrency(3)
    config_queue.set_limiter({"limit": 10, "period": 2.0})
    rows = query(
        f"SELECT concurrency, worker_concurrency, rate_limit_max, rate_limit_period_sec FROM {agent_env.schema}.queues WHERE name = %s",
        ("config_queue",),
    )
    assert rows == [(6, 3, 10, 2.0)]
    # A client's view of the queue reads what was stored.
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        seen = client.retrieve_queue("config_queue")
        assert seen is not None and (seen.global_concurrency, seen.worker_concurrency) == (6, 3)
        assert asyncio.run(config_queue.get_global_concurrency_async()) == 6
        assert asyncio.run(config_queue.get_limiter_async()) == {"limit": 10, "period": 2.0}
        # DBOS's cross-field rule, against the stored configuration, in DBOS's words.
        with pytest.raises(ValueError, match="^worker_concurrency must be less than or equal to concurrency$"):
            config_queue.set_worker_concurrency(7)
        asyncio.run(config_queue.set_global_concurrency_async(None))
        assert query(f"SELECT concurrency FROM {agent_env.schema}.queues WHERE name = %s", ("config_queue",)) == [(None,)]
        # The client's queue writes the row through the client (and the
        # worker's object reads it afresh).
        seen.set_worker_concurrency(1)
        assert config_queue.worker_concurrency == 1
    finally:
        client.destroy()
    # And it still runs work.
    assert config_queue.enqueue(plain_workflow).get_result() == "done"


def test_steps_start_and_enqueue_as_workflows(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("step-wf")
    with SetWorkflowID(wid):
        handle = DBOS.enqueue_workflow("step_queue", counted_step, "q")
    assert handle.get_result() == f"q-{wid}"
    # The same id again returns the recorded outcome: the step ran once.
    with SetWorkflowID(wid):
        again = DBOS.enqueue_workflow("step_queue", counted_step, "q")
    assert again.get_result() == f"q-{wid}"
    assert step_calls["q"] == 1
    st = DBOS.get_workflow_status(wid)
    assert st is not None and st.name == "<temp>.counted_step" and st.status == WorkflowStatusString.SUCCESS.value
    assert [s["function_name"] for s in DBOS.list_workflow_steps(wid)] == ["counted_step"]
    assert DBOS.start_workflow(counted_step, "s").get_result().startswith("s-")

    async def main() -> str:
        h = await step_queue.enqueue_async(async_counted_step, "a")
        return await h.get_result()  # type: ignore[no-any-return]

    assert asyncio.run(main()) == "A"
    # Called directly, a step outside a workflow is still a plain call.
    assert counted_step("direct") == "direct-None"


def test_validate_args_coerces_and_refuses_the_inputs_read_back(dbos: Any, agent_env: AgentEnv) -> None:
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        opts: Any = {"workflow_name": "typed_workflow", "queue_name": "step_queue",
                     "serialization_type": WorkflowSerializationFormat.PORTABLE}
        # Portable JSON carries the datetime as text and the int as a string
        # here; the validator turns them back into the annotated types.
        ok = client.enqueue(opts, "41", "2026-01-02T03:04:05+00:00", ["a", "b"])
        assert ok.get_result() == "42 2026 datetime a/b"
        bad = client.enqueue(opts, "not a number", "2026-01-02T03:04:05+00:00")
        with pytest.raises(Exception) as e:
            bad.get_result()
        text = str(e.value)
        assert "Argument validation failed for workflow" in text
        assert "Argument 'count' (position 0)" in text and "Missing required argument: 'tags'" in text
        assert bad.get_status().status == "ERROR"
    finally:
        client.destroy()
    # The validator on its own, as DBOS Python makes it.
    validate = make_pydantic_args_validator(typed_workflow)
    args, kwargs = validate(("3",), {"when": datetime(2020, 1, 1, tzinfo=timezone.utc), "tags": ("x",)})
    assert args == (3,) and kwargs["tags"] == ["x"]
    with pytest.raises(NotImplementedError):
        pydantic_args_validator((), {})


def test_a_reserved_step_runs_once_at_its_id(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("reserve")
    with SetWorkflowID(wid):
        out = uses_a_reservation()
    assert out == [1, "at-reserved-id", f"after-reservation-{wid}", "DBOS Error: A step reservation can only be run once"]
    steps = [(s["function_id"], s["function_name"], s["output"]) for s in DBOS.list_workflow_steps(wid)]
    assert steps == [(1, "reserved", "at-reserved-id"), (2, "counted_step", f"after-reservation-{wid}")]
    # A fork from step 3 replays steps 1 and 2 from the history, the
    # reserved one at its id, without running either again.
    calls_before = dict(step_calls)
    assert DBOS.fork_workflow(wid, 3).get_result() == out
    assert step_calls == calls_before and "twice" not in step_calls

    awid = new_id("reserve-async")

    async def main() -> List[Any]:
        with SetWorkflowID(awid):
            return await reserves_for_tasks()

    assert asyncio.run(main()) == [1, 2, "b", "a"]
    assert [(s["function_id"], s["function_name"]) for s in DBOS.list_workflow_steps(awid)] == [(1, "first"), (2, "second")]
    with pytest.raises(DBOSException, match="DBOS.reserve_step must be called from a workflow"):
        DBOS.reserve_step()
    assert isinstance(StepReservation, type)


def test_shard_keys_on_the_unsharded_system_database(dbos: Any, agent_env: AgentEnv) -> None:
    with pytest.raises(ValueError, match="shard_key must be a non-empty string"):
        SetShardKey("")
    assert shard_probe() is None
    assert DBOS.shard_key is None
    wid = new_id("shard")
    with SetShardKey("tenant-1"):
        with pytest.raises(DBOSException, match="A shard key was given, but this system database is not sharded"):
            with SetWorkflowID(wid):
                plain_workflow()
    assert DBOS.get_workflow_status(wid) is None
    # Where a call takes a shard key: DBOS's errors on an unsharded database.
    with pytest.raises(DBOSException, match="A shard key was given, but this system database is not sharded"):
        DBOS.get_workflow_status(wid, shard_key="tenant-1")
    with pytest.raises(DBOSException, match="Invalid shard key ''"):
        DBOS.get_workflow_status(wid, shard_key="")
    with pytest.raises(DBOSException, match="Filtering by shard key requires a sharded system database"):
        DBOS.list_workflows(shard_key=["tenant-1"])
    with pytest.raises(DBOSException, match="not sharded"):
        DBOS.send_bulk([SendMessage(wid, "m", shard_key="tenant-1")])
    # A schedule under a shard key: DBOS's own wording for schedules.
    with pytest.raises(DBOSException, match="^DBOS Error: Scheduling under a shard key requires a sharded system database$"):
        DBOS.create_schedule(schedule_name="keyed", workflow_fn=plain_workflow, schedule="0 0 * * *", shard_key="tenant-1")
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        with pytest.raises(DBOSException, match="Scheduling under a shard key requires a sharded system database"):
            client.create_schedule(schedule_name="keyed", workflow_name="w", schedule="0 0 * * *", shard_key="tenant-1")
        with pytest.raises(DBOSException, match="Scheduling under a shard key requires a sharded system database"):
            client.apply_schedules([{"schedule_name": "keyed", "workflow_name": "w", "schedule": "0 0 * * *", "shard_key": "t"}])
    finally:
        client.destroy()
    assert DBOS.get_schedule("keyed") is None


def test_set_shard_key_exits_in_another_context() -> None:
    # Entered in one contextvars Context and exited in another (a
    # threadpool-run generator dependency): each keeps or gets back its own.
    with SetShardKey("tenant-a"):
        inner = SetShardKey("tenant-b")
        entered = contextvars.copy_context()
        entered.run(inner.__enter__)
        assert entered.run(_shard_key.get) == "tenant-b"
        assert _shard_key.get() == "tenant-a"
        exited = contextvars.copy_context()
        exited.run(inner.__exit__, None, None, None)
        assert exited.run(_shard_key.get) == "tenant-a"
        assert _shard_key.get() == "tenant-a"
    assert _shard_key.get() is None


def test_otel_context_is_propagated_in_the_attributes(dbos: Any, agent_env: AgentEnv) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("caller") as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
        assert DBOS.span is span
        with SetWorkflowAttributes({"team": "a"}):
            with PropagateOtelContext():
                handle = DBOS.start_workflow(plain_workflow)
    assert handle.get_result() == "done"
    attrs = handle.get_status().attributes
    assert attrs is not None and attrs["team"] == "a"
    assert trace_id in attrs["dbos.otelContext"]["traceparent"]
    # The runs execute in the propagated context, wherever they run: a
    # started one on a thread of its own, an enqueued one pushed by the agent.
    with tracer.start_as_current_span("caller-2") as span2:
        trace_id2 = format(span2.get_span_context().trace_id, "032x")
        with PropagateOtelContext():
            started = DBOS.start_workflow(trace_of_run)
            queued = step_queue.enqueue(trace_of_run)
    assert started.get_result() == trace_id2 and queued.get_result() == trace_id2
    assert DBOS.start_workflow(trace_of_run).get_result() is None
    # No valid span: nothing to propagate, nothing stored.
    assert DBOS.span is None
    with PropagateOtelContext():
        bare = DBOS.start_workflow(plain_workflow)
    assert bare.get_result() == "done" and bare.get_status().attributes is None
    # DBOS's tracer makes real spans when OpenTelemetry is there.
    s = DBOS.tracer.start_span({"name": "manual", "operationType": "test"})
    assert s.is_recording() is not None
    DBOS.tracer.end_span(s)
    assert trace is not None


def test_tracing_without_opentelemetry_does_nothing(dbos: Any, agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    span = DBOS.tracer.start_span({"name": "nothing"})
    span.set_attribute("k", "v")
    assert span.is_recording() is False
    DBOS.tracer.end_span(span)
    assert DBOS.span is None
    with PropagateOtelContext():
        handle = DBOS.start_workflow(plain_workflow)
    assert handle.get_result() == "done" and handle.get_status().attributes is None


def test_import_needs_none_of_the_optional_packages() -> None:
    code = (
        "import sys\n"
        "for m in ('pydantic', 'opentelemetry', 'confluent_kafka', 'sqlalchemy'): sys.modules[m] = None\n"
        "import dbos_agent\n"
        "from dbos_agent import *\n"
        "print(len(dbos_agent.__all__))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 40


def test_status_strings_client_probe_and_errors(dbos: Any, agent_env: AgentEnv) -> None:
    assert {s.value for s in WorkflowStatusString} == {
        "PENDING", "SUCCESS", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED", "CANCELLED", "ENQUEUED", "DELAYED",
    }
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        client.check_connection()
        asyncio.run(client.check_connection_async())
    finally:
        client.destroy()
    e = DBOSWorkflowIDInUseError("wf-1", "PENDING", "checkout")
    assert str(e) == "DBOS Error 27: Workflow ID wf-1 is already in use by workflow checkout with status PENDING."
    back = pickle.loads(pickle.dumps(e))
    assert (back.workflow_id, back.workflow_status, back.workflow_name) == ("wf-1", "PENDING", "checkout")
    assert error.is_workflow_id_in_use_error(back)
    assert error.is_workflow_id_in_use_error(PortableWorkflowError("m", "DBOSWorkflowIDInUseError", None, None))
    assert not error.is_workflow_id_in_use_error(ValueError("x"))
    assert str(error.DBOSQueryTimeoutError(2.5)) == (
        "DBOS Error 26: This query was cancelled after exceeding its 2.5s statement timeout."
    )
    assert error.DBOSStreamNondeterminismError("w", "k").dbos_error_code == 17


def test_refusals_are_raised_when_used(dbos: Any, agent_env: AgentEnv) -> None:
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        with pytest.raises(DBOSNotSupportedError, match="transaction"):
            client.enqueue_in_transaction(None, {"workflow_name": "plain_workflow", "queue_name": "step_queue"})
        with pytest.raises(DBOSNotSupportedError, match="transaction"):
            client.send_in_transaction(None, "wf", "msg")
    finally:
        client.destroy()
    # DBOS's rule for alert handlers: declared before launch.
    with pytest.raises(DBOSException, match="alert_handler must be defined before DBOS is launched"):
        DBOS.alert_handler(lambda name, message, metadata: None)
