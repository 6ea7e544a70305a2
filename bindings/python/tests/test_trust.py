"""Who serves the socket: before it sends anything, the binding checks the
uid the kernel records for the process listening on it (SO_PEERCRED) and
refuses a socket of a user it does not trust. The impostor here is a real
process of the user nobody: a child forked from the test that drops to
nobody's uid."""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import signal
import socket
import struct
import tempfile
import threading
from typing import Iterator, Tuple

import pytest

from dbos_agent import (
    DBOS,
    DBOSAgentUnavailableError,
    DBOSAgentUntrustedError,
    DBOSClient,
    DBOSInitializationError,
)
from dbos_agent import _protocol as proto
from dbos_agent._transport import TRUSTED_UIDS_ENV, resolve_trusted_uids

from conftest import AgentEnv, LineWaiter


def serve_as_impostor(path: str, out: int) -> None:
    """The forked child's life: listen on path; for each connection, read
    one frame (or until the peer closes) and write "received <hex of the
    bytes>" to out. No print, no logging: the child must take no lock that
    one of the parent's threads held at the fork."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    os.write(out, b"ready\n")
    while True:
        conn, _ = srv.accept()
        conn.settimeout(30)
        data = b""
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
                if len(data) >= 4 and len(data) >= 4 + struct.unpack(">I", data[:4])[0]:
                    break
        except socket.timeout:
            pass
        conn.close()
        os.write(out, b"received " + data.hex().encode() + b"\n")


def require_root() -> None:
    if os.getuid() != 0:
        pytest.fail(
            f"this test must run as root (uid {os.getuid()}): it runs a process as nobody "
            "(the machine and CI run the tests as root)"
        )


class Impostor:
    """A process of the user nobody listening on a socket of its own."""

    def __init__(self) -> None:
        require_root()
        user = pwd.getpwnam("nobody")
        self.uid = user.pw_uid
        self.dir = tempfile.mkdtemp(prefix="dbi")
        os.chown(self.dir, user.pw_uid, user.pw_gid)
        self.socket = os.path.join(self.dir, "agent.sock")
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
                serve_as_impostor(self.socket, w)
            except BaseException as e:
                os.write(2, f"impostor: {e!r}\n".encode())
            finally:
                os._exit(0)
        os.close(w)
        self.out = LineWaiter(os.fdopen(r))
        self.out.wait_for("ready", timeout=30)
        self.seen = 0

    def next_received(self) -> bytes:
        """The bytes of the next connection the impostor closed."""
        line = self.out.wait_count(lambda l: l.startswith("received "), self.seen + 1, timeout=30)[self.seen]
        self.seen += 1
        return bytes.fromhex(line[len("received ") :])

    def close(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def impostor() -> Iterator[Impostor]:
    imp = Impostor()
    try:
        yield imp
    finally:
        imp.close()


@pytest.fixture(autouse=True)
def no_dbos() -> Iterator[None]:
    DBOS.destroy()
    yield
    DBOS.destroy()


def _refusal(imp: Impostor, err: DBOSAgentUntrustedError) -> None:
    message = str(err)
    assert f"refusing the dbos-agent socket {imp.socket}" in message
    assert f"served by uid {imp.uid} (nobody)" in message
    assert TRUSTED_UIDS_ENV in message
    assert err.path == imp.socket and err.uid == imp.uid
    assert imp.next_received() == b"", "nothing is sent to an impostor"


def test_a_client_refuses_an_impostor(impostor: Impostor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRUSTED_UIDS_ENV, raising=False)
    with pytest.raises(DBOSAgentUntrustedError) as info:
        DBOSClient(agent_socket=impostor.socket)
    _refusal(impostor, info.value)


def test_a_worker_refuses_an_impostor(impostor: Impostor, monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker is the one that would unpickle what a run push carries.
    monkeypatch.delenv(TRUSTED_UIDS_ENV, raising=False)
    DBOS(config={"name": "trusting", "agent_socket": impostor.socket})
    with pytest.raises(DBOSAgentUntrustedError) as info:
        DBOS.launch()
    _refusal(impostor, info.value)


def _hello_sent(imp: Impostor) -> None:
    data = imp.next_received()
    assert len(data) > proto.HEADER.size
    env = proto.decode_envelope(data[proto.HEADER.size :])
    assert env["op"] == proto.OP_HELLO


def test_a_trusted_user_passes_the_check(impostor: Impostor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRUSTED_UIDS_ENV, raising=False)
    # The impostor reads the handshake and hangs up: the check passed.
    with pytest.raises(DBOSAgentUnavailableError):
        DBOSClient(agent_socket=impostor.socket, agent_trusted_uids=[impostor.uid])
    _hello_sent(impostor)

    monkeypatch.setenv(TRUSTED_UIDS_ENV, f"1001, {impostor.uid}")
    DBOS(config={"name": "trusting", "agent_socket": impostor.socket})
    with pytest.raises(DBOSAgentUnavailableError):
        DBOS.launch()
    _hello_sent(impostor)

    # The config key wins over the environment.
    with pytest.raises(DBOSAgentUntrustedError):
        DBOSClient(agent_socket=impostor.socket, agent_trusted_uids=[])
    assert impostor.next_received() == b""


class Signal(logging.Handler):
    """Sets an event when a record's message contains text."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


def test_a_reconnection_refuses_an_impostor(
    impostor: Impostor, agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent goes away and the path now leads to an impostor: the
    reconnection refuses it, says so, and sends it nothing."""
    monkeypatch.delenv(TRUSTED_UIDS_ENV, raising=False)
    links = tempfile.mkdtemp(prefix="dbl")
    try:
        path = os.path.join(links, "agent.sock")
        os.symlink(agent_env.socket, path)
        client = DBOSClient(agent_socket=path)
        try:
            assert isinstance(client.list_workflows(), list)
            refused = Signal("reconnect refused")
            log = logging.getLogger("dbos_agent")
            log.addHandler(refused)
            try:
                os.symlink(impostor.socket, path + ".new")
                os.replace(path + ".new", path)
                agent_env.agent.kill()
                assert refused.event.wait(30), "no warning of the refused reconnection"
            finally:
                log.removeHandler(refused)
            assert impostor.next_received() == b""
        finally:
            client.destroy()
    finally:
        shutil.rmtree(links, ignore_errors=True)


def test_trusted_uids_are_uids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRUSTED_UIDS_ENV, " 1001,1002 ,")
    assert resolve_trusted_uids(None) == frozenset({1001, 1002})
    assert resolve_trusted_uids("7") == frozenset({7})
    assert resolve_trusted_uids([3, 4]) == frozenset({3, 4})
    monkeypatch.setenv(TRUSTED_UIDS_ENV, "1001,bob")
    with pytest.raises(DBOSInitializationError, match=TRUSTED_UIDS_ENV):
        resolve_trusted_uids(None)
    bad: Tuple[object, ...] = ([-1], [True], ["x"], [1.5])
    for value in bad:
        with pytest.raises(DBOSInitializationError, match="agent_trusted_uids"):
            resolve_trusted_uids(value)  # type: ignore[arg-type]
