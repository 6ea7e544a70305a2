"""Plain public types of DBOS Python 3.4: ``WorkflowStatusString`` (the
values of ``WorkflowStatus.status``) and ``KafkaMessage``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import List, Optional, Tuple, Union


class WorkflowStatusString(Enum):
    """The values of a workflow's ``status``."""

    PENDING = "PENDING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"
    MAX_RECOVERY_ATTEMPTS_EXCEEDED = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
    CANCELLED = "CANCELLED"
    ENQUEUED = "ENQUEUED"
    DELAYED = "DELAYED"


@dataclass
class KafkaMessage:
    """A Kafka message as a ``DBOS.kafka_consumer`` workflow receives it
    (the fields of confluent-kafka's Message)."""

    headers: Optional[List[Tuple[str, Union[str, bytes]]]]
    key: Optional[Union[str, bytes]]
    latency: Optional[float]
    leader_epoch: Optional[int]
    offset: Optional[int]
    partition: Optional[int]
    timestamp: Tuple[int, int]
    topic: Optional[str]
    value: Optional[Union[str, bytes]]
