"""The connection to the agent: one Unix socket per process, shared by every
thread and event loop. Requests are multiplexed: each gets an id and a
future, a reader thread resolves the futures and hands pushes over. A link
reconnects when the agent goes away and comes back.

A caller that gives up on a request cancels its future (``Future.cancel``,
which an asyncio task cancelled while awaiting ``asyncio.wrap_future`` of it
does too): the connection then tells the agent with ``cancel_request``, so a
wait (get_result, recv, get_event, read_stream) stops there and answers
``request_cancelled`` at once instead of holding until its condition or the
connection ends. That answer, like any answer to a request whose caller has
gone, is dropped.

Before anything is sent, the connection checks who serves the socket (the
uid the kernel records for it, SO_PEERCRED): this process's own user, root,
or a user configured as trusted (``agent_trusted_uids``, env
``DBOS_AGENT_TRUSTED_UIDS``). Anyone else could read every request and send
``run`` pushes whose payloads this process unpickles.

The agent handles at most ``max_in_flight`` requests of a connection at once
(its hello reply says how many) and stops reading the connection past that.
So a request waits here while that many are unanswered: a thread blocks, a
coroutine (``request_async``) awaits. An abandoned request keeps its place
until its late answer comes, as it does in the agent; ``cancel_request``
takes none, since the agent answers it as it reads it.

What carries the frames is an ``Endpoint``: the agent's Unix socket
(``SocketEndpoint``, here) or a handle of ``libdbos.so`` (``_library``),
each giving a ``Stream`` of whole frames. Everything above (multiplexing,
the in-flight bound, cancel_request, reconnection) is written once, here,
for both."""

from __future__ import annotations

import abc
import asyncio
import collections
import concurrent.futures
import itertools
import logging
import os
import pwd
import socket
import stat
import struct
import threading
import time
from typing import Any, Callable, Deque, Dict, FrozenSet, Iterable, Iterator, List, Optional, Tuple, Union

from . import _protocol as proto
from ._error import (
    CLOSING_CODES,
    AgentErrorReply,
    DBOSAgentForkedError,
    DBOSAgentUnavailableError,
    DBOSAgentUntrustedError,
    DBOSException,
    DBOSInitializationError,
)

logger = logging.getLogger("dbos_agent")


def default_socket_path() -> str:
    """The agent's default socket, as ``dbos-agent serve`` computes it: in
    the user's runtime directory when it is theirs alone, else in a
    directory of their own under the temp directory."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _private_dir(runtime):
        return os.path.join(runtime, "dbos-agent.sock")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"dbos-agent-{os.getuid()}", "agent.sock")


def _private_dir(path: str) -> bool:
    """Whether path is a directory of this user that neither group nor
    others may write (the agent's rule for its default)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o022 == 0


def resolve_socket_path(configured: Optional[str]) -> str:
    """The socket to use: the configured one, else env DBOS_AGENT_SOCKET, else
    the agent's default."""
    return configured or os.environ.get("DBOS_AGENT_SOCKET") or default_socket_path()


#: The environment variable naming the users, besides this process's own
#: and root, whose agent this process talks to: ``"1001,1002"``.
TRUSTED_UIDS_ENV = "DBOS_AGENT_TRUSTED_UIDS"


def resolve_trusted_uids(configured: Union[None, str, Iterable[int]]) -> FrozenSet[int]:
    """The users besides this process's own and root that may serve the
    agent's socket: the configured ones (config key ``agent_trusted_uids``,
    a list of uids or a comma-separated string), else env
    ``DBOS_AGENT_TRUSTED_UIDS``, else none."""
    source = "agent_trusted_uids"
    if configured is None:
        configured = os.environ.get(TRUSTED_UIDS_ENV) or ()
        source = TRUSTED_UIDS_ENV
    items: Iterable[Any] = configured.split(",") if isinstance(configured, str) else configured
    uids = set()
    try:
        for item in items:
            if isinstance(item, str):
                item = item.strip()
                if not item:
                    continue
                uid = int(item, 10)
            elif isinstance(item, int) and not isinstance(item, bool):
                uid = item
            else:
                raise ValueError(repr(item))
            if uid < 0:
                raise ValueError(str(uid))
            uids.add(uid)
    except (TypeError, ValueError) as e:
        raise DBOSInitializationError(
            f"{source} must list user ids (non-negative integers, e.g. \"1001,1002\"): {e}"
        ) from None
    return frozenset(uids)


def _describe_uid(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


# struct ucred: pid_t, uid_t, gid_t.
_UCRED = struct.Struct("iII")


def check_peer(sock: socket.socket, path: str, trusted: FrozenSet[int]) -> None:
    """Refuse a socket served by a user this process does not trust, before
    anything is sent on it: the uid the kernel recorded for the process
    that listens (SO_PEERCRED) must be this process's, root's or a trusted
    one. Raises DBOSAgentUntrustedError."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        raise DBOSAgentUntrustedError(
            f"cannot check who serves the dbos-agent socket {path}: this platform has no SO_PEERCRED", path
        )
    try:
        pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size))
    except (OSError, struct.error) as e:
        raise DBOSAgentUntrustedError(f"cannot check who serves the dbos-agent socket {path}: {e}", path) from None
    if uid == os.getuid() or uid == 0 or uid in trusted:
        return
    raise untrusted_error(path, uid, f" (pid {pid})")


def untrusted_error(path: str, uid: int, detail: str = "") -> DBOSAgentUntrustedError:
    """The refusal of a socket served by ``uid``, whoever checked it (this
    binding, or libdbos.so in connect mode)."""
    return DBOSAgentUntrustedError(
        f"refusing the dbos-agent socket {path}: it is served by {_describe_uid(uid)}{detail}, "
        f"not by this process's user ({_describe_uid(os.getuid())}), root or a trusted user "
        f"(config agent_trusted_uids, env {TRUSTED_UIDS_ENV}); nothing was sent to it",
        path,
        uid,
    )


class Stream(abc.ABC):
    """One session's frames, both ways: what a Connection reads and writes.
    ``send`` and ``frames`` raise OSError (or a DBOSAgentUnavailableError,
    which a forked child's refusal is) when the session is lost."""

    @abc.abstractmethod
    def send(self, frame: bytes) -> None:
        """Send whole frames (each a 4-byte length and an envelope)."""

    @abc.abstractmethod
    def frames(self) -> Iterator[bytes]:
        """The envelopes received, in order, until the session ends."""

    @abc.abstractmethod
    def close(self) -> None:
        """End the session (idempotent), waking a reader blocked in ``frames``."""


class Endpoint(abc.ABC):
    """Where the agent is, and how to open a session with it."""

    #: How messages name the agent: "at /run/dbos.sock", "embedded in this
    #: process (libdbos.so)", ...
    where: str = ""
    #: Whether the endpoint runs the agent itself, on the system database
    #: the config names (libdbos.so's embedded and sidecar modes).
    runs_agent: bool = False

    @abc.abstractmethod
    def dial(self, timeout: float) -> Stream:
        """Open a session; raises DBOSAgentUnavailableError (or a subclass)."""


class _SocketStream(Stream):
    def __init__(self, sock: socket.socket):
        self._sock = sock

    def send(self, frame: bytes) -> None:
        self._sock.sendall(frame)

    def frames(self) -> Iterator[bytes]:
        f = self._sock.makefile("rb")
        try:
            while True:
                header = f.read(proto.HEADER.size)
                if len(header) < proto.HEADER.size:
                    return
                (n,) = proto.HEADER.unpack(header)
                payload = f.read(n)
                if len(payload) < n:
                    return
                yield payload
        finally:
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass


class SocketEndpoint(Endpoint):
    """The agent's Unix socket, served by a user this process trusts (see
    ``check_peer``)."""

    def __init__(self, path: str, trusted_uids: FrozenSet[int] = frozenset()):
        self.path = path
        self.trusted_uids = trusted_uids
        self.where = f"at {path}"

    def dial(self, timeout: float) -> Stream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            raise DBOSAgentUnavailableError(
                f"cannot reach the dbos-agent at {self.path}: {e.strerror or e} "
                "(is `dbos-agent serve` running? set config agent_socket or DBOS_AGENT_SOCKET)"
            ) from None
        try:
            check_peer(sock, self.path, self.trusted_uids)
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)
        return _SocketStream(sock)


PushHandler = Callable[[str, Dict[str, Any], "Connection"], None]

#: The error code of a wait this process cancelled (``request_cancelled``).
REQUEST_CANCELLED = 111


class Request(concurrent.futures.Future[Dict[str, Any]]):
    """The future of a request in flight: its reply body, or AgentErrorReply
    (an error reply) or DBOSAgentUnavailableError. Cancelling it abandons the
    request: its connection sends ``cancel_request`` for it (once, and only
    while the connection it was sent on is open)."""

    def __init__(self, conn: "Connection", rid: int, op: str):
        super().__init__()
        self.conn = conn
        self.rid = rid
        self.op = op
        self.abandoned = False  # cancel_request was sent (under conn._plock)

    def cancel(self) -> bool:
        # True also when it was cancelled already: _abandon acts once.
        if not super().cancel():
            return False
        self.conn._abandon(self)
        return True


def _complete(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_result(None)


class Connection:
    """One connection to the agent, from handshake to close."""

    _generations = itertools.count(1)

    def __init__(
        self,
        endpoint: Endpoint,
        on_push: PushHandler,
        on_lost: Callable[["Connection", BaseException], None],
    ):
        self.endpoint = endpoint
        self.generation = next(Connection._generations)
        self._on_push = on_push
        self._on_lost = on_lost
        self._stream: Optional[Stream] = None
        # Frames to send, and whether a thread is sending them (see
        # ``_write``); both under _olock, which is never held across a send.
        self._olock = threading.Lock()
        self._outbox: List[bytes] = []
        self._sending = False
        #: How many writes to the stream carried the frames sent (for tests:
        #: fewer than the frames when sends were combined).
        self.writes = 0
        # Guards the pending-request table and the counters below; notified
        # whenever either changes (see ``wait_until``).
        self._plock = threading.Condition(threading.Lock())
        self._pending: Dict[int, Request] = {}
        self._ids = itertools.count(1)
        #: ``cancel_request`` frames sent (for requests whose caller gave up).
        self.cancels_sent = 0
        #: Answers that came for abandoned requests (and were dropped), and
        #: of those the ``request_cancelled`` ones.
        self.late_answers = 0
        self.cancelled_answers = 0
        #: The latest abandoned requests as ``(id, op)`` when cancel_request
        #: went for them, and their dropped answers as ``(id, op, error code
        #: or 0)``: for debugging and tests.
        self.abandoned: Deque[Tuple[int, str]] = collections.deque(maxlen=256)
        self.dropped: Deque[Tuple[int, str, int]] = collections.deque(maxlen=256)
        self._closed = False
        self._lost_reason: Optional[BaseException] = None
        self.max_frame_size = proto.DEFAULT_MAX_FRAME_SIZE
        #: The most requests in flight the agent takes (0: it announced no
        #: bound; so until the hello reply).
        self.max_in_flight = 0
        #: How many times a request waited for a place (for tests; a change
        #: wakes ``wait_until``).
        self.waited_for_slot = 0
        self.hello_reply: Dict[str, Any] = {}
        self._reader: Optional[threading.Thread] = None
        # Coroutines waiting for a place: (their loop, a future to complete).
        self._slot_waiters: "List[Tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]" = []

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """How many requests await their answer (abandoned ones included,
        until their late answer comes)."""
        return len(self._pending)

    def pending_ops(self) -> Dict[int, str]:
        """The requests awaiting their answer: id -> op."""
        with self._plock:
            return {rid: r.op for rid, r in self._pending.items()}

    def wait_until(self, cond: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``cond()`` holds, at most ``timeout`` seconds; returns
        whether it does. ``cond`` is checked whenever a request is sent,
        answered or abandoned and when the connection closes, under the
        table's lock: it may read ``in_flight``, the counters and the logs,
        but not call ``pending_ops``. For tests and debugging."""
        with self._plock:
            return self._plock.wait_for(cond, timeout)

    def open(self, hello: Dict[str, Any], timeout: float) -> Dict[str, Any]:
        """Open the session and shake hands: the hello reply."""
        self.attach(self.endpoint.dial(timeout))
        fut = self.request(proto.OP_HELLO, hello)
        try:
            reply = fut.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise DBOSAgentUnavailableError(f"the dbos-agent {self.endpoint.where} did not answer the handshake") from None
        except BaseException:
            self.close()
            raise
        self.hello_reply = reply
        if reply.get("max_frame_size"):
            self.max_frame_size = int(reply["max_frame_size"])
        if reply.get("max_in_flight"):
            self.max_in_flight = int(reply["max_in_flight"])
        return reply

    def attach(self, stream: Stream) -> None:
        """Start reading an open session (``open`` does, before its hello)."""
        self._stream = stream
        reader = threading.Thread(target=self._read_loop, name=f"dbos-agent-reader-{self.generation}", daemon=True)
        self._reader = reader
        reader.start()

    def request(self, op: str, body: Dict[str, Any]) -> "concurrent.futures.Future[Dict[str, Any]]":
        """Send a request; the future resolves to the reply body or fails with
        AgentErrorReply (an error reply) or DBOSAgentUnavailableError.
        Cancelling the future abandons the request (see ``Request``). Blocks
        while ``max_in_flight`` requests are unanswered (see the module)."""
        fut = self._send(op, body, block=True)
        assert fut is not None
        return fut

    async def request_async(self, op: str, body: Dict[str, Any]) -> "concurrent.futures.Future[Dict[str, Any]]":
        """``request`` for a coroutine: while ``max_in_flight`` requests are
        unanswered it awaits a place, and the event loop runs on."""
        loop = asyncio.get_running_loop()
        while True:
            fut = self._send(op, body, block=False)
            if fut is not None:
                return fut
            waiter: "asyncio.Future[None]" = loop.create_future()
            with self._plock:
                if self._closed or not self._full_locked():
                    continue
                self._slot_waiters.append((loop, waiter))
                self.waited_for_slot += 1
                self._plock.notify_all()
            await waiter

    def _full_locked(self) -> bool:
        return 0 < self.max_in_flight <= len(self._pending)

    def _send(self, op: str, body: Dict[str, Any], block: bool) -> "Optional[concurrent.futures.Future[Dict[str, Any]]]":
        """Send a request, waiting for a place if ``block``; None when there
        is none and not ``block``."""
        rid = next(self._ids)  # one an unsent attempt leaves unused is skipped
        frame = proto.encode_frame(proto.KIND_REQUEST, rid, op, body)
        if len(frame) - proto.HEADER.size > self.max_frame_size:
            raise DBOSException(
                f"{op}: the message is {len(frame)} bytes, more than the agent's limit of "
                f"{self.max_frame_size}; keep large payloads in the application's own storage"
            )
        with self._plock:
            if not self._closed and self._full_locked():
                if not block:
                    return None
                # The reader thread resolves the answers that free places:
                # it must never wait for one (a push handler's request).
                if threading.current_thread() is not self._reader:
                    self.waited_for_slot += 1
                    self._plock.notify_all()
                    self._plock.wait_for(lambda: self._closed or not self._full_locked())
            fut = Request(self, rid, op)
            if self._closed:
                fut.set_exception(self._unavailable())
                return fut
            self._pending[rid] = fut
            self._plock.notify_all()
        try:
            self._write(frame)
        except (OSError, DBOSAgentUnavailableError) as e:
            self._lost(e)
        return fut

    def _write(self, frame: bytes) -> None:
        """Send a frame, combined with those other threads queue meanwhile.
        The first thread to find no send under way becomes the sender: it
        writes everything queued, in one write, until nothing is left; the
        others only queue theirs and return. Sending releases the GIL, and
        under a contended GIL each release costs a hand-off to another
        thread and another to get it back; so a thread whose frame another
        sends never gives up the GIL for it, and many frames cost one
        write. The frames go in the order they were queued (a request
        before its cancel_request). A failed write raises in the sender;
        the connection is then lost, which fails every request in flight,
        those whose frames it carried too."""
        with self._olock:
            self._outbox.append(frame)
            if self._sending:
                return
            self._sending = True
        try:
            while True:
                with self._olock:
                    frames, self._outbox = self._outbox, []
                    if not frames:
                        self._sending = False
                        return
                if self._closed or self._stream is None:
                    raise ConnectionResetError("the connection to the dbos-agent is closed")
                self.writes += 1
                self._stream.send(frames[0] if len(frames) == 1 else b"".join(frames))
        except BaseException:
            with self._olock:
                self._sending = False
                self._outbox = []  # the connection is lost: nothing more goes on it
            raise

    def _freed_locked(self) -> None:
        """Requests left the table, or the connection closed: wake whoever
        waits for a place (and for ``wait_until``)."""
        self._plock.notify_all()
        waiters, self._slot_waiters = self._slot_waiters, []
        for loop, waiter in waiters:
            try:
                loop.call_soon_threadsafe(_complete, waiter)
            except RuntimeError:
                pass  # its loop has closed

    def _abandon(self, req: Request) -> None:
        """``req``'s caller gave up on it: ask the agent to stop it. Fire and
        forget: nothing waits for the reply, which is dropped like its
        errors (e.g. unknown_op from an agent that predates cancel_request).
        The request stays in the table until its own late answer comes, to
        be dropped. Nothing is sent for a request already answered, or once
        this connection has closed (its ids mean nothing to the next one)."""
        with self._plock:
            if req.abandoned or self._closed or self._pending.get(req.rid) is not req:
                return
            req.abandoned = True
            cid = next(self._ids)
            self.cancels_sent += 1
            self.abandoned.append((req.rid, req.op))
            self._plock.notify_all()
        frame = proto.encode_frame(proto.KIND_REQUEST, cid, proto.OP_CANCEL_REQUEST, {"request_id": req.rid})
        if self._closed or self._stream is None:
            return
        try:
            self._write(frame)
        except (OSError, DBOSAgentUnavailableError) as e:
            self._lost(e)

    def _unavailable(self) -> DBOSAgentUnavailableError:
        if isinstance(self._lost_reason, DBOSAgentForkedError):
            # The caller is a child after fork(): say that, not "closed".
            return DBOSAgentForkedError(self._lost_reason.detail)
        why = f": {self._lost_reason}" if self._lost_reason else ""
        return DBOSAgentUnavailableError(f"the connection to the dbos-agent {self.endpoint.where} is closed{why}")

    def _read_loop(self) -> None:
        assert self._stream is not None
        reason: BaseException = EOFError("the agent closed the connection")
        try:
            for payload in self._stream.frames():
                env = proto.decode_envelope(payload)
                kind = env["kind"]
                if kind == proto.KIND_RESPONSE:
                    self._resolve(env)
                elif kind == proto.KIND_PUSH:
                    try:
                        self._on_push(env["op"], env.get("body") or {}, self)
                    except Exception:
                        logger.exception("dbos-agent: handling a %s push failed", env.get("op"))
        except (OSError, ValueError, proto.MalformedFrame, DBOSAgentUnavailableError) as e:
            reason = e
        finally:
            self._lost(reason)

    def _resolve(self, env: Dict[str, Any]) -> None:
        rid = env["id"]
        err = env.get("error")
        with self._plock:
            fut = self._pending.pop(rid, None)
            if fut is not None:
                self._freed_locked()
        if fut is None:
            # No such request: an error about the connection itself (id 0),
            # or the reply to a cancel_request, which nothing waits for.
            if rid == 0 and err:
                reply = AgentErrorReply(
                    int(err.get("code", 0)), err.get("name", ""), err.get("message", ""), err.get("data")
                )
                if reply.code in CLOSING_CODES:
                    self._lost_reason = reply  # the connection closes next
                else:
                    logger.warning("dbos-agent: an error about the connection, which stays open: %s", reply)
            return
        # A caller that stopped waiting (it cancelled the future, as does a
        # cancelled asyncio task) has gone: its late answer, request_cancelled
        # or what a request that completed before its cancel_request arrived
        # answers, is dropped.
        try:
            if err:
                fut.set_exception(
                    AgentErrorReply(int(err.get("code", 0)), err.get("name", ""), err.get("message", ""), err.get("data"))
                )
            else:
                body = env.get("body")
                fut.set_result(body if isinstance(body, dict) else {})
        except concurrent.futures.InvalidStateError:
            code = int(err.get("code", 0)) if err else 0
            with self._plock:
                self.late_answers += 1
                if code == REQUEST_CANCELLED:
                    self.cancelled_answers += 1
                self.dropped.append((rid, fut.op, code))
                self._plock.notify_all()

    def _lost(self, reason: BaseException) -> None:
        with self._plock:
            if self._closed:
                return
            self._closed = True
            if self._lost_reason is None:
                self._lost_reason = reason
            pending = list(self._pending.values())
            self._pending.clear()
            self._freed_locked()
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:
                logger.debug("dbos-agent: closing the session failed", exc_info=True)
        err = self._unavailable()
        for fut in pending:
            try:
                fut.set_exception(err)
            except concurrent.futures.InvalidStateError:
                pass  # cancelled by its caller
        try:
            self._on_lost(self, reason)
        except Exception:
            logger.exception("dbos-agent: connection-lost handler failed")

    def close(self) -> None:
        self._lost(ConnectionAbortedError("closed by this process"))


# How long a call waits for a lost agent to come back before it fails.
DEFAULT_RECONNECT_WAIT = 30.0


class AgentLink:
    """The process's link to the agent: the current connection, and a new one
    (with the same handshake) when it drops, until ``close``.

    Calls made while the agent is away wait up to ``reconnect_wait`` seconds
    for it to come back before failing with DBOSAgentUnavailableError. A
    session refused because this process is a child forked after it was
    opened (DBOSAgentForkedError) is not reopened: every call raises that."""

    def __init__(
        self,
        endpoint: Endpoint,
        hello: Callable[[], Dict[str, Any]],
        on_push: PushHandler,
        on_connected: Callable[[Connection, Dict[str, Any]], None],
        on_lost: Callable[[Connection, BaseException], None],
        *,
        reconnect: bool = True,
        connect_timeout: float = 10.0,
        reconnect_wait: float = DEFAULT_RECONNECT_WAIT,
    ):
        self.endpoint = endpoint
        self._hello = hello
        self._on_push = on_push
        self._on_connected = on_connected
        self._on_lost_cb = on_lost
        self._reconnect = reconnect
        self._connect_timeout = connect_timeout
        self._reconnect_wait = reconnect_wait
        self._cond = threading.Condition()
        self._conn: Optional[Connection] = None
        self._closed = False
        self._reconnecting = False
        # Why the latest reconnection attempt failed, for the error of a call
        # that gives up waiting.
        self._last_failure: Optional[BaseException] = None
        # Set when a session was refused to this process as a forked child.
        self._forked: Optional[DBOSAgentForkedError] = None
        # defer_start: the first connection is made by the first call
        # that needs one, in that caller, one caller at a time.
        self._deferred = False
        self._start_lock = threading.Lock()

    def _connect(self) -> Tuple[Connection, Dict[str, Any]]:
        conn = Connection(self.endpoint, self._on_push, self._lost)
        return conn, conn.open(self._hello(), self._connect_timeout)

    def start(self) -> Dict[str, Any]:
        """Connect now: the handshake's reply."""
        return self._start_now()

    def defer_start(self) -> None:
        """Connect at the first call that needs the agent, in that caller
        (a lazy DBOSClient): until then nothing is attempted, and each call
        finding the agent unreachable raises, as the next one tries again."""
        self._deferred = True

    def _start_deferred(self) -> None:
        with self._start_lock:
            if self._deferred and not self._closed:
                self._start_now()
                self._deferred = False

    def _start_now(self) -> Dict[str, Any]:
        try:
            conn, reply = self._connect()
        except AgentErrorReply as e:
            raise DBOSInitializationError(
                f"the dbos-agent {self.endpoint.where} refused the handshake: {e.name or e.code}: {e.message}"
            ) from None
        with self._cond:
            self._conn = conn
            self._cond.notify_all()
        self._on_connected(conn, reply)
        return reply

    @property
    def closed(self) -> bool:
        return self._closed

    def connection(self, wait: Optional[float] = None) -> Connection:
        """The live connection, waiting for a reconnection if needed."""
        if self._deferred:
            self._start_deferred()
        deadline = time.monotonic() + (self._reconnect_wait if wait is None else wait)
        with self._cond:
            while True:
                if self._forked is not None:
                    raise DBOSAgentForkedError(self._forked.detail)
                if self._closed:
                    raise DBOSAgentUnavailableError("the connection to the dbos-agent was closed (DBOS.destroy)")
                conn = self._conn
                if conn is not None and not conn.closed:
                    return conn
                if not self._reconnect:
                    raise DBOSAgentUnavailableError(f"the connection to the dbos-agent {self.endpoint.where} is closed")
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f" (last attempt: {self._last_failure})" if self._last_failure is not None else ""
                    raise DBOSAgentUnavailableError(
                        f"the dbos-agent {self.endpoint.where} has been unreachable for {self._reconnect_wait:g}s{why}"
                    )
                self._cond.wait(left)

    def current(self) -> Optional[Connection]:
        """The live connection, or None while there is none (never waits)."""
        conn = self._conn
        return conn if conn is not None and not conn.closed else None

    async def connection_async(self) -> Connection:
        conn = self.current()
        if conn is None:
            # Waiting for a reconnection blocks: keep it off the event loop.
            conn = await asyncio.get_running_loop().run_in_executor(None, self.connection)
        return conn

    def request(self, op: str, body: Dict[str, Any]) -> "concurrent.futures.Future[Dict[str, Any]]":
        return self.connection().request(op, body)

    def call(self, op: str, body: Dict[str, Any], timeout: Optional[float] = None) -> Dict[str, Any]:
        fut = self.request(op, body)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()  # given up: the agent stops it, its answer is dropped
            raise

    async def call_async(self, op: str, body: Dict[str, Any]) -> Dict[str, Any]:
        conn = await self.connection_async()
        return await asyncio.wrap_future(await conn.request_async(op, body))

    def _lost(self, conn: Connection, reason: BaseException) -> None:
        with self._cond:
            current = conn is self._conn
            if current:
                self._conn = None
            if isinstance(reason, DBOSAgentForkedError):
                # A child after fork(): no session of this process's can
                # ever be opened here; reconnecting would only fail again.
                self._forked = reason
                self._cond.notify_all()
            start = current and self._forked is None and self._reconnect and not self._closed and not self._reconnecting
            if start:
                self._reconnecting = True
        self._on_lost_cb(conn, reason)
        if start:
            logger.warning("dbos-agent: connection to the agent %s lost (%s); reconnecting", self.endpoint.where, reason)
            threading.Thread(target=self._reconnect_loop, name="dbos-agent-reconnect", daemon=True).start()

    def _reconnect_loop(self) -> None:
        delay = 0.05
        while True:
            with self._cond:
                live = self._conn is not None and not self._conn.closed
                if self._closed or live:
                    # Decided under the lock, so a drop after this starts a
                    # new loop rather than being missed.
                    self._reconnecting = False
                    return
            try:
                conn, reply = self._connect()
            except Exception as e:
                # An impostor in the agent's place is worth a warning (once
                # per impostor); the agent being away is the expected case.
                if isinstance(e, DBOSAgentUntrustedError) and str(e) != str(self._last_failure):
                    logger.warning("dbos-agent: reconnect refused: %s", e)
                else:
                    logger.debug("dbos-agent: reconnect failed: %s", e)
                self._last_failure = e
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            with self._cond:
                stale = self._closed
                if not stale:
                    self._last_failure = None
                    self._conn = conn
                    self._cond.notify_all()
            if stale:
                conn.close()
                continue
            logger.info("dbos-agent: reconnected to the agent %s", self.endpoint.where)
            self._on_connected(conn, reply)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            conn = self._conn
            self._conn = None
            self._cond.notify_all()
        if conn is not None:
            conn.close()
