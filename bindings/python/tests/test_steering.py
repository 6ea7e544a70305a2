"""Steering workflows against the real agent: fork (from a step, the steps
below it copied, a new id, a queue and a version), rewind, delete, delays
and attributes, from outside and from workflow code (where each is a step),
and patches across a code change."""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List

import pytest

from dbos_agent import (
    DBOS,
    DBOSClient,
    DBOSException,
    Queue,
    SetEnqueueOptions,
    SetWorkflowAttributes,
    SetWorkflowID,
)

from conftest import AgentEnv, gate, new_id, step_names

WAIT = 30.0
steer_queue = Queue("pytest_steering")
effects: Counter = Counter()


@DBOS.step()
def effect(tag: str, n: int) -> str:
    effects[(tag, n)] += 1
    return f"{tag}-{n}-{effects[(tag, n)]}"


@DBOS.workflow()
def three_steps(tag: str) -> List[str]:
    return [effect(tag, n) for n in (1, 2, 3)]


@DBOS.workflow()
def held(key: str) -> str:
    effect(key, 1)
    assert gate(key).wait(WAIT)
    return key


@DBOS.workflow()
def steering_workflow(target: str, delayed: str) -> str:
    forked = DBOS.fork_workflow(target, 3)
    DBOS.update_workflow_attributes(target, {"steered": True}, merge=True)
    DBOS.set_workflow_delay(delayed, delay_seconds=0)
    DBOS.delete_workflow(forked.workflow_id)
    return forked.workflow_id


@DBOS.workflow()
def attributed_parent() -> str:
    return DBOS.start_workflow(three_steps, "attr-child").workflow_id


def test_fork_copies_the_steps_below_its_start(dbos: Any) -> None:
    tag = new_id("fork")
    wid = new_id("original")
    with SetWorkflowID(wid):
        assert three_steps(tag) == [f"{tag}-1-1", f"{tag}-2-1", f"{tag}-3-1"]
    fork_id = new_id("forked")
    with SetWorkflowID(fork_id):
        fork = DBOS.fork_workflow(wid, 3, queue_name="pytest_steering")
    assert fork.workflow_id == fork_id
    # Steps 1 and 2 were copied, step 3 ran again.
    assert fork.get_result() == [f"{tag}-1-1", f"{tag}-2-1", f"{tag}-3-2"]
    status = fork.get_status()
    assert (status.forked_from, status.queue_name) == (wid, "pytest_steering")
    assert not status.was_forked_from and DBOS.get_workflow_status(wid).was_forked_from
    assert DBOS.retrieve_workflow(wid).get_result() == [f"{tag}-1-1", f"{tag}-2-1", f"{tag}-3-1"]
    # From step 1 nothing is copied: a fresh run under a new id.
    assert DBOS.fork_workflow(wid, 1).get_result() == [f"{tag}-1-2", f"{tag}-2-2", f"{tag}-3-3"]
    # Below 1 is the first step, as in DBOS.
    assert DBOS.fork_workflow(wid, -1).get_result() == [f"{tag}-1-3", f"{tag}-2-3", f"{tag}-3-4"]


def test_fork_for_another_version_waits_for_its_workers(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("original-v")
    with SetWorkflowID(wid):
        three_steps(new_id("fork-v"))
    with DBOSClient(agent_socket=agent_env.socket) as client:
        fork = client.fork_workflow(wid, 2, application_version="some-other-version", timeout_seconds=60)
        status = fork.get_status()
        assert (status.status, status.app_version, status.forked_from) == ("ENQUEUED", "some-other-version", wid)
        assert status.workflow_timeout_ms == 60000
        client.delete_workflow(fork.workflow_id)
        assert client.list_workflows(workflow_ids=[fork.workflow_id]) == []


def test_rewind_runs_an_ended_workflow_again_from_a_step(dbos: Any, agent_env: AgentEnv) -> None:
    tag = new_id("rewind")
    wid = new_id("rewound")
    with SetWorkflowID(wid):
        three_steps(tag)
    handle = DBOS.rewind_workflow(wid, start_step=2)
    assert handle.workflow_id == wid
    assert handle.get_result() == [f"{tag}-1-1", f"{tag}-2-2", f"{tag}-3-2"]
    assert effects[(tag, 1)] == 1
    # An active workflow cannot be rewound.
    key = new_id("held")
    with SetWorkflowID(key):
        active = DBOS.start_workflow(held, key)
    with DBOSClient(agent_socket=agent_env.socket) as client:
        with pytest.raises(DBOSException, match="only a workflow in a terminal state can be rewound"):
            client.rewind_workflow(key)
        gate(key).set()
        assert active.get_result() == key
        assert client.rewind_workflow(key).get_result() == key
    assert effects[(key, 1)] == 2


def test_delete_removes_a_workflow_and_what_it_stored(dbos: Any) -> None:
    wid = new_id("deleted")
    with SetWorkflowID(wid):
        three_steps(new_id("delete"))
    DBOS.delete_workflows([wid])
    assert DBOS.get_workflow_status(wid) is None
    assert DBOS.list_workflow_steps(wid) == []


def test_steering_from_workflow_code_is_recorded_as_steps(dbos: Any) -> None:
    target = new_id("target")
    with SetWorkflowID(target):
        three_steps(new_id("steer"))
    delayed = new_id("delayed")
    with SetWorkflowID(delayed), SetEnqueueOptions(delay_seconds=600):
        parked = steer_queue.enqueue(three_steps, new_id("parked"))
    sid = new_id("steerer")
    with SetWorkflowID(sid):
        fork_id = steering_workflow(target, delayed)
    assert step_names(sid) == [
        "DBOS.forkWorkflow", "DBOS.getStatus", "DBOS.updateWorkflowAttributes", "DBOS.setWorkflowDelay",
        "DBOS.deleteWorkflow",
    ]
    assert DBOS.list_workflow_steps(sid)[0]["output"] == fork_id
    assert DBOS.get_workflow_status(fork_id) is None
    assert DBOS.get_workflow_status(target).attributes == {"steered": True}  # type: ignore[union-attr]
    assert len(parked.get_result()) == 3


def test_attributes_set_at_start_and_updated(dbos: Any, agent_env: AgentEnv) -> None:
    wid = new_id("attributed")
    with SetWorkflowID(wid), SetWorkflowAttributes({"customer": "acme", "tier": 1}):
        child_id = attributed_parent()
    assert DBOS.get_workflow_status(wid).attributes == {"customer": "acme", "tier": 1}  # type: ignore[union-attr]
    # Children do not inherit them.
    DBOS.retrieve_workflow(child_id).get_result()
    assert DBOS.get_workflow_status(child_id).attributes is None  # type: ignore[union-attr]
    DBOS.update_workflow_attributes(wid, {"tier": 2, "region": "eu"}, merge=True)
    assert DBOS.get_workflow_status(wid).attributes == {"customer": "acme", "tier": 2, "region": "eu"}  # type: ignore[union-attr]
    with DBOSClient(agent_socket=agent_env.socket) as client:
        client.update_workflow_attributes(wid, {"only": "this"})
        assert client.retrieve_workflow(wid).get_status().attributes == {"only": "this"}
        client.update_workflow_attributes(wid, None)
        assert client.retrieve_workflow(wid).get_status().attributes is None
        queued = client.enqueue(
            {"workflow_name": "three_steps", "queue_name": "pytest_steering", "attributes": {"via": "client"}},
            new_id("attr"),
        )
        assert queued.get_status().attributes == {"via": "client"}
        queued.get_result()
    with pytest.raises(DBOSException, match="must be a dict"):
        SetWorkflowAttributes(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(DBOSException, match="Cannot merge None"):
        DBOS.update_workflow_attributes(wid, None, merge=True)


# --------------------------------------------------------------------------
# Patches: one workflow whose code changes between runs ("v1" before the
# patch, "v2" with it, "v3" with the patch deprecated).

code = {"version": "v1"}


@DBOS.step()
def step_a() -> str:
    return "a"


@DBOS.step()
def step_old() -> str:
    return "old"


@DBOS.step()
def step_new() -> str:
    return "new"


@DBOS.step()
def step_c() -> str:
    return "c"


@DBOS.workflow()
def evolving() -> List[str]:
    a = step_a()
    if code["version"] == "v1":
        b = step_old()
    elif code["version"] == "v2":
        b = step_new() if DBOS.patch("use-new") else step_old()
    else:
        DBOS.deprecate_patch("use-new")
        b = step_new()
    return [a, b, step_c()]


@pytest.fixture
def code_version() -> Any:
    yield code
    code["version"] = "v1"


def test_patch_keeps_old_runs_on_the_old_path(dbos: Any, code_version: Dict[str, str]) -> None:
    old = new_id("v1-run")
    with SetWorkflowID(old):
        assert evolving() == ["a", "old", "c"]
    assert step_names(old) == ["step_a", "step_old", "step_c"]

    code_version["version"] = "v2"
    # Replaying the old run's first two steps with the patched code: the
    # patch finds step_old where its marker would be, and takes the old path.
    replay = DBOS.fork_workflow(old, 3)
    assert replay.get_result() == ["a", "old", "c"]
    assert step_names(replay.workflow_id) == ["step_a", "step_old", "step_c"]
    # A new run takes the patched path and records the marker.
    new = new_id("v2-run")
    with SetWorkflowID(new):
        assert evolving() == ["a", "new", "c"]
    assert step_names(new) == ["step_a", "DBOS.patch-use-new", "step_new", "step_c"]
    again = DBOS.fork_workflow(new, 4)
    assert again.get_result() == ["a", "new", "c"]

    code_version["version"] = "v3"
    # The deprecated patch still steps over the marker of patched runs...
    patched = DBOS.fork_workflow(new, 4)
    assert patched.get_result() == ["a", "new", "c"]
    assert step_names(patched.workflow_id) == ["step_a", "DBOS.patch-use-new", "step_new", "step_c"]
    # ...and new runs record none.
    fresh = new_id("v3-run")
    with SetWorkflowID(fresh):
        assert evolving() == ["a", "new", "c"]
    assert step_names(fresh) == ["step_a", "step_new", "step_c"]
