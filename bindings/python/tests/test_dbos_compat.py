"""Details DBOS Python's callers can see and branch on, against the real
agent: the registered name under DBOS's attribute, the reject reuse policy
of an ambient SetWorkflowID applied to an enqueue by options from workflow
code, the error of an outcome that cannot be serialized, and a step that
forks a workflow inside a SetWorkflowID block of its workflow (the block is
for the workflow's next start, not the step's)."""

from __future__ import annotations

from typing import Any, Iterator, List

import pytest

from dbos_agent import DBOS, DBOSWorkflowIDInUseError, Queue, SetWorkflowID

from conftest import AgentEnv, new_id

compat_queue = Queue("pytest_compat")


@DBOS.workflow(name="compat_echo")
def compat_echo(value: str) -> str:
    return value


@DBOS.step()
def compat_step() -> str:
    return "stepped"


@DBOS.workflow()
def compat_enqueue_by_name(child_id: str) -> str:
    try:
        with SetWorkflowID(child_id, workflow_id_reuse_policy="reject"):
            opts: Any = {"queue_name": "pytest_compat", "workflow_name": compat_echo.dbos_function_name}  # type: ignore[attr-defined]
            return str(DBOS.enqueue_workflow_with_options(opts, "from-parent").get_result())
    except Exception as e:
        return f"rejected:{type(e).__name__}"


@DBOS.step()
def compat_generator_step() -> Iterator[str]:
    yield "never recorded"


@DBOS.workflow()
def compat_unserializable_workflow() -> None:
    compat_generator_step()


def test_a_step_outcome_that_cannot_be_serialized_raises_the_serializers_error(dbos: Any) -> None:
    """As in DBOS Python, pickle's TypeError itself, and no step recorded."""
    wid = new_id("compat-unserializable")
    with pytest.raises(TypeError, match="cannot pickle 'generator' object"):
        with SetWorkflowID(wid):
            compat_unserializable_workflow()
    assert DBOS.list_workflow_steps(wid) == []
    status = DBOS.get_workflow_status(wid)
    assert status is not None and status.status == "ERROR" and isinstance(status.error, TypeError)


@DBOS.step()
def compat_forking_step(source_id: str) -> List[str]:
    return [DBOS.fork_workflow(source_id, 1).workflow_id]


@DBOS.workflow()
def compat_step_in_a_set_id_block(source_id: str, child_id: str) -> List[str]:
    with SetWorkflowID(child_id):
        from_step = compat_forking_step(source_id)
        return from_step + [DBOS.start_workflow(compat_echo, "child").workflow_id]


def test_a_step_does_not_take_its_workflows_set_workflow_id(dbos: Any) -> None:
    source = new_id("compat-source")
    with SetWorkflowID(source):
        compat_echo("source")
    child = new_id("compat-set-child")
    forked, child_started = compat_step_in_a_set_id_block(source, child)
    assert child_started == child and forked != child
    assert DBOS.retrieve_workflow(forked).get_result() == "source"
    assert DBOS.retrieve_workflow(child).get_result() == "child"


def test_the_registered_name_is_on_dbos_function_name(dbos: Any) -> None:
    assert compat_echo.dbos_function_name == "compat_echo"  # type: ignore[attr-defined]
    assert compat_step.dbos_function_name == compat_step.__qualname__  # type: ignore[attr-defined]
    wid = new_id("compat-name")
    with SetWorkflowID(wid):
        handle = DBOS.enqueue_workflow_with_options(
            {"queue_name": "pytest_compat", "workflow_name": compat_echo.dbos_function_name}, "by-name"  # type: ignore[attr-defined]
        )
    assert handle.get_result() == "by-name"


def test_an_enqueue_by_options_from_a_workflow_honours_the_reject_policy(dbos: Any) -> None:
    child = new_id("compat-child")
    with SetWorkflowID(child):
        assert compat_echo("original") == "original"
    parent = new_id("compat-parent")
    with SetWorkflowID(parent):
        assert compat_enqueue_by_name(child) == "rejected:DBOSWorkflowIDInUseError"
    steps = DBOS.list_workflow_steps(parent)
    assert steps[0]["function_id"] == 1 and isinstance(steps[0]["error"], DBOSWorkflowIDInUseError)
    # With the child gone, a fork still raises: the rejection is replayed.
    DBOS.delete_workflow(child)
    assert DBOS.fork_workflow(parent, 2).get_result() == "rejected:DBOSWorkflowIDInUseError"
    assert DBOS.get_workflow_status(child) is None
    with pytest.raises(DBOSWorkflowIDInUseError):
        with SetWorkflowID(parent, workflow_id_reuse_policy="reject"):
            compat_enqueue_by_name(child)


def test_handles_keep_working_after_destroy_and_a_new_launch(dbos: Any, agent_env: AgentEnv) -> None:
    """A handle made before DBOS.destroy() acts through the DBOS made and
    launched after it, as DBOS Python's handles do. (Last in the module: it
    relaunches DBOS.)"""
    wid = new_id("compat-handle")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(compat_echo, "kept")
    assert handle.get_result() == "kept"
    DBOS.destroy()
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()
    try:
        assert handle.get_status().status == "SUCCESS"
        assert handle.get_result() == "kept"
        later = DBOS.start_workflow(compat_echo, "later")
        assert later.get_result() == "later"
    finally:
        DBOS.destroy()
