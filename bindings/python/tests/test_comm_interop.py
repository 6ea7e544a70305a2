"""Messages, events and streams shared with the official DBOS Python
package on one system database: the official client sends to a binding
workflow and reads its event and stream; a binding client sends to a
workflow an official DBOS process runs and reads its event and stream."""

from __future__ import annotations

from typing import Any, Iterator, List

import pytest
from dbos import DBOSClient as OfficialClient

from dbos_agent import DBOS, DBOSClient, SetWorkflowID

from conftest import AgentEnv, Worker, new_id

WAIT = 30.0


@DBOS.workflow()
def binding_receiver() -> Any:
    msg = DBOS.recv("to-binding", WAIT)
    DBOS.set_event("got", msg)
    DBOS.write_stream("out", msg)
    DBOS.write_stream("out", "second")
    DBOS.close_stream("out")
    return msg


@pytest.fixture(scope="module")
def official(agent_env: AgentEnv) -> Iterator[OfficialClient]:
    client = OfficialClient(system_database_url=agent_env.system_database_url, dbos_system_schema=agent_env.schema)
    yield client
    client.destroy()


def test_official_client_sends_to_a_binding_workflow_and_reads_its_event_and_stream(
    dbos: Any, official: OfficialClient
) -> None:
    wid = new_id("binding-receiver")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(binding_receiver)
    official.send(wid, {"from": "official", "n": 1}, "to-binding")
    assert official.get_event(wid, "got", WAIT) == {"from": "official", "n": 1}
    assert list(official.read_stream(wid, "out")) == [{"from": "official", "n": 1}, "second"]
    assert handle.get_result() == {"from": "official", "n": 1}
    # The official client reads the binding's records as its own.
    steps = official.list_workflow_steps(wid)
    assert [s["function_name"] for s in steps] == [
        "DBOS.recv", "DBOS.sleep", "DBOS.setEvent", "DBOS.writeStream", "DBOS.writeStream", "DBOS.closeStream",
    ]
    assert steps[0]["output"] == {"from": "official", "n": 1}


def test_binding_client_sends_to_an_official_workflow_and_reads_its_event_and_stream(
    dbos: Any, agent_env: AgentEnv
) -> None:
    wid = new_id("official-receiver")
    app = Worker("official_comm_app.py", {
        "APP_DATABASE_URL": agent_env.system_database_url, "APP_SCHEMA": agent_env.schema, "WORKFLOW_ID": wid,
        # Its own executor id, so that its startup recovery leaves the
        # agent's workflows alone.
        "DBOS__VMID": "official-comm",
    })
    try:
        app.out.wait_for("started", timeout=120)
        with DBOSClient(agent_socket=agent_env.socket) as client:
            client.send(wid, {"from": "binding"}, "to-official")
            assert client.get_event(wid, "got", WAIT) == {"from": "binding"}
            values: List[Any] = list(client.read_stream(wid, "out"))
            assert values == [{"from": "binding"}, "second"]
            assert client.retrieve_workflow(wid).get_result() == {"from": "binding"}
            names = [s["function_name"] for s in client.list_workflow_steps(wid)]
            assert names[:3] == ["DBOS.recv", "DBOS.sleep", "DBOS.setEvent"]
        app.out.wait_for("result {'from': 'binding'}")
    finally:
        app.kill()
