"""The agent's bound on requests in flight (``max_in_flight`` of its hello
reply, here ``serve --max-in-flight 4``): the binding never has more
unanswered on a connection. A thread past the bound blocks and a coroutine
awaits, with its event loop running on, until an answer frees a place.
Waits that end only when the test says so (get_result of a workflow that
does not exist yet) hold the places; another connection ends them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Dict, Iterator, List

import pytest

from dbos_agent import _protocol as proto
from dbos_agent._transport import Connection

from conftest import AgentEnv, agent_endpoint, new_id

BOUND = 4
WAIT = 30.0


@pytest.fixture(scope="module")
def bounded_env(agent_binary: str) -> Iterator[AgentEnv]:
    env = AgentEnv(agent_binary, "in_flight", extra=["--max-in-flight", str(BOUND)])
    try:
        yield env
    finally:
        env.close()


def _connect(env: AgentEnv) -> Connection:
    conn = Connection(agent_endpoint(env.socket), on_push=lambda *a: None, on_lost=lambda *a: None)
    conn.open({"min_version": 1, "max_version": 1, "role": proto.ROLE_CLIENT, "app_name": "bounds"}, WAIT)
    return conn


def _wait_for(conn: Connection, workflow_id: str) -> "concurrent.futures.Future[Dict[str, Any]]":
    return conn.request(proto.OP_GET_RESULT, {"workflow_id": workflow_id, "wait_for_creation": True})


def _end(other: Connection, workflow_id: str) -> None:
    """Ends a wait for ``workflow_id``: the workflow is created, then cancelled."""
    other.request(
        proto.OP_START_WORKFLOW,
        {"workflow_id": workflow_id, "name": "never_runs", "queue_name": "no_worker", "serialization": "portable_json"},
    ).result(WAIT)
    other.request(proto.OP_CANCEL, {"workflow_id": workflow_id}).result(WAIT)


def _answered(fut: "concurrent.futures.Future[Dict[str, Any]]") -> None:
    fut.exception(WAIT)  # a reply, whichever: the wait is over


def test_a_thread_past_the_bound_blocks_until_an_answer(bounded_env: AgentEnv) -> None:
    conn, other = _connect(bounded_env), _connect(bounded_env)
    try:
        assert conn.max_in_flight == BOUND
        ids = [new_id("held") for _ in range(BOUND)]
        waits = [_wait_for(conn, wid) for wid in ids]
        assert conn.in_flight == BOUND

        past: "concurrent.futures.Future[Dict[str, Any]]" = concurrent.futures.Future()
        threading.Thread(target=lambda: past.set_result(conn.request(proto.OP_PING, {}).result(WAIT)), daemon=True).start()
        assert conn.wait_until(lambda: conn.waited_for_slot == 1, WAIT)
        assert not past.done() and conn.in_flight == BOUND

        _end(other, ids[0])
        _answered(waits[0])
        assert past.result(WAIT) == {}
        for wid, w in zip(ids[1:], waits[1:]):
            _end(other, wid)
            _answered(w)
        assert conn.wait_until(lambda: conn.in_flight == 0, WAIT)
    finally:
        conn.close()
        other.close()


def test_a_coroutine_past_the_bound_awaits_and_the_loop_runs_on(bounded_env: AgentEnv) -> None:
    conn, other = _connect(bounded_env), _connect(bounded_env)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        ids = [new_id("held") for _ in range(BOUND)]
        waits: List["concurrent.futures.Future[Dict[str, Any]]"] = [
            await conn.request_async(proto.OP_GET_RESULT, {"workflow_id": wid, "wait_for_creation": True}) for wid in ids
        ]
        past = asyncio.ensure_future(conn.request_async(proto.OP_PING, {}))
        assert await loop.run_in_executor(None, conn.wait_until, lambda: conn.waited_for_slot == 1, WAIT)
        assert not past.done() and conn.in_flight == BOUND

        # The loop is not blocked: another task runs to completion.
        ran = asyncio.Event()
        loop.call_soon(ran.set)
        await asyncio.wait_for(ran.wait(), WAIT)
        assert not past.done()

        await loop.run_in_executor(None, _end, other, ids[0])
        await loop.run_in_executor(None, _answered, waits[0])
        ping = await asyncio.wait_for(past, WAIT)
        assert await asyncio.wait_for(asyncio.wrap_future(ping), WAIT) == {}
        for wid, w in zip(ids[1:], waits[1:]):
            await loop.run_in_executor(None, _end, other, wid)
            await loop.run_in_executor(None, _answered, w)

    try:
        asyncio.run(scenario())
        assert conn.wait_until(lambda: conn.in_flight == 0, WAIT)
    finally:
        conn.close()
        other.close()
