"""Exceptions, named and shaped like DBOS Python's so that code written for
the official SDK catches the same classes, and the mapping from the agent
protocol's error codes to them.

Constructor arguments and ``__reduce__`` follow DBOS Python's, so a pickled
exception written by either side rebuilds with the same fields (the
unpickler in ``_serialization`` maps ``dbos._error`` classes onto these).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Dict, List, Optional


class DBOSException(Exception):
    """Base class of the exceptions DBOS raises.

    Attributes:
        message: the error message.
        dbos_error_code: the code, from ``DBOSErrorCode``.
    """

    def __init__(self, message: str, dbos_error_code: Optional[int] = None):
        self.message = message
        self.dbos_error_code = dbos_error_code
        super().__init__(self.message)

    def __str__(self) -> str:
        if self.dbos_error_code:
            return f"DBOS Error {self.dbos_error_code}: {self.message}"
        return f"DBOS Error: {self.message}"


class DBOSBaseException(BaseException):
    """DBOS exceptions that user code must not swallow with ``except Exception``:
    they stop a workflow run (cancellation, lost ownership)."""

    def __init__(self, message: str, dbos_error_code: Optional[int] = None):
        self.message = message
        self.dbos_error_code = dbos_error_code
        super().__init__(self.message)

    def __str__(self) -> str:
        if self.dbos_error_code:
            return f"DBOS Error {self.dbos_error_code}: {self.message}"
        return f"DBOS Error: {self.message}"


class DBOSErrorCode(Enum):
    """DBOS Python's numeric error codes (``dbos_error_code``)."""

    ConflictingIDError = 1
    RecoveryError = 2
    InitializationError = 3
    WorkflowFunctionNotFound = 4
    NonExistentWorkflowError = 5
    MaxRecoveryAttemptsExceeded = 6
    MaxStepRetriesExceeded = 7
    NotAuthorized = 8
    ConflictingWorkflowError = 9
    WorkflowCancelled = 10
    UnexpectedStep = 11
    QueueDeduplicated = 12
    AwaitedWorkflowCancelled = 13
    AwaitedWorkflowMaxRecoveryAttemptsExceeded = 14
    PatchNondeterminism = 15
    StreamTimeout = 16
    StreamNondeterminism = 17
    StepTimeout = 18
    QueryTimeout = 26
    WorkflowIDInUse = 27
    StepNondeterminism = 28
    # Codes of this binding only (DBOS Python has no such situation).
    AgentUnavailable = 100
    AgentProtocolError = 101
    NotSupported = 102
    AgentUntrusted = 103


class DBOSConflictingWorkflowError(DBOSException):
    """A workflow id was started again as a different workflow."""

    def __init__(self, workflow_id: str, message: Optional[str] = None):
        self.workflow_id = workflow_id
        self.detail = message
        super().__init__(
            f"Conflicting workflow invocation with the same ID ({workflow_id}): {message}",
            dbos_error_code=DBOSErrorCode.ConflictingWorkflowError.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.detail))


class DBOSRecoveryError(DBOSException):
    def __init__(self, workflow_id: str, message: Optional[str] = None):
        self.workflow_id = workflow_id
        self.detail = message
        super().__init__(
            f"Recovery error for workflow ID {workflow_id}: {message}",
            dbos_error_code=DBOSErrorCode.RecoveryError.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.detail))


class DBOSInitializationError(DBOSException):
    """DBOS could not start: bad configuration, or the agent refused it."""

    def __init__(self, message: str):
        self.detail = message
        super().__init__(
            f"Error initializing DBOS Transact: {message}",
            DBOSErrorCode.InitializationError.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.detail,))


class DBOSWorkflowFunctionNotFoundError(DBOSException):
    """No process can run the named workflow function."""

    def __init__(self, workflow_id: str, message: Optional[str] = None):
        self.workflow_id = workflow_id
        self.detail = message
        super().__init__(
            f"Could not execute workflow {workflow_id}: {message}",
            dbos_error_code=DBOSErrorCode.WorkflowFunctionNotFound.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.detail))


class DBOSNonExistentWorkflowError(DBOSException):
    """No workflow has the given id."""

    def __init__(self, destination: str, destination_id: str):
        self.destination = destination
        self.destination_id = destination_id
        super().__init__(
            f"Non-existent {destination} workflow ID: {destination_id}",
            dbos_error_code=DBOSErrorCode.NonExistentWorkflowError.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.destination, self.destination_id))


class MaxRecoveryAttemptsExceededError(DBOSException):
    """A workflow was started or recovered more often than it allows."""

    def __init__(self, wf_id: str, max_retries: Optional[int] = None):
        self.workflow_id = wf_id
        self.max_retries = max_retries
        limit = "its maximum" + (
            f" of {max_retries}" if max_retries is not None else " number of"
        )
        super().__init__(
            f"Workflow {wf_id} has exceeded {limit} execution or recovery attempts. "
            "Further attempts to execute or recover it will fail.",
            dbos_error_code=DBOSErrorCode.MaxRecoveryAttemptsExceeded.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.max_retries))


class DBOSNotAuthorizedError(DBOSException):
    def __init__(self, msg: str):
        self.msg = msg
        super().__init__(msg, dbos_error_code=DBOSErrorCode.NotAuthorized.value)

    def __reduce__(self) -> Any:
        return (self.__class__, (self.msg,))


class DBOSMaxStepRetriesExceeded(DBOSException):
    """A step with retries failed on every attempt; ``errors`` holds each
    attempt's exception."""

    def __init__(self, step_name: str, max_retries: int, errors: List[Exception]) -> None:
        self.step_name = step_name
        self.max_retries = max_retries
        self.errors = errors
        super().__init__(
            f"Step {step_name} has exceeded its maximum of {max_retries} retries",
            dbos_error_code=DBOSErrorCode.MaxStepRetriesExceeded.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.step_name, self.max_retries, self.errors))


class DBOSStepTimeoutError(DBOSException):
    def __init__(self, step_name: str, timeout_seconds: float) -> None:
        self.step_name = step_name
        self.timeout_seconds = timeout_seconds
        super().__init__(
            f"Step {step_name} was cancelled after exceeding its timeout of {timeout_seconds} seconds",
            dbos_error_code=DBOSErrorCode.StepTimeout.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.step_name, self.timeout_seconds))


class DBOSUnexpectedStepError(DBOSException):
    """Replay found another step recorded at this step id: the workflow is
    not deterministic."""

    def __init__(
        self, workflow_id: str, step_id: int, expected_name: str, recorded_name: str
    ) -> None:
        self.inputs = (workflow_id, step_id, expected_name, recorded_name)
        super().__init__(
            f"During execution of workflow {workflow_id} step {step_id}, function {recorded_name} "
            f"was recorded when {expected_name} was expected. Check that your workflow is deterministic.",
            dbos_error_code=DBOSErrorCode.UnexpectedStep.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, self.inputs)


class DBOSStepNondeterminismError(DBOSException):
    def __init__(self, workflow_id: str, step_id: int) -> None:
        self.inputs = (workflow_id, step_id)
        super().__init__(
            f"Step {step_id} of workflow {workflow_id} was recorded twice by the same execution "
            "with different results. Check that your workflow is deterministic.",
            dbos_error_code=DBOSErrorCode.StepNondeterminism.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, self.inputs)


class DBOSStreamTimeoutError(DBOSException):
    """No value arrived on a stream within the timeout (without a timeout:
    the stream ended before the offset asked for, so none ever will)."""

    def __init__(self, workflow_id: str, key: str, timeout_seconds: Optional[float] = None):
        self.workflow_id = workflow_id
        self.key = key
        self.timeout_seconds = timeout_seconds
        within = f" within {timeout_seconds} seconds" if timeout_seconds is not None else ""
        super().__init__(
            f"No value arrived on stream {key} of workflow {workflow_id}{within}",
            dbos_error_code=DBOSErrorCode.StreamTimeout.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.key, self.timeout_seconds))


class DBOSPatchNondeterminismError(DBOSException):
    """A patch's position in the workflow's history would depend on task
    scheduling (``DBOS.patch_async`` called concurrently)."""

    def __init__(self, workflow_id: str, patch_name: str, details: str) -> None:
        self.inputs = (workflow_id, patch_name, details)
        super().__init__(
            f"Cannot deterministically apply patch {patch_name} in workflow {workflow_id}: {details}. "
            "Check that your workflow is deterministic.",
            dbos_error_code=DBOSErrorCode.PatchNondeterminism.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, self.inputs)


class DBOSQueueDeduplicatedError(DBOSException):
    """The queue already holds an active workflow with this deduplication id."""

    def __init__(self, workflow_id: str, queue_name: str, deduplication_id: str) -> None:
        self.workflow_id = workflow_id
        self.queue_name = queue_name
        self.deduplication_id = deduplication_id
        super().__init__(
            f"Workflow {workflow_id} was deduplicated due to an existing workflow in queue "
            f"{queue_name} with deduplication ID {deduplication_id}.",
            dbos_error_code=DBOSErrorCode.QueueDeduplicated.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.queue_name, self.deduplication_id))


class DBOSAwaitedWorkflowCancelledError(DBOSException):
    """The workflow whose result was awaited was cancelled."""

    def __init__(self, workflow_id: str):
        self.workflow_id = workflow_id
        super().__init__(
            f"Awaited workflow {workflow_id} was cancelled",
            dbos_error_code=DBOSErrorCode.AwaitedWorkflowCancelled.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id,))


class DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded(DBOSException):
    """The workflow whose result was awaited was dead-lettered."""

    def __init__(self, workflow_id: str):
        self.workflow_id = workflow_id
        super().__init__(
            f"Awaited workflow {workflow_id} exceeded its maximum recovery attempts",
            dbos_error_code=DBOSErrorCode.AwaitedWorkflowMaxRecoveryAttemptsExceeded.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id,))


class DBOSWorkflowCancelledError(DBOSBaseException):
    """Raised inside a workflow run that was cancelled, at its next step."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, dbos_error_code=DBOSErrorCode.WorkflowCancelled.value)

    def __reduce__(self) -> Any:
        return (self.__class__, (self.message,))


class DBOSWorkflowConflictIDError(DBOSBaseException):
    """Raised inside a run that no longer owns its workflow (it was recovered
    elsewhere, or the agent connection dropped): the run stops and leaves the
    outcome to the owner."""

    def __init__(self, workflow_id: str):
        self.workflow_id = workflow_id
        super().__init__(
            f"Workflow {workflow_id} is no longer owned by this execution",
            dbos_error_code=DBOSErrorCode.ConflictingIDError.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id,))


class DBOSAgentError(DBOSException):
    """An error of the agent protocol with no DBOS counterpart (a malformed
    frame, an unknown op, a version mismatch, the agent shutting down...).

    Attributes:
        code: the protocol's numeric error code.
        name: the protocol's snake_case name of it.
        data: the code-specific details the agent sent, if any.
    """

    def __init__(
        self,
        message: str,
        code: int = 0,
        name: str = "",
        data: Optional[Dict[str, Any]] = None,
    ):
        self.code = code
        self.name = name
        self.data = data
        self.agent_message = message
        super().__init__(
            f"agent error {name or code}: {message}" if (name or code) else message,
            dbos_error_code=DBOSErrorCode.AgentProtocolError.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.agent_message, self.code, self.name, self.data))


class DBOSAgentUnavailableError(DBOSException):
    """The agent cannot be reached, or the connection to it dropped while a
    request was in flight."""

    def __init__(self, message: str):
        self.detail = message
        super().__init__(message, dbos_error_code=DBOSErrorCode.AgentUnavailable.value)

    def __reduce__(self) -> Any:
        return (self.__class__, (self.detail,))


class DBOSAgentForkedError(DBOSAgentUnavailableError):
    """A call from a child process after ``fork()`` on a session of
    ``libdbos.so`` its parent opened (or in a child of a process that loaded
    the library): the Go runtime's threads did not survive the fork, so the
    library refuses it. Launch DBOS after forking (under gunicorn: do not
    ``--preload`` an app that launches DBOS, or launch it in ``post_fork``)."""


class DBOSAgentUntrustedError(DBOSException):
    """The socket is served by a process of a user this process does not
    trust (not its own user, not root, not one configured with
    ``agent_trusted_uids`` or ``DBOS_AGENT_TRUSTED_UIDS``): the binding
    closed the connection without sending or reading anything.

    Attributes:
        path: the socket.
        uid: the user serving it.
    """

    def __init__(self, message: str, path: str = "", uid: int = -1):
        self.detail = message
        self.path = path
        self.uid = uid
        super().__init__(message, dbos_error_code=DBOSErrorCode.AgentUntrusted.value)

    def __reduce__(self) -> Any:
        return (self.__class__, (self.detail, self.path, self.uid))


class DBOSNotSupportedError(DBOSException):
    """A DBOS call this binding does not serve yet. It is raised rather than
    doing less than DBOS Python would."""

    def __init__(self, call: str, reason: Optional[str] = None):
        self.call = call
        self.reason = reason
        super().__init__(
            f"{call} is not supported by dbos-agent yet"
            + (f": {reason}" if reason else ""),
            dbos_error_code=DBOSErrorCode.NotSupported.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.call, self.reason))


# ---------------------------------------------------------------------------
# The protocol's error catalog (protocol/errors.go). tests/test_protocol.py
# checks this table against protocol/testdata/error_codes.json, so the two
# cannot drift.

#: code -> (protocol name, DBOS exception name or "", retryable)
ERROR_CATALOG: Dict[int, "tuple[str, str, bool]"] = {
    100: ("internal", "DBOSException", True),
    101: ("malformed_frame", "", False),
    102: ("frame_too_large", "", False),
    103: ("unknown_op", "", False),
    104: ("invalid_argument", "DBOSException", False),
    105: ("version_mismatch", "", False),
    106: ("handshake_needed", "", False),
    107: ("shutting_down", "", True),
    108: ("database_unavailable", "DBOSException", True),
    109: ("not_registered", "DBOSWorkflowFunctionNotFoundError", False),
    110: ("permission_denied", "", False),
    111: ("request_cancelled", "", False),
    112: ("resource_exhausted", "", True),
    200: ("workflow_not_found", "DBOSNonExistentWorkflowError", False),
    201: ("workflow_conflict", "DBOSConflictingWorkflowError", False),
    202: ("deduplicated", "DBOSQueueDeduplicatedError", False),
    203: ("fenced", "DBOSWorkflowConflictIDError", False),
    204: ("workflow_cancelled", "DBOSWorkflowCancelledError", False),
    205: ("unexpected_step", "DBOSUnexpectedStepError", False),
    206: ("step_conflict", "DBOSStepNondeterminismError", False),
    207: ("timeout", "", True),
    208: ("max_recovery_attempts_exceeded", "MaxRecoveryAttemptsExceededError", False),
    209: ("stream_closed", "DBOSException", False),
    210: ("workflow_active", "DBOSException", False),
    211: ("workflow_id_in_use", "DBOSWorkflowIDInUseError", False),
}

#: The codes after which the agent closes the connection (the catalog's
#: ``close_connection``); any other error with id 0 leaves it open.
CLOSING_CODES = frozenset({102, 105, 110, 112})


class AgentErrorReply(Exception):
    """An error response as it came off the wire, before it is turned into a
    DBOS exception with the context of the call (see ``map_agent_error``)."""

    def __init__(self, code: int, name: str, message: str, data: Optional[Dict[str, Any]]):
        self.code = code
        self.name = name
        self.message = message
        self.data = data or {}
        super().__init__(f"{name or code}: {message}")


def _str(v: Any) -> str:
    return "" if v is None else str(v)


def map_agent_error(
    err: AgentErrorReply,
    *,
    workflow_id: Optional[str] = None,
    step_id: Optional[int] = None,
    step_name: Optional[str] = None,
) -> BaseException:
    """Turn an agent error reply into the exception DBOS Python raises in the
    same situation. The call's context fills the DBOS constructors' fields."""
    wid = workflow_id or _str(err.data.get("workflow_id"))
    code, msg, data = err.code, err.message, err.data
    if code == 109:
        return DBOSWorkflowFunctionNotFoundError(wid, msg)
    if code == 200:
        return DBOSNonExistentWorkflowError("target", wid)
    if code == 201:
        return DBOSConflictingWorkflowError(wid, msg)
    if code == 202:
        # A debounce's answer names the key's holder, as DBOS raises it.
        return DBOSQueueDeduplicatedError(
            _str(data.get("workflow_id")) or wid, _str(data.get("queue_name")), _str(data.get("deduplication_id"))
        )
    if code == 203:
        return DBOSWorkflowConflictIDError(wid)
    if code == 204:
        return DBOSWorkflowCancelledError(f"Workflow {wid} is cancelled. Aborting function.")
    if code == 205:
        recorded = _str(data.get("recorded"))
        attempted = _str(data.get("attempted")) or _str(step_name)
        return DBOSUnexpectedStepError(wid, step_id if step_id is not None else 0, attempted, recorded or msg)
    if code == 206:
        return DBOSStepNondeterminismError(wid, step_id if step_id is not None else 0)
    if code == 208:
        return MaxRecoveryAttemptsExceededError(wid)
    if code == 211:
        return DBOSWorkflowIDInUseError(
            _str(data.get("workflow_id")) or wid, _str(data.get("status")), _str(data.get("name"))
        )
    if code in (100, 104, 108, 209, 210):
        return DBOSException(f"{err.name}: {msg}")
    return DBOSAgentError(msg, code, err.name, data or None)


# DBOS Python 3.4's remaining public exceptions. The binding raises none of
# them itself yet (the agent has no statement timeout on its queries, stream
# reads of one workflow are serialized by the agent); they are here so that
# code catching them, and their pickled forms, resolve.
# DBOSWorkflowIDInUseError, among them, is raised (map_agent_error, 211).


class DBOSQueryTimeoutError(DBOSException):
    """An observability query exceeded its statement timeout."""

    def __init__(self, timeout_seconds: float):
        self.timeout_seconds = timeout_seconds
        super().__init__(
            f"This query was cancelled after exceeding its {timeout_seconds:g}s statement timeout.",
            dbos_error_code=DBOSErrorCode.QueryTimeout.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.timeout_seconds,))


class DBOSStreamNondeterminismError(DBOSException):
    """Concurrent stream reads would make a replay depend on scheduling."""

    def __init__(self, workflow_id: str, key: str):
        self.workflow_id = workflow_id
        self.key = key
        super().__init__(
            f"Cannot deterministically read stream {key} in workflow {workflow_id}: another "
            "stream read in the same workflow is still in progress, so which read records which "
            "value would depend on task scheduling. Read streams from sequential workflow code, "
            "or read them from a step.",
            dbos_error_code=DBOSErrorCode.StreamNondeterminism.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.key))


class DBOSWorkflowIDInUseError(DBOSException):
    """A workflow_id_reuse_policy "reject" start found its workflow id in use."""

    def __init__(self, workflow_id: str, workflow_status: str, workflow_name: str):
        self.workflow_id = workflow_id
        self.workflow_status = workflow_status
        self.workflow_name = workflow_name
        super().__init__(
            f"Workflow ID {workflow_id} is already in use by workflow {workflow_name} with status {workflow_status}.",
            dbos_error_code=DBOSErrorCode.WorkflowIDInUse.value,
        )

    def __reduce__(self) -> Any:
        return (self.__class__, (self.workflow_id, self.workflow_status, self.workflow_name))


def is_workflow_id_in_use_error(e: BaseException) -> bool:
    """True if ``e`` is a workflow-id-in-use rejection, including replayed
    forms that lost the class (a portable error keeps its name)."""
    if getattr(e, "dbos_error_code", None) == DBOSErrorCode.WorkflowIDInUse.value:
        return True
    from ._serialization import PortableWorkflowError

    return isinstance(e, PortableWorkflowError) and e.name == DBOSWorkflowIDInUseError.__name__


def check_no_shard_key(
    shard_key: object, refusal: str = "A shard key was given, but this system database is not sharded"
) -> None:
    """A shard key where DBOS takes one (a call's ``shard_key``, a handle's,
    ``SendMessage``'s, ``EnqueueOptions``'): the agent's system database is
    unsharded (sharding is DBOS Enterprise's), so a key is DBOS's own error
    on an unsharded database (``refusal``: DBOS words it per API), after its
    validation of the key."""
    if shard_key is None:
        return
    if not isinstance(shard_key, str) or not shard_key:
        raise DBOSException(f"Invalid shard key {shard_key!r}: a shard key must be a non-empty string")
    raise DBOSException(refusal)


# DBOS's refusal of a schedule's shard key on an unsharded system database.
SCHEDULE_SHARD_KEY_REFUSAL = "Scheduling under a shard key requires a sharded system database"
