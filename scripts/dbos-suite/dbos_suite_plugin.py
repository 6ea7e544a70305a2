"""pytest plugin of the DBOS-suite harness (loaded with ``-p dbos_suite_plugin``): gives DBOS
Python's tests, rewritten to import dbos_agent, a real agent to talk to.

DBOS's tests construct ``DBOS(config=...)``, launch and ``DBOS.destroy(destroy_registry=True)``
in every test, and their conftest drops or truncates the system database between tests. With
DBOS Python that database is opened by the process itself; through dbos_agent it is the
agent's. So this plugin instruments the binding (harness instrumentation, not part of the API
under test): ``DBOS.launch`` (and a ``DBOSClient`` made while no agent runs) first starts a
fresh ``dbos-agent serve`` on the configured ``system_database_url``, on a private socket;
``DBOS.destroy`` stops it once the binding has disconnected, so the conftest's resets happen
while no agent holds the database. A destroy while a ``DBOSClient`` of the test is still open
leaves the agent running: the test expects that client to go on working across the destroy (it
does with DBOS, whose client opens the database itself), as a real agent, a per-host daemon,
outlives an application's destroy; the agent is stopped once the client is destroyed, and in any
case at the end of each test. The agent runs with intervals as short as DBOS's test
configuration sets for DBOS itself (background jobs every 0.1 s, notification polling 0.01 s).

Environment: DBOS_SUITE_AGENT (the agent binary), DBOS_SUITE_LOG_DIR (where the agents' logs
go), DBOS_SUITE_AGENT_FLAGS (extra flags for ``serve``, split on spaces),
DBOS_SUITE_DEFAULT_SYSTEM_DATABASE_URL (the database of the agent a config naming none gets).
"""

from __future__ import annotations

import functools
import os
import sys
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TextIO
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

# The flags that make the agent as quick as DBOS's test configuration makes DBOS: its
# conftest runs the background jobs (delayed release, timeouts, schedules) every 0.1 s and
# polls notifications every 0.01 s.
FAST_FLAGS = [
    "--poll-interval=100ms",
    "--sweep-interval=100ms",
    "--schedule-interval=100ms",
    "--message-poll-interval=10ms",
    "--result-poll-interval=10ms",
    "--rescue-interval=100ms",
    "--rescue-horizon=1s",
    # DBOS.destroy leaves nothing to drain: the binding has disconnected already.
    "--grace-period=100ms",
    # A test pointing at an unreachable database gets a quick answer, not an endless wait.
    "--database-retry=5s",
    "--shutdown-timeout=2s",
]
_START_TIMEOUT_SEC = 20.0
_STOP_TIMEOUT_SEC = 10.0


def agent_database_url(url: str) -> Optional[str]:
    """A SQLAlchemy Postgres URL (``postgresql+psycopg://...``) as the agent takes it, or None
    for a database the agent cannot serve (SQLite)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in ("postgresql", "postgres"):
        return None
    query = dict(parse_qsl(parts.query))
    query.setdefault("sslmode", "disable")
    return urlunsplit(("postgres", parts.netloc, parts.path, urlencode(query), parts.fragment))


class Agent:
    """One ``dbos-agent serve`` at a time, on one private socket."""

    def __init__(self, binary: str, socket_path: str, log: TextIO) -> None:
        self.binary = binary
        self.socket_path = socket_path
        self.log = log
        self.proc: Optional[subprocess.Popen[str]] = None
        self.url: Optional[str] = None
        self.starts = 0
        self.test = "(no test)"
        self._lock = threading.RLock()

    def ensure(self, url: str, config: Dict[str, Any]) -> None:
        """An agent serving ``url``: the running one if it does, else a fresh one."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None and self.url == url:
                return
            self.stop()
            self._start(url, config)

    def _start(self, url: str, config: Dict[str, Any]) -> None:
        database_url = agent_database_url(url)
        if database_url is None:
            # The binding then finds no agent and says so, as it would to an application.
            self.log.write(f"=== no agent for {self.test}: it serves Postgres only, not {url}\n")
            self.log.flush()
            return
        cmd = [self.binary, "serve", f"--database-url={database_url}", f"--socket={self.socket_path}"]
        cmd += FAST_FLAGS + shlex.split(os.environ.get("DBOS_SUITE_AGENT_FLAGS", ""))
        if config.get("dbos_system_schema"):
            cmd.append(f"--schema={config['dbos_system_schema']}")
        if config.get("executor_id"):
            cmd.append(f"--executor-id={config['executor_id']}")
        self.starts += 1
        self.log.write(f"=== agent {self.starts} for {self.test}: {' '.join(cmd[1:])}\n")
        self.log.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.PIPE, text=True)
        # For the script, which stops what a killed pytest left behind.
        with open(Path(self.log.name).with_name("agent.pids"), "a") as pids:
            pids.write(f"{proc.pid}\n")
        ready = threading.Event()

        def drain() -> None:
            # The agent says "dbos-agent listening" once its socket accepts connections.
            assert proc.stderr is not None
            for line in proc.stderr:
                self.log.write(line)
                if not ready.is_set() and '"dbos-agent listening"' in line:
                    ready.set()
            self.log.flush()
            ready.set()  # exited: stop waiting

        threading.Thread(target=drain, name="dbos-suite-agent-log", daemon=True).start()
        if not ready.wait(_START_TIMEOUT_SEC) or proc.poll() is not None:
            proc.kill()
            proc.wait()
            # Not the harness's error to raise: the binding finds no agent and says so, as it
            # would to an application (DBOS itself fails on an unreachable database).
            self.log.write(f"=== agent did not start on {url}\n")
            self.log.flush()
            return
        self.proc, self.url = proc, url

    def stop(self) -> None:
        with self._lock:
            proc, self.proc, self.url = self.proc, None, None
            if proc is None or proc.poll() is not None:
                return
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(_STOP_TIMEOUT_SEC)
            except subprocess.TimeoutExpired:
                self.log.write("=== agent did not stop on SIGTERM: killed\n")
                proc.kill()
                proc.wait()


_agent: Optional[Agent] = None
_sock_dir: Optional[str] = None
_config: Dict[str, Any] = {}
_restore: List[Callable[[], None]] = []
# The DBOSClients a test has open: while there is one, a destroy keeps the agent.
_clients: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _instrument() -> None:
    """Wrap the binding's lifecycle calls: construction records the config, launch and a
    client start the agent, destroy stops it."""
    import dbos_agent

    cls = dbos_agent.DBOS
    orig_init, orig_launch, orig_destroy = cls.__init__, cls.__dict__["launch"], cls.__dict__["destroy"]
    client_init, client_destroy = dbos_agent.DBOSClient.__init__, dbos_agent.DBOSClient.destroy

    @functools.wraps(orig_init)
    def init(self: Any, *args: Any, config: Dict[str, Any], **kwargs: Any) -> None:
        _config.clear()
        _config.update(config)
        orig_init(self, *args, config=config, **kwargs)

    @functools.wraps(orig_launch.__func__)
    def launch(klass: Any, *args: Any, **kwargs: Any) -> Any:
        # A config naming no system database uses the host's agent, on
        # whatever database it serves (DBOS would open a SQLite file of its
        # own): the harness's agent serves the suite's.
        url = _config.get("system_database_url") or os.environ.get("DBOS_SUITE_DEFAULT_SYSTEM_DATABASE_URL")
        if _agent is not None and url:
            _agent.ensure(url, _config)
        return orig_launch.__func__(klass, *args, **kwargs)

    @functools.wraps(orig_destroy.__func__)
    def destroy(klass: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return orig_destroy.__func__(klass, *args, **kwargs)
        finally:
            if _agent is not None and not _clients:
                _agent.stop()

    @functools.wraps(client_init)
    def client(self: Any, *args: Any, **kwargs: Any) -> None:
        url = kwargs.get("system_database_url") or _config.get("system_database_url")
        if _agent is not None and url and (_agent.proc is None or _agent.proc.poll() is not None):
            _agent.ensure(url, {"dbos_system_schema": kwargs.get("dbos_system_schema")})
        client_init(self, *args, **kwargs)
        _clients.add(self)

    @functools.wraps(client_destroy)
    def close_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        _clients.discard(self)
        return client_destroy(self, *args, **kwargs)

    cls.__init__ = init  # type: ignore[method-assign]
    cls.launch = classmethod(launch)  # type: ignore[method-assign,assignment]
    cls.destroy = classmethod(destroy)  # type: ignore[method-assign,assignment]
    dbos_agent.DBOSClient.__init__ = client  # type: ignore[method-assign]
    dbos_agent.DBOSClient.destroy = close_client  # type: ignore[method-assign]

    def restore() -> None:
        cls.__init__ = orig_init  # type: ignore[method-assign]
        cls.launch = orig_launch  # type: ignore[method-assign]
        cls.destroy = orig_destroy  # type: ignore[method-assign]
        dbos_agent.DBOSClient.__init__ = client_init  # type: ignore[method-assign]
        dbos_agent.DBOSClient.destroy = client_destroy  # type: ignore[method-assign]

    _restore.append(restore)


def pytest_configure(config: pytest.Config) -> None:
    global _agent, _sock_dir
    binary = os.environ.get("DBOS_SUITE_AGENT", "dbos-agent")
    log_dir = Path(os.environ.get("DBOS_SUITE_LOG_DIR") or tempfile.mkdtemp(prefix="dbos-suite-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    # A short private directory: a Unix socket path is limited to about 100 bytes.
    _sock_dir = tempfile.mkdtemp(prefix="dbos-suite-")
    socket_path = os.path.join(_sock_dir, "agent.sock")
    # Every DBOS and DBOSClient the tests make finds the agent here.
    os.environ["DBOS_AGENT_SOCKET"] = socket_path
    # DBOS.migrate and run_dbos_database_migrations run this agent's migrator.
    os.environ["DBOS_AGENT_BINARY"] = binary
    _agent = Agent(binary, socket_path, open(log_dir / "agent.log", "a"))
    _instrument()


_exit_status = 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _agent is not None:
        _agent.stop()
        _agent.log.close()
    for restore in _restore:
        restore()
    if _sock_dir is not None:
        shutil.rmtree(_sock_dir, ignore_errors=True)
    # A test that failed while its own non-daemon thread waited on an event
    # it would have set (test_classdecorators' test_step_recovery does) keeps
    # the interpreter from exiting, and the file would hold the run until its
    # file timeout. The results are written by now (junitxml writes them at
    # session finish, and this hook runs last): exit without joining threads.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
    if _agent is not None:
        _agent.test = item.nodeid.strip()
    yield
    # Nothing a test left running outlives it (its fixtures have been torn down by now).
    _clients.clear()
    if _agent is not None:
        _agent.stop()
