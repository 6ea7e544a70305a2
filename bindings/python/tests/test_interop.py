"""Interop with the official DBOS Python package (from PyPI) on the same
system database: its DBOSClient reads and decodes what the binding ran, and
a workflow it enqueues is run by a binding worker."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any, Dict, Iterator, List

import pytest
from dbos import DBOSClient as OfficialClient
from dbos import WorkflowSerializationFormat as OfficialFormat

from dbos_agent import DBOS, Queue, SetWorkflowID, WorkflowSerializationFormat

from conftest import AgentEnv

Queue("interop_queue")


@DBOS.step()
def price(sku: str, qty: int) -> Decimal:
    return Decimal("2.50") * qty


@DBOS.workflow()
def interop_order(sku: str, qty: int, *, note: str = "") -> Dict[str, Any]:
    total = price(sku, qty)
    return {"sku": sku, "qty": qty, "total": total, "tags": (note, DBOS.workflow_id)}


@DBOS.workflow(serialization_type=WorkflowSerializationFormat.PORTABLE)
def interop_portable(items: List[str], express: bool = False) -> Dict[str, Any]:
    return {"count": len(items), "first": items[0], "express": express}


@DBOS.workflow()
def interop_failing(reason: str) -> None:
    raise KeyError(reason)


@pytest.fixture(scope="module")
def official(agent_env: AgentEnv) -> Iterator[OfficialClient]:
    client = OfficialClient(system_database_url=agent_env.system_database_url, dbos_system_schema=agent_env.schema)
    yield client
    client.destroy()


def test_official_client_reads_a_binding_workflow(dbos: Any, official: OfficialClient) -> None:
    wid = f"interop-{uuid.uuid4().hex[:8]}"
    with SetWorkflowID(wid):
        ours = interop_order("apple", 3, note="gift")
    handle = official.retrieve_workflow(wid)
    assert handle.get_result() == ours == {"sku": "apple", "qty": 3, "total": Decimal("7.50"), "tags": ("gift", wid)}
    status = handle.get_status()
    assert status.status == "SUCCESS"
    assert status.name == "interop_order"
    assert status.input == {"args": ("apple", 3), "kwargs": {"note": "gift"}}
    steps = official.list_workflow_steps(wid)
    assert [(s["function_id"], s["function_name"], s["output"]) for s in steps] == [(1, "price", Decimal("7.50"))]


def test_official_client_reads_portable_workflows_and_errors(dbos: Any, official: OfficialClient) -> None:
    wid = f"interop-p-{uuid.uuid4().hex[:8]}"
    with SetWorkflowID(wid):
        interop_portable(["a", "b"], express=True)
    assert official.retrieve_workflow(wid).get_result() == {"count": 2, "first": "a", "express": True}
    assert official.retrieve_workflow(wid).get_status().input == {"args": (["a", "b"],), "kwargs": {"express": True}}

    wid = f"interop-e-{uuid.uuid4().hex[:8]}"
    with SetWorkflowID(wid):
        with pytest.raises(KeyError):
            interop_failing("missing sku")
    with pytest.raises(KeyError, match="missing sku"):
        official.retrieve_workflow(wid).get_result()


def test_workflow_enqueued_by_the_official_client_runs_on_a_binding_worker(dbos: Any, official: OfficialClient) -> None:
    handle = official.enqueue({"workflow_name": "interop_order", "queue_name": "interop_queue"}, "pear", 2, note="official")
    result = handle.get_result(polling_interval_sec=0.1)
    assert result == {"sku": "pear", "qty": 2, "total": Decimal("5.00"), "tags": ("official", handle.workflow_id)}
    # The binding reads the same outcome, and ran the step.
    assert DBOS.retrieve_workflow(handle.workflow_id).get_result() == result
    assert [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)] == ["price"]
    assert handle.get_status().queue_name == "interop_queue"


def test_portable_enqueue_by_the_official_client_runs_on_a_binding_worker(dbos: Any, official: OfficialClient) -> None:
    handle = official.enqueue(
        {"workflow_name": "interop_portable", "queue_name": "interop_queue", "serialization_type": OfficialFormat.PORTABLE},
        ["x", "y", "z"],
    )
    assert handle.get_result(polling_interval_sec=0.1) == {"count": 3, "first": "x", "express": False}
    assert DBOS.get_workflow_status(handle.workflow_id).input == {"args": (["x", "y", "z"],), "kwargs": {}}  # type: ignore[union-attr]


@DBOS.required_roles(["admin"])
@DBOS.workflow()
def interop_guarded() -> List[Any]:
    return [DBOS.authenticated_user, DBOS.authenticated_roles, DBOS.assumed_role]


def test_identity_is_shared_with_the_official_package(dbos: Any, official: OfficialClient) -> None:
    from dbos_agent import DBOSContextSetAuth

    wid = f"interop-auth-{uuid.uuid4().hex[:8]}"
    with DBOSContextSetAuth("alice", ["user", "admin"]):
        with SetWorkflowID(wid):
            assert interop_guarded() == ["alice", ["user", "admin"], "admin"]
    # DBOS reads the identity columns the agent wrote.
    status = official.retrieve_workflow(wid).get_status()
    assert (status.authenticated_user, status.authenticated_roles, status.assumed_role) == ("alice", ["user", "admin"], "admin")
    assert [w.workflow_id for w in official.list_workflows(user="alice", workflow_ids=[wid])] == [wid]

    # And a binding worker runs what DBOS enqueued as the identity DBOS wrote.
    handle = official.enqueue(
        {"workflow_name": "interop_guarded", "queue_name": "interop_queue",
         "authenticated_user": "bob", "authenticated_roles": ["admin"]}
    )
    assert handle.get_result() == ["bob", ["admin"], "admin"]
