"""Configuration, launch and teardown: how the agent is found, what the
agent refuses, and declarations before and after launch."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from typing import Any, Iterator

import pytest

import dbos_agent
from dbos_agent import (
    DBOS,
    DBOSAgentUnavailableError,
    DBOSException,
    DBOSInitializationError,
    DBOSNotSupportedError,
    DBOSQueueDeduplicatedError,
    Queue,
    SetEnqueueOptions,
    SetWorkflowID,
    SetWorkflowTimeout,
)
from dbos_agent._transport import default_socket_path, resolve_socket_path

from conftest import AgentEnv

dedup_queue = Queue("pytest_dedup", priority_enabled=True)


@DBOS.workflow()
def echo_workflow(value: Any) -> Any:
    return value


release = threading.Event()


@DBOS.workflow()
def held_workflow(value: Any) -> Any:
    assert release.wait(30)
    return value


@pytest.fixture(autouse=True)
def no_dbos() -> Iterator[None]:
    DBOS.destroy()
    yield
    DBOS.destroy()


def test_socket_path_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # As the agent: the runtime directory when it is this user's alone.
    runtime = tmp_path / "run"
    runtime.mkdir()
    runtime.chmod(0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert default_socket_path() == f"{runtime}/dbos-agent.sock"
    monkeypatch.setenv("TMPDIR", "/var/tmp")
    runtime.chmod(0o777)
    assert default_socket_path() == f"/var/tmp/dbos-agent-{os.getuid()}/agent.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    assert default_socket_path() == f"/var/tmp/dbos-agent-{os.getuid()}/agent.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("TMPDIR", "/var/tmp")
    assert default_socket_path() == f"/var/tmp/dbos-agent-{os.getuid()}/agent.sock"
    monkeypatch.delenv("TMPDIR")
    assert default_socket_path() == f"/tmp/dbos-agent-{os.getuid()}/agent.sock"
    monkeypatch.setenv("DBOS_AGENT_SOCKET", "/from/env.sock")
    assert resolve_socket_path(None) == "/from/env.sock"
    assert resolve_socket_path("/from/config.sock") == "/from/config.sock"


def test_launch_without_an_agent_says_where_it_looked(tmp_path: Any) -> None:
    missing = str(tmp_path / "none.sock")
    DBOS(config={"name": "lonely", "agent_socket": missing})
    with pytest.raises(DBOSAgentUnavailableError, match="none.sock") as info:
        DBOS.launch()
    assert "dbos-agent serve" in str(info.value)


def test_dbos_logger_logs_to_the_console_as_dbos_configures_it() -> None:
    dbos_logger = logging.getLogger("dbos")
    DBOS(config={"name": "logs", "agent_socket": "/nowhere", "log_level": "DEBUG", "console_log_level": "ERROR"})
    assert DBOS.logger is dbos_logger and dbos_logger.level == logging.DEBUG
    consoles = [h for h in dbos_logger.handlers if h.name == "__dbos_console_log_handler__"]
    assert len(consoles) == 1 and isinstance(consoles[0], logging.StreamHandler)
    assert consoles[0].level == logging.ERROR
    assert not dbos_logger.propagate  # records are printed once
    DBOS.destroy()
    # Without console_log_level the console takes log_level; one handler, reused.
    DBOS(config={"name": "logs", "agent_socket": "/nowhere", "log_level": "WARNING"})
    assert [h.level for h in dbos_logger.handlers if h.name == "__dbos_console_log_handler__"] == [logging.WARNING]


def test_config_needs_a_name() -> None:
    with pytest.raises(DBOSInitializationError, match="name"):
        DBOS(config={"agent_socket": "/nowhere"})  # type: ignore[typeddict-item]


def test_identity_outlives_destroy_until_the_next_dbos(agent_env: AgentEnv) -> None:
    # As DBOS Python's process-wide identity: destroy leaves it, constructing
    # the next DBOS sets that one's (none configured: empty until launch).
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()
    version, executor = DBOS.application_version, DBOS.executor_id
    assert version and executor
    DBOS.destroy()
    assert (DBOS.application_version, DBOS.executor_id) == (version, executor)
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    assert DBOS.application_version == ""
    DBOS.launch()
    assert DBOS.application_version == version


def test_conductor_executor_metadata_must_be_json() -> None:
    # DBOS refuses it when constructed, and no instance is made.
    with pytest.raises(DBOSException, match="conductor_executor_metadata must be JSON-serializable"):
        DBOS(config={"name": "pytest", "agent_socket": "/nowhere", "conductor_executor_metadata": {"bad": object()}})  # type: ignore[typeddict-unknown-key]
    assert dbos_agent._registry._instance is None


def test_executor_id_must_match_the_agents(agent_env: AgentEnv) -> None:
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket, "executor_id": "host-b"})
    with pytest.raises(DBOSInitializationError, match="--executor-id host-b"):
        DBOS.launch()
    DBOS.destroy()
    # No application_version here: once "pytest" had a version, the workers
    # of this module, which have none, would take no queued unversioned
    # work (PROTOCOL.md 2.13). test_versions checks a configured version.
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket, "executor_id": "local",
                 "system_database_url": "postgresql://ignored"})
    DBOS.launch()
    assert DBOS.executor_id == "local"
    with SetWorkflowID(f"echo-{uuid.uuid4().hex[:6]}") as s:
        assert echo_workflow("hi") == "hi"
    assert DBOS.get_workflow_status(s.wfid).status == "SUCCESS"  # type: ignore[union-attr]


def instance_as_dbos_names_it() -> Any:
    from dbos_agent._dbos import _dbos_global_instance  # DBOS Python's module attribute

    return _dbos_global_instance


def test_relaunch_after_destroy_and_declarations_after_launch(agent_env: AgentEnv) -> None:
    for _ in range(2):
        inst = DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
        assert instance_as_dbos_names_it() is inst and not inst._launched
        DBOS.launch()
        assert instance_as_dbos_names_it()._launched
        assert echo_workflow({"n": 1}) == {"n": 1}
        DBOS.destroy()
        assert instance_as_dbos_names_it() is None
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()

    # Workflows and queues may come after launch, as in DBOS Python
    # (registered with register on the live connection); they run here.
    @DBOS.workflow()
    def declared_late(x: int) -> int:
        return x + 1

    assert declared_late(1) == 2

    late = DBOS.register_queue("pytest_late", worker_concurrency=1)
    assert DBOS.retrieve_queue("pytest_late") is late
    assert late.enqueue(echo_workflow, "late").get_result() == "late"
    assert Queue("pytest_late_2").enqueue(echo_workflow, 2).get_result() == 2
    DBOS.destroy()
    with pytest.raises(DBOSException, match="DBOS is not configured"):
        echo_workflow(1)
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    with pytest.raises(DBOSException, match="not launched"):
        echo_workflow(1)


def test_enqueue_options_deduplicate_and_prioritize(agent_env: AgentEnv) -> None:
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()
    dedup = f"dedup-{uuid.uuid4().hex[:6]}"
    with SetEnqueueOptions(deduplication_id=dedup, priority=5):
        first = dedup_queue.enqueue(held_workflow, 1)
        status = first.get_status()
        assert (status.priority, status.deduplication_id) == (5, dedup)
        # While the first is active (held), the same deduplication id is refused.
        with pytest.raises(DBOSQueueDeduplicatedError) as info:
            dedup_queue.enqueue(held_workflow, 2)
        assert info.value.deduplication_id == dedup and info.value.queue_name == "pytest_dedup"
    release.set()
    assert first.get_result() == 1
    # As in DBOS Python: bad values and enqueue-only options on a direct start
    # are refused.
    with pytest.raises(Exception, match="Invalid workflow timeout"):
        SetWorkflowTimeout(-1)
    with pytest.raises(Exception, match="Invalid priority"):
        SetEnqueueOptions(priority=0)
    with SetEnqueueOptions(priority=3):
        with pytest.raises(DBOSException, match="not being enqueued"):
            echo_workflow(1)
    with SetEnqueueOptions(queue_partition_key="p", deduplication_id="d"):
        with pytest.raises(DBOSException, match="Deduplication is not supported for partitioned queues"):
            dedup_queue.enqueue(echo_workflow, 1)
    with SetEnqueueOptions(duplication_policy="return-existing"):
        with pytest.raises(DBOSException, match="requires a deduplication_id"):
            dedup_queue.enqueue(echo_workflow, 1)


def test_a_message_over_the_agents_frame_limit_is_refused_clearly(agent_env: AgentEnv) -> None:
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()
    with pytest.raises(DBOSException, match="limit"):
        echo_workflow(b"x" * (17 << 20))
    # The connection is still good.
    assert echo_workflow("after") == "after"


def test_public_names_match_dbos_python() -> None:
    import dbos

    for name in ["DBOS", "DBOSClient", "Queue", "SetWorkflowID", "SetEnqueueOptions", "SetWorkflowTimeout",
                 "WorkflowHandle", "WorkflowHandleAsync", "WorkflowStatus", "StepInfo", "EnqueueOptions",
                 "WorkflowSerializationFormat", "PortableWorkflowError", "Serializer", "DBOSConfig", "StepOptions"]:
        assert hasattr(dbos, name) and hasattr(dbos_agent, name), name
    for name in ["DBOSException", "DBOSWorkflowCancelledError", "DBOSNonExistentWorkflowError",
                 "DBOSUnexpectedStepError", "DBOSMaxStepRetriesExceeded", "DBOSAwaitedWorkflowCancelledError",
                 "DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded", "DBOSConflictingWorkflowError",
                 "DBOSQueueDeduplicatedError", "DBOSWorkflowConflictIDError", "DBOSWorkflowFunctionNotFoundError",
                 "MaxRecoveryAttemptsExceededError", "DBOSInitializationError"]:
        theirs = getattr(dbos.error, name)
        ours = getattr(dbos_agent.error, name)
        assert ours.__name__ == theirs.__name__
        assert issubclass(ours, BaseException) and (issubclass(ours, Exception) == issubclass(theirs, Exception))
    for method in ["launch", "destroy", "workflow", "step", "start_workflow", "start_workflow_async",
                   "retrieve_workflow", "retrieve_workflow_async", "get_result", "get_result_async",
                   "get_workflow_status", "list_workflows", "list_workflows_async", "list_workflow_steps",
                   "list_workflow_steps_async", "cancel_workflow", "cancel_workflow_async", "resume_workflow",
                   "resume_workflow_async", "register_queue"]:
        assert hasattr(dbos.DBOS, method) and hasattr(DBOS, method), method


def test_queue_schedule_and_version_calls_take_dbos_pythons_arguments() -> None:
    import inspect

    import dbos

    def params(fn: Any) -> list:  # type: ignore[type-arg]
        return [
            (p.name, p.kind) for p in inspect.signature(fn).parameters.values()
            if p.kind not in (inspect.Parameter.VAR_KEYWORD,)
        ]

    dbos_methods = [
        "register_queue", "register_queue_async", "retrieve_queue", "retrieve_queue_async", "list_queues",
        "list_queues_async", "listen_queues", "enqueue_workflow", "enqueue_workflow_async",
        "enqueue_workflow_with_options", "enqueue_workflow_with_options_async", "set_workflow_delay",
        "set_workflow_delay_async", "create_schedule", "create_schedule_async", "list_schedules",
        "list_schedules_async", "get_schedule", "get_schedule_async", "delete_schedule", "delete_schedule_async",
        "pause_schedule", "resume_schedule", "apply_schedules", "apply_schedules_async", "backfill_schedule",
        "trigger_schedule", "list_application_versions", "list_application_versions_async",
        "get_latest_application_version", "get_latest_application_version_async", "set_latest_application_version",
        "set_latest_application_version_async",
    ]
    for m in dbos_methods:
        assert params(getattr(dbos_agent.DBOS, m)) == params(getattr(dbos.DBOS, m)), m
    client_methods = [
        "enqueue", "enqueue_async", "set_workflow_delay", "set_workflow_delay_async", "retrieve_queue",
        "retrieve_queue_async", "list_queues", "list_queues_async", "create_schedule", "create_schedule_async",
        "list_schedules", "list_schedules_async", "get_schedule", "get_schedule_async", "delete_schedule",
        "delete_schedule_async", "pause_schedule", "resume_schedule", "apply_schedules", "apply_schedules_async",
        "backfill_schedule", "trigger_schedule", "list_application_versions", "list_application_versions_async",
        "get_latest_application_version", "get_latest_application_version_async", "set_latest_application_version",
        "set_latest_application_version_async",
    ]
    for m in client_methods:
        assert params(getattr(dbos_agent.DBOSClient, m)) == params(getattr(dbos.DBOSClient, m)), m
    for ours, theirs, m in [
        (dbos_agent.Debouncer, dbos.Debouncer, "__init__"), (dbos_agent.Debouncer, dbos.Debouncer, "create"),
        (dbos_agent.Debouncer, dbos.Debouncer, "create_async"), (dbos_agent.Debouncer, dbos.Debouncer, "debounce"),
        (dbos_agent.Debouncer, dbos.Debouncer, "debounce_async"),
        (dbos_agent.DebouncerClient, dbos.DebouncerClient, "__init__"),
        (dbos_agent.DebouncerClient, dbos.DebouncerClient, "debounce"),
        (dbos_agent.SetEnqueueOptions, dbos.SetEnqueueOptions, "__init__"),
        (dbos_agent.SetWorkflowTimeout, dbos.SetWorkflowTimeout, "__init__"),
    ]:
        assert params(getattr(ours, m)) == params(getattr(theirs, m)), f"{ours.__name__}.{m}"
    for name in ["Debouncer", "DebouncerClient", "ScheduleInput", "WorkflowSchedule", "ClientScheduleInput",
                 "VersionInfo", "DuplicationPolicy", "WorkflowIDReusePolicy", "EnqueueOptions"]:
        assert hasattr(dbos, name) and hasattr(dbos_agent, name), name
    assert set(dbos_agent.EnqueueOptions.__annotations__) >= set(dbos.EnqueueOptions.__annotations__)


def test_communication_and_steering_calls_take_dbos_pythons_arguments() -> None:
    import dataclasses
    import inspect

    import dbos

    def params(fn: Any) -> list:  # type: ignore[type-arg]
        out = []
        for p in inspect.signature(fn).parameters.values():
            plain = p.default is inspect.Parameter.empty or isinstance(p.default, (int, float, str, type(None)))
            out.append((p.name, p.kind, p.default if plain else type(p.default).__name__))
        return out

    both = [
        "send", "send_async", "send_bulk", "send_bulk_async", "get_event", "get_event_async", "read_stream",
        "read_stream_async", "read_stream_offset", "read_stream_offset_async", "fork_workflow", "fork_workflow_async",
        "rewind_workflow", "rewind_workflow_async", "delete_workflow", "delete_workflow_async", "delete_workflows",
        "delete_workflows_async", "update_workflow_attributes", "update_workflow_attributes_async",
        "cancel_workflow", "cancel_workflow_async", "cancel_workflows", "cancel_workflows_async",
        "wait_first", "wait_first_async",
    ]
    dbos_only = [
        "recv", "recv_async", "sleep", "sleep_async", "set_event", "set_event_async", "get_all_events",
        "get_all_events_async", "write_stream", "write_stream_async", "close_stream", "close_stream_async", "patch",
        "patch_async", "deprecate_patch", "deprecate_patch_async", "run_step", "run_step_async",
    ]
    for m in both + dbos_only:
        assert params(getattr(dbos_agent.DBOS, m)) == params(getattr(dbos.DBOS, m)), m
    for m in both:
        assert params(getattr(dbos_agent.DBOSClient, m)) == params(getattr(dbos.DBOSClient, m)), m
    for m in ("run_step_async", "wait_first_async"):
        assert inspect.iscoroutinefunction(getattr(dbos_agent.DBOS, m)), m
    assert dbos_agent.StepOptions.__annotations__.keys() == dbos.StepOptions.__annotations__.keys()
    for m in ("read_stream", "read_stream_async"):
        for ours, theirs in ((dbos_agent.DBOS, dbos.DBOS), (dbos_agent.DBOSClient, dbos.DBOSClient)):
            assert inspect.isgeneratorfunction(getattr(ours, m)) == inspect.isgeneratorfunction(getattr(theirs, m))
            assert inspect.isasyncgenfunction(getattr(ours, m)) == inspect.isasyncgenfunction(getattr(theirs, m))
    assert params(dbos_agent.SetWorkflowAttributes.__init__) == params(dbos.SetWorkflowAttributes.__init__)
    assert [f.name for f in dataclasses.fields(dbos_agent.SendMessage)] == [
        f.name for f in dataclasses.fields(dbos.SendMessage)
    ]
    for name in ("SendMessage", "SetWorkflowAttributes"):
        assert hasattr(dbos, name) and hasattr(dbos_agent, name), name
