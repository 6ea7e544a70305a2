"""DBOS durable workflows for Python, served by the dbos-agent.

The API is DBOS Python's: moving an application onto the agent is changing
``from dbos import ...`` into ``from dbos_agent import ...``. The agent (one
per host) owns the system database, the queues and recovery; this package
runs the workflow and step code, replaying recorded steps from the history
the agent sends with each run.
"""

from . import _error as error
from ._classes import DBOSConfiguredInstance
from ._client import DBOSClient
from ._start import EnqueueOptions
from ._comm import SendMessage
from ._context import (
    DuplicationPolicy,
    SetEnqueueOptions,
    SetWorkflowAttributes,
    SetWorkflowID,
    SetWorkflowTimeout,
    WorkflowIDReusePolicy,
)
from ._core import StepInfo, StepOptions, WorkflowHandle, WorkflowHandleAsync, WorkflowStatus
from ._datasource import AsyncSQLAlchemyDatasource, SQLAlchemyDatasource
from ._dbos import DBOS
from ._queue import Queue, QueueRateLimit
from ._version import __version__
from ._debouncer import Debouncer, DebouncerClient
from ._scheduling import ClientScheduleInput, ScheduleInput, VersionInfo, WorkflowSchedule
from ._error import (
    DBOSAgentError,
    DBOSAgentForkedError,
    DBOSAgentUnavailableError,
    DBOSAgentUntrustedError,
    DBOSAwaitedWorkflowCancelledError,
    DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded,
    DBOSBaseException,
    DBOSConflictingWorkflowError,
    DBOSErrorCode,
    DBOSException,
    DBOSInitializationError,
    DBOSMaxStepRetriesExceeded,
    DBOSNonExistentWorkflowError,
    DBOSNotSupportedError,
    DBOSPatchNondeterminismError,
    DBOSQueueDeduplicatedError,
    DBOSStepNondeterminismError,
    DBOSStepTimeoutError,
    DBOSStreamTimeoutError,
    DBOSUnexpectedStepError,
    DBOSWorkflowCancelledError,
    DBOSWorkflowConflictIDError,
    DBOSWorkflowFunctionNotFoundError,
    MaxRecoveryAttemptsExceededError,
)
from ._serialization import (
    DBOSPortableJSONSerializer,
    PortableWorkflowError,
    Serializer,
    WorkflowSerializationFormat,
)
from ._transport import default_socket_path
from ._ambient import PropagateOtelContext, SetShardKey
from ._auth import DBOSContextEnsure, DBOSContextSetAuth
from ._error import (
    DBOSNotAuthorizedError,
    DBOSQueryTimeoutError,
    DBOSStreamNondeterminismError,
    DBOSWorkflowIDInUseError,
)
from ._extras import StepReservation, run_dbos_database_migrations
from ._types import KafkaMessage, WorkflowStatusString
from ._validation import make_pydantic_args_validator, pydantic_args_validator

DBOSConfig = dict  # DBOS Python's DBOSConfig is a TypedDict over these keys

__all__ = [
    "DBOS",
    "DBOSClient",
    "DBOSConfiguredInstance",
    "DBOSConfig",
    "Debouncer",
    "DebouncerClient",
    "DuplicationPolicy",
    "EnqueueOptions",
    "Queue",
    "QueueRateLimit",
    "ScheduleInput",
    "ClientScheduleInput",
    "VersionInfo",
    "WorkflowSchedule",
    "WorkflowIDReusePolicy",
    "SendMessage",
    "SQLAlchemyDatasource",
    "AsyncSQLAlchemyDatasource",
    "SetEnqueueOptions",
    "SetWorkflowAttributes",
    "SetWorkflowID",
    "SetWorkflowTimeout",
    "StepInfo",
    "StepOptions",
    "WorkflowHandle",
    "WorkflowHandleAsync",
    "WorkflowStatus",
    "WorkflowSerializationFormat",
    "Serializer",
    "DBOSPortableJSONSerializer",
    "PortableWorkflowError",
    "DBOSException",
    "DBOSBaseException",
    "DBOSErrorCode",
    "DBOSAgentError",
    "DBOSAgentForkedError",
    "DBOSAgentUnavailableError",
    "DBOSAgentUntrustedError",
    "DBOSAwaitedWorkflowCancelledError",
    "DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded",
    "DBOSConflictingWorkflowError",
    "DBOSInitializationError",
    "DBOSMaxStepRetriesExceeded",
    "DBOSNonExistentWorkflowError",
    "DBOSNotSupportedError",
    "DBOSPatchNondeterminismError",
    "DBOSQueueDeduplicatedError",
    "DBOSStepNondeterminismError",
    "DBOSStepTimeoutError",
    "DBOSStreamTimeoutError",
    "DBOSUnexpectedStepError",
    "DBOSWorkflowCancelledError",
    "DBOSWorkflowConflictIDError",
    "DBOSWorkflowFunctionNotFoundError",
    "MaxRecoveryAttemptsExceededError",
    "default_socket_path",
    "error",
    "__version__",
    "DBOSContextEnsure",
    "DBOSContextSetAuth",
    "DBOSNotAuthorizedError",
    "DBOSQueryTimeoutError",
    "DBOSStreamNondeterminismError",
    "DBOSWorkflowIDInUseError",
    "KafkaMessage",
    "PropagateOtelContext",
    "SetShardKey",
    "StepReservation",
    "WorkflowStatusString",
    "make_pydantic_args_validator",
    "pydantic_args_validator",
    "run_dbos_database_migrations",
]
