"""Identity and roles against the real agent: DBOSContextSetAuth,
DBOS.set_authentication, @DBOS.required_roles (either side of the workflow
decorator), @DBOS.default_required_roles, the identity recorded on the
workflow_status row and handed back with each run, and DBOSNotAuthorizedError
where DBOS 3.4 raises it (a denied start or enqueue ends ERROR). The
recovery of an identity after SIGKILL is in test_auth_crash.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, Optional, Tuple

import pytest

from dbos_agent import (
    DBOS,
    DBOSClient,
    DBOSConfiguredInstance,
    DBOSContextEnsure,
    DBOSContextSetAuth,
    DBOSNotAuthorizedError,
    Debouncer,
    DebouncerClient,
    Queue,
    SetWorkflowID,
    WorkflowStatusString,
)

from conftest import AgentEnv, new_id, query

Identity = Tuple[Optional[str], Optional[List[str]], Optional[str]]

auth_queue = Queue("auth_queue")
seen: Dict[str, Any] = {}


def identity() -> Identity:
    return (DBOS.authenticated_user, DBOS.authenticated_roles, DBOS.assumed_role)


@DBOS.required_roles(["admin"])
@DBOS.workflow()
def admin_only() -> Identity:
    return identity()


@DBOS.workflow()
@DBOS.required_roles(["user", "admin"])
def user_or_admin() -> Identity:
    return identity()


@DBOS.required_roles(["admin"])
@DBOS.workflow()
async def admin_only_async() -> Identity:
    return identity()


@DBOS.workflow()
def child_identity() -> Identity:
    return identity()


@DBOS.required_roles(["admin"])
@DBOS.workflow()
def parent_of_child() -> Tuple[Identity, str]:
    handle = DBOS.start_workflow(child_identity)
    return handle.get_result(), handle.workflow_id


@DBOS.step()
@DBOS.required_roles(["auditor"])
def audited_step() -> Identity:
    return identity()


@DBOS.workflow()
def calls_audited_step() -> Identity:
    return audited_step()


@DBOS.workflow()
def open_workflow() -> Identity:
    return identity()


@DBOS.workflow()
def switches_identity() -> List[Identity]:
    out = [identity()]
    with DBOSContextSetAuth("bob", ["reader"]):
        out.append(identity())
        seen["inner_child"] = DBOS.start_workflow(child_identity).workflow_id
    out.append(identity())
    return out


@DBOS.default_required_roles(["ops"])
class Ops:
    @staticmethod
    @DBOS.workflow()
    def by_default() -> Identity:
        return identity()

    @staticmethod
    @DBOS.workflow()
    @DBOS.required_roles(["root"])
    def own_roles() -> Identity:
        return identity()


@DBOS.default_required_roles(["ops"])
class OpsDesk(DBOSConfiguredInstance):
    """Registered by default_required_roles alone (no @DBOS.dbos_class), as
    in DBOS Python: its instance and class methods are workflows."""

    def __init__(self) -> None:
        super().__init__("desk")

    @DBOS.workflow()
    def on_instance(self, tag: str) -> Tuple[str, Identity]:
        return f"{self.config_name}:{tag}", identity()

    @classmethod
    @DBOS.workflow()
    def on_class(cls, tag: str) -> Tuple[str, Identity]:
        return f"{cls.__name__}:{tag}", identity()


ops_desk = OpsDesk()


def row(env: AgentEnv, wid: str) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    rows = query(
        f"SELECT authenticated_user, assumed_role, authenticated_roles FROM {env.schema}.workflow_status WHERE workflow_uuid = %s",
        (wid,),
    )
    assert len(rows) == 1, rows
    return rows[0]


def exists(env: AgentEnv, wid: str) -> bool:
    return bool(query(f"SELECT 1 FROM {env.schema}.workflow_status WHERE workflow_uuid = %s", (wid,)))


def test_direct_call_runs_as_the_block_and_records_its_identity(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("auth-call")
    with DBOSContextSetAuth("alice", ["user", "admin"]):
        with SetWorkflowID(wid):
            assert admin_only() == ("alice", ["user", "admin"], "admin")
    user, role, roles = row(agent_env, wid)
    assert (user, role) == ("alice", "admin")
    assert json.loads(roles) == ["user", "admin"]  # a JSON list, as DBOS stores it
    st = DBOS.get_workflow_status(wid)
    assert st is not None
    assert (st.authenticated_user, st.authenticated_roles, st.assumed_role) == ("alice", ["user", "admin"], "admin")
    # list_workflows(user=) filters on the recorded user, as in DBOS.
    assert [w.workflow_id for w in DBOS.list_workflows(user="alice", workflow_ids=[wid])] == [wid]
    assert DBOS.list_workflows(user=["bob", "carol"], workflow_ids=[wid]) == []
    # Outside the block there is no identity again.
    assert identity() == (None, None, None)


def test_direct_call_denied_raises_before_the_workflow_exists(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("auth-denied")
    with pytest.raises(DBOSNotAuthorizedError) as e:
        with SetWorkflowID(wid):
            admin_only()
    assert str(e.value) == (
        "DBOS Error 8: Function admin_only requires a role, but was called in a context without authentication information"
    )
    with DBOSContextSetAuth("bob", ["reader"]):
        with pytest.raises(DBOSNotAuthorizedError) as e:
            with SetWorkflowID(wid):
                admin_only()
    assert str(e.value) == "DBOS Error 8: Function admin_only has required roles, but user is not authenticated for any of them"
    # DBOSContextEnsure gives a context without roles: still denied.
    with DBOSContextEnsure():
        with pytest.raises(DBOSNotAuthorizedError, match="without authentication information"):
            admin_only()
    assert not exists(agent_env, wid)


def test_roles_below_the_workflow_decorator_assume_the_first_held(dbos: Any, agent_env: AgentEnv) -> None:
    with DBOSContextSetAuth("carol", ["admin", "user"]):
        # The first of the function's required roles the user holds.
        assert user_or_admin() == ("carol", ["admin", "user"], "user")
    with pytest.raises(DBOSNotAuthorizedError):
        user_or_admin()


def test_started_and_enqueued_workflows_are_checked_when_they_run(dbos: Any, agent_env: AgentEnv) -> None:
    with DBOSContextSetAuth("bob", ["reader"]):
        started = DBOS.start_workflow(admin_only)
        queued = auth_queue.enqueue(admin_only)
    unauthenticated = auth_queue.enqueue(admin_only)
    for handle, message in (
        (started, "user is not authenticated for any of them"),
        (queued, "user is not authenticated for any of them"),
        (unauthenticated, "without authentication information"),
    ):
        with pytest.raises(DBOSNotAuthorizedError, match=message):
            handle.get_result()
        st = handle.get_status()
        assert st.status == WorkflowStatusString.ERROR.value
        assert isinstance(st.error, DBOSNotAuthorizedError)
    assert started.get_status().authenticated_user == "bob"

    with DBOSContextSetAuth("alice", ["admin"]):
        ok = auth_queue.enqueue(admin_only)
    # The dequeued run executes as the identity recorded at enqueue.
    assert ok.get_result() == ("alice", ["admin"], "admin")


def test_async_workflow_roles(dbos: Any, agent_env: AgentEnv) -> None:
    async def main() -> None:
        with DBOSContextSetAuth("dave", ["admin"]):
            handle = await DBOS.start_workflow_async(admin_only_async)
            assert await admin_only_async() == ("dave", ["admin"], "admin")
        assert await handle.get_result() == ("dave", ["admin"], "admin")
        with DBOSContextSetAuth("eve", ["guest"]):
            denied = await DBOS.start_workflow_async(admin_only_async)
        with pytest.raises(DBOSNotAuthorizedError):
            await denied.get_result()
        st = await DBOS.get_workflow_status_async(denied.workflow_id)
        assert st is not None and st.status == "ERROR"

    asyncio.run(main())


def test_children_inherit_the_identity_and_a_block_inside_shadows_it(dbos: Any, agent_env: AgentEnv) -> None:
    with DBOSContextSetAuth("frank", ["admin"]):
        child_ident, child_id = parent_of_child()
    assert child_ident == ("frank", ["admin"], "admin")
    user, role, roles = row(agent_env, child_id)
    assert (user, role, json.loads(roles)) == ("frank", "admin", ["admin"])

    with DBOSContextSetAuth("grace", ["writer"]):
        inside = switches_identity()
    assert inside == [
        ("grace", ["writer"], None),
        ("bob", ["reader"], None),
        ("grace", ["writer"], None),
    ]
    user, _, roles = row(agent_env, seen["inner_child"])
    assert (user, json.loads(roles)) == ("bob", ["reader"])


def test_a_denied_step_raises_in_the_workflow_and_is_not_recorded(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("auth-step")
    with DBOSContextSetAuth("henry", ["user"]):
        with pytest.raises(DBOSNotAuthorizedError, match="Function audited_step has required roles"):
            with SetWorkflowID(wid):
                calls_audited_step()
    assert DBOS.list_workflow_steps(wid) == []
    assert DBOS.get_workflow_status(wid).status == "ERROR"  # type: ignore[union-attr]
    with DBOSContextSetAuth("ivy", ["auditor"]):
        assert calls_audited_step() == ("ivy", ["auditor"], "auditor")


def test_class_default_roles_and_a_methods_own(dbos: Any, agent_env: AgentEnv) -> None:
    with DBOSContextSetAuth("judy", ["ops"]):
        assert Ops.by_default() == ("judy", ["ops"], "ops")
        with pytest.raises(DBOSNotAuthorizedError):
            Ops.own_roles()  # its own roles replace the class's
    with DBOSContextSetAuth("kim", ["root"]):
        assert Ops.own_roles() == ("kim", ["root"], "root")
        with pytest.raises(DBOSNotAuthorizedError):
            Ops.by_default()


def test_default_roles_register_the_class_for_its_method_workflows(dbos: Any, agent_env: AgentEnv) -> None:
    with pytest.raises(DBOSNotAuthorizedError, match="requires a role"):
        ops_desk.on_instance("none")
    with pytest.raises(DBOSNotAuthorizedError, match="requires a role"):
        OpsDesk.on_class("none")
    wid = new_id("auth-desk")
    with DBOSContextSetAuth("lee", ["ops"]):
        with SetWorkflowID(wid):
            assert ops_desk.on_instance("a") == ("desk:a", ("lee", ["ops"], "ops"))
        assert OpsDesk.on_class("b") == ("OpsDesk:b", ("lee", ["ops"], "ops"))
    names = query(f"SELECT class_name, config_name FROM {agent_env.schema}.workflow_status WHERE workflow_uuid = %s", (wid,))
    assert names == [("OpsDesk", "desk")]


def test_set_authentication_changes_the_innermost_context(dbos: Any, agent_env: AgentEnv) -> None:
    with pytest.raises(AssertionError, match="No DBOS context found"):
        DBOS.set_authentication("x", ["y"])
    with DBOSContextEnsure():
        assert identity() == (None, None, None)
        DBOS.set_authentication("leo", ["admin"])
        assert admin_only() == ("leo", ["admin"], "admin")
        with DBOSContextSetAuth("mia", ["user"]):
            DBOS.set_authentication("mia", ["user", "admin"])
            assert admin_only() == ("mia", ["user", "admin"], "admin")
        assert identity() == ("leo", ["admin"], None)
    assert identity() == (None, None, None)
    # A workflow with no required roles records whatever identity it has.
    wid = new_id("auth-open")
    with SetWorkflowID(wid):
        assert open_workflow() == (None, None, None)
    assert row(agent_env, wid) == (None, None, None)


def test_client_enqueue_records_the_granted_roles(dbos: Any, agent_env: AgentEnv) -> None:
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handle = client.enqueue(
            {
                "workflow_name": admin_only.__qualname__,
                "queue_name": "auth_queue",
                "authenticated_user": "nina",
                "authenticated_roles": ["user", "admin"],
            }
        )
        assert handle.get_result() == ("nina", ["user", "admin"], "admin")
        st = client.retrieve_workflow(handle.workflow_id).get_status()
        assert (st.authenticated_user, st.authenticated_roles) == ("nina", ["user", "admin"])
    finally:
        client.destroy()


def test_a_debounced_workflow_runs_as_the_first_caller(dbos: Any, agent_env: AgentEnv) -> None:
    debouncer = Debouncer.create(admin_only, queue=auth_queue)
    with DBOSContextSetAuth("olga", ["admin"]):
        handle = debouncer.debounce("key-1", 0.0)
    assert handle.get_result() == ("olga", ["admin"], "admin")
    # Without the identity, the debounced run is denied like any other.
    denied = debouncer.debounce("key-2", 0.0)
    with pytest.raises(DBOSNotAuthorizedError):
        denied.get_result()
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        from_client = DebouncerClient(
            client,
            {"workflow_name": admin_only.__qualname__, "queue_name": "auth_queue",
             "authenticated_user": "pia", "authenticated_roles": ["admin"]},
        ).debounce("key-3", 0.0)
        assert from_client.get_result() == ("pia", ["admin"], "admin")
    finally:
        client.destroy()
