"""Schedules on the real agent: DBOS Python's schedule API (create, list,
get, pause, resume, delete, apply, backfill, trigger) and its client twin,
ticks turned into (scheduled time, context), one run per tick with two
agents firing, and the @DBOS.scheduled decorator."""

from __future__ import annotations

import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, List, Tuple
from zoneinfo import ZoneInfo

import pytest

from dbos_agent import DBOS, DBOSClient, DBOSException, Queue, SetWorkflowID
from dbos_agent._serialization import DBOSDefaultSerializer

from conftest import AgentEnv, AgentProcess, LineWaiter, Worker, query, wait_until
from holds import queue_env, tick_lines

Queue("sc_queue")

_cond = threading.Condition()
ticks: List[Tuple[str, Any, Any]] = []


def _record(when: Any, context: Any) -> None:
    with _cond:
        ticks.append((DBOS.workflow_id or "", when, context))
        _cond.notify_all()


@DBOS.workflow()
def sc_tick(scheduled_at: datetime, context: Any) -> None:
    _record(scheduled_at, context)


@DBOS.workflow()
def sc_untyped(when, context):  # type: ignore[no-untyped-def]
    _record(when, context)


@DBOS.workflow()
def sc_creates_a_schedule(name: str) -> None:
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="0 0 1 1 *")


def ticks_of(name: str) -> List[Tuple[str, Any, Any]]:
    with _cond:
        return [t for t in ticks if t[0].startswith(f"sched-{name}-")]


def wait_ticks(name: str, n: int, timeout: float = 30.0) -> List[Tuple[str, Any, Any]]:
    with _cond:
        if not _cond.wait_for(lambda: len(ticks_of(name)) >= n, timeout):
            raise AssertionError(f"{len(ticks_of(name))} of {n} ticks of {name} within {timeout}s")
        return ticks_of(name)


def no_more_ticks(name: str, n: int, window: float) -> bool:
    with _cond:
        return not _cond.wait_for(lambda: len(ticks_of(name)) >= n, window)


@pytest.fixture(scope="module")
def agent_b(agent_env: AgentEnv) -> AgentProcess:
    return agent_env.start_other_agent("exec-b")


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def test_a_schedule_fires_every_tick_with_its_time_and_context(dbos: Any) -> None:
    name = unique("every-")
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="* * * * * *", context={"k": [1, 2]})
    got = wait_ticks(name, 2)
    for wid, when, context in got:
        assert isinstance(when, datetime) and when.tzinfo is not None and when.microsecond == 0
        assert wid == f"sched-{name}-{when.isoformat()}"
        assert context == {"k": [1, 2]}
    s = DBOS.get_schedule(name)
    assert s is not None
    assert (s["schedule_name"], s["workflow_name"], s["schedule"], s["status"], s["context"]) == (
        name, "sc_tick", "* * * * * *", "ACTIVE", {"k": [1, 2]}
    )
    assert s["last_fired_at"] is not None and s["queue_name"] is None and s["automatic_backfill"] is False
    # A schedule without a time zone records its ticks in UTC.
    assert datetime.fromisoformat(s["last_fired_at"]).utcoffset() == timedelta(0)
    assert [x["schedule_name"] for x in DBOS.list_schedules(schedule_name_prefix=name)] == [name]
    assert name in [x["schedule_name"] for x in DBOS.list_schedules(status="ACTIVE", workflow_name="sc_tick")]
    assert name not in [x["schedule_name"] for x in DBOS.list_schedules(status="PAUSED")]

    DBOS.pause_schedule(name)
    assert DBOS.get_schedule(name)["status"] == "PAUSED"  # type: ignore[index]
    paused_at = len(ticks_of(name))
    # At most a tick already on its way; none fires while paused.
    assert no_more_ticks(name, paused_at + 2, 2.5), "a paused schedule kept firing"
    settled = len(ticks_of(name))
    DBOS.resume_schedule(name)
    wait_ticks(name, settled + 1)

    DBOS.delete_schedule(name)
    assert DBOS.get_schedule(name) is None
    assert DBOS.list_schedules(schedule_name_prefix=name) == []
    DBOS.delete_schedule(name)  # a missing schedule is no error
    DBOS.pause_schedule(name)
    listed = DBOS.list_workflows(workflow_id_prefix=f"sched-{name}-")
    for w in listed:
        DBOS.retrieve_workflow(w.workflow_id).get_result()
    ids = [t[0] for t in ticks_of(name)]
    assert len(ids) == len(set(ids)), "a tick ran twice"
    assert {w.workflow_id for w in listed} <= set(ids), "an enqueued tick did not run"
    assert {w.status for w in DBOS.list_workflows(workflow_ids=ids)} == {"SUCCESS"}


def _minutes_between(start: datetime, end: datetime) -> List[datetime]:
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    out = []
    while t < end:
        if t > start:
            out.append(t)
        t += timedelta(minutes=1)
    return out


def test_backfill_enqueues_each_missed_tick_once_and_trigger_runs_now(dbos: Any) -> None:
    name = unique("minutely-")
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="0 * * * * *", context="ctx")
    DBOS.pause_schedule(name)
    end = datetime.now(timezone.utc).replace(microsecond=0)
    start = end - timedelta(minutes=5, seconds=30)
    handles = DBOS.backfill_schedule(name, start, end)
    expected = [f"sched-{name}-{t.isoformat()}" for t in _minutes_between(start, end)]
    assert [h.workflow_id for h in handles] == expected and len(expected) >= 5
    for h in handles:
        assert h.get_result() is None
    by_id = {wid: (when, ctx) for wid, when, ctx in ticks_of(name)}
    assert sorted(by_id) == sorted(expected)
    assert all(ctx == "ctx" and by_id[wid][0].isoformat() in wid for wid, (_, ctx) in by_id.items())
    # Backfilling again enqueues nothing new: the ids are the scheduler's.
    again = DBOS.backfill_schedule(name, start.replace(tzinfo=None), end.replace(tzinfo=None))  # naive is UTC
    assert [h.workflow_id for h in again] == expected
    for h in again:
        h.get_result()
    assert len(ticks_of(name)) == len(expected)

    before = datetime.now(timezone.utc)
    trig = DBOS.trigger_schedule(name)
    assert trig.workflow_id.startswith(f"sched-{name}-trigger-")
    assert trig.get_result() is None
    (wid, when, ctx), = [t for t in ticks_of(name) if t[0] == trig.workflow_id]
    assert ctx == "ctx" and before - timedelta(seconds=1) <= when <= datetime.now(timezone.utc)

    with pytest.raises(DBOSException, match="does not exist"):
        DBOS.backfill_schedule(f"{name}-none", start, end)
    with pytest.raises(DBOSException, match="does not exist"):
        DBOS.trigger_schedule(f"{name}-none")
    DBOS.delete_schedule(name)


def test_concurrent_applies_of_one_schedule_leave_one_row(dbos: Any) -> None:
    name = unique("shared-")
    workers = 8
    barrier = threading.Barrier(workers)

    def apply() -> None:
        barrier.wait(timeout=30)
        DBOS.apply_schedules([{"schedule_name": name, "workflow_fn": sc_tick, "schedule": "0 0 1 1 *", "context": {"r": "us"}}])

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(apply) for _ in range(workers)]:
            f.result()  # none raises
    listed = DBOS.list_schedules(schedule_name_prefix=name)
    assert [(s["schedule_name"], s["context"]) for s in listed] == [(name, {"r": "us"})]
    DBOS.delete_schedule(name)


class Region:
    """A schedule context JSON cannot hold (DBOS Python pickles every context)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Region) and other.name == self.name


def test_a_context_json_cannot_hold_is_stored_with_the_serializer(
    dbos: Any, agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, bad = unique("json-ctx-"), unique("pickled-ctx-")
    DBOS.apply_schedules([
        {"schedule_name": good, "workflow_fn": sc_tick, "schedule": "0 0 1 1 *", "context": {"env": "test"}},
        {"schedule_name": bad, "workflow_fn": sc_tick, "schedule": "0 0 1 1 *", "context": Region("us")},
    ])
    try:
        # Stored as the serializer's text, as DBOS stores it; read back whole,
        # and a tick gets the object.
        raw = DBOSDefaultSerializer.serialize(Region("us"))
        assert query(f"SELECT context FROM {agent_env.schema}.workflow_schedules WHERE schedule_name = %s", (bad,)) == [(raw,)]
        assert DBOS.get_schedule(bad)["context"] == Region("us")  # type: ignore[index]
        DBOS.trigger_schedule(bad).get_result()
        (_, _, ctx), = ticks_of(bad)
        assert ctx == Region("us")
        # Once the class is gone, the listing still lists both, the one it
        # cannot read as its stored text (DBOS's fallback).
        monkeypatch.delattr(sys.modules[__name__], "Region")
        by_name = {s["schedule_name"]: s for s in DBOS.list_schedules() if s["schedule_name"] in (good, bad)}
        assert by_name[good]["context"] == {"env": "test"}
        assert by_name[bad]["context"] == raw
    finally:
        DBOS.delete_schedule(good)
        DBOS.delete_schedule(bad)


def test_last_fired_at_is_in_the_schedules_time_zone(dbos: Any) -> None:
    # DBOS records a tick as it computed it, in the schedule's time zone.
    name = unique("tz-")
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="* * * * * *", cron_timezone="America/New_York")
    try:
        wait_until(lambda: (DBOS.get_schedule(name) or {}).get("last_fired_at") is not None, "a tick recorded")
        s = DBOS.get_schedule(name)
        assert s is not None and s["last_fired_at"] is not None
        fired = datetime.fromisoformat(s["last_fired_at"])
        assert fired.utcoffset() == datetime.now(ZoneInfo("America/New_York")).utcoffset()
        assert fired <= datetime.now(timezone.utc)
    finally:
        DBOS.delete_schedule(name)


def test_apply_schedules_keeps_last_fired_at(dbos: Any) -> None:
    # A changed definition is written in place, as DBOS's upsert writes it: the latest tick stays.
    name = unique("kept-tick-")
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="* * * * * *")
    try:
        wait_until(lambda: (DBOS.get_schedule(name) or {}).get("last_fired_at") is not None, "a tick recorded")
        DBOS.pause_schedule(name)
        fired = DBOS.get_schedule(name)["last_fired_at"]  # type: ignore[index]
        DBOS.apply_schedules([{"schedule_name": name, "workflow_fn": sc_tick, "schedule": "0 0 1 1 *"}])
        s = DBOS.get_schedule(name)
        assert s is not None and s["schedule"] == "0 0 1 1 *"
        assert s["last_fired_at"] is not None
        assert datetime.fromisoformat(s["last_fired_at"]) >= datetime.fromisoformat(fired)  # type: ignore[arg-type]
    finally:
        DBOS.delete_schedule(name)


def test_a_workflow_without_type_hints_gets_a_datetime_too(dbos: Any) -> None:
    name = unique("untyped-")
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_untyped, schedule="0 0 1 1 *", context=[1, "two"],
                         queue_name="sc_queue", cron_timezone="America/New_York")
    handle = DBOS.trigger_schedule(name)
    handle.get_result()
    (_, when, ctx), = ticks_of(name)
    assert isinstance(when, datetime) and ctx == [1, "two"]
    assert handle.get_status().queue_name == "sc_queue"
    s = DBOS.get_schedule(name)
    assert s is not None and s["cron_timezone"] == "America/New_York" and s["queue_name"] == "sc_queue"
    DBOS.delete_schedule(name)


def test_schedule_api_checks_and_apply(dbos: Any) -> None:
    name = unique("checks-")
    # DBOS's wording, which callers match.
    with pytest.raises(DBOSException, match="Invalid cron schedule: 'every so often'"):
        DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="every so often")
    with pytest.raises(DBOSException, match="Invalid cron schedule"):
        DBOS.apply_schedules([{"schedule_name": name, "workflow_fn": sc_tick, "schedule": "61 * * * *"}])
    with pytest.raises(DBOSException, match="Invalid timezone: 'Fake/Zone'"):
        DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="* * * * *", cron_timezone="Fake/Zone")
    with pytest.raises(DBOSException, match="not declared"):
        DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="* * * * *", queue_name="sc_nope")
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="0 0 1 1 *", context=1)
    created_id = DBOS.get_schedule(name)["schedule_id"]  # type: ignore[index]
    with pytest.raises(DBOSException, match="already exists"):
        DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="0 0 1 1 *")
    DBOS.pause_schedule(name)
    # apply_schedules replaces the definition and makes it active.
    DBOS.apply_schedules([
        {"schedule_name": name, "workflow_fn": sc_tick, "schedule": "0 0 2 1 *", "context": {"v": 2}},
        {"schedule_name": name + "-b", "workflow_fn": sc_untyped, "schedule": "0 0 3 1 *"},
    ])
    s = DBOS.get_schedule(name)
    assert s is not None and (s["schedule"], s["context"], s["status"]) == ("0 0 2 1 *", {"v": 2}, "ACTIVE")
    # Updated in place, as DBOS updates it: the schedule keeps its id.
    assert s["schedule_id"] == created_id
    # Several prefixes: the schedules starting with any of them, as DBOS takes a list.
    assert {x["schedule_name"] for x in DBOS.list_schedules(schedule_name_prefix=[name + "-b", "no-such-"])} == {name + "-b"}
    assert {x["schedule_name"] for x in DBOS.list_schedules(schedule_name_prefix=[name + "-b", name])} == {name, name + "-b"}
    b = DBOS.get_schedule(name + "-b")
    assert b is not None and b["workflow_name"] == "sc_untyped" and b["context"] is None
    with pytest.raises(DBOSException, match="missing required field 'schedule'"):
        DBOS.apply_schedules([{"schedule_name": "x", "workflow_fn": sc_tick}])

    # Inside a workflow, creating a schedule is a recorded step.
    inner = name + "-inner"
    with SetWorkflowID(f"creator-{inner}"):
        sc_creates_a_schedule(inner)
    assert [s["function_name"] for s in DBOS.list_workflow_steps(f"creator-{inner}")] == ["DBOS.createSchedule"]
    assert DBOS.get_schedule(inner) is not None
    for n in (name, name + "-b", inner):
        DBOS.delete_schedule(n)


def test_client_schedules_by_workflow_name(dbos: Any, agent_env: AgentEnv) -> None:
    name = unique("client-")
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest") as client:
        client.create_schedule(schedule_name=name, workflow_name="sc_tick", schedule="0 * * * * *", context={"c": True})
        client.pause_schedule(name)
        got = client.get_schedule(name)
        assert got is not None and got["status"] == "PAUSED" and got["context"] == {"c": True}
        assert [s["schedule_name"] for s in client.list_schedules(schedule_name_prefix=name)] == [name]
        end = datetime.now(timezone.utc)
        handles = client.backfill_schedule(name, end - timedelta(minutes=2, seconds=30), end)
        assert len(handles) >= 2
        for h in handles:
            h.get_result()
        trig = client.trigger_schedule(name)
        trig.get_result()
        assert {t[0] for t in ticks_of(name)} == {h.workflow_id for h in handles} | {trig.workflow_id}
        client.apply_schedules([{"schedule_name": name, "workflow_name": "sc_tick", "schedule": "0 0 1 1 *"}])
        assert client.get_schedule(name)["status"] == "ACTIVE"  # type: ignore[index]
        client.resume_schedule(name)
        client.delete_schedule(name)
        assert client.get_schedule(name) is None


def test_a_schedule_fires_once_per_tick_with_two_agents_firing(
    agent_env: AgentEnv, agent_b: AgentProcess, workers: List[Worker]
) -> None:
    log = LineWaiter()
    for sock in (agent_env.socket, agent_b.socket):
        w = Worker("queue_worker.py", queue_env(sock, "pytest-s"), sink=log)
        workers.append(w)
    for w in workers:
        w.out.wait_for("ready")
    name = unique("both-")
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-s") as client:
        client.create_schedule(schedule_name=name, workflow_name="tick", schedule="* * * * * *", context={"n": 1})
        def of_this(line: str) -> bool:
            return line.startswith(f"tick sched-{name}-")

        log.wait_count(of_this, 4)
        client.pause_schedule(name)
        # The other agent learns of the pause at its next look at the
        # schedules (within --schedule-interval): wait until ticks stop.
        while not log.stays_below(of_this, len(log.matching(of_this)) + 1, 1.5):
            pass
        fired = client.list_workflows(workflow_id_prefix=f"sched-{name}-")
        for wf in fired:
            client.retrieve_workflow(wf.workflow_id).get_result()
        ran = [t for t in tick_lines(log) if t[0].startswith(f"sched-{name}-")]
        ids = [t[0] for t in ran]
        # Every tick enqueued once (both agents fire it; the id makes it one
        # workflow) and run once, on one of the two workers.
        assert len(ids) == len(set(ids)), f"a tick ran twice: {ids}"
        assert sorted(ids) == sorted(wf.workflow_id for wf in fired)
        for wid, when, context in ran:
            assert wid == f"sched-{name}-{when}" and context == '{"n":1}'
        seconds = sorted(datetime.fromisoformat(t[1]) for t in ran)
        assert all(b - a >= timedelta(seconds=1) for a, b in zip(seconds, seconds[1:]))
        client.delete_schedule(name)


def test_the_scheduled_decorator_writes_and_updates_its_schedule(agent_env: AgentEnv, workers: List[Worker]) -> None:
    env = queue_env(agent_env.socket, "pytest-d", DECORATED_CRON="* * * * * *")
    w = Worker("queue_worker.py", env)
    workers.append(w)
    w.out.wait_for("ready")
    lines = w.out.wait_count(lambda line: line.startswith("decorated "), 2)
    for line in lines:
        _, wid, scheduled, actual, _ = line.split()
        assert wid == f"sched-decorated_tick-{scheduled}"
        # actual_time is when the tick was enqueued: at or after its time.
        assert datetime.fromisoformat(actual) >= datetime.fromisoformat(scheduled) - timedelta(milliseconds=50)
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-d") as client:
        s = client.get_schedule("decorated_tick")
        assert s is not None and (s["workflow_name"], s["schedule"], s["status"]) == ("decorated_tick", "* * * * * *", "ACTIVE")
        w.stop()
        client.pause_schedule("decorated_tick")
        paused_at = datetime.now(timezone.utc)

        def later_tick(line: str) -> bool:
            # (A tick enqueued before the pause and left unrun by the first
            # worker is run by the next one: only later ticks count here.)
            return line.startswith("decorated ") and datetime.fromisoformat(line.split()[2]) > paused_at

        # A new deploy with another cron updates the schedule and keeps it paused.
        w2 = Worker("queue_worker.py", dict(env, DECORATED_CRON="*/2 * * * * *"))
        workers.append(w2)
        w2.out.wait_for("ready")
        s = client.get_schedule("decorated_tick")
        assert s is not None and (s["schedule"], s["status"]) == ("*/2 * * * * *", "PAUSED")
        assert w2.out.stays_below(later_tick, 1, 2.5), "a paused schedule fired"
        client.resume_schedule("decorated_tick")
        line = w2.out.wait_for(later_tick)
        assert datetime.fromisoformat(line.split()[2]).second % 2 == 0
        # Another application with a workflow of the same name does not take
        # the schedule over: its launch fails, the schedule stays.
        intruder = Worker("queue_worker.py", queue_env(agent_env.socket, "pytest-other", DECORATED_CRON="0 0 1 1 *"))
        workers.append(intruder)
        intruder.out.wait_for("is already registered by application 'pytest-d'")
        assert intruder.proc.wait(30) != 0
        s = client.get_schedule("decorated_tick")
        assert s is not None and (s["schedule"], s["status"]) == ("*/2 * * * * *", "ACTIVE")
        client.delete_schedule("decorated_tick")


def test_versioned_ticks_follow_the_latest_version(dbos: Any) -> None:
    # Ticks are enqueued for the application's latest version: this
    # module's DBOS was given no version, so, as DBOS Python, it computed
    # one from its workflows' source and registered it, the first of its
    # application, hence the latest.
    name = unique("ver-")
    DBOS.create_schedule(schedule_name=name, workflow_fn=sc_tick, schedule="0 0 1 1 *")
    h = DBOS.trigger_schedule(name)
    h.get_result()
    assert DBOS.application_version and h.get_status().app_version == DBOS.application_version
    DBOS.delete_schedule(name)



