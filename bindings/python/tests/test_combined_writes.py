"""Requests of many threads share writes: while one thread sends, the frames
others queue go with its next write, in the order they were queued, and
those threads do not wait for the send (``Connection._write``). Over the
real agent's socket, with the first write held until the test lets it go."""

from __future__ import annotations

import threading
from typing import Any, Dict, List

from dbos_agent import _protocol as proto
from dbos_agent._transport import Connection, Stream

from conftest import AgentEnv, agent_endpoint

WAIT = 30.0


class _HeldStream(Stream):
    """The agent's stream, whose sends are counted and whose first send
    after ``hold`` waits for ``release``."""

    def __init__(self, inner: Stream):
        self.inner = inner
        self.sent: List[bytes] = []
        self.holding = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()

    def send(self, frame: bytes) -> None:
        if self.holding.is_set() and not self.held.is_set():
            self.held.set()
            assert self.release.wait(WAIT), "the test never released the held send"
        self.sent.append(frame)
        self.inner.send(frame)

    def frames(self):  # type: ignore[no-untyped-def]
        return self.inner.frames()

    def close(self) -> None:
        self.release.set()
        self.inner.close()


def _frame_ids(data: bytes) -> List[int]:
    ids = []
    while data:
        (n,) = proto.HEADER.unpack(data[: proto.HEADER.size])
        ids.append(proto.decode_envelope(data[proto.HEADER.size : proto.HEADER.size + n])["id"])
        data = data[proto.HEADER.size + n :]
    return ids


def test_frames_queued_during_a_send_share_the_next_write_in_order(agent_env: AgentEnv) -> None:
    stream = _HeldStream(agent_endpoint(agent_env.socket).dial(WAIT))
    conn = Connection(agent_endpoint(agent_env.socket), on_push=lambda *a: None, on_lost=lambda *a: None)
    conn.attach(stream)
    hello = {"min_version": 1, "max_version": 1, "role": proto.ROLE_CLIENT, "app_name": "writes"}
    conn.request(proto.OP_HELLO, hello).result(WAIT)
    held: Dict[str, Any] = {}
    try:
        stream.holding.set()
        first = threading.Thread(target=lambda: held.setdefault("first", conn.request(proto.OP_PING, {})))
        first.start()
        assert stream.held.wait(WAIT), "the first ping's write began"
        writes_before = conn.writes

        # While that write is held, other threads' requests are queued and
        # they return at once, each with its future.
        later = []
        for _ in range(5):
            t = threading.Thread(target=lambda: later.append(conn.request(proto.OP_PING, {})))
            t.start()
            t.join(WAIT)
            assert not t.is_alive(), "a thread whose frame another sends does not wait for the send"
        assert len(later) == 5
        assert not any(f.done() for f in later), "nothing is answered before it is sent"

        stream.release.set()
        first.join(WAIT)
        for f in [held["first"], *later]:
            assert f.result(WAIT) == {}
        assert conn.writes == writes_before + 1, "the five queued pings went in one write after the held one"
        assert _frame_ids(stream.sent[-1]) == sorted(f.rid for f in later), "in the order they were queued"
    finally:
        conn.close()
