"""DBOS.kafka_consumer against a real Kafka broker (scripts/kafka-broker.sh:
a single-node KRaft broker, resolved with Maven once and started for this
module) and the real agent: one workflow per message with the message as
its KafkaMessage, the three orderings, a custom queue, no duplicate on
redelivery (a consumer restarted in process, a worker SIGKILLed between
enqueue and offset commit), and the decorator's checks in DBOS's words."""

import subprocess
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import REPO, AgentEnv, LineWaiter, Worker, effect_counts, new_id, query, wait_until
from dbos_agent import DBOS, KafkaMessage
from dbos_agent._error import DBOSInitializationError
from dbos_agent import _kafka


@pytest.fixture(scope="module")
def broker() -> Iterator[str]:
    """A real broker for this module: its bootstrap address."""
    proc = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "kafka-broker.sh")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    err = LineWaiter(proc.stderr, echo_prefix="kafka-broker: ")
    address = proc.stdout.readline().strip()
    if not address:
        proc.wait(30)
        raise AssertionError(f"the broker did not start: {err.text()}")
    try:
        yield address
    finally:
        # This module's consumers read from this broker: stopped before it.
        _kafka.stop_consumers(forget=True)
        proc.terminate()
        proc.wait(60)


def _topic(broker: str, partitions: int) -> str:
    name = new_id("kt")
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": broker})
    # The producer learns the partitions from the metadata the controller publishes.
    wait_until(lambda: len(producer.list_topics(name, timeout=5).topics[name].partitions) == partitions,
               f"topic {name} has {partitions} partitions")
    return name


def _produce(broker: str, topic: str, messages: List[Tuple[Optional[int], bytes, bytes]],
             headers: Optional[List[Tuple[str, bytes]]] = None) -> None:
    producer = Producer({"bootstrap.servers": broker})
    for partition, key, value in messages:
        if partition is None:
            producer.produce(topic, key=key, value=value, headers=headers)
        else:
            producer.produce(topic, key=key, value=value, partition=partition, headers=headers)
    assert producer.flush(30) == 0


def _rows(schema: str, topic: str) -> List[Tuple[str, str, str, Optional[str]]]:
    return [
        (r[0], r[1], r[2], r[3])
        for r in query(
            f'SELECT workflow_uuid, status, queue_name, queue_partition_key FROM "{schema}".workflow_status '
            "WHERE workflow_uuid LIKE %s ORDER BY workflow_uuid",
            (f"kafka-unique-id-{topic}-%",),
        )
    ]


def _committed(broker: str, group: str, topic: str, partitions: int = 1) -> List[int]:
    c = Consumer({"bootstrap.servers": broker, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)]
    finally:
        c.close()


class Recorder:
    """What a consumer workflow saw, and how many ran at once."""

    def __init__(self, expected: int, hold: float = 0.0):
        self.expected = expected
        self.hold = hold
        self.lock = threading.Lock()
        self.messages: List[KafkaMessage] = []
        self.ids: List[Optional[str]] = []
        self.active: Dict[Any, int] = {}
        self.max_active: Dict[Any, int] = {}
        self.done = threading.Event()

    def enter(self, group: Any) -> None:
        with self.lock:
            self.active[group] = self.active.get(group, 0) + 1
            self.max_active[group] = max(self.max_active.get(group, 0), self.active[group])

    def leave(self, group: Any, msg: KafkaMessage) -> None:
        with self.lock:
            self.active[group] -= 1
            self.messages.append(msg)
            self.ids.append(DBOS.workflow_id)
            if len(self.messages) >= self.expected:
                self.done.set()

    def run(self, msg: KafkaMessage, *groups: Any) -> None:
        for g in groups:
            self.enter(g)
        if self.hold:
            time.sleep(self.hold)
        for g in groups[1:]:
            with self.lock:
                self.active[g] -= 1
        self.leave(groups[0], msg)

    def wait(self, timeout: float = 90) -> None:
        assert self.done.wait(timeout), f"{len(self.messages)} of {self.expected} messages ran"


def test_each_message_starts_one_workflow_with_the_message(dbos: type, broker: str, agent_env: AgentEnv) -> None:
    topic = _topic(broker, 1)
    group = new_id("g")
    _produce(broker, topic, [(None, f"k{i}".encode(), f"v{i}".encode()) for i in range(3)], headers=[("h", b"x")])
    rec = Recorder(3)

    @DBOS.kafka_consumer({"bootstrap.servers": broker, "group.id": group}, [topic])
    @DBOS.workflow()
    def sync_consumer(msg: KafkaMessage) -> None:
        rec.run(msg, "all")

    rec.wait()
    by_offset = sorted(rec.messages, key=lambda m: m.offset or 0)
    assert [(m.key, m.value, m.topic, m.partition, m.offset) for m in by_offset] == [
        (f"k{i}".encode(), f"v{i}".encode(), topic, 0, i) for i in range(3)
    ]
    assert all(m.headers == [("h", b"x")] and m.timestamp[1] > 0 for m in by_offset)
    assert sorted(rec.ids) == [f"kafka-unique-id-{topic}-0-{group}-{i}" for i in range(3)]  # type: ignore[type-var]
    wait_until(lambda: [r[1] for r in _rows(agent_env.schema, topic)] == ["SUCCESS"] * 3, "three SUCCESS rows")
    assert {(r[2], r[3]) for r in _rows(agent_env.schema, topic)} == {(_kafka.KAFKA_QUEUE_NAME, None)}
    # The offsets are committed once the workflows are enqueued (auto-commit, 5 s by default).
    wait_until(lambda: _committed(broker, group, topic) == [3], "offset 3 committed", timeout=30)


def test_async_workflow_consumer(dbos: type, broker: str) -> None:
    topic = _topic(broker, 1)
    _produce(broker, topic, [(None, b"k", f"a{i}".encode()) for i in range(3)])
    rec = Recorder(3)

    @DBOS.kafka_consumer({"bootstrap.servers": broker, "group.id": new_id("g")}, [topic])
    @DBOS.workflow()
    async def async_consumer(msg: KafkaMessage) -> None:
        rec.run(msg, "all")

    rec.wait()
    assert sorted(m.value for m in rec.messages) == [b"a0", b"a1", b"a2"]  # type: ignore[type-var]


def test_partition_ordering_is_serial_per_partition_and_parallel_across(
    dbos: type, broker: str, agent_env: AgentEnv
) -> None:
    partitions, per = 3, 5
    topic = _topic(broker, partitions)
    group = new_id("g")
    _produce(broker, topic, [(p, b"k", str(i).encode()) for p in range(partitions) for i in range(per)])
    rec = Recorder(partitions * per, hold=0.3)

    @DBOS.kafka_consumer({"bootstrap.servers": broker, "group.id": group}, [topic], ordering="partition", batch_size=4)
    @DBOS.workflow()
    def partition_consumer(msg: KafkaMessage) -> None:
        rec.run(msg, msg.partition, "all")

    rec.wait()
    for p in range(partitions):
        assert [int(m.value) for m in rec.messages if m.partition == p] == list(range(per))  # type: ignore[arg-type]
        assert rec.max_active[p] == 1
    assert rec.max_active["all"] >= 2  # partitions ran side by side
    rows = _rows(agent_env.schema, topic)
    assert {r[2] for r in rows} == {_kafka.KAFKA_ORDERED_QUEUE_NAME}
    assert {r[3] for r in rows} == {f"{group}:{topic}:{p}" for p in range(partitions)}


def test_topic_ordering_runs_one_at_a_time(dbos: type, broker: str, agent_env: AgentEnv) -> None:
    partitions, per = 2, 4
    topic = _topic(broker, partitions)
    group = new_id("g")
    _produce(broker, topic, [(p, b"k", str(i).encode()) for p in range(partitions) for i in range(per)])
    rec = Recorder(partitions * per, hold=0.1)

    @DBOS.kafka_consumer({"bootstrap.servers": broker, "group.id": group}, [topic], ordering="topic")
    @DBOS.workflow()
    def topic_consumer(msg: KafkaMessage) -> None:
        rec.run(msg, "all")

    rec.wait()
    assert rec.max_active["all"] == 1
    for p in range(partitions):
        assert [int(m.value) for m in rec.messages if m.partition == p] == list(range(per))  # type: ignore[arg-type]
    assert {r[3] for r in _rows(agent_env.schema, topic)} == {f"{group}:{topic}"}


def test_custom_queue(dbos: type, broker: str, agent_env: AgentEnv) -> None:
    topic = _topic(broker, 1)
    queue = new_id("kq")
    DBOS.register_queue(queue, concurrency=1)
    _produce(broker, topic, [(None, b"k", str(i).encode()) for i in range(4)])
    rec = Recorder(4, hold=0.1)

    @DBOS.kafka_consumer({"bootstrap.servers": broker, "group.id": new_id("g")}, [topic], queue_name=queue)
    @DBOS.workflow()
    def custom_queue_consumer(msg: KafkaMessage) -> None:
        rec.run(msg, "all")

    rec.wait()
    assert rec.max_active["all"] == 1
    assert {r[2] for r in _rows(agent_env.schema, topic)} == {queue}


def test_redelivery_after_restart_starts_no_duplicate(dbos: type, broker: str, agent_env: AgentEnv) -> None:
    topic = _topic(broker, 1)
    group = new_id("g")
    _produce(broker, topic, [(None, b"k", str(i).encode()) for i in range(3)])
    runs: List[int] = []
    first = threading.Event()

    @DBOS.kafka_consumer({"bootstrap.servers": broker, "group.id": group, "auto.commit.interval.ms": 200}, [topic])
    @DBOS.workflow()
    def redelivered_consumer(msg: KafkaMessage) -> None:
        runs.append(int(msg.value))  # type: ignore[arg-type]
        if len(runs) == 3:
            first.set()

    assert first.wait(60)
    wait_until(lambda: _committed(broker, group, topic) == [3], "offset 3 committed")
    DBOS.destroy()
    # Kafka delivers the messages again: the group's offset rewound to 0.
    rewind = Consumer({"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False})
    rewind.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    rewind.close()
    assert _committed(broker, group, topic) == [0]
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()
    # The restarted consumer took all three again (and stored their offsets)...
    wait_until(lambda: _committed(broker, group, topic) == [3], "offset 3 committed again")
    # ...and started no second workflow for any of them.
    assert sorted(runs) == [0, 1, 2]
    assert [r[0] for r in _rows(agent_env.schema, topic)] == [f"kafka-unique-id-{topic}-0-{group}-{i}" for i in range(3)]


def test_worker_killed_before_the_offset_commit(agent_binary: str, broker: str, workers: List[Worker]) -> None:
    # A worker of its own application on its own agent and schema, so its
    # internal queues are its own.
    env = AgentEnv(agent_binary, "kafkacrash")
    try:
        topic = _topic(broker, 1)
        group = new_id("g")
        effects = env.path("effects")
        n = 5
        _produce(broker, topic, [(None, b"k", str(i).encode()) for i in range(n)])
        base = {"DBOS_AGENT_SOCKET": env.socket, "APP_NAME": "pytest-kafka", "KAFKA_BOOTSTRAP": broker,
                "KAFKA_TOPIC": topic, "KAFKA_GROUP": group, "EFFECTS": effects}
        # Auto-commit would flush the stored offsets only after ten minutes.
        w = Worker("kafka_worker.py", dict(base, KAFKA_COMMIT_INTERVAL_MS="600000"))
        workers.append(w)
        w.out.wait_for("ready")
        wait_until(lambda: [r[1] for r in _rows(env.schema, topic)] == ["SUCCESS"] * n, f"{n} workflows done")
        assert _committed(broker, group, topic) == [-1001]  # nothing committed (OFFSET_INVALID)
        w.kill()
        # The restarted worker gets every message again (nothing was committed).
        w2 = Worker("kafka_worker.py", dict(base, KAFKA_COMMIT_INTERVAL_MS="200"))
        workers.append(w2)
        w2.out.wait_for("ready")
        wait_until(lambda: _committed(broker, group, topic) == [n], f"offset {n} committed", timeout=90)
        ids = [f"kafka-unique-id-{topic}-0-{group}-{i}" for i in range(n)]
        # No message lost, none started twice, each workflow ran once.
        assert [(r[0], r[1]) for r in _rows(env.schema, topic)] == [(i, "SUCCESS") for i in ids]
        assert effect_counts(effects) == {i: 1 for i in ids}
        w2.stop()
    finally:
        env.close()


# ----------------------------------------------------------------------
# The decorator's checks (DBOS's DBOSInitializationError and messages)


def test_decorator_checks(dbos: type) -> None:
    with pytest.raises(DBOSInitializationError, match='invalid Kafka ordering "sorted"'):
        DBOS.kafka_consumer({}, ["t"], ordering="sorted")
    with pytest.raises(DBOSInitializationError, match="batch_size must be positive"):
        DBOS.kafka_consumer({}, ["t"], batch_size=0)
    with pytest.raises(DBOSInitializationError, match='custom queue is only supported with ordering="none"'):
        DBOS.kafka_consumer({}, ["t"], ordering="partition", queue_name="q")

    partitioned = new_id("kpq")
    DBOS.register_queue(partitioned, partition_concurrency=1)

    def refused(msg: KafkaMessage) -> None:
        pass

    with pytest.raises(DBOSInitializationError, match="is a partitioned queue"):
        DBOS.kafka_consumer({"bootstrap.servers": "127.0.0.1:1"}, ["t"], queue_name=partitioned)(
            DBOS.workflow()(refused)
        )

    topic, group = new_id("dup"), new_id("g")
    config = {"bootstrap.servers": "127.0.0.1:1", "group.id": group}
    snapshot = dict(config)

    @DBOS.kafka_consumer(config, [topic])
    @DBOS.workflow()
    def dup_one(msg: KafkaMessage) -> None:
        pass

    assert config == snapshot  # the caller's configuration is not changed
    with pytest.raises(DBOSInitializationError, match=f"share group.id {group} and topic"):

        @DBOS.kafka_consumer(dict(config), [topic])
        @DBOS.workflow()
        def dup_two(msg: KafkaMessage) -> None:
            pass


def test_polling_interval_config_is_checked() -> None:
    for bad in (0.0, float("nan"), float("inf")):
        with pytest.raises(DBOSInitializationError, match="kafka_queue_polling_interval_sec must be a finite number"):
            _kafka.check_config({"name": "x", "kafka_queue_polling_interval_sec": bad})
    _kafka.check_config({"name": "x", "kafka_queue_polling_interval_sec": 0.5})


def test_generated_group_id() -> None:
    name = _kafka.safe_group_name("my_func", ["topic.a", "^b*"])
    assert name == "dbos-kafka-group-myfunc-topica-b"
    assert len(_kafka.safe_group_name("f" * 400, ["t" * 400])) == 255


def test_without_confluent_kafka_the_decorator_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['confluent_kafka'] = None\n"
        "from dbos_agent import DBOS\n"
        "from dbos_agent._error import DBOSInitializationError\n"
        "try:\n"
        "    DBOS.kafka_consumer({}, ['t'])\n"
        "except DBOSInitializationError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "needs confluent-kafka (pip install 'dbos-agent[kafka]')" in out.stdout
