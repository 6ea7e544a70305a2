"""A worker process for the Kafka crash test: a DBOS.kafka_consumer on one
topic whose workflow appends its message's workflow id to EFFECTS (one line
per execution).

Environment: DBOS_AGENT_SOCKET, APP_NAME, KAFKA_BOOTSTRAP, KAFKA_TOPIC,
KAFKA_GROUP, KAFKA_COMMIT_INTERVAL_MS (how often auto-commit flushes the
stored offsets: a long interval keeps them uncommitted until the worker is
killed), EFFECTS (a file). It prints "ready" once launched and exits when
stdin closes.
"""

import logging
import os
import sys

from dbos_agent import DBOS, KafkaMessage

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

EFFECTS = os.environ["EFFECTS"]


@DBOS.kafka_consumer(
    {
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP"],
        "group.id": os.environ["KAFKA_GROUP"],
        "auto.commit.interval.ms": int(os.environ.get("KAFKA_COMMIT_INTERVAL_MS", "200")),
        # A killed member leaves the group this soon (the broker's minimum),
        # so the restarted worker is assigned its partitions quickly.
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
    },
    [os.environ["KAFKA_TOPIC"]],
)
@DBOS.workflow()
def record_message(msg: KafkaMessage) -> None:
    with open(EFFECTS, "a") as f:
        f.write(f"{DBOS.workflow_id}\n")


if __name__ == "__main__":
    DBOS(config={"name": os.environ.get("APP_NAME", "pytest-kafka"), "agent_socket": os.environ["DBOS_AGENT_SOCKET"]})
    DBOS.launch()
    print("ready", flush=True)
    for _ in sys.stdin:
        pass
    DBOS.destroy()
