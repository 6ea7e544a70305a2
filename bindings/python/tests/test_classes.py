"""Workflows and steps that are methods of classes (@DBOS.dbos_class,
DBOSConfiguredInstance), on the real agent: instance, class and static
methods as workflows and steps, called, started and enqueued (sync and
async); the rows name the class and configured instance as DBOS Python
writes them (compared with the rows the official package writes for the same
calls), the target is not part of the recorded inputs, and a run the agent
pushes (a dequeue, a recovery, an enqueue by the official DBOSClient) runs on
the configured instance its row names."""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import sys
import threading
import uuid
from datetime import datetime
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from dbos import DBOSClient as OfficialClient

from dbos_agent import DBOS, DBOSClient, DBOSConfiguredInstance, DBOSException, Queue, SetWorkflowID

from class_defs import Pricing, Warehouse, compared_calls
from conftest import TESTS, AgentEnv, Worker, effect_counts, query, sqlalchemy_url

classes_queue = Queue("classes_queue")

# Configured before launch, as DBOS Python asks.
east = Warehouse("east", 100)
west = Warehouse("west", 50)


class Annex(Warehouse):
    """Not registered itself: it goes by its base's name, as in DBOS Python."""


annex = Annex("annex", 5)


@DBOS.dbos_class()
class NoConfigName:
    """A registered class whose instances are not configured instances."""

    @DBOS.workflow()
    def wf(self) -> str:
        return "never"


class Unregistered(DBOSConfiguredInstance):
    """Workflows on a class that @DBOS.dbos_class never saw."""

    def __init__(self) -> None:
        super().__init__("unregistered")

    @DBOS.workflow()
    def inst_wf(self) -> str:
        return "never"

    @classmethod
    @DBOS.workflow()
    def cls_wf(cls) -> str:
        return "never"


class StepsOnly:
    """Steps may be methods of any class: they record no inputs."""

    def __init__(self, base: int) -> None:
        self.base = base

    @DBOS.step()
    def add(self, x: int) -> int:
        return self.base + x


steps_only = StepsOnly(7)


@DBOS.workflow()
def uses_plain_step_methods(x: int) -> int:
    return steps_only.add(x) + steps_only.add(x)


@DBOS.dbos_class()
class Family(DBOSConfiguredInstance):
    """Method workflows that are children of one another."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.runs = 0

    @DBOS.workflow()
    def parent(self, n: int) -> List[str]:
        self.runs += 1
        direct = self.child(n)
        started = DBOS.start_workflow(self.child, n + 1)
        return [direct, started.get_result()]

    @DBOS.workflow()
    def child(self, n: int) -> str:
        return f"{self.config_name}:{n}"


family = Family("smiths")


@DBOS.dbos_class(class_name="ticker")
class Ticker:
    seen: "queue.Queue[Tuple[str, type, Any]]" = queue.Queue()

    @classmethod
    @DBOS.workflow()
    def tick(cls, scheduled_at: datetime, context: Any) -> None:
        cls.seen.put((str(DBOS.workflow_id), cls, context))


def row(agent_env: AgentEnv, wid: str) -> Tuple[Any, ...]:
    rows = query(
        f'SELECT name, class_name, config_name FROM "{agent_env.schema}".workflow_status WHERE workflow_uuid = %s', (wid,)
    )
    assert len(rows) == 1, (wid, rows)
    return tuple(rows[0])


def inputs_of(wid: str) -> Any:
    st = DBOS.get_workflow_status(wid)
    assert st is not None
    return st.input


def step_names(wid: str) -> List[str]:
    return [s["function_name"] for s in DBOS.list_workflow_steps(wid)]


def test_instance_method_workflow_runs_on_its_instance_called_started_and_enqueued(dbos: Any, agent_env: AgentEnv) -> None:
    called, started, enqueued, by_name = (f"inst-{k}-{uuid.uuid4().hex[:8]}" for k in ("call", "start", "enq", "queue"))
    with SetWorkflowID(called):
        assert east.order("apple", 2) == {"site": "east", "left": 98, "price": 32}
    with SetWorkflowID(started):
        h = DBOS.start_workflow(west.order, "pear", 1)
    assert h.get_result() == {"site": "west", "left": 49, "price": 13}
    # Enqueued: the agent pushes the run, and the binding finds the instance
    # by the names in the row.
    with SetWorkflowID(enqueued):
        q = classes_queue.enqueue(west.order, "fig", 4)
    assert q.get_result() == {"site": "west", "left": 45, "price": 40}
    with SetWorkflowID(by_name):
        n = DBOS.enqueue_workflow("classes_queue", east.order, "kiwi", 1)
    assert n.get_result() == {"site": "east", "left": 97, "price": 13}
    assert east.orders[-2:] == [called, by_name] and west.orders[-2:] == [started, enqueued]

    for wid, site in ((called, "east"), (started, "west"), (enqueued, "west"), (by_name, "east")):
        assert row(agent_env, wid) == ("Warehouse.order", "Warehouse", site)
        st = DBOS.get_workflow_status(wid)
        assert st is not None and (st.class_name, st.config_name) == ("Warehouse", site)
        assert step_names(wid) == ["Warehouse.reserve", "Pricing.unit_price", "Pricing.tax"]
    # The instance is the target, not an input.
    assert inputs_of(started) == {"args": ("pear", 1), "kwargs": {}}
    assert inputs_of(enqueued) == {"args": ("fig", 4), "kwargs": {}}


def test_an_unregistered_subclass_goes_by_its_registered_base(dbos: Any, agent_env: AgentEnv) -> None:
    h = classes_queue.enqueue(annex.order, "ab", 1)
    assert h.get_result() == {"site": "annex", "left": 4, "price": 7}
    assert annex.orders == [h.workflow_id]
    assert row(agent_env, h.workflow_id) == ("Warehouse.order", "Warehouse", "annex")


def test_class_and_static_method_workflows(dbos: Any, agent_env: AgentEnv) -> None:
    quote, quote_q, total, total_q = (f"cls-{k}-{uuid.uuid4().hex[:8]}" for k in ("quote", "quoteq", "total", "totalq"))
    with SetWorkflowID(quote):
        assert Pricing.quote("apple", 2) == {"cls": "Pricing", "total": 32}
    with SetWorkflowID(quote_q):
        assert classes_queue.enqueue(Pricing.quote, "fig", 1).get_result() == {"cls": "Pricing", "total": 10}
    with SetWorkflowID(total):
        assert DBOS.start_workflow(Pricing.total, "apple", 2).get_result() == 32
    with SetWorkflowID(total_q):
        assert classes_queue.enqueue(Pricing.total, "fig", 1).get_result() == 10
    # A class method names its class by its registered name, with no
    # configured instance; a static method names neither, as in DBOS Python.
    for wid in (quote, quote_q):
        assert row(agent_env, wid) == ("Pricing.quote", "pricing-v2", None)
        assert step_names(wid) == ["Pricing.unit_price", "Pricing.tax"]
    assert inputs_of(quote_q) == {"args": ("fig", 1), "kwargs": {}}
    for wid in (total, total_q):
        assert row(agent_env, wid) == ("Pricing.total", None, None)
        assert inputs_of(wid)["args"] == ((("apple", 2) if wid == total else ("fig", 1)))
    # Reached through an instance, a class method still binds the class.
    with SetWorkflowID(f"{quote}-via"):
        assert DBOS.start_workflow(Pricing().quote, "ab", 1).get_result() == {"cls": "Pricing", "total": 7}
    assert row(agent_env, f"{quote}-via")[1:] == ("pricing-v2", None)


def test_method_workflows_as_children_of_a_method_workflow(dbos: Any, agent_env: AgentEnv) -> None:
    wid = f"family-{_suffix}"
    with SetWorkflowID(wid):
        assert family.parent(1) == ["smiths:1", "smiths:2"]
    steps = DBOS.list_workflow_steps(wid)
    assert [s["function_name"] for s in steps] == ["Family.child", "DBOS.getResult", "Family.child", "DBOS.getResult"]
    children = sorted({s["child_workflow_id"] for s in steps})
    assert len(children) == 2
    for child in children:
        assert child.startswith(f"{wid}-")
        assert row(agent_env, child) == ("Family.child", "Family", "smiths")
    # Run again under its id: the recorded outcome, the body not run again.
    with SetWorkflowID(wid):
        assert family.parent(1) == ["smiths:1", "smiths:2"]
    assert family.runs == 1


def test_a_completed_method_workflow_started_again_returns_its_recorded_result(dbos: Any) -> None:
    wid = f"again-{uuid.uuid4().hex[:8]}"
    with SetWorkflowID(wid):
        first = east.order("plum", 1)
    runs = len(east.orders)
    with SetWorkflowID(wid):
        assert DBOS.start_workflow(east.order, "plum", 1).get_result() == first
    assert len(east.orders) == runs


async def _async_calls() -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    with SetWorkflowID(f"async-call-{_suffix}"):
        out["call"] = await east.order_async("apple", 1)
    with SetWorkflowID(f"async-start-{_suffix}"):
        h = await DBOS.start_workflow_async(west.order_async, "pear", 2)
    out["start"] = await h.get_result()
    with SetWorkflowID(f"async-enq-{_suffix}"):
        q = await classes_queue.enqueue_async(west.order_async, "fig", 3)
    out["enq"] = await q.get_result()
    with SetWorkflowID(f"async-cls-{_suffix}"):
        out["cls"] = await Pricing.quote_async("ab", 2)
    return out


_suffix = uuid.uuid4().hex[:8]


def test_async_method_workflows(dbos: Any, agent_env: AgentEnv) -> None:
    import asyncio

    e0, w0 = east.stock, west.stock
    out = asyncio.run(_async_calls())
    assert out == {
        "call": {"site": "east", "left": e0 - 1},
        "start": {"site": "west", "left": w0 - 2},
        "enq": {"site": "west", "left": w0 - 5},
        "cls": {"cls": "Pricing", "total": 12},
    }
    assert row(agent_env, f"async-start-{_suffix}") == ("Warehouse.order_async", "Warehouse", "west")
    assert row(agent_env, f"async-enq-{_suffix}") == ("Warehouse.order_async", "Warehouse", "west")
    assert row(agent_env, f"async-cls-{_suffix}") == ("Pricing.quote_async", "pricing-v2", None)
    assert inputs_of(f"async-enq-{_suffix}") == {"args": ("fig", 3), "kwargs": {}}


def test_step_methods_of_an_unregistered_class(dbos: Any) -> None:
    h = DBOS.start_workflow(uses_plain_step_methods, 5)
    assert h.get_result() == 24
    assert step_names(h.workflow_id) == ["StepsOnly.add", "StepsOnly.add"]
    # Outside a workflow a step method is a plain call.
    assert steps_only.add(1) == 8


def test_method_workflows_of_classes_dbos_cannot_name_are_refused_as_in_dbos(dbos: Any, agent_env: AgentEnv) -> None:
    wid = f"refused-{uuid.uuid4().hex[:8]}"
    with SetWorkflowID(wid):
        with pytest.raises(Exception, match="Function target appears to be a class instance, but does not have `config_name` set"):
            NoConfigName().wf()
    with pytest.raises(Exception, match="Function target appears to be a class instance, but is not properly registered"):
        Unregistered().inst_wf()
    with pytest.raises(Exception, match="Function target appears to be a class, but is not properly registered"):
        Unregistered.cls_wf()
    with pytest.raises(Exception, match="does not have `config_name` set"):
        DBOS.start_workflow(NoConfigName().wf)
    # Refused before anything was written.
    assert query(f'SELECT 1 FROM "{agent_env.schema}".workflow_status WHERE workflow_uuid = %s', (wid,)) == []


def test_duplicate_class_and_instance_registrations(dbos: Any) -> None:
    @DBOS.dbos_class()
    class Twice(DBOSConfiguredInstance):
        def __init__(self, name: str) -> None:
            super().__init__(name)

    with pytest.raises(Exception) as exc_info:

        @DBOS.dbos_class()
        class Twice(DBOSConfiguredInstance):  # type: ignore[no-redef]  # noqa: F811
            pass

    qual = "test_duplicate_class_and_instance_registrations.<locals>.Twice"
    assert str(exc_info.value) == f"Duplicate type registration for class '{qual}'"

    Named = DBOS.dbos_class(class_name="twice-named")(type("Twice", (DBOSConfiguredInstance,), {}))
    first = Named("bob")
    with pytest.raises(Exception) as exc_info:
        Named("bob")
    assert str(exc_info.value) == "Duplicate instance registration for class 'twice-named' instance 'bob'"
    # Another config name, or the same instance again, is fine.
    Named("alice")
    DBOSConfiguredInstance.__init__(first, "bob")


def official_app(agent_env: AgentEnv, prefix: str) -> None:
    env = dict(os.environ)
    env.update({
        "APP_DATABASE_URL": sqlalchemy_url(), "APP_SCHEMA": agent_env.schema,
        # Another application and executor: its version and startup recovery
        # leave this module's workflows alone.
        "APP_NAME": "official-classes", "APP_VERSION": "official-1", "DBOS__VMID": "official-classes",
        "ID_PREFIX": prefix,
    })
    out = subprocess.run(
        [sys.executable, str(TESTS / "apps" / "official_class_app.py")], env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0 and "done" in out.stdout, out.stdout + out.stderr


def test_rows_are_the_ones_dbos_python_writes_for_the_same_calls(dbos: Any, agent_env: AgentEnv) -> None:
    theirs, ours = f"official-{_suffix}", f"binding-{_suffix}"
    official_app(agent_env, theirs)
    compared_calls(ours, Warehouse("north", 10))  # the same state as the official app's instance

    for call in ("order", "start", "quote", "total"):
        a, b = f"{theirs}-{call}", f"{ours}-{call}"
        assert row(agent_env, b) == row(agent_env, a), call
        sa, sb = DBOS.get_workflow_status(a), DBOS.get_workflow_status(b)
        assert sa is not None and sb is not None
        assert (sb.input, sb.output, sb.status) == (sa.input, sa.output, sa.status), call
        assert step_names(b) == step_names(a), call
    assert row(agent_env, f"{ours}-order") == ("Warehouse.order", "Warehouse", "north")


def test_a_class_method_workflow_on_a_schedule_runs_on_its_class(dbos: Any, agent_env: AgentEnv) -> None:
    name = f"ticker-{_suffix}"
    DBOS.create_schedule(schedule_name=name, workflow_fn=Ticker.tick, schedule="* * * * * *", context="ctx")
    try:
        assert DBOS.get_schedule(name)["workflow_class_name"] == "ticker"  # type: ignore[index]
        wid, cls, context = Ticker.seen.get(timeout=30)
    finally:
        DBOS.delete_schedule(name)
    assert wid.startswith(f"sched-{name}-") and cls is Ticker and context == "ctx"
    assert row(agent_env, wid) == ("Ticker.tick", "ticker", None)
    with pytest.raises(DBOSException, match="Configured instance methods cannot be used as scheduled workflows"):
        DBOS.create_schedule(schedule_name=f"{name}-inst", workflow_fn=east.order, schedule="* * * * * *")


@pytest.fixture(scope="module")
def official(agent_env: AgentEnv) -> Iterator[OfficialClient]:
    client = OfficialClient(system_database_url=sqlalchemy_url(), dbos_system_schema=agent_env.schema)
    yield client
    client.destroy()


def test_the_official_client_enqueues_onto_a_configured_instance(dbos: Any, official: OfficialClient, agent_env: AgentEnv) -> None:
    h = official.enqueue(
        {"queue_name": "classes_queue", "workflow_name": "Warehouse.order", "class_name": "Warehouse", "instance_name": "west"},
        "lime", 2,
    )
    left = west.stock - 2
    assert h.get_result(polling_interval_sec=0.1) == {"site": "west", "left": left, "price": 26}
    assert west.orders[-1] == h.workflow_id
    c = official.enqueue({"queue_name": "classes_queue", "workflow_name": "Pricing.quote", "class_name": "pricing-v2"}, "ab", 3)
    assert c.get_result(polling_interval_sec=0.1) == {"cls": "Pricing", "total": 21}
    s = official.enqueue({"queue_name": "classes_queue", "workflow_name": "Pricing.total"}, "ab", 3)
    assert s.get_result(polling_interval_sec=0.1) == 21
    # A static method named with its class (DBOS's client allows it): the class is not passed.
    sc = official.enqueue({"queue_name": "classes_queue", "workflow_name": "Pricing.total", "class_name": "pricing-v2"}, "ab", 3)
    assert sc.get_result(polling_interval_sec=0.1) == 21
    # And the official client reads the binding's rows as its own.
    st = official.retrieve_workflow(h.workflow_id).get_status()
    assert (st.class_name, st.config_name, st.input) == ("Warehouse", "west", {"args": ("lime", 2), "kwargs": {}})


class _Seen(logging.Handler):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = threading.Event()
        self.records: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        self.records.append(msg)
        if self.text in msg:
            self.event.set()


def test_a_run_for_an_instance_this_process_lacks_does_not_run(dbos: Any, official: OfficialClient) -> None:
    seen = _Seen("configured class instance 'Warehouse/nowhere' is not registered")
    log = logging.getLogger("dbos_agent")
    log.addHandler(seen)
    try:
        h = official.enqueue(
            {"queue_name": "classes_queue", "workflow_name": "Warehouse.order", "class_name": "Warehouse", "instance_name": "nowhere"},
            "lime", 1,
        )
        assert seen.event.wait(60), seen.records
    finally:
        log.removeHandler(seen)
    wid = h.workflow_id
    st = DBOS.get_workflow_status(wid)
    # As in DBOS Python: not run, not failed; it waits for the instance.
    assert st is not None and st.status == "PENDING" and st.output is None
    assert wid not in east.orders + west.orders
    DBOS.cancel_workflow(wid)


def test_a_configured_instance_workflow_recovered_after_sigkill_runs_on_the_same_instance(
    agent_env: AgentEnv, workers: List[Worker]
) -> None:
    effects = agent_env.path("effects-classes")
    env = {"DBOS_AGENT_SOCKET": agent_env.socket, "EFFECTS_FILE": effects}
    first = Worker("class_worker.py", dict(env, BLOCK_AT="3"))
    workers.append(first)
    first.out.wait_for("ready")
    started = f"crash-start-{_suffix}"
    first.send(f"start {started} beta 5")
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        enq = client.enqueue(
            {"workflow_name": "Line.run", "queue_name": "class_crash_queue", "class_name": "Line", "instance_name": "alpha"}, 4
        )
        first.out.wait_for(f"blocking {started} beta 3")
        first.out.wait_for(f"blocking {enq.workflow_id} alpha 3")
        first.kill()

        second = Worker("class_worker.py", env)
        workers.append(second)
        # Each workflow is recovered onto its own configured instance (beta
        # multiplies by 100, alpha by 10), without re-running its recorded steps.
        assert client.retrieve_workflow(started).get_result() == [100, 200, 300, 400, 500]
        assert enq.get_result() == [10, 20, 30, 40]
        counts = effect_counts(effects)
        assert counts == {**{f"{started} beta {n}": 1 for n in range(1, 6)}, **{f"{enq.workflow_id} alpha {n}": 1 for n in range(1, 5)}}
        assert [line for line in second.out.lines if line.startswith(f"ran {started} ")] == [f"ran {started} beta {n}" for n in (3, 4, 5)]
        for wid, site in ((started, "beta"), (enq.workflow_id, "alpha")):
            st = client.retrieve_workflow(wid).get_status()
            assert (st.class_name, st.config_name, st.status) == ("Line", site, "SUCCESS")
            assert (st.recovery_attempts or 0) >= 2
        assert client.retrieve_workflow(started).get_status().input == {"args": (5,), "kwargs": {}}
    finally:
        client.destroy()


def test_step_methods_started_and_enqueued_as_workflows(dbos: Any) -> None:
    # DBOS Python makes a step startable: a workflow whose one step is the
    # method, on its instance (the row names the class and instance) or class.
    wid = f"inst-step-{uuid.uuid4()}"
    before = east.stock
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(east.reserve, "fig", 3)
    assert handle.get_result() == before - 3
    status = handle.get_status()
    assert (status.name, status.class_name, status.config_name) == ("<temp>.Warehouse.reserve", "Warehouse", "east")
    assert [s["function_name"] for s in DBOS.list_workflow_steps(wid)] == ["Warehouse.reserve"]
    queued = classes_queue.enqueue(west.reserve, "fig", 1)
    assert queued.get_result() == west.stock
    assert queued.get_status().config_name == "west"
    assert DBOS.start_workflow(Pricing.unit_price, "kiwi").get_result() == 3 * 4
    assert DBOS.start_workflow(Pricing.tax, 7).get_result() == 7
