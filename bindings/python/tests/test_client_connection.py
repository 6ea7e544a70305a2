"""DBOSClient's connection options as DBOS Python 3.4 takes them, on the
agent socket the client talks to: ``lazy`` connects at first use,
``check_connection`` reaches the agent, ``use_listen_notify`` with ``lazy``
is refused, and ``retry_connection_errors=False`` fails a call at once when
the agent is away instead of waiting for it to come back."""

from __future__ import annotations

import asyncio
import time

import pytest

from dbos_agent import DBOSAgentUnavailableError, DBOSClient, DBOSException

from conftest import AgentEnv


def test_lazy_client_connects_at_first_use(agent_env: AgentEnv) -> None:
    socket = agent_env.path("lazy.sock")
    # No agent serves this socket yet: an eager client raises, a lazy one
    # constructs, and each check says the agent is unreachable.
    with pytest.raises(DBOSAgentUnavailableError, match="lazy.sock"):
        DBOSClient(agent_socket=socket)
    client = DBOSClient(agent_socket=socket, lazy=True)
    try:
        with pytest.raises(DBOSAgentUnavailableError, match="lazy.sock"):
            client.check_connection()
        with pytest.raises(DBOSAgentUnavailableError, match="lazy.sock"):
            asyncio.run(client.check_connection_async())
        # Once an agent serves it, the same client connects on its next use.
        agent = agent_env.start_other_agent("lazy")
        try:
            client.check_connection()
            asyncio.run(client.check_connection_async())
            assert client.list_workflows(workflow_ids=["no-such-workflow"]) == []
        finally:
            agent.kill()
    finally:
        client.destroy()


def test_lazy_client_refuses_listen_notify(agent_env: AgentEnv) -> None:
    with pytest.raises(DBOSException, match="lazy"):
        DBOSClient(agent_socket=agent_env.socket, use_listen_notify=True, lazy=True)
    # Either alone is accepted (the agent wakes every wait, so
    # use_listen_notify changes nothing else).
    DBOSClient(agent_socket=agent_env.socket, use_listen_notify=True).destroy()


def test_no_retry_client_fails_at_once_while_the_agent_is_away(agent_env: AgentEnv) -> None:
    agent = agent_env.start_other_agent("noretry")
    client = DBOSClient(agent_socket=agent.socket, retry_connection_errors=False)
    try:
        client.check_connection()
        agent.kill()
        # A retrying client would wait up to 30 s for the agent to return.
        start = time.monotonic()
        with pytest.raises(DBOSAgentUnavailableError, match="noretry.sock"):
            while True:  # until the client has seen the connection drop
                client.check_connection()
        assert time.monotonic() - start < 10
    finally:
        client.destroy()
