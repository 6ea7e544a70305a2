"""cancel_request: a wait the binding gives up on (wait_first's losers, the
waits of a cancelled run, a cancelled asyncio task, a binding-side timeout)
is stopped on the real agent, which answers it request_cancelled at once; the
binding drops that answer, and the connection's pending-request table
empties. Observed through the transport's counters and logs
(``Connection.cancels_sent``, ``abandoned``, ``dropped``), waited for with
``Connection.wait_until``, which every answer wakes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import socket
import tempfile
import threading
from typing import Any, Callable, Dict, List, Optional

import pytest

from dbos_agent import DBOS, DBOSAwaitedWorkflowCancelledError, DBOSClient, SetWorkflowID
from dbos_agent import _protocol as proto
from dbos_agent._transport import REQUEST_CANCELLED, Connection, Request

from conftest import AgentEnv, agent_endpoint, gate, new_id
from test_run_step_wait_first import finish, start_waiters

WAIT = 30.0
NEVER = 3600.0  # a timeout no test waits out: these waits end only when cancelled


@DBOS.workflow()
def awaits(target_id: str) -> Any:
    return DBOS.retrieve_workflow(target_id, existing_workflow=False).get_result()


@DBOS.workflow()
def receives(topic: str) -> Any:
    return DBOS.recv(topic, timeout_seconds=NEVER)


@DBOS.workflow()
async def gives_up_on_recv(key: str) -> str:
    """Waits in recv until the test opens ``key``'s gate, then gives the
    wait up (cancels the task awaiting it) and ends."""
    waiting = asyncio.ensure_future(DBOS.recv_async("nothing-comes", timeout_seconds=NEVER))
    await asyncio.get_running_loop().run_in_executor(None, gate(key).wait, WAIT)
    waiting.cancel()
    try:
        await waiting
    except asyncio.CancelledError:
        return "gave up"
    return "received"


def release(*handles: Any) -> None:
    """Ends workflows of start_waiters (which wait for this, or 30 s: the
    tests' losers are released only when the test is done)."""
    for h in handles:
        finish(h)
    for h in handles:
        h.get_result()


def dbos_connection() -> Connection:
    from dbos_agent import _registry as _dbos

    inst = _dbos._instance
    assert inst is not None and inst._engine.link is not None
    conn = inst._engine.link.current()
    assert conn is not None
    return conn


seen_before: "set[int]" = set()


@pytest.fixture(autouse=True)
def _note_pending(dbos: Any) -> None:
    """The requests in flight on DBOS's connection when a test starts (the
    waits of workflows earlier tests left), which the test's own are not."""
    seen_before.clear()
    seen_before.update(dbos_connection().pending_ops())


def pending_of(conn: Connection, pred: Callable[[Request], bool]) -> List[int]:
    """The ids of pending requests matching ``pred``; only inside a
    ``wait_until`` condition (it runs under the table's lock)."""
    return [rid for rid, r in conn._pending.items() if pred(r)]


def wait_for_pending(conn: Connection, pred: Callable[[Request], bool], n: int = 1) -> List[int]:
    """Until ``n`` requests matching ``pred`` are in flight; their ids."""
    found: List[int] = []

    def cond() -> bool:
        found[:] = pending_of(conn, pred)
        return len(found) >= n

    assert conn.wait_until(cond, WAIT), f"{n} such requests never in flight: {conn.pending_ops()}"
    return list(found)


def wait_cancelled(conn: Connection, rids: List[int], codes: "tuple[int, ...]" = (REQUEST_CANCELLED,)) -> Dict[int, int]:
    """Until each of ``rids`` was abandoned (cancel_request sent), answered
    late with one of ``codes`` (dropped) and left the table; the codes."""
    want = set(rids)

    def cond() -> bool:
        sent = {rid for rid, _ in conn.abandoned} & want
        dropped = {rid for rid, _, code in conn.dropped if rid in want and code in codes}
        return sent == want and dropped == want and not any(rid in conn._pending for rid in want)

    ok = conn.wait_until(cond, WAIT)
    assert ok, (
        f"not all of {sorted(want)} cancelled: abandoned {list(conn.abandoned)[-5:]}, "
        f"dropped {list(conn.dropped)[-5:]}, pending {conn.pending_ops()}"
    )
    return {rid: code for rid, _, code in conn.dropped if rid in want}


# ---------------------------------------------------------------------------
# wait_first's losers


def test_client_wait_first_cancels_the_losers_waits(dbos: Any, agent_env: AgentEnv) -> None:
    a, b, c = start_waiters(3)
    with DBOSClient(agent_socket=agent_env.socket) as client:
        conn = client._link.current()
        assert conn is not None
        handles = [client.retrieve_workflow(h.workflow_id) for h in (a, b, c)]
        got: List[Any] = []
        waiting = threading.Thread(target=lambda: got.append(client.wait_first(handles)))
        waiting.start()
        wait_for_pending(conn, lambda r: r.op == proto.OP_GET_RESULT, 3)
        release(b)
        waiting.join(WAIT)
        assert got == [handles[1]]
        # a's and c's workflows have not ended, yet their waits are gone
        # from the agent: it answered both request_cancelled at once, and
        # nothing is left in flight on the client's connection.
        assert conn.wait_until(lambda: conn.in_flight == 0 and conn.cancelled_answers == 2, WAIT), (
            conn.pending_ops(), list(conn.dropped),
        )
        assert conn.cancels_sent == 2 and conn.late_answers == 2
        assert sorted(op for _, op in conn.abandoned) == [proto.OP_GET_RESULT] * 2
        assert sorted(code for _, _, code in conn.dropped) == [REQUEST_CANCELLED] * 2
        # The connection goes on serving, the agent's answers in step.
        assert client.retrieve_workflow(b.workflow_id).get_result() == b.workflow_id
        assert conn.in_flight == 0 and client._link.current() is conn
    release(a, c)


def test_wait_first_async_cancels_the_losers_waits(dbos: Any) -> None:
    a, b, c = start_waiters(3)
    conn = dbos_connection()

    async def main() -> Any:
        handles = [await DBOS.retrieve_workflow_async(h.workflow_id) for h in (a, b, c)]
        waiting = asyncio.ensure_future(DBOS.wait_first_async(handles))
        loop = asyncio.get_running_loop()
        rids = await loop.run_in_executor(
            None, wait_for_pending, conn, lambda r: r.op == proto.OP_GET_RESULT and r.rid not in seen_before, 3
        )
        await loop.run_in_executor(None, release, c)
        return handles.index(await waiting), rids

    first, rids = asyncio.run(main())
    assert first == 2 and len(rids) == 3
    # The winner's wait was answered; the two losers' were given up (before
    # wait_first_async returned) and stopped on the agent.
    losers = [rid for rid, _ in list(conn.abandoned) if rid in rids]
    assert len(losers) == 2
    assert wait_cancelled(conn, losers) == {rid: REQUEST_CANCELLED for rid in losers}
    assert not set(rids) & set(conn.pending_ops())
    release(a, b)


# ---------------------------------------------------------------------------
# The waits of a cancelled run


def test_a_cancelled_workflow_waiting_in_get_result_cancels_its_wait(dbos: Any) -> None:
    (target,) = start_waiters(1)
    conn = dbos_connection()
    wid = new_id("awaits")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(awaits, target.workflow_id)
    # The run waits for a workflow that does not end.
    (rid,) = wait_for_pending(conn, lambda r: r.op == proto.OP_GET_RESULT and r.rid not in seen_before)
    DBOS.cancel_workflow(wid)
    # The cancel push stops the run, which gives the wait up: the agent
    # stops it (the run's getting a result is not tied to the run there).
    assert wait_cancelled(conn, [rid]) == {rid: REQUEST_CANCELLED}
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        handle.get_result()
    assert "DBOS.getResult" not in [s["function_name"] for s in DBOS.list_workflow_steps(wid)]
    release(target)


def test_a_cancelled_workflow_waiting_in_recv_stops_its_wait(dbos: Any) -> None:
    conn = dbos_connection()
    wid = new_id("receives")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(receives, "nothing-comes")
    (rid,) = wait_for_pending(conn, lambda r: r.op == proto.OP_RECV and r.rid not in seen_before)
    DBOS.cancel_workflow(wid)
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        handle.get_result()
    # The run stops at the cancel push and gives the recv up: the binding
    # sends cancel_request, and the agent answers request_cancelled. But the
    # agent also ends, by itself, the recv of a run it cancels (it answers
    # workflow_cancelled), so which comes is a race: that answer may be sent
    # before the cancel_request arrives (then it is the one dropped), or
    # even reach the binding before the push has stopped the run (which
    # then stops on it, leaving nothing to cancel). In every case the wait
    # is over on both sides and its answer is used or dropped once.
    assert conn.wait_until(lambda: rid not in conn._pending, WAIT)
    if rid in {r for r, _ in list(conn.abandoned)}:
        codes = wait_cancelled(conn, [rid], (REQUEST_CANCELLED, 204))
        assert codes[rid] in (REQUEST_CANCELLED, 204)
    assert DBOS.get_workflow_status(wid).status == "CANCELLED"  # type: ignore[union-attr]


def test_a_recv_its_workflow_gives_up_is_cancelled(dbos: Any) -> None:
    conn = dbos_connection()
    key, wid = new_id("gives-up"), new_id("gives-up-wf")
    with SetWorkflowID(wid):
        handle = DBOS.start_workflow(gives_up_on_recv, key)
    (rid,) = wait_for_pending(conn, lambda r: r.op == proto.OP_RECV and r.rid not in seen_before)
    gate(key).set()
    # The run goes on (its agent-side wait is not tied to it ending): only
    # cancel_request stops the recv, and it answers request_cancelled.
    assert handle.get_result() == "gave up"
    assert wait_cancelled(conn, [rid]) == {rid: REQUEST_CANCELLED}


# ---------------------------------------------------------------------------
# A cancelled task, a binding-side timeout


def test_a_task_cancelled_while_awaiting_get_event_cancels_it(dbos: Any) -> None:
    (target,) = start_waiters(1)
    conn = dbos_connection()

    async def main() -> int:
        task = asyncio.ensure_future(DBOS.get_event_async(target.workflow_id, "never-set", NEVER))
        loop = asyncio.get_running_loop()
        (rid,) = await loop.run_in_executor(
            None, wait_for_pending, conn, lambda r: r.op == proto.OP_GET_EVENT and r.rid not in seen_before
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return rid

    rid = asyncio.run(main())
    assert wait_cancelled(conn, [rid]) == {rid: REQUEST_CANCELLED}
    release(target)


def test_a_binding_side_timeout_cancels_its_request(dbos: Any, agent_env: AgentEnv) -> None:
    (target,) = start_waiters(1)
    with DBOSClient(agent_socket=agent_env.socket) as client:
        conn = client._link.current()
        assert conn is not None
        with pytest.raises(concurrent.futures.TimeoutError):
            client._link.call(proto.OP_GET_RESULT, {"workflow_id": target.workflow_id}, timeout=0.2)
        (rid,) = [r for r, _ in list(conn.abandoned)]
        assert wait_cancelled(conn, [rid]) == {rid: REQUEST_CANCELLED}
        assert conn.in_flight == 0
    release(target)


# ---------------------------------------------------------------------------
# The transport alone, against a fake agent


def _read_frame(sock: socket.socket) -> Dict[str, Any]:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "closed"
            buf += chunk
        return buf

    (n,) = proto.HEADER.unpack(exactly(proto.HEADER.size))
    return proto.decode_envelope(exactly(n))


def _no_frame(sock: socket.socket) -> Optional[bytes]:
    sock.setblocking(False)
    try:
        return sock.recv(1)
    except BlockingIOError:
        return None
    finally:
        sock.setblocking(True)


def test_cancel_request_is_sent_once_and_never_on_a_closed_connection() -> None:
    # The fake agent listens where a real one would, so the connection
    # reaches it through the transport of this run (the socket, or
    # libdbos.so in connect mode).
    path = tempfile.mkdtemp(prefix="dbf") + "/fake.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(30)
    conn = Connection(agent_endpoint(path), on_push=lambda *a: None, on_lost=lambda *a: None)
    conn.attach(conn.endpoint.dial(30))
    agent: Optional[socket.socket] = None
    try:
        fut = conn.request(proto.OP_RECV, {"topic": "t"})
        agent, _ = srv.accept()
        agent.settimeout(30)
        sent = _read_frame(agent)
        assert sent["op"] == proto.OP_RECV
        assert fut.cancel() and fut.cancel()  # twice: one cancel_request
        cancel = _read_frame(agent)
        assert cancel["kind"] == proto.KIND_REQUEST and cancel["op"] == proto.OP_CANCEL_REQUEST
        assert cancel["body"] == {"request_id": sent["id"]}
        assert _no_frame(agent) is None
        assert conn.cancels_sent == 1 and conn.in_flight == 1  # until its late answer
        # Its reply and the late request_cancelled are dropped quietly, as
        # is an error from an agent that predates cancel_request.
        conn._resolve({"kind": proto.KIND_RESPONSE, "id": cancel["id"], "error": {"code": 103, "name": "unknown_op"}})
        conn._resolve({"kind": proto.KIND_RESPONSE, "id": sent["id"], "error": {"code": 111, "name": "request_cancelled"}})
        assert conn.in_flight == 0 and conn.late_answers == 1 and conn.cancelled_answers == 1
        assert list(conn.dropped) == [(sent["id"], proto.OP_RECV, REQUEST_CANCELLED)]
        # An answered request is not cancelled.
        done = conn.request(proto.OP_PING, {})
        ping = _read_frame(agent)
        conn._resolve({"kind": proto.KIND_RESPONSE, "id": ping["id"], "body": {}})
        assert done.result() == {} and not done.cancel()
        # A request still unanswered when the connection went: nothing is
        # sent for it (its id means nothing to the next connection).
        late = Request(conn, 10_000, proto.OP_GET_RESULT)
        conn._pending[late.rid] = late
        conn._closed = True
        assert late.cancel()
        assert conn.cancels_sent == 1 and _no_frame(agent) is None
    finally:
        conn.close()
        if agent is not None:
            agent.close()
        srv.close()
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
