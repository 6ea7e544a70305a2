"""The binding over libdbos.so: which transport the config selects, and the
library's modes and hazards through the real library with real processes
(tests/apps/library_app.py): an embedded program with no agent process
survives a SIGKILL mid-workflow without re-running its recorded steps; a
forked child is refused with a clear error; Ctrl-C and SIGTERM still reach
the host; launch, destroy and launch again work in one process; the sidecar
mode runs a real child agent. These use the library in both runs of the
suite (the socket one and the library one)."""

from __future__ import annotations

import json
import os
import secrets
import signal
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from dbos_agent import DBOSAgentUnavailableError, DBOSClient, DBOSInitializationError
from dbos_agent._library import LibraryEndpoint, load, resolve_endpoint
from dbos_agent._transport import SocketEndpoint

from conftest import TRANSPORT, Worker, database_url, drop_schema, effect_counts, library_path, query, sqlalchemy_url, wait_until


def test_the_suite_runs_over_the_transport_it_names(dbos: type) -> None:
    from dbos_agent._registry import _instance

    assert _instance is not None
    endpoint = _instance._endpoint
    if TRANSPORT == "library":
        assert isinstance(endpoint, LibraryEndpoint) and endpoint.mode == "connect"
        assert endpoint.path == library_path()
    else:
        assert isinstance(endpoint, SocketEndpoint)
    assert dbos.list_workflows(workflow_ids=["none-such"]) == []


def test_the_config_selects_the_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("DBOS_AGENT_LIBRARY", "DBOS_AGENT_MODE", "DBOS_SYSTEM_DATABASE_URL", "DBOS_AGENT_BINARY"):
        monkeypatch.delenv(key, raising=False)
    assert isinstance(resolve_endpoint(socket="/s.sock"), SocketEndpoint)
    assert isinstance(resolve_endpoint(socket="/s.sock", mode="connect"), SocketEndpoint)

    # A library alone: embedded, on DBOS's (SQLAlchemy-style) URL without its driver.
    e = resolve_endpoint(library="/l.so", database_url="postgresql+psycopg://u:p@h:5432/d?sslmode=disable", schema="s")
    assert isinstance(e, LibraryEndpoint) and e.runs_agent
    assert e.config == {"mode": "embedded", "database_url": "postgresql://u:p@h:5432/d?sslmode=disable", "schema": "s"}

    monkeypatch.setenv("DBOS_AGENT_LIBRARY", "/env.so")
    monkeypatch.setenv("DBOS_AGENT_MODE", "connect")
    e = resolve_endpoint(socket="/s.sock", trusted_uids=[7, 3])
    assert isinstance(e, LibraryEndpoint) and not e.runs_agent and e.path == "/env.so"
    assert e.config == {"mode": "connect", "socket": "/s.sock", "trusted_uids": [3, 7]}

    monkeypatch.setenv("DBOS_SYSTEM_DATABASE_URL", "postgres://x/y")
    monkeypatch.setenv("DBOS_AGENT_BINARY", "/bin/agent")
    e = resolve_endpoint(mode="sidecar", executor_id="e1")
    assert isinstance(e, LibraryEndpoint)
    assert e.config == {"mode": "sidecar", "database_url": "postgres://x/y", "executor_id": "e1", "agent_path": "/bin/agent"}

    monkeypatch.delenv("DBOS_AGENT_LIBRARY")
    monkeypatch.delenv("DBOS_AGENT_MODE")
    with pytest.raises(DBOSInitializationError, match="agent_library or DBOS_AGENT_LIBRARY"):
        resolve_endpoint(mode="embedded")
    with pytest.raises(DBOSInitializationError, match="must be one of embedded, sidecar, connect"):
        resolve_endpoint(mode="daemon")
    monkeypatch.delenv("DBOS_SYSTEM_DATABASE_URL")
    with pytest.raises(DBOSInitializationError, match="system_database_url or DBOS_SYSTEM_DATABASE_URL"):
        resolve_endpoint(library="/l.so")


def test_the_librarys_errors_are_the_bindings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A library that cannot start its agent is DBOSAgentUnavailableError, a
    config it refuses DBOSInitializationError, each with its message."""
    if not os.path.exists(library_path()):
        pytest.fail(f"no {library_path()}: run `make lib` (or name the library in DBOS_AGENT_TEST_LIBRARY)")
    monkeypatch.delenv("DBOS_AGENT_MODE", raising=False)
    wrong = database_url().replace("postgres:dbos@", "postgres:wrong@", 1)
    with pytest.raises(DBOSAgentUnavailableError, match="cannot start the dbos-agent embedded in this process") as info:
        DBOSClient(agent_library=library_path(), system_database_url=wrong)
    assert "password authentication failed" in str(info.value)
    with pytest.raises(DBOSInitializationError, match="libdbos.so refused dbos_open: .*nope"):
        load(library_path()).open(b'{"mode": "nope"}')
    # One Go runtime per process: another libdbos.so is refused before it loads.
    with pytest.raises(DBOSInitializationError, match="already loaded from"):
        load(str(tmp_path / "libdbos.so"))


@pytest.fixture
def lib_env(tmp_path: Path) -> Iterator[Dict[str, str]]:
    """A library_app environment on a fresh schema of its own."""
    if not os.path.exists(library_path()):
        pytest.fail(f"no {library_path()}: run `make lib` (or name the library in DBOS_AGENT_TEST_LIBRARY)")
    schema = f"pylib_{secrets.token_hex(4)}"
    env = {
        "LIBRARY": library_path(),
        "MODE": "embedded",
        # As a DBOS Python config gives it: the binding passes it to the
        # library without the driver.
        "SYSTEM_DATABASE_URL": sqlalchemy_url().replace("postgresql://", "postgresql+psycopg://", 1),
        "SCHEMA": schema,
        "EFFECTS_FILE": str(tmp_path / "effects"),
        # Over the library run the suite's environment selects connect mode:
        # these programs say their own.
        "DBOS_AGENT_MODE": "",
        "DBOS_AGENT_LIBRARY": "",
    }
    try:
        yield env
    finally:
        drop_schema(schema)


def children(pid: int) -> List[int]:
    out: List[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(c) for c in f.read().split()]
    return out


def main_thread_sleeps(pid: int) -> bool:
    """Whether the process's main thread is blocked (state S) in a wait."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"


def test_embedded_survives_a_sigkill_without_rerunning_recorded_steps(
    lib_env: Dict[str, str], workers: List[Worker]
) -> None:
    wid = f"lib-crash-{secrets.token_hex(4)}"
    first = Worker("library_app.py", dict(lib_env, BLOCK="1", WORKFLOW_ID=wid), args=["crash"])
    workers.append(first)
    first.out.wait_for("blocking 3", timeout=120)
    # The agent is this process's: no agent process, no child of any kind.
    assert children(first.proc.pid) == []
    first.kill()
    assert effect_counts(lib_env["EFFECTS_FILE"]) == {"step 1": 1, "step 2": 1, "step 3": 1}

    # The next start of the same program recovers the workflow: steps 1 and
    # 2 come from the record, 3 (never recorded) runs again, then 4 and 5.
    second = Worker("library_app.py", dict(lib_env, WORKFLOW_ID=wid), args=["crash"])
    workers.append(second)
    line = second.out.wait_for("result ", timeout=120)
    assert json.loads(line[len("result ") :]) == [10, 20, 30, 40, 50]
    assert second.proc.wait(60) == 0, second.out.text()
    assert effect_counts(lib_env["EFFECTS_FILE"]) == {"step 1": 1, "step 2": 1, "step 3": 2, "step 4": 1, "step 5": 1}
    schema = lib_env["SCHEMA"]
    steps = query(f'SELECT function_id FROM "{schema}".operation_outputs WHERE workflow_uuid = %s ORDER BY 1', (wid,))
    assert [r[0] for r in steps] == [1, 2, 3, 4, 5]
    status = query(f'SELECT status, recovery_attempts FROM "{schema}".workflow_status WHERE workflow_uuid = %s', (wid,))
    assert status[0][0] == "SUCCESS" and status[0][1] >= 2


def test_a_forked_child_is_refused_with_a_clear_error(lib_env: Dict[str, str], workers: List[Worker]) -> None:
    app = Worker("library_app.py", lib_env, args=["fork"])
    workers.append(app)
    app.out.wait_for("parent after", timeout=120)
    assert app.proc.wait(60) == 0, app.out.text()
    reports = app.out.matching(lambda s: s.startswith("child "))
    assert len(reports) == 4, app.out.text()
    on_parents_session, after_it, own_client, exited = reports
    # The parent's session, refused by the library (DBOS_ERR_FORKED, its
    # message naming the handle's process) with the binding's advice.
    assert on_parents_session.startswith("child DBOSAgentForkedError: ")
    assert "a child forked after libdbos.so was loaded" in on_parents_session
    assert "post_fork" in on_parents_session and "was opened by process" in on_parents_session
    # The link does not reopen a session from the child: the same refusal.
    assert after_it.startswith("child DBOSAgentForkedError: ") and "post_fork" in after_it
    # A session of its own (dbos_open) is refused too, by the library.
    assert own_client.startswith("child DBOSAgentForkedError: ") and "was loaded by process" in own_client
    assert exited == "child exited 0"
    assert "parent before" in app.out.lines


def test_launching_after_the_fork_works(lib_env: Dict[str, str], workers: List[Worker]) -> None:
    """What the fork advice says to do: declare before the fork (as a
    preloaded app does), launch in the child."""
    app = Worker("library_app.py", lib_env, args=["postfork"])
    workers.append(app)
    app.out.wait_for("parent loaded the library", timeout=120)
    assert app.proc.wait(60) == 0, app.out.text()
    assert "child ran in the child" in app.out.lines, app.out.text()
    assert "child exited 0" in app.out.lines
    assert "parent loaded the library: False" in app.out.lines


def test_ctrl_c_still_interrupts_the_host(lib_env: Dict[str, str], workers: List[Worker]) -> None:
    app = Worker("library_app.py", lib_env, args=["interrupt"])
    workers.append(app)
    pid = app.proc.pid
    app.out.wait_for("waiting result", timeout=120)
    wait_until(lambda: main_thread_sleeps(pid), "the main thread waits on the result")
    app.proc.send_signal(signal.SIGINT)
    app.out.wait_for("interrupted result")
    app.out.wait_for("works 1")  # the library answers after it
    app.out.wait_for("sleeping")
    wait_until(lambda: main_thread_sleeps(pid), "the main thread sleeps")
    app.proc.send_signal(signal.SIGINT)
    app.out.wait_for("interrupted sleep")
    app.out.wait_for("works still")
    app.out.wait_for("done")
    assert app.proc.wait(60) == 0, app.out.text()


@pytest.mark.parametrize("handler", [False, True], ids=["default", "python_handler"])
def test_sigterm_still_stops_the_host(handler: bool, lib_env: Dict[str, str], workers: List[Worker]) -> None:
    app = Worker("library_app.py", dict(lib_env, TERM_HANDLER="1" if handler else "0"), args=["sigterm"])
    workers.append(app)
    app.out.wait_for("waiting", timeout=120)
    wait_until(lambda: main_thread_sleeps(app.proc.pid), "the main thread waits on the result")
    app.proc.send_signal(signal.SIGTERM)
    code = app.proc.wait(60)
    if handler:
        assert code == 3 and "sigterm" in app.out.lines, app.out.text()
    else:
        assert code == -signal.SIGTERM, app.out.text()


def test_launch_destroy_and_launch_again_in_one_process(lib_env: Dict[str, str], workers: List[Worker]) -> None:
    app = Worker("library_app.py", lib_env, args=["relaunch"])
    workers.append(app)
    app.out.wait_for("run 2 ", timeout=180)
    assert app.proc.wait(60) == 0, app.out.text()
    assert app.out.matching(lambda s: s.startswith("run ")) == ["run 1 run-1 run-1", "run 2 run-2 run-2"]


def test_sidecar_runs_a_workflow_in_a_real_child_agent(
    lib_env: Dict[str, str], agent_binary: str, workers: List[Worker]
) -> None:
    app = Worker("library_app.py", dict(lib_env, MODE="sidecar", DBOS_AGENT_BINARY=agent_binary), args=["sidecar"])
    workers.append(app)
    line = app.out.wait_for("result ", timeout=120)
    assert json.loads(line[len("result ") :]) == [10, 20, 30, 40, 50]
    app.out.wait_for("listed children")
    kids = [s.split() for s in app.out.matching(lambda s: s.startswith("children "))]
    agents = [int(pid) for _, pid, exe in kids if os.path.basename(exe) == os.path.basename(agent_binary)]
    assert len(agents) == 1, app.out.text()
    assert effect_counts(lib_env["EFFECTS_FILE"]) == {f"step {n}": 1 for n in range(1, 6)}
    app.stop()
    assert app.proc.returncode == 0, app.out.text()

    def gone() -> bool:
        try:
            with open(f"/proc/{agents[0]}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    wait_until(gone, "the sidecar agent ends with its host")
