"""A workflow's application id (WorkflowStatus.app_id, the column
application_id) as DBOS Python writes it: DBOS__APPID, else "", on every
workflow this process starts (directly, by start_workflow, on a queue, as a
child, by name), and none on one a client enqueues."""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from dbos_agent import DBOS, DBOSClient, EnqueueOptions, Queue, SetWorkflowID

from conftest import AgentEnv, new_id, query

app_id_queue = Queue("pytest_app_id")


@DBOS.workflow()
def app_id_child() -> Optional[str]:
    return DBOS.workflow_id


@DBOS.workflow()
def app_id_parent() -> str:
    handle = DBOS.start_workflow(app_id_child)
    handle.get_result()
    return handle.workflow_id


@pytest.fixture(scope="module")
def client(dbos: Any, agent_env: AgentEnv) -> Iterator[DBOSClient]:
    c = DBOSClient(agent_socket=agent_env.socket, application_name="pytest")
    yield c
    c.destroy()


def stored(agent_env: AgentEnv, wid: str) -> Optional[str]:
    rows = query(f'SELECT application_id FROM "{agent_env.schema}".workflow_status WHERE workflow_uuid = %s', (wid,))
    assert len(rows) == 1
    return rows[0][0]  # type: ignore[no-any-return]


def test_workflows_this_process_starts_carry_an_empty_app_id(dbos: Any, agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBOS__APPID", raising=False)
    direct = new_id("appid-direct")
    with SetWorkflowID(direct):
        child = app_id_parent()
    started = DBOS.start_workflow(app_id_child)
    queued = app_id_queue.enqueue(app_id_child)
    by_name = DBOS.enqueue_workflow_with_options(
        EnqueueOptions(workflow_name="app_id_child", queue_name="pytest_app_id")
    )
    for wid in [direct, child, started.workflow_id, queued.workflow_id, by_name.workflow_id]:
        DBOS.retrieve_workflow(wid).get_result()
        status = DBOS.get_workflow_status(wid)
        assert status is not None and status.app_id == "", wid
        assert stored(agent_env, wid) == ""
    listed = DBOS.list_workflows(workflow_ids=[direct])
    assert [w.app_id for w in listed] == [""]


def test_app_id_is_dbos_appid_when_set(dbos: Any, agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBOS__APPID", "app-1234")
    handle = DBOS.start_workflow(app_id_child)
    handle.get_result()
    assert handle.get_status().app_id == "app-1234"
    assert stored(agent_env, handle.workflow_id) == "app-1234"


def test_a_client_enqueue_carries_no_app_id(dbos: Any, agent_env: AgentEnv, client: DBOSClient) -> None:
    handle = client.enqueue(EnqueueOptions(workflow_name="app_id_child", queue_name="pytest_app_id"))
    handle.get_result()
    assert handle.get_status().app_id is None
    assert stored(agent_env, handle.get_workflow_id()) is None
