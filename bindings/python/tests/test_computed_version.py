"""A worker given no application version computes one, as DBOS Python does
(PROTOCOL.md 2.13): an MD5 over its workflows' source, sorted, with the
binding's version and the application's name. The first registration of
that version makes it the latest; a process that was launched before, or
another version registered after it, does not; and the worker always runs
what it enqueues itself, whatever the latest."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import dbos_agent._registry as dbos_module
import dbos_agent._version as version_module
from dbos_agent import DBOS, DBOSClient
from dbos_agent._version import compute_app_version

from conftest import TESTS, AgentEnv, Worker, sqlalchemy_url
from holds import queue_env, ready_version

HEX32 = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(autouse=True)
def no_dbos() -> Iterator[None]:
    DBOS.destroy()
    yield
    DBOS.destroy()


def load_functions(path: Path, source: str) -> List[Callable[..., Any]]:
    """The functions of a module written at ``path`` (a new path for each
    source text: inspect reads the file through a cache keyed by path)."""
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [getattr(module, n) for n in sorted(vars(module)) if n.startswith("wf_")]


SOURCE = """
    def wf_one(x):
        return x + 1

    def wf_two(x):
        return x * 2
"""


def test_the_computed_version_depends_on_the_source_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_functions(tmp_path / "first.py", SOURCE)
    version = compute_app_version("app", first)
    assert HEX32.match(version)
    # The same source elsewhere (another checkout, another host), declared
    # in another order: the same version.
    again = load_functions(tmp_path / "again.py", SOURCE)
    assert compute_app_version("app", list(reversed(again))) == version
    # A changed workflow is another version; so is another application of
    # the same source, and the same source under another binding release.
    changed = load_functions(tmp_path / "changed.py", SOURCE.replace("x * 2", "x * 3"))
    assert compute_app_version("app", changed) != version
    assert compute_app_version("other-app", first) != version
    monkeypatch.setattr(version_module, "__version__", "99.0.0")
    assert compute_app_version("app", first) != version


def test_a_workflow_without_source_falls_back_to_the_default_version() -> None:
    scope: Dict[str, Any] = {}
    exec("def wf_built(x):\n    return x\n", scope)
    assert compute_app_version("my-app", [scope["wf_built"]]) == "DEFAULT_VERSION-my-app"


@DBOS.workflow()
def cv_echo(value: str) -> str:
    return value


def test_a_launch_without_a_version_registers_the_computed_one(agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBOS__APPVERSION", raising=False)
    DBOS(config={"name": "pytest-cv-inproc", "agent_socket": agent_env.socket})
    assert DBOS.application_version == ""  # computed at launch, as in DBOS
    DBOS.launch()
    version = DBOS.application_version
    expected = compute_app_version("pytest-cv-inproc", [r.func for r in dbos_module._workflows.values()])
    assert version == expected
    assert [v["version_name"] for v in DBOS.list_application_versions()] == [version]
    # What this process starts carries its version.
    assert DBOS.start_workflow(cv_echo, "hi").get_status().app_version == version  # type: ignore[union-attr]
    DBOS.destroy()
    # A relaunch of the same source: the same version, registered once.
    DBOS(config={"name": "pytest-cv-inproc", "agent_socket": agent_env.socket})
    DBOS.launch()
    assert DBOS.application_version == version
    assert [v["version_name"] for v in DBOS.list_application_versions()] == [version]
    DBOS.destroy()
    # A configured version or DBOS__APPVERSION comes first.
    monkeypatch.setenv("DBOS__APPVERSION", "from-env")
    DBOS(config={"name": "pytest-cv-inproc", "agent_socket": agent_env.socket})
    DBOS.launch()
    assert DBOS.application_version == "from-env"
    DBOS.destroy()
    DBOS(config={"name": "pytest-cv-inproc", "agent_socket": agent_env.socket, "application_version": "configured"})
    DBOS.launch()
    assert DBOS.application_version == "configured"


@pytest.fixture(scope="module")
def defaulting_env(agent_binary: str) -> Iterator[AgentEnv]:
    env = AgentEnv(agent_binary, "cv_default", extra=["--app-version", "agent-default"])
    try:
        yield env
    finally:
        env.close()


def test_the_agents_default_version_comes_before_a_computed_one(
    defaulting_env: AgentEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DBOS__APPVERSION", raising=False)
    DBOS(config={"name": "pytest-cv-default", "agent_socket": defaulting_env.socket})
    DBOS.launch()
    assert DBOS.application_version == "agent-default"
    assert [v["version_name"] for v in DBOS.list_application_versions()] == ["agent-default"]


def run_official_app(agent_env: AgentEnv, app: str, version: str) -> None:
    """An official DBOS process launches once on the agent's schema,
    registering ``version`` for ``app``, and exits."""
    env = dict(os.environ)
    env.update({
        "APP_DATABASE_URL": sqlalchemy_url(), "APP_SCHEMA": agent_env.schema, "APP_NAME": app,
        "APP_VERSION": version, "DBOS__VMID": "official-process",
    })
    out = subprocess.run(
        [sys.executable, str(TESTS / "apps" / "official_queue_app.py")], env=env, capture_output=True, text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def version_cli(agent_env: AgentEnv, *args: str) -> str:
    from conftest import database_url

    out = subprocess.run(
        [agent_env.binary, "version", *args, "--database-url", database_url(), "--schema", agent_env.schema],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_a_worker_without_a_version_behaves_as_a_dbos_process(agent_env: AgentEnv, workers: List[Worker]) -> None:
    app = "pytest-cv"
    queues = [{"name": "cvq"}]
    env = queue_env(agent_env.socket, app, queues)
    env.pop("APP_VERSION", None)
    w1 = Worker("queue_worker.py", env)
    workers.append(w1)
    version = ready_version(w1)
    assert HEX32.match(version)
    with DBOSClient(agent_socket=agent_env.socket, application_name=app) as client:
        # The first registration of the computed version: the latest, so
        # the worker takes unversioned work.
        assert [v["version_name"] for v in client.list_application_versions()] == [version]
        assert client.enqueue({"workflow_name": "quick", "queue_name": "cvq"}, "u0").get_result() == f"u0@{version}"

        # Another process of the same source computes the same version; a
        # process of other source (one more workflow) another one, which,
        # registered for the first time, becomes the latest.
        w2 = Worker("queue_worker.py", env)
        workers.append(w2)
        assert ready_version(w2) == version
        w2.stop()
        w3 = Worker("queue_worker.py", dict(env, DECORATED_CRON="0 0 1 1 *"))
        workers.append(w3)
        other = ready_version(w3)
        assert HEX32.match(other) and other != version
        assert [v["version_name"] for v in client.list_application_versions()] == [other, version]
        w3.stop()

        # An official DBOS process registers its version: the latest now.
        run_official_app(agent_env, app, "official-1")
        assert client.get_latest_application_version()["version_name"] == "official-1"
        # Unversioned work is the latest version's: w1 leaves it queued. The
        # queue is first in, first out, so a later row of w1's own version
        # that w1 ran proves the earlier unversioned one was not its to take.
        waiting = client.enqueue({"workflow_name": "quick", "queue_name": "cvq"}, "u1")
        # What w1 enqueues itself carries its version, so w1 runs it, as a
        # DBOS process runs its own enqueues when it is not the latest.
        w1.send("enqueue cvq own")
        own_id = w1.out.wait_for(lambda l: l.startswith("enqueued ") and " own " in l).split()[1]
        w1.out.wait_for(lambda l: l.startswith(f"ran {own_id} own {version} "))
        assert client.retrieve_workflow(own_id).get_result() == f"own@{version}"
        assert waiting.get_status().status == "ENQUEUED"

        # A relaunch of w1's source does not make its version the latest
        # again: only a first registration does, as in DBOS.
        w4 = Worker("queue_worker.py", env)
        workers.append(w4)
        assert ready_version(w4) == version
        w4.stop()
        assert client.get_latest_application_version()["version_name"] == "official-1"

        # Promoting it (the CLI's `version promote`) hands w1 the
        # unversioned work again.
        assert f"version {version} is the latest" in version_cli(agent_env, "promote", version, "--app-name", app)
        assert waiting.get_result() == f"u1@{version}"


def test_enable_patching_pins_the_version_with_dbos_deprecation_warning(
    agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The application the other tests here launch as: the queues declared
    # in this process belong to it.
    monkeypatch.delenv("DBOS__APPVERSION", raising=False)
    # DBOS.logger does not propagate once it has DBOS's console handler: listen on it.
    dbos_logger = logging.getLogger("dbos")
    dbos_logger.addHandler(caplog.handler)
    try:
        with caplog.at_level("WARNING", logger="dbos"):
            DBOS(config={"name": "pytest-cv-inproc", "agent_socket": agent_env.socket, "enable_patching": True})
    finally:
        dbos_logger.removeHandler(caplog.handler)
    assert "enable_patching is deprecated and will be removed in a future release" in caplog.text
    DBOS.launch()
    try:
        assert DBOS.application_version == "PATCHING_ENABLED"
    finally:
        DBOS.destroy()
    # A configured version wins over the flag, as in DBOS.
    DBOS(config={"name": "pytest-cv-inproc", "agent_socket": agent_env.socket, "enable_patching": True,
                 "application_version": "v-pinned"})
    DBOS.launch()
    try:
        assert DBOS.application_version == "v-pinned"
    finally:
        DBOS.destroy()
