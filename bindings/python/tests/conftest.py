"""Test harness: the real agent binary (built once per session with go
build) and a real Postgres. Each test module gets its own agent on a fresh
schema, dropped afterwards; waits are on signals (process output, pipes,
events), never on fixed sleeps.

The transport is the run's: env DBOS_AGENT_TEST_TRANSPORT=socket (the
default) or =library. Over the library, every DBOS and DBOSClient the tests
and their worker processes make reaches the test's agent through
libdbos.so in connect mode (env DBOS_AGENT_LIBRARY, DBOS_AGENT_MODE=connect,
set here for the whole session and inherited by the workers), so the whole
suite runs again with only the transport swapped. The library is
cgo/libdbos.so (`make lib`), or the one env DBOS_AGENT_TEST_LIBRARY names;
the tests of the library's own modes (test_library_modes) use it in both
runs."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Sequence

import pytest

if TYPE_CHECKING:
    from dbos_agent._transport import Endpoint

REPO = Path(__file__).resolve().parents[3]
TESTS = Path(__file__).resolve().parent
DEFAULT_DATABASE_URL = "postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable"


TRANSPORT = os.environ.get("DBOS_AGENT_TEST_TRANSPORT") or "socket"
if TRANSPORT not in ("socket", "library"):
    raise RuntimeError(f"DBOS_AGENT_TEST_TRANSPORT must be socket or library, not {TRANSPORT!r}")


# The agent's system database: postgres (DBOS_TEST_DATABASE_URL, a schema per
# module) or sqlite (a file per module, which the official dbos package opens
# too).
SYSTEM_DB = os.environ.get("DBOS_AGENT_TEST_SYSTEM_DB") or "postgres"
if SYSTEM_DB not in ("postgres", "sqlite"):
    raise RuntimeError(f"DBOS_AGENT_TEST_SYSTEM_DB must be postgres or sqlite, not {SYSTEM_DB!r}")


def library_path() -> str:
    """libdbos.so, as `make lib` builds it (or env DBOS_AGENT_TEST_LIBRARY)."""
    return os.environ.get("DBOS_AGENT_TEST_LIBRARY") or str(REPO / "cgo" / "libdbos.so")


# The transport's environment, before any test module imports the binding.
for _key in ("DBOS_AGENT_LIBRARY", "DBOS_AGENT_MODE"):
    os.environ.pop(_key, None)
if TRANSPORT == "library":
    if not os.path.exists(library_path()):
        raise RuntimeError(f"DBOS_AGENT_TEST_TRANSPORT=library, but there is no {library_path()}: run `make lib`")
    os.environ["DBOS_AGENT_LIBRARY"] = library_path()
    os.environ["DBOS_AGENT_MODE"] = "connect"


def agent_endpoint(socket: str) -> "Endpoint":
    """The endpoint of the agent at socket, through this run's transport
    (for the tests that open a Connection themselves)."""
    from dbos_agent._library import resolve_endpoint

    return resolve_endpoint(socket=socket)


def database_url() -> str:
    return os.environ.get("DBOS_TEST_DATABASE_URL") or DEFAULT_DATABASE_URL


def sqlalchemy_url() -> str:
    """The same database as a URL the official dbos package accepts."""
    url = database_url()
    return "postgresql://" + url.split("://", 1)[1]


class LineWaiter:
    """Reads a process's output stream line by line and lets a test wait for
    a line (no sleeps: a condition variable is signalled on every line)."""

    def __init__(self, stream: Optional[IO[str]] = None, echo_prefix: str = "", also: "Optional[LineWaiter]" = None):
        self.lines: List[str] = []
        self.eof = False
        self._cond = threading.Condition()
        self._echo_prefix = echo_prefix
        self._also = also
        if stream is not None:
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def add(self, line: str) -> None:
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.add(line.rstrip("\n"))
            if self._also is not None:
                self._also.add(line.rstrip("\n"))
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def tail(self, count: int) -> List[str]:
        """The last count lines read so far."""
        with self._cond:
            return self.lines[-count:]

    def wait_for(self, predicate_or_text: object, timeout: float = 60.0) -> str:
        def match(line: str) -> bool:
            if callable(predicate_or_text):
                return bool(predicate_or_text(line))
            return str(predicate_or_text) in line

        deadline = time.monotonic() + timeout
        with self._cond:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if match(line):
                        return line
                seen = len(self.lines)
                if self.eof:
                    raise AssertionError(f"output ended before {predicate_or_text!r}:\n" + self.text())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {predicate_or_text!r} within {timeout}s:\n" + self.text())
                self._cond.wait(left)

    def text(self) -> str:
        return "\n".join(self.lines)

    def matching(self, predicate: Callable[[str], bool]) -> List[str]:
        with self._cond:
            return [line for line in self.lines if predicate(line)]

    def wait_count(self, predicate: Callable[[str], bool], n: int, timeout: float = 60.0) -> List[str]:
        """Wait until n lines match; returns them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [line for line in self.lines if predicate(line)]
                if len(found) >= n:
                    return found
                if self.eof:
                    raise AssertionError(f"output ended with {len(found)} of {n} matching lines:\n" + self.text())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(found)} of {n} matching lines within {timeout}s:\n" + self.text())
                self._cond.wait(left)

    def stays_below(self, predicate: Callable[[str], bool], n: int, window: float) -> bool:
        """Watch the output for ``window`` seconds (woken by every line):
        True if fewer than n lines match all along. This bounds a negative
        observation ("no third workflow starts") rather than sleeping."""
        deadline = time.monotonic() + window
        with self._cond:
            while True:
                if sum(1 for line in self.lines if predicate(line)) >= n:
                    return False
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    return True
                self._cond.wait(left)


# The output of the agents and worker processes the running test can see: a
# failing test's report carries the end of each (a flake seen once in CI is
# then diagnosable from its log).
_live_outputs: List["tuple[str, LineWaiter]"] = []
_REPORTED_LINES = 200
_REMEMBERED_OUTPUTS = 16  # processes a test made and did not end through a fixture are dropped oldest first


def _remember_output(name: str, waiter: LineWaiter) -> None:
    _live_outputs.append((name, waiter))
    del _live_outputs[:-_REMEMBERED_OUTPUTS]


def _forget_output(waiter: LineWaiter) -> None:
    _live_outputs[:] = [(name, w) for name, w in _live_outputs if w is not waiter]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:  # type: ignore[type-arg]
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for name, waiter in _live_outputs:
        tail = waiter.tail(_REPORTED_LINES)
        report.sections.append((f"{name}: last {len(tail)} lines", "\n".join(tail)))


class AgentProcess:
    """A running `dbos-agent serve`."""

    def __init__(self, binary: str, schema: str, socket: str, executor_id: str = "local", extra: Optional[List[str]] = None,
                 url: Optional[str] = None):
        self.schema = schema
        self.socket = socket
        self.executor_id = executor_id
        args = [
            binary, "serve",
            "--database-url", url or database_url(),
            "--schema", schema,
            "--socket", socket,
            "--executor-id", executor_id,
            "--poll-interval", "200ms",
            "--result-poll-interval", "200ms",
            "--sweep-interval", "200ms",
            "--schedule-interval", "1s",
            "--grace-period", "2s",
            "--log-level", "debug",
        ] + (extra or [])
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        self.log = LineWaiter(self.proc.stderr)
        _remember_output(f"agent {executor_id} ({socket})", self.log)
        self.log.wait_for("dbos-agent listening", timeout=120)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


class AgentEnv:
    """One test module's database schema, socket directory and agent."""

    def __init__(self, binary: str, name: str, extra: Optional[List[str]] = None):
        self.binary = binary
        self.extra = extra
        self.schema = f"py_{name[:20]}_{secrets.token_hex(4)}".lower()
        # Unix socket paths are limited to ~100 bytes: keep the directory short.
        self.dir = tempfile.mkdtemp(prefix="dbp")
        self.socket = os.path.join(self.dir, "agent.sock")
        # The URL the agent is given; system_database_url is the same
        # database as the official dbos package takes it.
        if SYSTEM_DB == "sqlite":
            self.agent_url = "sqlite:///" + os.path.join(self.dir, "dbos.sqlite")
            self.system_database_url = self.agent_url
        else:
            self.agent_url = database_url()
            self.system_database_url = sqlalchemy_url()
        self.agents: List[AgentProcess] = []
        self.agent = self.start_agent()

    def start_agent(self, executor_id: str = "local") -> AgentProcess:
        a = AgentProcess(self.binary, self.schema, self.socket, executor_id, self.extra, url=self.agent_url)
        self.agents.append(a)
        self.agent = a
        return a

    def start_other_agent(self, executor_id: str) -> AgentProcess:
        """Another agent on the same schema (its own socket and executor id),
        as a second host would run one."""
        a = AgentProcess(self.binary, self.schema, os.path.join(self.dir, f"{executor_id}.sock"), executor_id, url=self.agent_url)
        self.agents.append(a)
        return a

    def close(self) -> None:
        for a in self.agents:
            a.kill()
            _forget_output(a.log)
        if SYSTEM_DB == "postgres":
            drop_schema(self.schema)
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)


def pg_connect():  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(database_url(), autocommit=True)


def query(sql: str, params: tuple = ()) -> List[tuple]:  # type: ignore[type-arg]
    """Rows of a query on the test database (to look at what the agent
    stored, as the official SDKs would read it)."""
    with pg_connect() as conn:
        return conn.execute(sql, params).fetchall()


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(5)}"


_gates: Dict[str, threading.Event] = {}


def gate(key: str) -> threading.Event:
    """An event a test workflow waits on and the test sets, by key."""
    return _gates.setdefault(key, threading.Event())


def step_names(workflow_id: str) -> List[str]:
    from dbos_agent import DBOS

    return [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Until cond() holds, for state of another process that sends no signal
    (a step recorded by its run): polled every 50 ms."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        pause.wait(0.05)


def drop_schema(schema: str) -> None:
    with pg_connect() as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def agent_binary(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The agent, built once per session from this checkout (or the binary
    env DBOS_AGENT_BINARY names)."""
    prebuilt = os.environ.get("DBOS_AGENT_BINARY")
    if prebuilt:
        return prebuilt
    out = tmp_path_factory.mktemp("bin") / "dbos-agent"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/dbos-agent"], cwd=REPO, check=True)
    return str(out)


@pytest.fixture(scope="module")
def agent_env(agent_binary: str, request: pytest.FixtureRequest) -> Iterator[AgentEnv]:
    """An agent on a fresh schema for this test module."""
    name = request.module.__name__.split(".")[-1].replace("test_", "")
    env = AgentEnv(agent_binary, name)
    try:
        yield env
    finally:
        env.close()


@pytest.fixture(scope="module")
def dbos(agent_env: AgentEnv) -> Iterator[type]:
    """DBOS launched in this process against the module's agent, with every
    workflow and queue the test modules declared."""
    from dbos_agent import DBOS

    DBOS.destroy()
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()
    try:
        yield DBOS
    finally:
        DBOS.destroy()


class Worker:
    """A worker process (tests/apps/<script>) whose output a test waits on."""

    def __init__(self, script: str, env: Dict[str, str], sink: Optional[LineWaiter] = None, args: Sequence[str] = ()):
        self.env = env
        full_env = dict(os.environ)
        full_env.update(env)
        full_env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, str(TESTS / "apps" / script), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
        )
        assert self.proc.stdout is not None
        self.out = LineWaiter(self.proc.stdout, also=sink)
        _remember_output(f"worker {script} (pid {self.proc.pid})", self.out)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()  # the apps exit when stdin closes
            except OSError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def workers() -> Iterator[List[Worker]]:
    started: List[Worker] = []
    yield started
    for w in started:
        w.kill()
        _forget_output(w.out)


def effect_counts(path: str) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    if not os.path.exists(path):
        return counts
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                counts[line] = counts.get(line, 0) + 1
    return counts
