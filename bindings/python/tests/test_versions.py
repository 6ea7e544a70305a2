"""Application versions on the real agent: DBOS Python's version calls, and
which worker takes which work: unversioned work only on the latest version,
versioned work only on its version, promotion switching the latest."""

from __future__ import annotations

import asyncio
import uuid
from typing import Iterator, List

import pytest

from dbos_agent import DBOS, DBOSClient, DBOSException, DBOSNotSupportedError, SetWorkflowID

from conftest import AgentEnv, Worker
from holds import queue_env, quick_lines


@pytest.fixture(autouse=True)
def no_dbos() -> Iterator[None]:
    DBOS.destroy()
    yield
    DBOS.destroy()


def names(versions: List[dict]) -> List[str]:  # type: ignore[type-arg]
    return [v["version_name"] for v in versions]


@DBOS.workflow()
def stamped_workflow(value: str) -> str:
    return value


def test_version_calls_list_get_and_promote(agent_env: AgentEnv) -> None:
    DBOS(config={"name": "pytest-ver", "agent_socket": agent_env.socket, "application_version": "v-a"})
    DBOS.launch()
    assert names(DBOS.list_application_versions()) == ["v-a"]
    latest = DBOS.get_latest_application_version()
    assert latest["version_name"] == "v-a" and latest["version_id"] and latest["version_timestamp"] > 0
    DBOS.destroy()

    DBOS(config={"name": "pytest-ver", "agent_socket": agent_env.socket, "application_version": "v-b"})
    DBOS.launch()
    # A version seen for the first time becomes the latest.
    assert names(DBOS.list_application_versions()) == ["v-b", "v-a"]
    DBOS.set_latest_application_version("v-a")  # roll back
    assert DBOS.get_latest_application_version()["version_name"] == "v-a"
    assert names(DBOS.list_application_versions()) == ["v-a", "v-b"]

    async def roll_forward() -> str:
        await DBOS.set_latest_application_version_async("v-b")
        assert names(await DBOS.list_application_versions_async()) == ["v-b", "v-a"]
        return (await DBOS.get_latest_application_version_async())["version_name"]

    assert asyncio.run(roll_forward()) == "v-b"
    with pytest.raises(DBOSException, match="not registered"):
        DBOS.set_latest_application_version("v-none")

    # register_queue's default on_conflict: a process that does not run the
    # latest version leaves the stored configuration alone.
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-ver") as client:
        DBOS.register_queue("ver_q", global_concurrency=2)  # v-b is the latest
        assert client.retrieve_queue("ver_q").global_concurrency == 2  # type: ignore[union-attr]
        DBOS.set_latest_application_version("v-a")
        DBOS.register_queue("ver_q", global_concurrency=3)  # v-b is not
        assert client.retrieve_queue("ver_q").global_concurrency == 2  # type: ignore[union-attr]
        DBOS.set_latest_application_version("v-b")
        DBOS.register_queue("ver_q", global_concurrency=3)
        assert client.retrieve_queue("ver_q").global_concurrency == 3  # type: ignore[union-attr]
    # Acting for another application, a version this one registered is a
    # collision, as in DBOS.
    with pytest.raises(DBOSException, match="already registered by application 'pytest-ver'"):
        DBOS.set_latest_application_version("v-a", application_name="someone-else")
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-ver") as client:
        assert names(client.list_application_versions()) == ["v-b", "v-a"]
        client.set_latest_application_version("v-a")
        assert client.get_latest_application_version()["version_name"] == "v-a"
    with DBOSClient(agent_socket=agent_env.socket, application_name="pytest-nothing") as client:
        with pytest.raises(DBOSException, match="No application versions"):
            client.get_latest_application_version()


def test_only_the_latest_version_takes_unversioned_work(agent_env: AgentEnv, workers: List[Worker]) -> None:
    app = "pytest-vw"
    queues = [{"name": "vq"}]
    w1 = Worker("queue_worker.py", queue_env(agent_env.socket, app, queues, APP_VERSION="v1"))
    workers.append(w1)
    w1.out.wait_for("ready")
    w2 = Worker("queue_worker.py", queue_env(agent_env.socket, app, queues, APP_VERSION="v2"))
    workers.append(w2)
    w2.out.wait_for("ready")
    with DBOSClient(agent_socket=agent_env.socket, application_name=app) as client:
        assert names(client.list_application_versions()) == ["v2", "v1"]
        # v2 registered last, so it is the latest: v1 takes none of this.
        unversioned = [client.enqueue({"workflow_name": "quick", "queue_name": "vq"}, f"u{i}") for i in range(4)]
        assert [h.get_result() for h in unversioned] == [f"u{i}@v2" for i in range(4)]
        assert quick_lines(w1.out) == []
        # Work of a version goes to that version's workers, latest or not.
        pinned = client.enqueue({"workflow_name": "quick", "queue_name": "vq", "app_version": "v1"}, "pinned")
        assert pinned.get_result() == "pinned@v1"
        # Promoting v1 (a rollback) sends unversioned work to it.
        client.set_latest_application_version("v1")
        after = [client.enqueue({"workflow_name": "quick", "queue_name": "vq"}, f"a{i}") for i in range(3)]
        assert [h.get_result() for h in after] == [f"a{i}@v1" for i in range(3)]
        assert sorted(t[1] for t in quick_lines(w2.out)) == [f"u{i}" for i in range(4)]
        # v2 still takes the work of its own version.
        direct = client.enqueue({"workflow_name": "quick", "queue_name": "vq", "app_version": "v2"}, "to-v2")
        assert direct.get_result() == "to-v2@v2"


def test_a_configured_version_stamps_what_it_starts(agent_env: AgentEnv) -> None:
    DBOS(config={"name": "pytest-ver", "agent_socket": agent_env.socket, "application_version": "v7"})
    DBOS.launch()
    assert DBOS.application_version == "v7"
    with SetWorkflowID(f"stamped-{uuid.uuid4().hex[:6]}") as s:
        assert stamped_workflow("hi") == "hi"
    status = DBOS.get_workflow_status(s.wfid)
    assert status is not None and status.app_version == "v7"
    # Queued too: its own version's work, which this worker runs. (Last in
    # this module, and of the application the others use: the application
    # of a queue is the first to register it, and the queues declared by
    # any test module are registered by every launch.)
    queue = DBOS.register_queue("v7q")
    assert queue.enqueue(stamped_workflow, "queued").get_result() == "queued"
