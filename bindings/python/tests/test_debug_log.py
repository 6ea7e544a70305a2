"""DBOS Python's debug lines on its logger "dbos" as workflow code runs its
operations, and as a finished workflow called again is waited for."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dbos_agent import DBOS, SetWorkflowID

from conftest import new_id


@DBOS.step()
def debug_log_step(message: str) -> str:
    return f"Step: {message}"


@DBOS.workflow()
def debug_log_sender(dest: str) -> str:
    DBOS.set_event("k", "v")
    out = debug_log_step("Hello")
    DBOS.send(dest, "m", topic="t")
    DBOS.sleep(0.01)
    return out


@DBOS.workflow()
def debug_log_receiver(source: str) -> str:
    return f"{DBOS.get_event(source, 'k')}, {DBOS.recv(topic='t')}, {DBOS.recv(timeout_seconds=0.01)}"


def test_operations_log_as_dbos_logs_them(dbos: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "dbos")
    source, dest = new_id("debug-src"), new_id("debug-dst")
    with SetWorkflowID(dest):
        handle = DBOS.start_workflow(debug_log_receiver, source)
    with SetWorkflowID(source):
        assert debug_log_sender(dest) == "Step: Hello"
    assert handle.get_result() == "v, m, None"
    lines = [r.getMessage() for r in caplog.records if r.name == "dbos"]
    for want in [
        f"Running workflow, id: {source}, name: ",
        "Running set_event, id: 1, key: k",
        f"Running step, id: 2, name: {debug_log_step.__qualname__}",
        "Running DBOS.send, id: 3, messages: 1",
        "Running sleep, id: 4, seconds: 0.01",
        "Running get_event, id: 1, key: k",
        "Running recv, id: 3, topic: t",
        "Running recv, id: 5, topic: __null__topic__",
    ]:
        assert any(line.startswith(want) for line in lines), f"{want!r} not in {lines}"

    caplog.clear()
    with SetWorkflowID(source):
        assert debug_log_sender(dest) == "Step: Hello"
    assert f"Workflow {source} already run with status SUCCESS" in [r.getMessage() for r in caplog.records]
