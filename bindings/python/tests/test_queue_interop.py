"""Queue configuration shared with the official DBOS Python package on one
system database: a queue an official DBOS process registers (with its
limits) is served by a binding worker within those limits, and a queue the
binding registers is read by an official process and fed by the official
DBOSClient, its workflows running on the binding worker within the limits
the binding stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, Iterator

import pytest
from dbos import DBOSClient as OfficialClient

from dbos_agent import DBOS, DBOSClient, Queue

from conftest import SYSTEM_DB, TESTS, AgentEnv
from holds import Tracker, drive

state: Dict[str, Tracker] = {"tracker": Tracker()}


@DBOS.workflow()
def qi_held(tag: str) -> str:
    wid = DBOS.workflow_id
    assert wid is not None
    state["tracker"].enter(wid, tag)
    return tag


@pytest.fixture(autouse=True)
def fresh_tracker() -> Iterator[Tracker]:
    t = Tracker()
    state["tracker"] = t
    yield t
    t.open()


@pytest.fixture(scope="module")
def dbos(agent_env: AgentEnv) -> Iterator[type]:
    """DBOS launched with a version of its own, as an official DBOS process
    always has one: the official process of this module registers its
    version, official-1, which then is the latest, and a worker without a
    version takes no queued unversioned work while another version is the
    latest (PROTOCOL.md 2.13, as DBOS Python routes it)."""
    DBOS.destroy()
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket, "application_version": "binding-1"})
    DBOS.launch()
    try:
        yield DBOS
    finally:
        DBOS.destroy()


def after_the_second_of(timestamp_ms: int) -> None:
    """Returns once the clock is past the whole second timestamp_ms falls in.

    On Python below 3.12, DBOS Python's SQLite schema stamps the rows it
    inserts with whole seconds (its column default is strftime('%s','now')
    * 1000), while the agent stamps milliseconds: a version the official
    process registers in the same second as the binding's would sort before
    it though made after it. On Postgres both stamp milliseconds.
    """
    until = (timestamp_ms // 1000 + 1) * 1000
    while (now := time.time() * 1000) < until:
        time.sleep((until - now) / 1000)


def run_official_app(agent_env: AgentEnv, **env: str) -> Dict[str, Any]:
    full = dict(os.environ)
    full.update({
        "APP_DATABASE_URL": agent_env.system_database_url, "APP_SCHEMA": agent_env.schema, "APP_NAME": "pytest",
        "APP_VERSION": "official-1",
        # Its own executor id, so that its startup recovery leaves the
        # agent's workflows alone.
        "DBOS__VMID": "official-process",
    })
    full.update(env)
    out = subprocess.run(
        [sys.executable, str(TESTS / "apps" / "official_queue_app.py")], env=full, capture_output=True, text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    result: Dict[str, Any] = {}
    for line in out.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        result[kind] = rest
    return result


def test_queues_are_shared_with_official_dbos_both_ways(dbos: Any, agent_env: AgentEnv, fresh_tracker: Tracker) -> None:
    ours = DBOS.register_queue("binding_limited", global_concurrency=1, limiter={"limit": 5, "period": 2.0})
    if SYSTEM_DB == "sqlite":
        after_the_second_of(DBOS.get_latest_application_version()["version_timestamp"])
    out = run_official_app(agent_env, QUEUE_TO_READ="binding_limited")
    assert out["registered"] == "official_limited"
    # The official process reads the limits the binding stored.
    assert json.loads(out["read"]) == {"global_concurrency": 1, "worker_concurrency": None,
                                       "limiter": {"limit": 5, "period": 2.0}}

    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest") as client:
        stored = client.retrieve_queue("official_limited")
        assert stored is not None
        assert (stored.worker_concurrency, stored.global_concurrency, stored.limiter) == (
            2, 3, {"limit": 100, "period": 1.5}
        )
    # Named alone, the queue is served with the official process's limits:
    # its worker_concurrency 2 holds in this worker.
    served = Queue("official_limited")
    handles = [served.enqueue(qi_held, f"o{i}") for i in range(5)]
    drive(fresh_tracker, total=5, limit=2)
    assert [h.get_result() for h in handles] == [f"o{i}" for i in range(5)]
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest") as client:
        again = client.retrieve_queue("official_limited")
        assert again is not None and (again.worker_concurrency, again.global_concurrency) == (2, 3)

    # The official client enqueues onto the binding's queue; the binding
    # worker runs them one at a time (the global concurrency it stored).
    # Its enqueues are unversioned, which only the latest version takes:
    # official-1 since the official process registered it, and gone, so
    # binding-1 is made the latest again (a rollback, as in DBOS).
    assert DBOS.get_latest_application_version()["version_name"] == "official-1"
    DBOS.set_latest_application_version("binding-1")
    official = OfficialClient(system_database_url=agent_env.system_database_url, dbos_system_schema=agent_env.schema)
    fresh = Tracker()
    state["tracker"] = fresh
    try:
        theirs = official.retrieve_queue("binding_limited")
        assert theirs is not None and theirs.global_concurrency == 1
        assert theirs.limiter == {"limit": 5, "period": 2.0}
        enqueued = [official.enqueue({"workflow_name": "qi_held", "queue_name": "binding_limited"}, f"c{i}") for i in range(3)]
        drive(fresh, total=3, limit=1)
        assert [h.get_result(polling_interval_sec=0.1) for h in enqueued] == ["c0", "c1", "c2"]
        assert {h.get_status().queue_name for h in enqueued} == {"binding_limited"}
    finally:
        fresh.open()
        official.destroy()
    assert ours.global_concurrency == 1
