"""DBOS Python 3.4's listing filters, attribute updates, debounced
attributes, workflow_id_reuse_policy="reject" and DBOSClient.register_queue,
against the real agent: DBOS and DBOSClient, sync and async, with DBOS's
semantics and messages."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, List, Set

import pytest

from dbos_agent import (
    DBOS,
    DBOSClient,
    DBOSException,
    DBOSWorkflowIDInUseError,
    Debouncer,
    DebouncerClient,
    Queue,
    SetWorkflowAttributes,
    SetWorkflowID,
)

from conftest import AgentEnv, new_id, query

WAIT = 30.0
filters_queue = Queue("pytest_filters")
release = threading.Event()


@DBOS.workflow()
def noop(x: int = 0) -> int:
    return x


@DBOS.workflow()
def parent_of(child_id: str) -> str:
    with SetWorkflowID(child_id):
        return DBOS.start_workflow(noop, 7).workflow_id


@DBOS.workflow()
def blocked() -> str:
    assert release.wait(WAIT)
    return "released"


@DBOS.workflow()
def start_rejected(child_id: str) -> str:
    try:
        with SetWorkflowID(child_id, workflow_id_reuse_policy="reject"):
            DBOS.start_workflow(noop, 1)
        return "started"
    except DBOSWorkflowIDInUseError as e:
        return f"rejected {e.workflow_status} {e.workflow_name}"


@pytest.fixture
def client(agent_env: AgentEnv) -> Iterator[DBOSClient]:
    c = DBOSClient(agent_socket=agent_env.socket)
    try:
        yield c
    finally:
        c.destroy()


def ids(statuses: List[Any]) -> Set[str]:
    return {s.workflow_id for s in statuses}


# --------------------------------------------------------------------------
# Attributes (DBOS's test_attributes, on the agent)


def test_attributes_filter_by_containment(dbos: Any) -> None:
    prefix = new_id("attrs")
    with SetWorkflowID(f"{prefix}-1"), SetWorkflowAttributes({"customer": "acme", "tier": 1, "beta": True, "note": None}):
        h1 = DBOS.start_workflow(noop)
    with SetWorkflowID(f"{prefix}-2"), SetWorkflowAttributes({"customer": "bigco", "tier": 2, "meta": {"region": "us-east-1"}}):
        h2 = DBOS.start_workflow(noop)
    with SetWorkflowID(f"{prefix}-3"):
        h3 = DBOS.start_workflow(noop)
    for h in (h1, h2, h3):
        h.get_result()

    def matched(**kwargs: Any) -> Set[str]:
        return ids(DBOS.list_workflows(workflow_id_prefix=prefix, **kwargs))

    assert matched(attributes={"customer": "acme"}) == {h1.workflow_id}
    assert matched(attributes={"customer": "bigco", "tier": 2}) == {h2.workflow_id}
    assert matched(attributes={"customer": "acme", "tier": 2}) == set()
    assert matched(attributes={"tier": 1}) == {h1.workflow_id}
    assert matched(attributes={"tier": "1"}) == set()
    assert matched(attributes={"beta": True}) == {h1.workflow_id}
    assert matched(attributes={"note": None}) == {h1.workflow_id}
    assert matched(attributes={"meta": {"region": "us-east-1"}}) == {h2.workflow_id}
    assert matched(attributes={"missing": "key"}) == set()
    # An empty dict filters nothing, as in DBOS ("if attributes:").
    assert matched(attributes={}) == {h1.workflow_id, h2.workflow_id, h3.workflow_id}
    assert ids(DBOS.list_workflows(attributes={"tier": 1}, workflow_ids=[h2.workflow_id])) == set()


def test_attributes_filter_on_queued_workflows_sync_async_and_client(dbos: Any, client: DBOSClient) -> None:
    release.clear()
    tag = new_id("side")
    try:
        with SetWorkflowAttributes({"side": tag}):
            handle = filters_queue.enqueue(blocked)
        assert [s.workflow_id for s in DBOS.list_queued_workflows(attributes={"side": tag})] == [handle.workflow_id]
        assert DBOS.list_queued_workflows(attributes={"side": "other"}) == []

        async def from_async() -> None:
            assert ids(await DBOS.list_workflows_async(attributes={"side": tag})) == {handle.workflow_id}
            assert ids(await DBOS.list_queued_workflows_async(attributes={"side": tag})) == {handle.workflow_id}
            assert ids(await client.list_workflows_async(attributes={"side": tag})) == {handle.workflow_id}
            assert ids(await client.list_queued_workflows_async(attributes={"side": tag})) == {handle.workflow_id}

        asyncio.run(from_async())
        assert ids(client.list_workflows(attributes={"side": tag})) == {handle.workflow_id}
        assert ids(client.list_queued_workflows(attributes={"side": tag})) == {handle.workflow_id}
    finally:
        release.set()
    assert handle.get_result() == "released"
    assert client.list_queued_workflows(attributes={"side": tag}) == []


def test_update_workflow_attributes_errors_are_dboss(dbos: Any, client: DBOSClient) -> None:
    wid = new_id("upd")
    with SetWorkflowID(wid):
        noop()
    with pytest.raises(DBOSException, match="Cannot merge None"):
        DBOS.update_workflow_attributes(wid, None, merge=True)
    with pytest.raises(DBOSException, match="Cannot merge None"):
        client.update_workflow_attributes(wid, None, merge=True)
    with pytest.raises(DBOSException, match="Cannot merge None"):
        asyncio.run(client.update_workflow_attributes_async(wid, None, merge=True))
    # DBOS checks the attributes before the merge: a list is "must be a dict".
    with pytest.raises(DBOSException, match="must be a dict"):
        DBOS.update_workflow_attributes(wid, ["not", "a", "dict"], merge=True)  # type: ignore[arg-type]
    with pytest.raises(DBOSException, match="must be JSON-serializable"):
        DBOS.update_workflow_attributes(wid, {"obj": object()})
    DBOS.update_workflow_attributes(wid, {"tier": 2}, merge=True)
    assert DBOS.list_workflows(workflow_ids=[wid], attributes={"tier": 2})[0].attributes == {"tier": 2}


def test_debounced_workflows_carry_the_first_callers_attributes(dbos: Any, client: DBOSClient) -> None:
    debouncer = Debouncer.create(noop)
    key = new_id("key")
    with SetWorkflowAttributes({"source": "debouncer"}):
        handle = debouncer.debounce(key, 1.0, 5)
    # A bounce keeps the stored attributes, as DBOS's bounce does.
    with SetWorkflowAttributes({"source": "second"}):
        again = debouncer.debounce(key, 0.0, 6)
    assert again.workflow_id == handle.workflow_id
    assert handle.get_result() == 6
    assert handle.get_status().attributes == {"source": "debouncer"}

    from_client = DebouncerClient(
        client, {"workflow_name": noop.__qualname__, "queue_name": "pytest_filters", "attributes": {"source": "client"}}
    )
    h = from_client.debounce(new_id("ckey"), 0.0, 3)
    assert h.get_result() == 3
    assert h.get_status().attributes == {"source": "client"}


# --------------------------------------------------------------------------
# The other filters


def test_fork_parent_time_and_prefix_filters(dbos: Any) -> None:
    prefix = new_id("flt")
    parent = f"{prefix}-parent"
    with SetWorkflowID(parent):
        child = parent_of(f"{prefix}-child")
    DBOS.retrieve_workflow(child).get_result()
    fork = DBOS.fork_workflow(parent, 1)
    fork.get_result()

    def listed(**kwargs: Any) -> Set[str]:
        return ids(DBOS.list_workflows(workflow_id_prefix=[prefix, fork.workflow_id], **kwargs))

    everything = {parent, child, fork.workflow_id}
    assert listed() == everything
    assert listed(forked_from=parent) == {fork.workflow_id}
    assert listed(forked_from=[parent, "nothing"]) == {fork.workflow_id}
    assert listed(is_fork=True) == {fork.workflow_id}
    assert listed(is_fork=False) == {parent, child}
    assert listed(was_forked_from=True) == {parent}
    assert listed(was_forked_from=False) == {child, fork.workflow_id}
    assert listed(has_parent=True) == {child}
    assert listed(has_parent=False) == {parent, fork.workflow_id}
    assert DBOS.get_workflow_status(parent).was_forked_from  # type: ignore[union-attr]

    statuses = {s.workflow_id: s for s in DBOS.list_workflows(workflow_ids=sorted(everything))}
    done = statuses[child]
    completed = datetime.fromtimestamp(done.updated_at / 1000, tz=timezone.utc)  # type: ignore[operator]
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    assert listed(completed_after=later) == set()
    assert listed(completed_before=later) == everything
    assert child in listed(completed_after=(completed - timedelta(minutes=5)).isoformat())
    # Only a dequeued workflow has a dequeue time (started_at_epoch_ms), as
    # in DBOS: the fork ran from the internal queue, the others directly.
    assert listed(dequeued_after=later) == set()
    assert listed(dequeued_before=later) == {fork.workflow_id}
    # Several prefixes, and limit/offset of 0 filtering nothing, as in DBOS.
    assert ids(DBOS.list_workflows(workflow_id_prefix=[f"{prefix}-p", f"{prefix}-c"], limit=0, offset=0)) == {parent, child}


def test_a_keyword_dbos_does_not_take_is_a_type_error(dbos: Any, client: DBOSClient) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        DBOS.list_workflows(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'schedule_name'"):
        DBOS.list_queued_workflows(schedule_name="s")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        client.list_workflows(bogus=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'queues_only'"):
        client.list_queued_workflows(queues_only=True)


def test_listing_is_scoped_to_the_callers_application(dbos: Any, agent_env: AgentEnv) -> None:
    other = DBOSClient(agent_socket=agent_env.socket, application_name="pytest-other-app")
    anyone = DBOSClient(agent_socket=agent_env.socket)
    try:
        theirs = other.enqueue({"workflow_name": "noop", "queue_name": "pytest_filters_unserved"}, 1).workflow_id
        with SetWorkflowID(new_id("mine")):
            mine = DBOS.start_workflow(noop).workflow_id
        assert query(
            f"SELECT application_name FROM {agent_env.schema}.workflow_status WHERE workflow_uuid = %s", (theirs,)
        ) == [("pytest-other-app",)]
        both = [theirs, mine]
        # As DBOS: a listing not by id sees the caller's application's rows
        # (and unclaimed ones); application_name names others; an id is an
        # identity read.
        listed = ids(DBOS.list_workflows(workflow_id_prefix=[theirs, mine]))
        assert listed == {mine}
        assert ids(DBOS.list_workflows(workflow_id_prefix=[theirs, mine], application_name="pytest-other-app")) == {theirs}
        assert ids(DBOS.list_workflows(workflow_id_prefix=[theirs, mine], application_name=[])) == set(both)
        assert ids(DBOS.list_workflows(workflow_ids=both)) == set(both)
        assert ids(other.list_workflows(workflow_id_prefix=[theirs, mine])) == {theirs}
        assert ids(other.list_queued_workflows(workflow_id_prefix=[theirs, mine])) == {theirs}
        assert ids(anyone.list_workflows(workflow_id_prefix=[theirs, mine])) == set(both)
    finally:
        other.destroy()
        anyone.destroy()


# --------------------------------------------------------------------------
# workflow_id_reuse_policy="reject"


def test_reject_reuse_policy(dbos: Any, client: DBOSClient) -> None:
    wid = new_id("reuse")
    with SetWorkflowID(wid, workflow_id_reuse_policy="reject"):
        assert DBOS.start_workflow(noop, 1).get_result() == 1
    before = DBOS.get_workflow_status(wid)
    with pytest.raises(DBOSWorkflowIDInUseError) as info:
        with SetWorkflowID(wid, workflow_id_reuse_policy="reject"):
            DBOS.start_workflow(noop, 2)
    assert (info.value.workflow_id, info.value.workflow_status, info.value.workflow_name) == (wid, "SUCCESS", "noop")
    assert str(info.value).endswith(f"Workflow ID {wid} is already in use by workflow noop with status SUCCESS.")
    with pytest.raises(DBOSWorkflowIDInUseError):
        with SetWorkflowID(wid, workflow_id_reuse_policy="reject"):
            noop(3)
    with pytest.raises(DBOSWorkflowIDInUseError):
        with SetWorkflowID(wid, workflow_id_reuse_policy="reject"):
            filters_queue.enqueue(noop, 4)
    with pytest.raises(DBOSWorkflowIDInUseError):
        client.enqueue({"workflow_name": "noop", "queue_name": "pytest_filters", "workflow_id": wid,
                        "workflow_id_reuse_policy": "reject"}, 5)
    with pytest.raises(DBOSWorkflowIDInUseError):
        DBOS.enqueue_workflow_with_options({"workflow_name": "noop", "queue_name": "pytest_filters", "workflow_id": wid,
                                            "workflow_id_reuse_policy": "reject"}, 6)
    # The ambient policy goes with the ambient id only.
    with SetWorkflowID(new_id("ambient"), workflow_id_reuse_policy="reject"):
        attached = DBOS.enqueue_workflow_with_options({"workflow_name": "noop", "queue_name": "pytest_filters",
                                                       "workflow_id": wid}, 7)
    assert attached.get_result() == 1
    # A wrong name is rejected as in use too (before the conflict check).
    with pytest.raises(DBOSWorkflowIDInUseError):
        with SetWorkflowID(wid, workflow_id_reuse_policy="reject"):
            DBOS.start_workflow(blocked)
    # Nothing changed, and the default policy attaches.
    assert DBOS.get_workflow_status(wid).__dict__ == before.__dict__  # type: ignore[union-attr]
    with SetWorkflowID(wid):
        assert DBOS.start_workflow(noop, 8).get_result() == 1
    with pytest.raises(DBOSException, match="Invalid workflow_id_reuse_policy bogus"):
        SetWorkflowID("x", workflow_id_reuse_policy="bogus")  # type: ignore[arg-type]
    with pytest.raises(DBOSException, match="Cannot debounce a workflow with workflow_id_reuse_policy 'reject'"):
        with SetWorkflowID(new_id("deb"), workflow_id_reuse_policy="reject"):
            Debouncer.create(noop).debounce("k", 0.0, 1)


def test_reject_reuse_policy_in_a_workflow_is_recorded(dbos: Any) -> None:
    taken = new_id("taken")
    with SetWorkflowID(taken):
        noop(0)
    parent = new_id("rparent")
    with SetWorkflowID(parent):
        assert start_rejected(taken) == "rejected SUCCESS noop"
    steps = DBOS.list_workflow_steps(parent)
    assert len(steps) == 1 and isinstance(steps[0]["error"], DBOSWorkflowIDInUseError)
    assert steps[0]["child_workflow_id"] is None
    # A fork replays the recorded rejection rather than starting again.
    assert DBOS.fork_workflow(parent, 2).get_result() == "rejected SUCCESS noop"


# --------------------------------------------------------------------------
# DBOSClient.register_queue


def test_client_registers_a_queue_without_serving_it(dbos: Any, client: DBOSClient) -> None:
    name = new_id("client_q")
    q = client.register_queue(name, worker_concurrency=2, global_concurrency=5, limiter={"limit": 7, "period": 3.0})
    assert (q.name, q.worker_concurrency, q.global_concurrency, q.limiter) == (name, 2, 5, {"limit": 7, "period": 3.0})
    stored = client.retrieve_queue(name)
    assert stored is not None and stored.global_concurrency == 5
    # never_update keeps the stored row; always_update (the default) replaces it.
    kept = client.register_queue(name, global_concurrency=9, on_conflict="never_update")
    assert kept.global_concurrency == 5
    replaced = asyncio.run(client.register_queue_async(name, global_concurrency=9))
    assert (replaced.global_concurrency, replaced.worker_concurrency, replaced.limiter) == (9, None, None)
    fresh = client.register_queue(new_id("client_q_new"), worker_concurrency=1, on_conflict="never_update")
    assert fresh.worker_concurrency == 1
    with pytest.raises(DBOSException, match="on_conflict='update_if_latest_version'"):
        client.register_queue(name, on_conflict="update_if_latest_version")
    with pytest.raises(ValueError, match="worker_concurrency"):
        client.register_queue(name, worker_concurrency=9, global_concurrency=2)

    # A worker that declares it serves it under the client's limits; the
    # client serves nothing (its enqueue waits for that worker).
    handle = client.enqueue({"workflow_name": "noop", "queue_name": name}, 11)
    assert handle.get_status().status == "ENQUEUED"
    Queue(name)
    assert handle.get_result() == 11
    # A bare declaration serves the stored limits and leaves them.
    assert client.retrieve_queue(name).global_concurrency == 9  # type: ignore[union-attr]


def test_client_enqueues_and_registers_queues_for_another_application(dbos: Any, client: DBOSClient, agent_env: AgentEnv) -> None:
    # DBOS's application_name: the row is the named application's (no
    # version of the caller's), not this one's, so its workers run it.
    handle = client.enqueue(
        {"workflow_name": "noop", "queue_name": "pytest_filters", "application_name": "pytest-billing"}, 1
    )
    assert query(
        f"SELECT application_name, application_version FROM {agent_env.schema}.workflow_status WHERE workflow_uuid = %s",
        (handle.workflow_id,),
    ) == [("pytest-billing", None)]
    assert ids(DBOS.list_workflows(workflow_ids=[handle.workflow_id], application_name="pytest-billing")) == {handle.workflow_id}
    assert DBOS.list_workflows(workflow_id_prefix=handle.workflow_id) == []
    name = new_id("billing_q")
    q = client.register_queue(name, worker_concurrency=3, application_name="pytest-billing")
    assert q.worker_concurrency == 3
    assert query(f"SELECT application_name FROM {agent_env.schema}.queues WHERE name = %s", (name,)) == [("pytest-billing",)]
    with pytest.raises(DBOSException, match="application"):
        client.register_queue(name, worker_concurrency=1, application_name="pytest-else")
