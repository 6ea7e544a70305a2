"""DBOS Python 3.4's queue objects on the real agent: the construction only
DBOS makes (``token``, ``database_backed_queue``, a client's connection),
a database-backed queue's getters reading the stored row, and the setters
with DBOS's checks, messages and writes, through a worker and a client."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator, Tuple

import pytest

from dbos_agent import DBOS, DBOSClient, DBOSException, Queue
from dbos_agent._queue import _INTERNAL_QUEUE_CONSTRUCTION

from conftest import AgentEnv, new_id, query


@DBOS.workflow()
def config_noop() -> str:
    return "ran"


@pytest.fixture
def client(dbos: Any, agent_env: AgentEnv) -> Iterator[DBOSClient]:
    c = DBOSClient(agent_socket=agent_env.socket)
    try:
        yield c
    finally:
        c.destroy()


def row(agent_env: AgentEnv, name: str) -> Tuple[Any, ...]:
    rows = query(
        "SELECT concurrency, worker_concurrency, rate_limit_max, rate_limit_period_sec, partition_concurrency,"
        " partition_worker_concurrency, partition_rate_limit_max, partition_rate_limit_period_sec, partition_queue,"
        f" polling_interval_sec FROM {agent_env.schema}.queues WHERE name = %s",
        (name,),
    )
    assert len(rows) == 1, rows
    return tuple(rows[0])


def stored_owner(agent_env: AgentEnv, name: str) -> Any:
    return query(f"SELECT application_name FROM {agent_env.schema}.queues WHERE name = %s", (name,))[0][0]


def test_only_dbos_s_own_token_builds_a_queue_value_object(dbos: Any, agent_env: AgentEnv) -> None:
    name = new_id("value-queue")
    # DBOS's internal options without its token, or a guessed token: DBOS's error.
    for kwargs in ({"token": True}, {"token": object()}, {"database_backed_queue": True}, {"application_name": "x"}):
        with pytest.raises(DBOSException, match="Queue objects cannot be constructed directly"):
            Queue(name, **kwargs)
    # With it: a value object of a configuration, declared nowhere and not
    # checked (the row it mirrors was checked when written).
    value = Queue(
        name, partition_concurrency=1, worker_concurrency=0, database_backed_queue=True,
        application_name="someone", token=_INTERNAL_QUEUE_CONSTRUCTION,
    )
    assert value.database_backed_queue is True and value.application_name == "someone"
    assert value._partition_concurrency == 1 and value._partition_queue
    assert DBOS.retrieve_queue(name) is None
    assert query(f"SELECT count(*) FROM {agent_env.schema}.queues WHERE name = %s", (name,)) == [(0,)]
    # Its getters read the row, which it does not have.
    with pytest.raises(DBOSException, match=f"Queue {name} not found in the database$"):
        value.partition_concurrency
    with pytest.raises(DBOSException, match=f"Queue {name} not found in the database$"):
        asyncio.run(value.get_worker_concurrency_async())
    with pytest.raises(DBOSException, match=f"Queue {name} not found in the database$"):
        value.set_global_concurrency(3)
    # A queue declared in code (DBOS 2's form) is not database-backed: its
    # getters are the declaration, and DBOS refuses to configure it.
    declared = Queue(new_id("code-queue"), concurrency=2)
    assert declared.database_backed_queue is False and declared.concurrency == 2
    with pytest.raises(DBOSException, match=f"Cannot configure queue {declared.name}: dynamic configuration is only"):
        declared.set_concurrency(3)
    with pytest.raises(DBOSException, match="Cannot configure queue"):
        asyncio.run(declared.set_limiter_async(None))


def test_setters_check_and_write_as_dbos_does(dbos: Any, agent_env: AgentEnv) -> None:
    name = new_id("dyn-queue")
    queue = DBOS.register_queue(name, concurrency=4, worker_concurrency=2)
    assert row(agent_env, name)[8] is False  # not partitioned
    queue.set_global_concurrency(8)
    queue.set_worker_concurrency(3)
    queue.set_limiter({"limit": 7, "period": 2.0})
    queue.set_partition_concurrency(6)
    queue.set_partition_worker_concurrency(2)
    queue.set_partition_limiter({"limit": 4, "period": 3.0})
    queue.set_polling_interval_sec(0.5)
    assert row(agent_env, name) == (8, 3, 7, 2.0, 6, 2, 4, 3.0, True, 0.5)
    fresh = DBOS.retrieve_queue(name)
    assert fresh is not None
    assert (fresh.global_concurrency, fresh.worker_concurrency, fresh.limiter) == (8, 3, {"limit": 7, "period": 2.0})
    assert (fresh.partition_concurrency, fresh.partition_worker_concurrency) == (6, 2)
    assert fresh.partition_limiter == {"limit": 4, "period": 3.0}
    # The polling interval and the owner are read back from the row too.
    assert fresh.polling_interval_sec == 0.5 and asyncio.run(fresh.get_polling_interval_sec_async()) == 0.5
    assert fresh.application_name == "pytest"

    # Each setter's own checks, in DBOS's words.
    cases = [
        (queue.set_worker_concurrency, 100, "worker_concurrency must be less than or equal to concurrency"),
        (queue.set_worker_concurrency, 1, "partition_worker_concurrency must be less than or equal to worker_concurrency"),
        (queue.set_global_concurrency, 2, "worker_concurrency must be less than or equal to concurrency"),
        (queue.set_partition_concurrency, 100, "partition_concurrency must be less than or equal to global_concurrency"),
        (queue.set_partition_concurrency, 1, "partition_concurrency must be greater than or equal to partition_worker_concurrency"),
        (queue.set_partition_concurrency, 0, "partition_concurrency must be at least 1"),
        (queue.set_partition_worker_concurrency, 0, "partition_worker_concurrency must be at least 1"),
        (queue.set_partition_worker_concurrency, 7, "partition_worker_concurrency must be less than or equal to partition_concurrency"),
        (queue.set_limiter, {"limit": 1}, "limiter must specify both 'limit' and 'period'"),
        (queue.set_partition_limiter, {"period": 1.0}, "partition_limiter must specify both 'limit' and 'period'"),
        (queue.set_polling_interval_sec, 0.0, "polling_interval_sec must be positive"),
    ]
    for setter, value, message in cases:
        with pytest.raises(ValueError, match=f"^{message}$"):
            setter(value)
    assert row(agent_env, name) == (8, 3, 7, 2.0, 6, 2, 4, 3.0, True, 0.5)  # nothing written

    # The derived partition_queue column clears only with the last partition limit.
    queue.set_partition_concurrency(None)
    queue.set_partition_limiter(None)
    assert row(agent_env, name)[8] is True
    asyncio.run(queue.set_partition_worker_concurrency_async(None))
    assert row(agent_env, name)[4:9] == (None, None, None, None, False)

    # A setter checks against the row, not a stale object.
    one, two = DBOS.list_queues(), DBOS.retrieve_queue(name)
    stale = next(q for q in one if q.name == name)
    assert two is not None
    two.set_global_concurrency(10)
    two.set_worker_concurrency(5)
    stale.set_global_concurrency(6)  # 6 >= the stored worker_concurrency 5
    with pytest.raises(ValueError, match="^worker_concurrency must be less than or equal to concurrency$"):
        stale.set_worker_concurrency(7)
    assert row(agent_env, name)[:2] == (6, 5)
    # The object DBOS.register_queue returned reads the row afresh.
    assert (queue.global_concurrency, queue.worker_concurrency) == (6, 5)
    assert asyncio.run(queue.get_global_concurrency_async()) == 6
    # And the queue still runs work.
    assert queue.enqueue(config_noop).get_result() == "ran"


def test_a_client_s_queues_read_and_write_through_the_client(dbos: Any, agent_env: AgentEnv, client: DBOSClient) -> None:
    name = new_id("client-queue")
    registered = client.register_queue(name, global_concurrency=4, partition_concurrency=2, polling_interval_sec=2.5)
    assert registered.database_backed_queue is True
    retrieved = client.retrieve_queue(name)
    listed = [q for q in client.list_queues() if q.name == name]
    assert retrieved is not None and len(listed) == 1
    for q in (registered, retrieved, listed[0]):
        assert q.database_backed_queue is True
        assert (q.global_concurrency, q.partition_concurrency, q.polling_interval_sec) == (4, 2, 2.5)
        assert q.application_name == stored_owner(agent_env, name)  # a client without a name stores none
    retrieved.set_concurrency(8)
    listed[0].set_partition_worker_concurrency(2)
    asyncio.run(registered.set_polling_interval_sec_async(0.25))
    assert row(agent_env, name)[:1] + row(agent_env, name)[4:6] == (8, 2, 2)
    assert row(agent_env, name)[9] == 0.25
    assert registered.global_concurrency == 8 and retrieved.partition_worker_concurrency == 2
    with pytest.raises(ValueError, match="^partition_worker_concurrency must be less than or equal to partition_concurrency$"):
        registered.set_partition_worker_concurrency(3)
    # A client's queue enqueues nothing itself (DBOS's error).
    with pytest.raises(DBOSException, match=f"Cannot enqueue on queue {name} from a client-bound Queue object"):
        retrieved.enqueue(config_noop)
    with pytest.raises(DBOSException, match="Use DBOSClient.enqueue instead"):
        asyncio.run(registered.enqueue_async(config_noop))
    # Deleted, the queue has no row to configure.
    client.delete_queue(name)
    with pytest.raises(DBOSException, match=f"Queue {name} not found in the database$"):
        retrieved.set_concurrency(1)


def test_register_queue_on_a_running_loop_is_dbos_s_error(dbos: Any, agent_env: AgentEnv) -> None:
    name = new_id("loop-queue")

    async def main() -> Queue:
        with pytest.raises(RuntimeError, match=r"register_queue\(\) was called while an event loop is running"):
            DBOS.register_queue(name)
        return await DBOS.register_queue_async(name, concurrency=3)

    queue = asyncio.run(main())
    assert queue.database_backed_queue is True and row(agent_env, name)[0] == 3
