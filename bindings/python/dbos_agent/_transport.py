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
gone, is dropped."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import logging
import os
import socket
import threading
import time
from typing import Any, Callable, Deque, Dict, Optional, Tuple

from . import _protocol as proto
from ._error import CLOSING_CODES, AgentErrorReply, DBOSAgentUnavailableError, DBOSException, DBOSInitializationError

logger = logging.getLogger("dbos_agent")


def default_socket_path() -> str:
    """The agent's default socket, as ``dbos-agent serve`` computes it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "dbos-agent.sock")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"dbos-agent-{os.getuid()}", "agent.sock")


def resolve_socket_path(configured: Optional[str]) -> str:
    """The socket to use: the configured one, else env DBOS_AGENT_SOCKET, else
    the agent's default."""
    return configured or os.environ.get("DBOS_AGENT_SOCKET") or default_socket_path()


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


class Connection:
    """One connection to the agent, from handshake to close."""

    _generations = itertools.count(1)

    def __init__(self, path: str, on_push: PushHandler, on_lost: Callable[["Connection", BaseException], None]):
        self.path = path
        self.generation = next(Connection._generations)
        self._on_push = on_push
        self._on_lost = on_lost
        self._sock: Optional[socket.socket] = None
        self._wlock = threading.Lock()
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
        self.hello_reply: Dict[str, Any] = {}

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
        sock.settimeout(None)
        self._sock = sock
        reader = threading.Thread(target=self._read_loop, name=f"dbos-agent-reader-{self.generation}", daemon=True)
        reader.start()
        fut = self.request(proto.OP_HELLO, hello)
        try:
            reply = fut.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise DBOSAgentUnavailableError(f"the dbos-agent at {self.path} did not answer the handshake") from None
        except BaseException:
            self.close()
            raise
        self.hello_reply = reply
        if reply.get("max_frame_size"):
            self.max_frame_size = int(reply["max_frame_size"])
        return reply

    def request(self, op: str, body: Dict[str, Any]) -> "concurrent.futures.Future[Dict[str, Any]]":
        """Send a request; the future resolves to the reply body or fails with
        AgentErrorReply (an error reply) or DBOSAgentUnavailableError.
        Cancelling the future abandons the request (see ``Request``)."""
        rid = next(self._ids)
        fut = Request(self, rid, op)
        frame = proto.encode_frame(proto.KIND_REQUEST, rid, op, body)
        if len(frame) - proto.HEADER.size > self.max_frame_size:
            raise DBOSException(
                f"{op}: the message is {len(frame)} bytes, more than the agent's limit of "
                f"{self.max_frame_size}; keep large payloads in the application's own storage"
            )
        with self._plock:
            if self._closed:
                fut.set_exception(self._unavailable())
                return fut
            self._pending[rid] = fut
            self._plock.notify_all()
        try:
            with self._wlock:
                assert self._sock is not None
                self._sock.sendall(frame)
        except OSError as e:
            self._lost(e)
        return fut

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
        try:
            with self._wlock:
                if self._closed or self._sock is None:
                    return
                self._sock.sendall(frame)
        except OSError as e:
            self._lost(e)

    def _unavailable(self) -> DBOSAgentUnavailableError:
        why = f": {self._lost_reason}" if self._lost_reason else ""
        return DBOSAgentUnavailableError(f"the connection to the dbos-agent at {self.path} is closed{why}")

    def _read_loop(self) -> None:
        assert self._sock is not None
        f = self._sock.makefile("rb")
        reason: BaseException = EOFError("the agent closed the connection")
        try:
            while True:
                header = f.read(proto.HEADER.size)
                if len(header) < proto.HEADER.size:
                    break
                (n,) = proto.HEADER.unpack(header)
                payload = f.read(n)
                if len(payload) < n:
                    break
                env = proto.decode_envelope(payload)
                kind = env["kind"]
                if kind == proto.KIND_RESPONSE:
                    self._resolve(env)
                elif kind == proto.KIND_PUSH:
                    try:
                        self._on_push(env["op"], env.get("body") or {}, self)
                    except Exception:
                        logger.exception("dbos-agent: handling a %s push failed", env.get("op"))
        except (OSError, ValueError, proto.MalformedFrame) as e:
            reason = e
        finally:
            try:
                f.close()
            except OSError:
                pass
            self._lost(reason)

    def _resolve(self, env: Dict[str, Any]) -> None:
        rid = env["id"]
        err = env.get("error")
        with self._plock:
            fut = self._pending.pop(rid, None)
            if fut is not None:
                self._plock.notify_all()
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
            self._plock.notify_all()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                self._sock.close()
            except OSError:
                pass
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


class AgentLink:
    """The process's link to the agent: the current connection, and a new one
    (with the same handshake) when it drops, until ``close``.

    Calls made while the agent is away wait up to ``reconnect_wait`` seconds
    for it to come back before failing with DBOSAgentUnavailableError."""

    def __init__(
        self,
        path: str,
        hello: Callable[[], Dict[str, Any]],
        on_push: PushHandler,
        on_connected: Callable[[Connection, Dict[str, Any]], None],
        on_lost: Callable[[Connection, BaseException], None],
        *,
        reconnect: bool = True,
        connect_timeout: float = 10.0,
        reconnect_wait: float = 30.0,
    ):
        self.path = path
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

    def start(self) -> Dict[str, Any]:
        conn = Connection(self.path, self._on_push, self._lost)
        try:
            reply = conn.open(self._hello(), self._connect_timeout)
        except AgentErrorReply as e:
            raise DBOSInitializationError(
                f"the dbos-agent at {self.path} refused the handshake: {e.name or e.code}: {e.message}"
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
        deadline = time.monotonic() + (self._reconnect_wait if wait is None else wait)
        with self._cond:
            while True:
                if self._closed:
                    raise DBOSAgentUnavailableError("the connection to the dbos-agent was closed (DBOS.destroy)")
                conn = self._conn
                if conn is not None and not conn.closed:
                    return conn
                if not self._reconnect:
                    raise DBOSAgentUnavailableError(f"the connection to the dbos-agent at {self.path} is closed")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DBOSAgentUnavailableError(
                        f"the dbos-agent at {self.path} has been unreachable for {self._reconnect_wait:g}s"
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
        return await asyncio.wrap_future(conn.request(op, body))

    def _lost(self, conn: Connection, reason: BaseException) -> None:
        with self._cond:
            current = conn is self._conn
            if current:
                self._conn = None
            start = current and self._reconnect and not self._closed and not self._reconnecting
            if start:
                self._reconnecting = True
        self._on_lost_cb(conn, reason)
        if start:
            logger.warning("dbos-agent: connection to %s lost (%s); reconnecting", self.path, reason)
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
            conn = Connection(self.path, self._on_push, self._lost)
            try:
                reply = conn.open(self._hello(), self._connect_timeout)
            except Exception as e:
                logger.debug("dbos-agent: reconnect failed: %s", e)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            with self._cond:
                stale = self._closed
                if not stale:
                    self._conn = conn
                    self._cond.notify_all()
            if stale:
                conn.close()
                continue
            logger.info("dbos-agent: reconnected to %s", self.path)
            self._on_connected(conn, reply)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            conn = self._conn
            self._conn = None
            self._cond.notify_all()
        if conn is not None:
            conn.close()
