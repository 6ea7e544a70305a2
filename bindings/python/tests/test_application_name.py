"""Acting for another application through the agent: DBOS 3.4's
``application_name`` on listings (queues, schedules), on the rows a client
writes (schedules, debounced workflows), on version promotion, and
``DBOSClient.rename_application``. Ownership is checked in the system
database itself, as DBOS's own tooling reads it."""

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Optional

import pytest

from conftest import AgentEnv, query
from dbos_agent import DBOS, DBOSClient, DBOSException, DBOSQueueDeduplicatedError, Debouncer, DebouncerClient


def _cron_far_from_now() -> str:
    # Daily, about 12 hours away: it never fires during the test.
    t = datetime.now(timezone.utc) + timedelta(hours=12)
    return f"{t.minute} {t.hour} * * *"


@DBOS.workflow()
def an_scheduled(scheduled_at: datetime, ctx: Any) -> None:
    pass


@DBOS.workflow()
def an_debounced(x: int) -> int:
    return x


@pytest.fixture
def client(agent_env: AgentEnv, dbos: type) -> Iterator[DBOSClient]:
    c = DBOSClient(agent_socket=agent_env.socket, application_name="an-client")
    try:
        yield c
    finally:
        c.destroy()


@pytest.fixture
def nameless(agent_env: AgentEnv, dbos: type) -> Iterator[DBOSClient]:
    c = DBOSClient(agent_socket=agent_env.socket)
    try:
        yield c
    finally:
        c.destroy()


def _owner(env: AgentEnv, table: str, column: str, name: str) -> Optional[str]:
    rows = query(f'SELECT application_name FROM "{env.schema}".{table} WHERE {column} = %s', (name,))
    assert len(rows) == 1, (table, name, rows)
    return rows[0][0]


def _workflow_owner(env: AgentEnv, workflow_id: str) -> Optional[str]:
    return _owner(env, "workflow_status", "workflow_uuid", workflow_id)


def test_queue_listings_take_an_application(agent_env: AgentEnv, dbos: type, client: DBOSClient, nameless: DBOSClient) -> None:
    DBOS.register_queue("an-mine")
    client.register_queue("an-theirs", application_name="an-other")
    nameless.register_queue("an-free")

    def listed(qs: Any) -> dict:
        return {q.name: q.application_name for q in qs if q.name.startswith("an-")}

    # Unset: this application's queues and the unclaimed ones, never a peer's.
    assert listed(DBOS.list_queues()) == {"an-mine": "pytest", "an-free": None}
    assert listed(DBOS.list_queues(application_name="an-other")) == {"an-theirs": "an-other", "an-free": None}
    assert listed(client.list_queues(application_name=["an-other", "pytest"])) == {
        "an-mine": "pytest", "an-theirs": "an-other", "an-free": None,
    }
    # A client with no application, or an explicit [], sees every queue.
    assert listed(nameless.list_queues()) == listed(DBOS.list_queues(application_name=[]))
    assert set(listed(nameless.list_queues())) == {"an-mine", "an-theirs", "an-free"}
    assert listed(asyncio.run(client.list_queues_async(application_name="an-other"))) == {
        "an-theirs": "an-other", "an-free": None,
    }
    with pytest.raises(DBOSException, match="at most 1000"):
        DBOS.list_queues(application_name=[f"app-{i}" for i in range(1001)])


def test_schedules_for_another_application(agent_env: AgentEnv, dbos: type, client: DBOSClient, nameless: DBOSClient) -> None:
    cron = _cron_far_from_now()
    DBOS.create_schedule(schedule_name="an-s-mine", workflow_fn=an_scheduled, schedule=cron)
    client.create_schedule(schedule_name="an-s-theirs", workflow_name="an_scheduled", schedule=cron, application_name="an-other")
    client.create_schedule(schedule_name="an-s-client", workflow_name="an_scheduled", schedule=cron)
    nameless.create_schedule(schedule_name="an-s-free", workflow_name="an_scheduled", schedule=cron)
    assert _owner(agent_env, "workflow_schedules", "schedule_name", "an-s-theirs") == "an-other"
    assert _owner(agent_env, "workflow_schedules", "schedule_name", "an-s-client") == "an-client"
    assert _owner(agent_env, "workflow_schedules", "schedule_name", "an-s-free") is None

    def listed(ss: Any) -> dict:
        return {s["schedule_name"]: s["application_name"] for s in ss if s["schedule_name"].startswith("an-s-")}

    assert listed(DBOS.list_schedules()) == {"an-s-mine": "pytest", "an-s-free": None}
    assert listed(DBOS.list_schedules(application_name="an-other")) == {"an-s-theirs": "an-other", "an-s-free": None}
    assert set(listed(client.list_schedules(application_name=[]))) == {"an-s-mine", "an-s-theirs", "an-s-client", "an-s-free"}
    assert all(s["schedule_id"] for s in DBOS.list_schedules())

    # A schedule name is global: another application's is a collision, in DBOS's words.
    with pytest.raises(DBOSException, match="already registered by application 'an-other'") as info:
        DBOS.create_schedule(schedule_name="an-s-theirs", workflow_fn=an_scheduled, schedule=cron)
    assert "give 'pytest' a different schedule name" in str(info.value)

    # apply_schedules for another application, and a nameless writer updates
    # a row without stripping its owner.
    new_cron = _cron_far_from_now().replace("* * *", "* * 1")
    client.apply_schedules([
        {"schedule_name": "an-s-applied", "workflow_name": "an_scheduled", "schedule": cron, "application_name": "an-other"},
    ])
    assert _owner(agent_env, "workflow_schedules", "schedule_name", "an-s-applied") == "an-other"
    nameless.apply_schedules([{"schedule_name": "an-s-applied", "workflow_name": "an_scheduled", "schedule": new_cron}])
    rows = query(f'SELECT application_name, schedule FROM "{agent_env.schema}".workflow_schedules WHERE schedule_name = %s', ("an-s-applied",))
    assert rows == [("an-other", new_cron)]
    # Re-applying an unclaimed schedule from an application claims it.
    DBOS.apply_schedules([{"schedule_name": "an-s-free", "workflow_fn": an_scheduled, "schedule": cron}])
    assert _owner(agent_env, "workflow_schedules", "schedule_name", "an-s-free") == "pytest"
    with pytest.raises(DBOSException, match="longer than 255 bytes"):
        client.create_schedule(schedule_name="an-s-long", workflow_name="an_scheduled", schedule=cron, application_name="a" * 256)


def test_versions_promoted_for_an_application(agent_env: AgentEnv, dbos: type, client: DBOSClient, nameless: DBOSClient) -> None:
    own = DBOS.application_version
    versions = {v["version_name"]: v["application_name"] for v in DBOS.list_application_versions()}
    assert versions[own] == "pytest"
    # Acting for another application, this one's version is a collision.
    with pytest.raises(DBOSException, match="already registered by application 'pytest'") as info:
        client.set_latest_application_version(own, application_name="an-other")
    assert "set a distinct application_version for 'an-other'" in str(info.value)
    # Acting for its owner, a client of another application promotes it.
    client.set_latest_application_version(own, application_name="pytest")
    nameless.set_latest_application_version(own)
    assert DBOS.get_latest_application_version()["version_name"] == own
    assert _owner(agent_env, "application_versions", "version_name", own) == "pytest"


def test_debouncing_for_another_application(agent_env: AgentEnv, dbos: type, client: DBOSClient) -> None:
    # Debounced for another application: its row, with no version of ours,
    # so nothing here runs it; a second call bounces that one.
    d = Debouncer.create(an_debounced, application_name="an-other")
    first = d.debounce("k1", 3600, 1)
    assert _workflow_owner(agent_env, first.workflow_id) == "an-other"
    assert d.debounce("k1", 3600, 2).workflow_id == first.workflow_id
    assert first.get_status().status == "DELAYED"
    assert query(f'SELECT application_version FROM "{agent_env.schema}".workflow_status WHERE workflow_uuid = %s', (first.workflow_id,)) == [(None,)]

    # The client's: the debouncer's application wins, then the workflow options'.
    dc = DebouncerClient(client, {"workflow_name": "an_debounced", "application_name": "an-opts"})
    by_options = dc.debounce("k2", 3600, 1)
    assert _workflow_owner(agent_env, by_options.workflow_id) == "an-opts"
    dc2 = DebouncerClient(client, {"workflow_name": "an_debounced", "application_name": "an-opts"}, application_name="an-deb")
    by_debouncer = dc2.debounce("k3", 3600, 1)
    assert _workflow_owner(agent_env, by_debouncer.workflow_id) == "an-deb"
    # The key is held on that queue by another application's pending
    # workflow, which this application's debounce may not bounce (DBOS's rule).
    with pytest.raises(DBOSQueueDeduplicatedError):
        Debouncer.create(an_debounced).debounce("k1", 0, 5)
    mine = Debouncer.create(an_debounced).debounce("k4", 0, 5)
    assert mine.get_result() == 5
    assert _workflow_owner(agent_env, mine.workflow_id) == "pytest"
    for h in (first, by_options, by_debouncer):
        DBOS.cancel_workflow(h.workflow_id)


def test_rename_application(agent_env: AgentEnv, dbos: type, client: DBOSClient) -> None:
    client.register_queue("an-r-queue", application_name="an-old")
    client.create_schedule(schedule_name="an-r-schedule", workflow_name="an_scheduled", schedule=_cron_far_from_now(), application_name="an-old")
    waiting = client.enqueue({"workflow_name": "an_debounced", "queue_name": "an-unserved", "application_name": "an-old"}, 1)
    finished = DBOS.start_workflow(an_debounced, 2)
    assert finished.get_result() == 2

    moved = client.rename_application("an-old", "an-new", batch_size=1)
    assert moved == {"queues": 1, "schedules": 1, "versions": 0, "workflows": 1, "steps": 0}
    assert _workflow_owner(agent_env, waiting.workflow_id) == "an-new"
    assert _owner(agent_env, "queues", "name", "an-r-queue") == "an-new"
    assert _owner(agent_env, "workflow_schedules", "schedule_name", "an-r-schedule") == "an-new"
    assert _workflow_owner(agent_env, finished.workflow_id) == "pytest", "only the named application's rows move"
    assert asyncio.run(client.rename_application_async("an-old", "an-new")) == {
        "queues": 0, "schedules": 0, "versions": 0, "workflows": 0, "steps": 0,
    }

    # DBOS's checks and messages, before anything is sent.
    for old, new, kwargs, error, message in [
        ("an-new", "No Spaces", {}, DBOSException, "Invalid application name"),
        ("an-new", "ab", {}, DBOSException, "Invalid application name"),
        ("an-new", "a" * 257, {}, DBOSException, "Invalid application name"),
        ("an-new", "an-new", {}, DBOSException, "already holds that name"),
        ("", "an-newer", {}, DBOSException, "cannot be empty"),
        (None, "an-newer", {}, DBOSException, "Nothing to re-own"),
        ("an-new", "an-newer", {"batch_size": 0}, ValueError, "batch_size"),
    ]:
        with pytest.raises(error, match=message):
            client.rename_application(old, new, **kwargs)
    assert _workflow_owner(agent_env, waiting.workflow_id) == "an-new"
    DBOS.cancel_workflow(waiting.workflow_id)
