"""Details DBOS Python's callers can see and branch on, against the real
agent: the registered name under DBOS's attribute, the reject reuse policy
of an ambient SetWorkflowID applied to an enqueue by options from workflow
code, and the error of an outcome that cannot be serialized."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from dbos_agent import DBOS, DBOSWorkflowIDInUseError, Queue, SetWorkflowID

from conftest import new_id

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
